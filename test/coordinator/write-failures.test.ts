// A full disk under a run directory, for real (a tiny tmpfs): every failed write is one line
// `detsim: [size_no_space] …`, a non-zero exit and no stack trace, and the files already written
// stay consistent — the trace (a segment per step with --segment-steps 1: the default would fit
// the tiny disk) reads back whole, summary.json is either whole and agrees with the trace or
// absent and said to be, receipt.json is never half written. Also the write primitives themselves
// (trace writer, durable replace) on a full disk.
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { writeFileDurable } from '../../coordinator/durable-file.js';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { SegmentedTraceWriter } from '../../coordinator/trace/trace-store.js';
import { BehaviourDigest, canonicalBehaviour, type TraceBehaviour } from '../../coordinator/trace/trace.js';
import { traceLinesOf, traceOf } from '../trace-read.js';
import { WriteFailure } from '../../coordinator/write-failure.js';
import { detsim } from '../checkpoint/cli.js';
import { fullDiskUnavailable, mountSmallDisk, PAGE, type SmallDisk } from '../full-disk.js';

const T = 300_000;
let disk: SmallDisk | undefined;
afterEach(() => {
  disk?.unmount();
  disk = undefined;
});

function small(bytes: number): SmallDisk {
  disk = mountSmallDisk(bytes);
  return disk;
}

/** The run's stderr must end in exactly one refusal line and carry no stack trace. */
function lastLine(stderr: string): string {
  expect(stderr).not.toMatch(/\n\s+at /);
  return stderr.trim().split('\n').at(-1)!;
}

describe.skipIf(fullDiskUnavailable !== null)('a full disk under detsim run', () => {
  it(
    'the trace fills the disk mid-run: one named line, exit 1, a trace that reads back whole, summary whole and consistent or said to be missing',
    () => {
      const d = small(64 * 1024);
      const r = detsim(['run', 'examples/lif-pair.yaml', '--steps', '400', '--segment-steps', '1', '--out', d.dir]);
      expect(r.status).toBe(1);
      const line = lastLine(r.stderr);
      expect(line).toMatch(
        /^detsim: \[size_no_space\] run failed: the run could not write its files at step [0-9]+, phase [a-z-]+: cannot write .*\/lif-pair-1\/(trace\/[0-9]{6}\.(jsonl|repro)\.gz|trace\/index\.jsonl|run\.log): no space left on the device \(ENOSPC\)/,
      );
      const dir = join(d.dir, 'lif-pair-1');
      const traces = traceOf(dir);
      expect(traces.length).toBeGreaterThan(0);
      expect(traces.map((t) => t.behaviour.scope.step)).toEqual(traces.map((_, i) => String(i)));
      expect(readdirSync(dir).filter((f) => f.startsWith('tmp-'))).toEqual([]);
      if (existsSync(join(dir, 'summary.json'))) {
        const summary = parseStrict(readFileSync(join(dir, 'summary.json'))) as Record<string, any>;
        const digest = new BehaviourDigest();
        for (const t of traces) digest.add(t.behaviour);
        expect(summary).toMatchObject({
          status: 'failed',
          stepsDone: traces.length,
          behaviourDigest: digest.digest(),
          failure: { kind: 'io' },
        });
      } else {
        expect(line).toMatch(/summary\.json was not written either \(ENOSPC\)$/);
      }
    },
    T,
  );

  it(
    'receipt.json does not fit after a completed run: one named line, exit 1, the run files complete, no receipt',
    () => {
      // Calibrate on this machine: what a 10-step run leaves, and how big its receipt is.
      const d = small(2 * 1024 * 1024);
      const cal = detsim(['run', 'examples/forage-walkers.yaml', '--steps', '10', '--out', d.dir]);
      expect(cal.status, cal.stderr).toBe(0);
      const receiptPages = Math.ceil(readFileSync(join(d.dir, 'forage-walkers-1', 'receipt.json')).length / PAGE);
      rmSync(join(d.dir, 'forage-walkers-1', 'receipt.json'));
      const runUsed = d.used();
      rmSync(join(d.dir, 'forage-walkers-1'), { recursive: true });
      // receipt.json binds the trace by digest instead of copying it: run.json (16 agents) and summary
      // make it a few pages, not one per step.
      expect(receiptPages).toBeGreaterThanOrEqual(3);
      // Room for the run and its transients, not for its receipt.
      d.resize(runUsed + 2 * PAGE);
      const r = detsim(['run', 'examples/forage-walkers.yaml', '--steps', '10', '--out', d.dir]);
      expect(r.status).toBe(1);
      expect(lastLine(r.stderr)).toMatch(
        /^detsim: \[size_no_space\] run completed but its receipt was not written: cannot write .*\/forage-walkers-1\/receipt\.json: no space left on the device \(ENOSPC\); run\.json, the trace and summary\.json are complete$/,
      );
      const dir = join(d.dir, 'forage-walkers-1');
      expect(existsSync(join(dir, 'receipt.json'))).toBe(false);
      expect(readdirSync(dir).filter((f) => f.startsWith('tmp-'))).toEqual([]);
      expect(parseStrict(readFileSync(join(dir, 'summary.json')))).toMatchObject({
        status: 'completed',
        stepsDone: 10,
      });
    },
    T,
  );
});

describe.skipIf(fullDiskUnavailable !== null)('a full disk at any moment of a checkpointed run', () => {
  it(
    'disks from 20 KiB to 150 KiB: every last line names the file it could not write, and a capture that did not fit is named too',
    () => {
      // Each size runs out at another moment: the lock, run.json, the ledger, a capture's temporary,
      // a trace segment (the sizes where one went unnamed before, and between). None may end in an
      // unnamed "file of the run directory".
      const seen = new Set<string>();
      for (const kib of [20, 30, 35, 60, 90, 120, 150]) {
        const d = small(kib * 1024);
        const r = detsim([
          'run',
          'examples/forage-walkers.yaml',
          '--steps',
          '300',
          '--checkpoint-every',
          '50',
          '--out',
          d.dir,
        ]);
        const line = lastLine(r.stderr);
        expect(line, `${kib} KiB`).not.toMatch(/a file of the run directory/);
        if (r.status === 0) continue;
        expect(r.status, `${kib} KiB: ${line}`).toBe(1);
        expect(line, `${kib} KiB`).toMatch(
          /^detsim: \[size_no_space\] .*cannot write \/[^:]+: no space left on the device \(ENOSPC\)/,
        );
        seen.add(/cannot write \/[^:]*\/([^/:]+):/.exec(line)![1]!.replace(/[0-9a-f-]{36}/, 'TOKEN'));
        for (const notTaken of r.stderr
          .split('\n')
          .filter((l) => /^checkpoint .* not taken: \[size_no_space\]/.test(l)))
          expect(notTaken).toMatch(/cannot write \/.*\/store\/tmp-ckpt-e1-[0-9]+(\+spill)?\.flysess: no space left/);
        d.unmount();
        disk = undefined;
      }
      expect(seen.size, [...seen].join(', ')).toBeGreaterThanOrEqual(2);
    },
    T,
  );
});

describe.skipIf(fullDiskUnavailable !== null)('write primitives on a full disk', () => {
  it('the trace writer fails naming the file; the index lists only whole segments, and says which steps are durable', async () => {
    const d = small(32 * 1024);
    const w = new SegmentedTraceWriter(d.dir, { segmentSteps: 1 });
    const behaviour = (k: number) =>
      ({
        scope: { sessionId: 's', epoch: 'e1', step: String(k) },
        agents: [],
        batchId: `batch-e1-${k}`,
        controlDigest: 'c',
        acknowledgedBoundary: String(k),
        observationDigest: 'o',
        worldDigest: `${k}`.padEnd(3000, 'x'),
        rewards: [],
        eventIds: [],
        publishedBoundary: String(k + 1),
      }) as unknown as TraceBehaviour;
    const digest = new BehaviourDigest();
    let error: unknown;
    try {
      for (let k = 0; ; k++) {
        const text = canonicalBehaviour(behaviour(k));
        await w.appendLine(`{"behaviour":${text},"operational":{"wallTimeNs":"1"}}`, text);
        digest.addCanonical(text);
      }
    } catch (e) {
      error = e;
    }
    await w.close().catch(() => undefined);
    expect(error).toBeInstanceOf(WriteFailure);
    expect(error).toMatchObject({ reason: 'size_no_space', code: 'ENOSPC' });
    expect((error as WriteFailure).path).toMatch(/\/trace\/([0-9]{6}\.(jsonl|repro)\.gz|index\.jsonl)$/);
    const lines = traceLinesOf(d.dir);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThan(digest.steps);
    const onDisk = new BehaviourDigest();
    for (const l of lines)
      onDisk.addCanonical(canonicalBehaviour((parseStrict(l) as unknown as { behaviour: TraceBehaviour }).behaviour));
    expect(w.durable().steps).toBe(lines.length);
    expect(new BehaviourDigest(w.durable()).digest()).toBe(onDisk.digest());
  });

  it('a durable replace that does not fit leaves the old file and no temporary', () => {
    const d = small(16 * 1024);
    const path = join(d.dir, 'summary.json');
    writeFileSync(path, 'old\n');
    d.fillLeaving(PAGE);
    let error: unknown;
    try {
      writeFileDurable(path, 'n'.repeat(3 * PAGE));
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({
      reason: 'size_no_space',
      code: 'ENOSPC',
      path,
      message: `cannot write ${path}: no space left on the device (ENOSPC)`,
    });
    expect(readFileSync(path, 'utf8')).toBe('old\n');
    expect(readdirSync(d.dir).sort()).toEqual(['filler', 'summary.json']);
  });
});
