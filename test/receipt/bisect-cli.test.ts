// `detsim bisect` over real runs of a researcher's own model (a module written outside the checkout,
// one directory per "code version", each with the same config and model file name). Version b
// increments a hidden accumulator differently for agent h-1 from step 30 on and shows it in its
// decision only from step 90: the trace diverges at step 90, the checkpoints (every 20) between
// boundaries 20 and 40, and the re-run of that window names step 30, agent h-1, state.hidden 31 vs
// 32 — leaving both run directories as they were. Version c changes h-1's move at step 50: the
// trace names it without a re-run. Two runs of version a are DIFF=0 (exit 0). Refused (exit 2, one
// line): another master seed, a tampered trace or checkpoint, a missing run. With only the last
// checkpoint kept, the re-run starts afresh from step 0 and still names step 30. A model file overwritten in place
// between two runs cannot re-run the older one, and a run that depended on an input outside it (an
// environment variable) is not reproduced by its re-run: bisect says so and names only the window.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { detsim } from '../checkpoint/cli.js';
import { tmpDir } from '../checkpoint/harness.js';
import { CLI_MAIN, expectCliRefusal } from '../cli-refusal.js';
import { snapshotDir } from '../dir-snapshot.js';
import { editTrace, traceLinesOf } from '../trace-read.js';

/** A model with a hidden accumulator, decided by `bump`; `move` picks the direction from x (and step, agent). */
const MODEL = (bump: string, move = "['north', 'south', 'east', 'west'][x % 4]") => `// hidden accumulator model
export default {
  kind: 'agent',
  modelVersion: 'hidden-v1',
  initialize: ({ seed }) => ({ rng: (seed >>> 0) || 1, hidden: 0 }),
  prepare(s, ctx) {
    let x = s.rng;
    x = (x ^ (x << 13)) >>> 0;
    x = (x ^ (x >>> 17)) >>> 0;
    x = (x ^ (x << 5)) >>> 0;
    s.rng = x;
    const step = Number(ctx.step);
    s.hidden += ${bump};
    const move = ${move};
    return step >= 90 ? { move, hidden: s.hidden } : { move };
  },
  commit() {},
  capture: (s) => ({ rng: s.rng, hidden: s.hidden }),
  restore: (d) => ({ rng: d.rng, hidden: d.hidden }),
};
`;
const V1 = MODEL('1');
const V2 = MODEL("(step >= 30 && ctx.agentId === 'h-1' ? 2 : 1)");
const V3 = MODEL('1', "['north', 'south', 'east', 'west'][(x + (step >= 50 && ctx.agentId === 'h-1' ? 1 : 0)) % 4]");

const CONFIG = (seed = '11') => `sessionId: study
masterSeed: "${seed}"
steps: 120
stepHz: 60
environment: { id: forage, model: forage, params: { width: 8, height: 8, food: 4 } }
agents:
  - { id: h-0, model: ./hidden.mjs, actionFields: [move] }
  - { id: h-1, model: ./hidden.mjs, actionFields: [move] }
workers: { agentsPerWorker: 2 }
`;

const home = tmpDir('detsim-bisect-');

function checkout(name: string, model: string, seed?: string): string {
  const dir = join(home, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'hidden.mjs'), model);
  writeFileSync(join(dir, 'study.yaml'), CONFIG(seed));
  return dir;
}

/**
 * `detsim run` of a checkout's config into its runs/, checkpoints every 20 (all kept; every one taken:
 * --checkpoint-wait, so a writer still busy with two never skips one); the run directory.
 */
function run(dir: string, n: number, extra: string[] = ['--checkpoint-every', '20', '--keep', '10']): string {
  const wait = extra.includes('--checkpoint-every') ? ['--checkpoint-wait'] : [];
  const r = detsim(['run', join(dir, 'study.yaml'), '--out', join(dir, 'runs'), ...wait, ...extra]);
  expect(r.status, r.stderr).toBe(0);
  return join(dir, 'runs', `study-${n}`);
}

interface Report {
  same: boolean;
  hidden: boolean;
  codeVersions: { participantId: string; kind: string }[];
  trace: { step: string; agentId: string; path: string; left: unknown; right: unknown } | null;
  states: { common: number[]; lastEqual: number | null; firstDiffering: number | null; differences: unknown[] };
  rerun: {
    outcome: string;
    from: number;
    to: number;
    boundary: number | null;
    checkpoints: (string | null)[];
    reproduced: (boolean | null)[];
    differences: { participantId: string }[];
    message: string | null;
  } | null;
  first: Record<string, unknown> | null;
}

const bisect = (a: string, b: string, extra: string[] = []) => detsim(['bisect', a, b, ...extra]);
const json = (a: string, b: string, extra: string[] = []) => {
  const r = bisect(a, b, ['--json', ...extra]);
  expect(r.status, r.stderr).toBe(1);
  return JSON.parse(r.stdout) as Report;
};

describe('detsim bisect', () => {
  let [aDir, bDir, a1, a2, b] = ['', '', '', '', ''];
  beforeAll(() => {
    aDir = checkout('a', V1);
    bDir = checkout('b', V2);
    a1 = run(aDir, 1);
    a2 = run(aDir, 2);
    b = run(bDir, 1);
  }, 240_000);

  it('names the step where a hidden state diverged (step 30), long before the trace shows it (step 90)', () => {
    const before = [snapshotDir(a1), snapshotDir(b)];
    const r = bisect(a1, b);
    expect(r.status, r.stderr).toBe(1);
    expect(r.stdout).toContain(
      `trace            first differs at step 90 (agent h-1): steps[90].behaviour.agents[agentId=h-1].decision.hidden: ${a1} 91, ${b} 152`,
    );
    expect(r.stdout).toContain(
      `checkpoints      states agree at boundary 20; first differ at boundary 40: agent h-1 state.hidden: ${a1} 40, ${b} 50`,
    );
    expect(r.stdout).toContain(
      `re-run           boundaries 20→40 from ckpt-e1-20 (${a1}) and ckpt-e1-20 (${b}), a checkpoint after every step; each re-run gave back its run’s own state at boundary 40`,
    );
    expect(r.stdout).toContain(
      `first divergence step 30 (the state after it, boundary 31): agent h-1 state.hidden: ${a1} 31, ${b} 32 (the trace shows a divergence first at step 90)`,
    );
    expect(r.stdout).toMatch(/^code version {5}agent h-0, agent h-1: module:hidden\.mjs@sha256:[0-9a-f]{64} \(/m);
    expect(r.stderr).toContain(`re-running ${a1} from ckpt-e1-20 to boundary 40`);
    // Bisect never writes a run directory: the re-runs ran in copies.
    expect([snapshotDir(a1), snapshotDir(b)]).toEqual(before);

    const rep = json(a1, b);
    expect(rep.same).toBe(false);
    expect(rep.hidden).toBe(true);
    expect(rep.codeVersions.map((v) => v.participantId)).toEqual(['h-0', 'h-1']);
    expect(rep.states).toMatchObject({ common: [20, 40, 60, 80, 100, 120], lastEqual: 20, firstDiffering: 40 });
    expect(rep.rerun).toMatchObject({
      outcome: 'found',
      from: 20,
      to: 40,
      boundary: 31,
      checkpoints: ['ckpt-e1-20', 'ckpt-e1-20'],
      reproduced: [true, true],
    });
    // Only h-1's state differs after step 30; h-0 and the environment agree.
    expect(rep.rerun!.differences.map((d) => d.participantId)).toEqual(['h-1']);
    expect(rep.first).toEqual({
      source: 'step-state',
      step: '30',
      window: null,
      participantId: 'h-1',
      kind: 'agent',
      path: 'state.hidden',
      left: 31,
      right: 32,
    });
    // --rerun never: the window of boundaries is the answer.
    const coarse = json(a1, b, ['--rerun', 'never']);
    expect(coarse.rerun).toBeNull();
    expect(coarse.first).toMatchObject({ source: 'checkpoint-state', window: [20, 40], participantId: 'h-1' });
  }, 240_000);

  it('names a divergence the trace shows from the trace alone; --rerun always confirms no state differed earlier', () => {
    const c = run(checkout('c', V3), 1);
    const rep = json(a1, c);
    expect(rep.hidden).toBe(false);
    expect(rep.rerun).toBeNull();
    expect(rep.states).toMatchObject({ lastEqual: 40, firstDiffering: 60 });
    expect(rep.trace).toMatchObject({
      step: '50',
      agentId: 'h-1',
      path: 'steps[50].behaviour.agents[agentId=h-1].decision.move',
    });
    expect(rep.first).toMatchObject({ source: 'trace', step: '50', participantId: 'h-1' });
    const moves = ['north', 'south', 'east', 'west'];
    expect(moves.indexOf(rep.first!.right as string)).toBe((moves.indexOf(rep.first!.left as string) + 1) % 4);
    expect(bisect(a1, c).stdout).toMatch(
      /^first divergence step 50: agent h-1 steps\[50\]\.behaviour\.agents\[agentId=h-1\]\.decision\.move: .* \(from the trace; a hidden state divergence in steps 40–49 is not ruled out: --rerun always re-runs them\)$/m,
    );

    const always = json(a1, c, ['--rerun', 'always']);
    // Boundaries 40→51: states agree up to 50 and first differ after step 50 — where the trace says.
    expect(always.rerun).toMatchObject({ outcome: 'found', from: 40, to: 51, boundary: 51, reproduced: [null, null] });
    expect(always.first).toMatchObject({ source: 'trace', step: '50', participantId: 'h-1' });
  }, 240_000);

  it('re-runs from step 0 when no kept checkpoint precedes the first differing one', () => {
    // Only boundaries 80 and 120 are kept: 80 differs already, and nothing earlier agrees to start from.
    const [a3, b2] = [
      run(aDir, 3, ['--checkpoint-every', '40', '--keep', '2']),
      run(bDir, 2, ['--checkpoint-every', '40', '--keep', '2']),
    ];
    const rep = json(a3, b2);
    expect(rep.states).toMatchObject({ common: [80, 120], lastEqual: null, firstDiffering: 80 });
    expect(rep.rerun).toMatchObject({
      outcome: 'found',
      from: 0,
      to: 80,
      boundary: 31,
      checkpoints: [null, null],
      reproduced: [true, true],
    });
    expect(rep.first).toMatchObject({
      source: 'step-state',
      step: '30',
      participantId: 'h-1',
      path: 'state.hidden',
      left: 31,
      right: 32,
    });
    const r = bisect(a3, b2, ['--rerun', 'never']);
    expect(r.stdout).toContain(
      'checkpoints      no earlier common boundary; first differ at boundary 80: agent h-1 state.hidden:',
    );
    expect(r.stdout).toContain('first divergence between boundaries 0 and 80 (steps 0–79): agent h-1 state.hidden:');
  }, 240_000);

  it('says DIFF=0 (exit 0) for two runs of one config and one model', () => {
    const r = bisect(a1, a2);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('trace            the traces agree (120 steps)');
    expect(r.stdout).toContain('checkpoints      every state agrees at all 6 common boundaries');
    expect(r.stdout).toMatch(/^DIFF=0: the runs do not diverge/m);
    const rep = JSON.parse(bisect(a1, a2, ['--json']).stdout) as Report;
    expect(rep).toMatchObject({ same: true, hidden: false, rerun: null, first: null, codeVersions: [] });
  }, 120_000);

  it('refuses runs of another config, a damaged trace or checkpoint and a missing run (exit 2, one line)', () => {
    const seeded = run(checkout('seed', V1, '12'), 1, ['--steps', '10']);
    const line = expectCliRefusal(bisect(a1, seeded), 'ident_bisect_config_differs', 'run.masterSeed');
    expect(line).toContain(`run.masterSeed: "11" (${a1}) vs "12" (${seeded}): not runs of one config`);

    const damaged = join(home, 'damaged');
    cpSync(a2, damaged, { recursive: true });
    const first = traceLinesOf(damaged)[0]!;
    editTrace(damaged, (lines) => [first.replace('"step":"0"', '"step":"0" '), ...lines.slice(1)]);
    expect(traceLinesOf(damaged)[0]).not.toBe(first);
    expectCliRefusal(bisect(a1, damaged), 'audit_trace_segment_tampered', damaged);

    // A damaged checkpoint generation is refused naming the file.
    const store = join(home, 'damaged-store');
    cpSync(a2, store, { recursive: true });
    const gen = join(store, 'store', 'ckpt-e1-40.flysess');
    const bytes = readFileSync(gen);
    bytes[200]! ^= 0x01;
    writeFileSync(gen, bytes);
    const bad = expectCliRefusal(bisect(a1, store), 'audit_envelope_digest', gen);
    expect(bad).toContain('check 2 (footer digest)');

    expectCliRefusal(bisect(a1, join(home, 'nope')), 'struct_invalid_receipt', join(home, 'nope', 'run.json'));
    expectCliRefusal(bisect(a1, b, ['--rerun', 'sometimes']), 'struct_invalid_field', '--rerun');
  }, 120_000);

  it('names no step when a re-run does not give back its run’s own state (an input outside the run)', () => {
    // Version e reads an environment variable: its run had 2, the re-run (without it) gets 1.
    const e = checkout(
      'e',
      MODEL("(step >= 30 && ctx.agentId === 'h-1' ? Number(process.env.DETSIM_BISECT_BUMP ?? 1) : 1)"),
    );
    const made = spawnSync(
      process.execPath,
      [
        CLI_MAIN,
        'run',
        join(e, 'study.yaml'),
        '--out',
        join(e, 'runs'),
        '--checkpoint-every',
        '20',
        '--keep',
        '10',
        '--checkpoint-wait',
      ],
      { encoding: 'utf8', env: { ...process.env, DETSIM_BISECT_BUMP: '2' } },
    );
    expect(made.status, made.stderr).toBe(0);
    const rep = json(a1, join(e, 'runs', 'study-1'));
    expect(rep.states).toMatchObject({ lastEqual: 20, firstDiffering: 40 });
    expect(rep.rerun).toMatchObject({
      outcome: 'not-reproduced',
      from: 20,
      to: 40,
      boundary: null,
      reproduced: [true, false],
    });
    expect(rep.rerun!.message).toContain('so no step is named');
    expect(rep.first).toMatchObject({ source: 'checkpoint-state', window: [20, 40], participantId: 'h-1' });
  }, 240_000);

  it('finds a model file moved beside its run directory, as replay does (not beside the scratch copy)', () => {
    const moved = checkout('moved', V2);
    const r = run(moved, 1);
    renameSync(join(moved, 'hidden.mjs'), join(moved, 'runs', 'hidden.mjs'));
    const rep = json(a1, r);
    expect(rep.rerun).toMatchObject({ outcome: 'found', from: 20, to: 40, boundary: 31 });
  }, 240_000);

  it('cannot re-run a version whose model file was overwritten, and says so with the window', () => {
    const same = checkout('same', V1);
    const old = run(same, 1);
    writeFileSync(join(same, 'hidden.mjs'), V2);
    const changed = run(same, 2);
    const rep = json(old, changed);
    expect(rep.rerun).toMatchObject({ outcome: 'failed', from: 20, to: 40 });
    expect(rep.rerun!.message).toContain(`the re-run of ${old} failed: [ident_model_source_changed] ${old}/run.json`);
    expect(rep.rerun!.message).toContain('model source changed');
    expect(rep.first).toMatchObject({ source: 'checkpoint-state', window: [20, 40], participantId: 'h-1' });
    expect(readFileSync(join(same, 'hidden.mjs'), 'utf8')).toBe(V2);
  }, 240_000);
});
