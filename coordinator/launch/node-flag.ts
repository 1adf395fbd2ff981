// The Node flag every detsim process starts with: V8's background pool (optimizing compiles, GC
// helpers) sized to the machine's parallelism minus one instead of Node's fixed 4. A run is several
// isolates at once (the coordinator, agent threads, the sealing thread); on 2 cores four compile
// threads per process took the CPU the step needs — the README job ran 15–20% faster with it, and
// 1 walker on a thread too. Only the value: who passes it is scripts/postbuild.mjs (the CLI's
// preamble), launcher.ts (TypeScript worker processes) and slurm/batch-script.ts (the coordinator).
export const NODE_POOL_FLAG = '--v8-pool-size=0';
