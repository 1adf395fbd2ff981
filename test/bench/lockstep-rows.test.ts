// The lockstep bench's row table and figure arithmetic: which transports this build can run (and
// the worded skip of the others), row labels, figures beside their echo or the inline ceiling,
// percentiles. Hand-made rows; no run is timed here and no figure value is judged.
import { describe, expect, it } from 'vitest';
import { percentile } from '../../bench/lib/measure.js';
import { configRefusal, NOT_AVAILABLE, transportPlan } from '../../bench/lib/transports.js';
import {
  FULL_ROWS,
  lockstepFigures,
  lockstepTable,
  QUICK_ROWS,
  rowSpec,
  type LockstepRow,
  type StepFigures,
} from '../../bench/suites/lockstep.js';

const figures = (rate: number): StepFigures => ({
  agentStepsPerSec: rate,
  p50StepMs: 2,
  p99StepMs: 8,
  cpuUsPerAgentStep: { coordinatorThread: 50, process: 60, workerProcesses: 40, all: 100 },
});

function row(agents: number, processes: number, transport: 'unix' | 'thread' | 'inline', pipeline = true): LockstepRow {
  const echo = transport === 'inline' ? null : figures(4000);
  return {
    ...rowSpec(agents, processes, transport, pipeline),
    ...figures(transport === 'inline' ? 8000 : 2000),
    steps: 120,
    warmup: 30,
    stepsPerSec: 100,
    echo,
    echoAgentStepsPerSec: echo?.agentStepsPerSec ?? null,
    slowdown: echo ? 2 : null,
    coordinatorPeakRssMiB: 100,
    workersPeakRssMiB: 200,
  };
}

describe('lockstep bench: transports', () => {
  it('every transport runs in this build, each through config (workers.transport)', () => {
    expect(transportPlan('inline')).toEqual({
      available: true,
      setup: { workers: { transport: 'inline' }, runOptions: {} },
    });
    // The unix and thread rows keep the environment on a process or thread of its own (the default
    // would put a built-in one inline); the -env-inline rows put it there.
    for (const transport of ['unix', 'thread'] as const) {
      expect(transportPlan(transport)).toEqual({
        available: true,
        setup: { workers: { transport }, environment: { transport: 'workers' }, runOptions: {} },
      });
      expect(transportPlan(`${transport}-env-inline`)).toEqual({
        available: true,
        setup: { workers: { transport }, environment: { transport: 'inline' }, runOptions: {} },
      });
    }
  });

  it('a transport the config refuses is named by the probe that decides skips, and a skipped row shows its reason', () => {
    expect(configRefusal({ transport: 'thread' })).toBeNull();
    const refused = configRefusal({ transport: 'carrier-pigeon' });
    expect(refused).toContain('workers.transport');
    const reason = `${NOT_AVAILABLE} (config refuses it: ${refused})`;
    const table = lockstepTable([], [{ ...rowSpec(16, 4, 'thread'), reason }]);
    expect(table.split('\n')).toHaveLength(3);
    expect(table).toContain(NOT_AVAILABLE);
  });

  it('labels name N, where the agents run, and the Phase-D-exact mode; the tables hold every transport', () => {
    expect(rowSpec(16, 4, 'unix').label).toBe('n16.p4');
    expect(rowSpec(16, 4, 'thread').label).toBe('n16.thread4');
    expect(rowSpec(16, 4, 'inline')).toMatchObject({ label: 'n16.inline', processes: 1 });
    expect(rowSpec(16, 4, 'unix', false).label).toBe('n16.p4.phase-d');
    for (const table of [QUICK_ROWS, FULL_ROWS]) {
      expect(new Set(table.map((r) => r.transport))).toEqual(new Set(['unix', 'thread', 'inline']));
      expect(new Set(table.map((r) => r.label)).size).toBe(table.length);
    }
  });
});

describe('lockstep bench: figures', () => {
  const rows = [row(16, 4, 'unix'), row(16, 4, 'unix', false), row(16, 4, 'thread'), row(16, 1, 'inline')];
  const byId = new Map(lockstepFigures(rows).map((f) => [f.id, f]));

  it('a transport row: rate, p50, p99 and three CPU figures, each beside the same measure of its echo', () => {
    for (const suffix of ['', '.p50', '.p99', '.cpu.coordinator', '.cpu.process', '.cpu.all']) {
      const f = byId.get(`lockstep.n16.thread4${suffix}`)!;
      expect(f.limit?.name).toBe('raw worker_threads postMessage echo, same pipelined messages per step');
      expect(f.ratio).toBeCloseTo(f.value / f.limit!.value, 12);
    }
    expect(byId.get('lockstep.n16.p4')).toMatchObject({ value: 2000, ratio: 0.5, higherIsBetter: true });
    expect(byId.get('lockstep.n16.p4.p99')).toMatchObject({ unit: 'ms/step', higherIsBetter: false });
    expect(byId.get('lockstep.n16.p4.cpu.all')?.limit?.name).toMatch(/^raw socket-wire echo/);
  });

  it('the inline ceiling has no echo; the other rows at its N are also figured beside it, Phase-D-exact ones not', () => {
    expect(byId.get('lockstep.n16.inline')).toMatchObject({ limit: null, ratio: null });
    expect(byId.get('lockstep.n16.thread4.vs-inline')).toMatchObject({ value: 2000, ratio: 0.25 });
    expect(byId.get('lockstep.n16.p4.vs-inline')?.limit?.value).toBe(8000);
    expect(byId.has('lockstep.n16.p4.phase-d.vs-inline')).toBe(false);
    expect(byId.has('lockstep.n16.inline.vs-inline')).toBe(false);
  });

  it('a row without a coordinator-thread CPU reading (no /proc schedstat) has no such figure', () => {
    const r = row(1, 1, 'unix');
    r.cpuUsPerAgentStep = { ...r.cpuUsPerAgentStep, coordinatorThread: null };
    expect(lockstepFigures([r]).map((f) => f.id)).not.toContain('lockstep.n1.p1.cpu.coordinator');
  });

  it('percentiles are nearest-rank', () => {
    const xs = Array.from({ length: 100 }, (_, i) => 100 - i); // 100..1, unsorted
    expect(percentile(xs, 50)).toBe(50);
    expect(percentile(xs, 99)).toBe(99);
    expect(percentile([7], 99)).toBe(7);
    expect(percentile([], 50)).toBeNaN();
  });
});
