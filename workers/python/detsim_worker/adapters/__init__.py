# Adapters from other simulation APIs (PettingZoo) to the detsim SDK. Not loaded unless imported.
