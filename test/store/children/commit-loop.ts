// Child process for the live-store verify test: commits generation after generation into a store
// with keep 2 (so every commit rotates one out) until killed, printing `ready` after the first.
// Not a test by itself; test/store/store.test.ts spawns it.
import { writeSync } from 'node:fs';
import { CheckpointStore } from '../../../coordinator/store/store.js';
import { makeCheckpoint } from '../helpers.js';

const [dir] = process.argv.slice(2) as [string];
const store = await CheckpointStore.open(dir, { keep: 2 });
for (let n = 1; ; n++) {
  const c = makeCheckpoint(`ckpt-${n}`, n, { payloadBytes: 256 * 1024 });
  await store.commit(c.identity, c.encoded);
  if (n === 3) writeSync(1, 'ready\n');
}
