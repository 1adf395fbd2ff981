// Profile of a group restore (issue 16, the 24 MB target): one lif-pair group over real worker
// processes captures and commits one checkpoint, then restores it --rounds times into new epochs,
// each beside a raw readFile + SHA-256 of the same file (the bench's limit, timed in a process of
// its own: bench/lib/raw-read.ts). It prints each round's restore and raw times with the
// coordinator's CPU (user/system) during the restore, the medians and their ratio, and with --timeline every worker call of each round (start and end in
// ms from the restore's start), so one sees whether the workers' prefetch, the coordinator's
// verify pass or the stage/activate tail is the long pole. A developer tool; NOT a bench suite (no
// receipt) and NOT a test. The machine is shared: run it 2-3 times and read the medians.
//
//   node --import tsx bench/profile-restore.ts                       # 1 M neurons per agent (24 MB), 11 rounds
//   node --import tsx bench/profile-restore.ts --neurons 200000 --rounds 21 --timeline
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { captureGroup } from '../coordinator/checkpoint/capture.js';
import type { CheckpointGroup } from '../coordinator/checkpoint/group.js';
import { restoreGroup } from '../coordinator/checkpoint/restore.js';
import { RawReadLimit } from './lib/raw-read.js';
import { group, lifPlan } from './suites/checkpoint.js';

const { values } = parseArgs({
  options: {
    neurons: { type: 'string', default: '1000000' },
    rounds: { type: 'string', default: '11' },
    timeline: { type: 'boolean', default: false },
  },
});
const neurons = Number(values.neurons);
const rounds = Number(values.rounds);

/** Every worker call the group makes, as `start > who method` and `end < who method` lines. */
function recordCalls(g: CheckpointGroup, since: () => number, lines: string[]): void {
  const call = g.call.bind(g);
  g.call = (async (...args: Parameters<typeof call>) => {
    const what = `${args[1]} ${args[2]}`;
    lines.push(`${since().toFixed(1).padStart(7)} > ${what}`);
    try {
      return await call(...args);
    } finally {
      lines.push(`${since().toFixed(1).padStart(7)} < ${what}`);
    }
  }) as typeof g.call;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const runDir = mkdtempSync(join(tmpdir(), 'detsim-profile-restore-'));
const s = await group(lifPlan(neurons, neurons), runDir);
const limit = RawReadLimit.start();
try {
  await s.g.step();
  const rec = await captureGroup(s.g, { checkpointId: `ckpt-e1-${s.g.boundary}` });
  await rec.ticket.wait();
  const hw = s.ck.store.highWater()!;
  const file = join(s.ck.store.dir, hw.file);
  const mb = Number(hw.byteLength) / 1e6;
  console.log(`checkpoint ${hw.checkpointId}: ${mb.toFixed(1)} MB (2 lif agents x ${neurons} neurons)`);
  let start = 0;
  const calls: string[] = [];
  recordCalls(s.g, () => performance.now() - start, calls);
  const restoreMs: number[] = [];
  const rawMs: number[] = [];
  for (let r = 0; r < rounds; r++) {
    rawMs.push(await limit.time(file));
    calls.length = 0;
    const cpu = process.cpuUsage();
    start = performance.now();
    await restoreGroup(s.g, { store: s.ck.store, checkpointId: hw.checkpointId }, { epoch: `e${r + 2}` });
    restoreMs.push(performance.now() - start);
    const used = process.cpuUsage(cpu);
    s.g.resume();
    console.log(
      `round ${r + 1}: restore ${restoreMs[r]!.toFixed(1)} ms (coordinator cpu user ${(used.user / 1000).toFixed(1)}, ` +
        `system ${(used.system / 1000).toFixed(1)} ms), raw read + SHA-256 ${rawMs[r]!.toFixed(1)} ms`,
    );
    if (values.timeline) console.log(calls.map((l) => `    ${l}`).join('\n'));
  }
  const ratio = median(rawMs) / median(restoreMs);
  console.log(
    `median: restore ${median(restoreMs).toFixed(1)} ms, raw ${median(rawMs).toFixed(1)} ms, ratio ${ratio.toFixed(2)}x`,
  );
} finally {
  limit.stop();
  await s.close();
  rmSync(runDir, { recursive: true, force: true });
}
