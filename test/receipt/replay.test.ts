// Replay with real worker processes (small runs: 2 walkers, few steps): two independent runs
// agree (D4), the self-check and physical-diff checks pass on real runs and fail when they must,
// and a nondeterministic agent is caught with a diagnosis naming the step, field and agent.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hydrateReceipt, readReceipt } from '../../coordinator/receipt/receipt.js';
import { materialize } from '../../coordinator/receipt/receipt-view.js';
import { type ReplayReport, replay, replayChecks } from '../../coordinator/diff0/replay.js';
import { reproHash } from '../../coordinator/receipt/reprohash.js';
import { traceOf } from '../trace-read.js';

const FIX = join(process.cwd(), 'test', 'receipt', 'fixtures');
const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));
const statusOf = (r: { checks: readonly { check: string; status: string }[] }) =>
  Object.fromEntries(r.checks.map((c) => [c.check, c.status]));

type Trace = { behaviour: { scope: { step: string }; agents: { agentId: string; decision: { move: string } }[] } };
const traces = (dir: string): Trace[] => traceOf(dir) as unknown as Trace[];

describe('replay with fresh worker processes', () => {
  let tiny: ReplayReport;

  it(
    '[D4] two independent runs agree (fresh workers, concurrent vs reversed dispatch)',
    { timeout: 180_000 },
    async () => {
      tiny = await replay(join(FIX, 'tiny-walkers.yaml'), { runs: 2, outDir: tmp('detsim-replay-') });
      expect(tiny.runs.map((r) => r.dispatch)).toEqual(['concurrent', 'reversed']);
      expect(tiny.runs[0]!.runDir).not.toBe(tiny.runs[1]!.runDir);
      expect(tiny.runs[1]!.reproHash).toBe(tiny.runs[0]!.reproHash);
      expect(statusOf(tiny)).toEqual({
        replay: 'pass',
        sensitivity: 'pass',
        'physical-diff': 'pass',
        'field-table': 'pass',
        honesty: 'pass',
      });
      // Fresh processes: the recorded worker pids differ between the runs.
      const pids = tiny.runs.map((r) =>
        JSON.stringify((materialize(r.receipt).steps[0] as { operational: { pids: unknown } }).operational.pids),
      );
      expect(pids[0]).not.toBe(pids[1]);
      // receipt.json was written, binds its trace (no steps copied), and with the steps read back
      // through the trace reader hashes to what the run reported.
      const onDisk = readReceipt(join(tiny.runs[0]!.runDir, 'receipt.json'));
      expect(onDisk.reproHash).toBe(tiny.runs[0]!.reproHash);
      expect(onDisk.steps).toBeUndefined();
      expect(reproHash(hydrateReceipt(tiny.runs[0]!.runDir, onDisk)).reproHash).toBe(tiny.runs[0]!.reproHash);
      expect(onDisk.evidence_class).toBe('simulated');
    },
  );

  it('[D5] on a real receipt, changing one character of one agent decision changes the hash', () => {
    expect(tiny.sensitivity.length).toBe(3);
    for (const p of tiny.sensitivity) expect(p.after, p.field).not.toBe(p.before);
    expect(tiny.sensitivity[0]!.field).toBe('steps.0.behaviour.agents.0.decision.move');
  });

  it('[DIFF-3] the physical-diff check fails on the same real runs when stripping is disabled', () => {
    const r = replayChecks(
      'tiny',
      tiny.runs.map((x) => x.receipt),
      null,
      { stripPhysical: false },
    );
    expect(statusOf(r)['physical-diff']).toBe('fail');
    expect(statusOf(r).replay).toBe('fail'); // and wall times now "prove" the runs differ
  });

  it('a recorded run directory replays against its own record', { timeout: 180_000 }, async () => {
    const r = await replay(tiny.runs[0]!.runDir, { runs: 2, outDir: tmp('detsim-replay-'), dispatch: 'sequential' });
    expect(r.reference?.reproHash).toBe(tiny.runs[0]!.reproHash);
    expect(r.runs.every((x) => x.reproHash === tiny.runs[0]!.reproHash && x.dispatch === 'sequential')).toBe(true);
    expect(statusOf(r).replay).toBe('pass');
  });

  it(
    '--environment-transport inline replays a recorded run with its environment in this thread: the same hash',
    {
      timeout: 180_000,
    },
    async () => {
      const r = await replay(tiny.runs[0]!.runDir, {
        runs: 2,
        outDir: tmp('detsim-replay-'),
        environmentTransport: 'inline',
      });
      expect(r.runs.map((x) => x.reproHash)).toEqual([tiny.runs[0]!.reproHash, tiny.runs[0]!.reproHash]);
      for (const run of r.runs)
        expect(JSON.parse(readFileSync(join(run.runDir, 'launch.json'), 'utf8')).environmentTransport).toBe('inline');
      expect(
        JSON.parse(readFileSync(join(tiny.runs[0]!.runDir, 'launch.json'), 'utf8')).environmentTransport,
      ).toBeUndefined();
    },
  );

  it(
    '[DIFF-4] an agent reading the clock and Math.random (strict off) fails replay; the diagnosis names the first step, field and agent',
    { timeout: 180_000 },
    async () => {
      const r = await replay(join(FIX, 'leaky.yaml'), { runs: 2, outDir: tmp('detsim-replay-') });
      expect(statusOf(r).replay).toBe('fail');
      // Independently: the first step where the two traces' decisions differ, and the first agent there.
      const [a, b] = r.runs.map((x) => traces(x.runDir));
      let expected: { step: string; agentId: string; left: string; right: string } | undefined;
      for (let k = 0; k < a!.length && !expected; k++) {
        for (const ag of a![k]!.behaviour.agents) {
          const other = b![k]!.behaviour.agents.find((x) => x.agentId === ag.agentId)!;
          if (other.decision.move !== ag.decision.move) {
            expected = {
              step: a![k]!.behaviour.scope.step,
              agentId: ag.agentId,
              left: ag.decision.move,
              right: other.decision.move,
            };
            break;
          }
        }
      }
      expect(expected, 'the leaky agents should have diverged').toBeDefined();
      expect(r.divergence).toEqual({
        part: 'step',
        step: expected!.step,
        path: `steps[${expected!.step}].behaviour.agents[agentId=${expected!.agentId}].decision.move`,
        agentId: expected!.agentId,
        left: expected!.left,
        right: expected!.right,
      });
      // Both sources of nondeterminism are visible in the traces.
      for (const id of ['clock-a', 'rand-b']) {
        const moves = (t: Trace[]) =>
          t.map((s) => s.behaviour.agents.find((x) => x.agentId === id)!.decision.move).join(',');
        expect(moves(a!), id).not.toBe(moves(b!));
      }
    },
  );

  it(
    'the same clock-reading agent with strict mode on stops the run and names the agent and the call',
    { timeout: 120_000 },
    () => {
      const r = spawnSync(
        process.execPath,
        [
          '--import',
          'tsx',
          'coordinator/cli/main.ts',
          'replay',
          join(FIX, 'leaky-strict.yaml'),
          '--out',
          tmp('detsim-replay-'),
        ],
        { encoding: 'utf8', timeout: 60_000 },
      );
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(/clock-a/);
      expect(r.stderr).toMatch(/new Date\(\)/);
    },
  );
});
