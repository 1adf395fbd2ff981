# The built-in models, ported bit for bit from workers/models/*.ts (the RULES comments there are
# normative): agents walker and lif, environment forage. Not the loader (registry.py).
