// Child process for the crash-point tests: commits one checkpoint into a store and SIGKILLs itself
// right after the named commit step. Not a test by itself; test/store/crash.test.ts spawns it.
import { writeSync } from 'node:fs';
import { DurableFs, type CommitStep } from '../../../coordinator/store/durable-fs.js';
import { CheckpointStore } from '../../../coordinator/store/store.js';
import { makeCheckpoint } from '../helpers.js';

const [dir, stopAt, checkpointId, step, payloadBytes, keep] = process.argv.slice(2) as [
  string,
  CommitStep,
  string,
  string,
  string,
  string,
];
const fs = new DurableFs({
  reached(reached) {
    if (reached !== stopAt) return;
    writeSync(1, `crash ${reached}\n`);
    process.kill(process.pid, 'SIGKILL');
  },
});
const store = await CheckpointStore.open(dir, { fs, keep: Number(keep) });
const c = makeCheckpoint(checkpointId, Number(step), { payloadBytes: Number(payloadBytes) });
await store.commit(c.identity, c.encoded);
writeSync(1, 'done\n');
