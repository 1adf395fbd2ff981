# detsim_worker: the detsim worker protocol v1 in Python. `python -m detsim_worker` runs a worker
# process (agent or environment) over proto/detsim/v1/worker.proto; detsim_worker.sdk is what a
# Python model is written against; detsim_worker.models holds the bit-exact built-ins.
# Not the coordinator: runs are planned and driven by the TypeScript `detsim` CLI.
__version__ = '0.1.0'
