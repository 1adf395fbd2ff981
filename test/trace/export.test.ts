// `detsim trace export` and the Python `read_trace` on real runs made by the built CLI: forage-walkers
// and mixed-python exported to CSV and Parquet and read back by pyarrow, pandas and read_trace (in
// the venv), every value checked against the trace as the TypeScript trace reader yields it
// (readTraceSync through test/trace-read.ts), never against the exporter's own output; a resumed run
// exports exactly its final history; a directory of runs exports each with its run id; a damaged
// trace, an existing --out and a full disk are refused with nothing left behind; progress is
// reported while reading. Not the table's unit rules in isolation (they are exercised here on real
// decisions) and not the trace reader (trace-store.test.ts).
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import { exportTrace, type ExportProgress } from '../../coordinator/export/trace-export.js';
import { detsimCli, expectCliRefusal } from '../cli-refusal.js';
import { ensurePythonWorker } from '../cross-lang/python-worker.js';
import { prepareRuntimesFor } from '../cross-lang/example-runtimes.js';
import { fullDiskUnavailable, mountSmallDisk } from '../full-disk.js';
import { editTrace, traceOf } from '../trace-read.js';
import { SegmentedTraceWriter } from '../../coordinator/trace/trace-store.js';
import { canonicalBehaviour, type TraceBehaviour } from '../../coordinator/trace/trace.js';
import { REPO_ROOT } from '../workers/harness.js';

type Row = Record<string, JsonValue>;
interface Read {
  columns: string[];
  types: string[];
  nullable?: boolean[];
  rowGroups?: number;
  rows: Row[];
  metadata?: Record<string, string>;
  error?: { reason: string; message: string };
}

const ROOT = mkdtempSync(join(tmpdir(), 'detsim-export-'));
const RUNS = join(ROOT, 'runs');
const OUT = join(ROOT, 'out');
const FW = join(RUNS, 'forage-walkers-1');
const FW_SHORT = join(RUNS, 'forage-walkers-2');

afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

function run(args: string[]): void {
  const r = detsimCli(args, 240_000);
  expect(r.status, r.stderr).toBe(0);
}

beforeAll(() => {
  mkdirSync(OUT);
  run(['run', 'examples/forage-walkers.yaml', '--checkpoint-every', '100', '--out', RUNS]);
  run(['run', 'examples/forage-walkers.yaml', '--steps', '50', '--segment-steps', '16', '--out', RUNS]);
}, 300_000);

/** Export through the built CLI; the result's status, stdout and stderr. */
function exportCli(source: string, out: string, format?: 'csv' | 'parquet') {
  return detsimCli(['trace', 'export', source, ...(format ? ['--format', format] : []), '--out', out], 120_000);
}

/** Read an export (or a run directory with read_trace) in the venv's Python; this worktree's package first. */
function readBack(mode: 'parquet' | 'csv' | 'frame' | 'list', path: string): Read {
  const python = ensurePythonWorker();
  const r = spawnSync(python, [join(REPO_ROOT, 'test/trace/read_export.py'), mode, path], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'workers/python') },
  });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Read;
}

/**
 * The table the export must hold, from the TypeScript trace reader: per step and agent (in the
 * trace's order) the run id, step, epoch, agent, the sum of the agent's rewards and each decision
 * field — scalars as they are, arrays as canonical JSON text — missing fields null.
 */
function expectedRows(runs: { id: string; dir: string }[], actionColumns: string[]): Row[] {
  const rows: Row[] = [];
  for (const { id, dir } of runs)
    for (const t of traceOf(dir)) {
      const b = t.behaviour;
      for (const a of b.agents) {
        const reward = b.rewards.filter((r) => r.agentId === a.agentId).reduce((n, r) => n + r.value, 0);
        const row: Row = { run: id, step: Number(b.scope.step), epoch: b.scope.epoch, agent: a.agentId, reward };
        const decision = a.decision as Record<string, JsonValue>;
        for (const c of actionColumns) {
          const v = decision[c.slice('action.'.length)];
          row[c] = v === undefined || v === null ? null : typeof v === 'object' ? canonicalize(v) : v;
        }
        rows.push(row);
      }
    }
  return rows;
}

/** Every reading of an export agrees with the trace: the same columns in order and the same rows. */
function expectTable(read: Read, columns: string[], rows: Row[]): void {
  expect(read.error).toBeUndefined();
  expect(read.columns).toEqual(columns);
  expect(read.rows.length).toBe(rows.length);
  for (let i = 0; i < rows.length; i++)
    if (canonicalize(read.rows[i]) !== canonicalize(rows[i])) expect(read.rows[i]).toEqual(rows[i]);
}

const FIXED = ['run', 'step', 'epoch', 'agent', 'reward'];

describe('detsim trace export: real runs read back by pyarrow, pandas and read_trace', () => {
  it('forage-walkers: CSV and Parquet hold every step and agent of the trace, typed', () => {
    const columns = [...FIXED, 'action.move'];
    const rows = expectedRows([{ id: 'forage-walkers-1', dir: FW }], ['action.move']);
    expect(rows.length).toBe(600 * 16);
    expect(rows.some((r) => (r.reward as number) > 0)).toBe(true);

    const csv = join(OUT, 'fw.csv');
    const c = exportCli(FW, csv);
    expect(c.status, c.stderr).toBe(0);
    expect(c.stdout).toContain(`${csv}: 9600 rows (600 steps of run forage-walkers-1), csv, 6 columns`);
    const fromCsv = readBack('csv', csv);
    expectTable(fromCsv, columns, rows);
    // pandas infers the documented types from the text alone: ints, floats (always with a '.'), strings.
    expect([fromCsv.types[1], fromCsv.types[4]]).toEqual(['int64', 'float64']);

    const pq = join(OUT, 'fw.parquet');
    const p = exportCli(FW, pq, 'parquet');
    expect(p.status, p.stderr).toBe(0);
    const fromPq = readBack('parquet', pq);
    expectTable(fromPq, columns, rows);
    expect(fromPq.types).toEqual(['string', 'int64', 'string', 'string', 'double', 'string']);
    expect(fromPq.nullable).toEqual([false, false, false, false, false, true]);
    expect(fromPq.metadata).toEqual({ 'detsim.format': 'detsim-trace-table-v1' });

    const frame = readBack('frame', FW);
    expectTable(frame, columns, rows);
    expect(frame.types).toEqual(['string', 'Int64', 'string', 'string', 'float64', 'string']);
    expectTable(readBack('list', FW), columns, rows);
  });

  it('mixed-python (TypeScript, Rust and Python agents): array fields are canonical JSON text, absent ones null', async (ctx) => {
    const skip = prepareRuntimesFor('examples/mixed-python.yaml');
    if (skip) return ctx.skip(skip);
    const parent = join(ROOT, 'mixed');
    run(['run', 'examples/mixed-python.yaml', '--steps', '60', '--out', parent]);
    const dir = join(parent, 'mixed-python-1');
    const columns = [...FIXED, 'action.move', 'action.spikes'];
    const rows = expectedRows([{ id: 'mixed-python-1', dir }], ['action.move', 'action.spikes']);
    expect(rows.filter((r) => r['action.spikes'] === null).length).toBe(60 * 4); // the walkers decide no spikes
    expect(rows.find((r) => r.agent === 'lif-a')!['action.spikes']).toMatch(/^\[[0-9]+(,[0-9]+)*\]$/);

    const csv = join(OUT, 'mixed.csv');
    expect(exportCli(dir, csv).status).toBe(0);
    expectTable(readBack('csv', csv), columns, rows);
    const pq = join(OUT, 'mixed.parquet');
    expect(exportCli(dir, pq).status).toBe(0);
    const fromPq = readBack('parquet', pq);
    expectTable(fromPq, columns, rows);
    expect(fromPq.types).toEqual(['string', 'int64', 'string', 'string', 'double', 'string', 'string']);
    expectTable(readBack('frame', dir), columns, rows);
  });

  it('a resumed run exports exactly its final history: later epochs kept, abandoned segments never', () => {
    const dir = join(ROOT, 'resumed', 'forage-walkers-1');
    cpSync(FW, dir, { recursive: true });
    run(['resume', dir, '--checkpoint', 'ckpt-e1-400']);
    expect(readdirSync(join(dir, 'trace')).filter((f) => f.startsWith('abandoned-')).length).toBeGreaterThan(0);

    const rows = expectedRows([{ id: 'forage-walkers-1', dir }], ['action.move']);
    const csv = join(OUT, 'resumed.csv');
    expect(exportCli(dir, csv).status).toBe(0);
    const read = readBack('csv', csv);
    expectTable(read, [...FIXED, 'action.move'], rows);
    const keys = read.rows.map((r) => `${r.step}/${r.agent}`);
    expect(new Set(keys).size).toBe(600 * 16);
    expect(read.rows.every((r) => r.epoch === ((r.step as number) < 400 ? 'e1' : 'e2'))).toBe(true);
    // Deterministic: the same decisions and rewards as the uninterrupted run, step for step.
    const plain = expectedRows([{ id: 'forage-walkers-1', dir: FW }], ['action.move']);
    expect(read.rows.map(({ epoch: _e, ...r }) => r)).toEqual(plain.map(({ epoch: _e, ...r }) => r));
    expectTable(readBack('frame', dir), [...FIXED, 'action.move'], rows);
  });

  it('a directory of runs exports every run with its id (files and other directories beside them are not runs)', () => {
    writeFileSync(join(RUNS, 'sweep.json'), '{}');
    mkdirSync(join(RUNS, 'notes'), { recursive: true });
    const runs = [
      { id: 'forage-walkers-1', dir: FW },
      { id: 'forage-walkers-2', dir: FW_SHORT },
    ];
    const rows = expectedRows(runs, ['action.move']);
    expect(rows.length).toBe(600 * 16 + 50 * 16);
    const pq = join(OUT, 'both.parquet');
    const r = exportCli(RUNS, pq);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('10400 rows (650 steps of 2 runs)');
    expect(r.stderr).not.toContain('note:');
    const read = readBack('parquet', pq);
    expectTable(read, [...FIXED, 'action.move'], rows);
    expect(read.rowGroups).toBe(1);
    expectTable(readBack('list', RUNS), [...FIXED, 'action.move'], rows);
  });

  it('a run that did not complete is exported with the others, and the command says its rows stop short', () => {
    const mixed = join(OUT, 'partial-runs');
    mkdirSync(mixed);
    cpSync(FW, join(mixed, 'whole'), { recursive: true });
    cpSync(FW_SHORT, join(mixed, 'cut'), { recursive: true });
    rmSync(join(mixed, 'cut', 'summary.json'));
    rmSync(join(mixed, 'cut', 'receipt.json'));
    const r = exportCli(mixed, join(OUT, 'partial.csv'));
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain('(650 steps of 2 runs)');
    expect(r.stderr).toContain(
      'note: 1 of 2 run(s) did not complete, their rows stop where they did: cut (not ended (no summary.json: still running, or killed))',
    );
  });
});

describe('detsim trace export: the overrides a run was made with', () => {
  it('each --set path (and --master-seed) is a set.<path> column, typed by its values; a run without it has null', () => {
    const parent = join(ROOT, 'overrides');
    const short = ['run', 'examples/forage-walkers.yaml', '--steps', '20', '--out', parent];
    run([...short, '--set', 'environment.params.food=12', '--master-seed', '5']);
    run([...short, '--set', 'environment.params.food=30']);
    run(short);
    const runs = [1, 2, 3].map((i) => ({ id: `forage-walkers-${i}`, dir: join(parent, `forage-walkers-${i}`) }));
    const set: Record<string, Row> = {
      'forage-walkers-1': { 'set.environment.params.food': 12, 'set.masterSeed': '5' },
      'forage-walkers-2': { 'set.environment.params.food': 30, 'set.masterSeed': null },
      'forage-walkers-3': { 'set.environment.params.food': null, 'set.masterSeed': null },
    };
    const rows = expectedRows(runs, ['action.move']).map((r) => ({ ...r, ...set[r.run as string] }));
    const columns = [...FIXED, 'action.move', 'set.environment.params.food', 'set.masterSeed'];

    const pq = join(OUT, 'overrides.parquet');
    const p = exportCli(parent, pq, 'parquet');
    expect(p.status, p.stderr).toBe(0);
    const fromPq = readBack('parquet', pq);
    expectTable(fromPq, columns, rows);
    expect(fromPq.types.slice(5)).toEqual(['string', 'int64', 'string']);
    expectTable(readBack('frame', parent), columns, rows);
    expectTable(readBack('list', parent), columns, rows);
    const csv = join(OUT, 'overrides.csv');
    expect(exportCli(parent, csv).status).toBe(0);
    const lines = readFileSync(csv, 'utf8').split('\n');
    expect(lines[0]).toBe(columns.join(','));
    expect(lines[1]).toMatch(/^forage-walkers-1,0,e1,walker-00,[0-9.]+,[a-z]+,12,5$/);
  });
});

describe('detsim trace export: a fork of a fork', () => {
  it("each step's set.<path> is what it ran with: the parent's, then each fork's own --set from its boundary on", () => {
    const dir = join(ROOT, 'forks');
    run(['run', 'examples/forage-walkers.yaml', '--steps', '60', '--checkpoint-every', '20', '--out', dir]);
    const parent = join(dir, 'forage-walkers-1');
    run([
      'fork',
      parent,
      '--checkpoint',
      'ckpt-e1-20',
      '--set',
      'environment.params.food=48',
      '--out',
      join(dir, 'f1'),
    ]);
    const f1 = join(dir, 'f1');
    // f1's checkpoints are epoch e2 from its boundary on: ckpt-e2-40 is its own.
    run(['fork', f1, '--checkpoint', 'ckpt-e2-40', '--set', 'environment.params.food=24', '--out', join(dir, 'f2')]);
    const f2 = join(dir, 'f2');
    const food = (step: number) => (step >= 40 ? 24 : step >= 20 ? 48 : null);
    const rows = expectedRows([{ id: 'f2', dir: f2 }], ['action.move']).map((r) => ({
      ...r,
      'set.environment.params.food': food(r.step as number),
    }));
    expect(new Set(rows.map((r) => r['set.environment.params.food']))).toEqual(new Set([null, 48, 24]));
    const columns = [...FIXED, 'action.move', 'set.environment.params.food'];
    const csv = join(OUT, 'forks.csv');
    expect(exportCli(f2, csv).status).toBe(0);
    expectTable(readBack('csv', csv), columns, rows);
    const pq = join(OUT, 'forks.parquet');
    expect(exportCli(f2, pq, 'parquet').status).toBe(0);
    expectTable(readBack('parquet', pq), columns, rows);
    expectTable(readBack('list', f2), columns, rows);
  });
});

describe('detsim trace export: refusals leave nothing behind', () => {
  const damaged = (name: string) => {
    const dir = join(ROOT, name, 'forage-walkers-1');
    cpSync(FW, dir, { recursive: true });
    return dir;
  };
  const outDir = (name: string) => {
    const dir = join(ROOT, `${name}-out`);
    mkdirSync(dir);
    return dir;
  };

  it('a tampered segment is refused naming the file, by the CLI and by read_trace', () => {
    const dir = damaged('flipped');
    const segment = join(dir, 'trace', '000002.jsonl.gz');
    const bytes = readFileSync(segment);
    const mid = bytes.length >> 1;
    bytes.writeUInt8(bytes.readUInt8(mid) ^ 0xff, mid);
    writeFileSync(segment, bytes);
    const out = outDir('flipped');
    for (const format of ['csv', 'parquet'] as const) {
      const line = expectCliRefusal(exportCli(dir, join(out, `t.${format}`)), 'audit_trace_segment_tampered', segment);
      expect(line).toContain('receipt.json');
    }
    expect(readdirSync(out)).toEqual([]);
    const py = readBack('frame', dir).error!;
    expect(py.reason).toBe('audit_trace_segment_tampered');
    expect(py.message).toContain(segment);
    // Without a receipt (a run still going) the index's own digest catches it.
    rmSync(join(dir, 'receipt.json'));
    const line = expectCliRefusal(exportCli(dir, join(out, 't.csv')), 'audit_trace_segment_tampered', segment);
    expect(line).toContain('index.jsonl');
    expect(readBack('list', dir).error?.reason).toBe('audit_trace_segment_tampered');
    expect(readdirSync(out)).toEqual([]);
  });

  it('a segment rewritten with its index re-bound still differs from the receipt: refused', () => {
    const dir = damaged('rebound');
    editTrace(dir, (lines) => lines.map((l, i) => (i === 250 ? l.replace('"move":"', '"move":"x') : l)));
    const segment = join(dir, 'trace', '000002.jsonl.gz');
    const out = outDir('rebound');
    expectCliRefusal(exportCli(dir, join(out, 't.csv')), 'audit_trace_segment_tampered', segment);
    expect(readdirSync(out)).toEqual([]);
    expect(readBack('frame', dir).error?.reason).toBe('audit_trace_segment_tampered');
  });

  it('an --out that exists is refused and left as it was; so is a source that holds no run', () => {
    const out = join(outDir('exists'), 'fw.csv');
    writeFileSync(out, 'mine\n');
    expectCliRefusal(exportCli(FW, out), 'perm_export_exists', out);
    expect(readFileSync(out, 'utf8')).toBe('mine\n');
    const empty = outDir('no-runs');
    expectCliRefusal(exportCli(empty, join(ROOT, 'x.csv')), 'struct_export_source', empty);
    expectCliRefusal(
      exportCli(join(ROOT, 'nowhere'), join(ROOT, 'x.csv')),
      'struct_export_source',
      join(ROOT, 'nowhere'),
    );
    expectCliRefusal(exportCli(FW, join(ROOT, 'x.json')), 'struct_missing_field', '--format');
    expectCliRefusal(exportCli(FW, join(ROOT, 'no-dir', 'x.csv')), 'struct_invalid_field', '--out');
    expectCliRefusal(
      detsimCli(['trace', 'export', FW, '--format', 'xlsx', '--out', join(ROOT, 'x.csv')]),
      'struct_invalid_field',
      '--format',
    );
    expectCliRefusal(detsimCli(['trace', 'export', FW]), 'struct_missing_field', '--out');
    expect(existsSync(join(ROOT, 'x.csv'))).toBe(false);
  });

  describe.skipIf(fullDiskUnavailable !== null)('on a full disk', () => {
    it('the write failure is one line naming the file, exit 1, and nothing is left', () => {
      const disk = mountSmallDisk(64 * 1024);
      try {
        const out = join(disk.dir, 'fw.csv');
        const r = exportCli(FW, out);
        expect(r.status, r.stderr).toBe(1);
        const lines = r.stderr.trim().split('\n');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^detsim: \[size_no_space\] cannot write .*fw\.csv: no space left on the device/);
        expect(readdirSync(disk.dir)).toEqual([]);
      } finally {
        disk.unmount();
      }
    });
  });
});

/**
 * A trace with decisions of every kind no example makes (written by the real segment writer; only
 * the fields the export reads are meaningful): ints, floats, booleans, strings that need quoting,
 * arrays, objects, a field always null, one mixing a string and a number, bare decisions, and an
 * agent with two rewards in one step.
 */
async function kindsRun(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'run.json'), '{}');
  const decisions: [JsonValue, JsonValue][] = [
    [{ i: 1, f: 1, b: true, s: 'x', mixed: 'north', arr: [1, 2], obj: { k: 'v' }, nul: null }, 'bare'],
    [{ i: -7, f: 2.5, b: false, s: 'y,"q"', mixed: 3, arr: [], big: 1e300 }, { i: 9007199254740991 }],
    [{ f: 1e21, s: '', tiny: 5e-324 }, ['list']],
  ];
  const reward = (agentId: string, eventId: string, value: number) => ({ agentId, eventId, ruleId: 'r', value });
  const rewards = [[], [reward('a', 'e1', 0.1), reward('a', 'e2', 0.2), reward('b', 'e3', -1)], []];
  const w = new SegmentedTraceWriter(dir, { segmentSteps: 2 });
  for (const [k, [a, b]] of decisions.entries()) {
    const agent = (agentId: string, decision: JsonValue) => ({ agentId, decision, decisionDigest: 'd' });
    const behaviour = {
      scope: { sessionId: 'kinds', epoch: 'e1', step: String(k) },
      agents: [agent('a', a), agent('b', b)],
      batchId: `batch-e1-${k}`,
      rewards: rewards[k],
      eventIds: [],
    } as unknown as TraceBehaviour;
    const text = canonicalBehaviour(behaviour);
    await w.appendLine(`{"behaviour":${text},"operational":{}}`, text);
  }
  await w.close();
}

describe('detsim trace export: the column types on decisions of every kind', () => {
  const actions = ['action', 'arr', 'b', 'big', 'f', 'i', 'mixed', 'nul', 'obj', 's', 'tiny'];
  const columns = [...FIXED, ...actions.map((a) => (a === 'action' ? a : `action.${a}`))];
  const row = (step: number, agent: string, reward: number, cells: JsonValue[]): Row => {
    const values = ['kinds', step, 'e1', agent, reward, ...cells];
    return Object.fromEntries(columns.map((c, i) => [c, values[i] ?? null]));
  };
  const rows = [
    row(0, 'a', 0, [null, '[1,2]', true, null, 1, 1, '"north"', null, '{"k":"v"}', 'x', null]),
    row(0, 'b', 0, ['"bare"']),
    row(1, 'a', 0.1 + 0.2, [null, '[]', false, 1e300, 2.5, -7, '3', null, null, 'y,"q"', null]),
    row(1, 'b', -1, [null, null, null, null, null, 9007199254740991]),
    row(2, 'a', 0, [null, null, null, null, 1e21, null, null, null, null, '', 5e-324]),
    row(2, 'b', 0, ['["list"]']),
  ];

  it('ints, floats, bools and strings keep their type; arrays, objects and mixed columns are canonical JSON; CSV, Parquet and read_trace agree', async () => {
    const dir = join(ROOT, 'kinds');
    await kindsRun(dir);
    const pq = join(OUT, 'kinds.parquet');
    expect(exportCli(dir, pq).status).toBe(0);
    const fromPq = readBack('parquet', pq);
    expectTable(fromPq, columns, rows);
    const types = [
      'string',
      'string',
      'bool',
      'double',
      'double',
      'int64',
      'string',
      'string',
      'string',
      'string',
      'double',
    ];
    expect(fromPq.types).toEqual(['string', 'int64', 'string', 'string', 'double', ...types]);
    expectTable(readBack('list', dir), columns, rows);
    const frame = readBack('frame', dir);
    expectTable(frame, columns, rows);
    expect(frame.types.slice(5)).toEqual([
      'string',
      'string',
      'boolean',
      'float64',
      'float64',
      'Int64',
      'string',
      'string',
      'string',
      'string',
      'float64',
    ]);
    const csv = join(OUT, 'kinds.csv');
    expect(exportCli(dir, csv).status).toBe(0);
    expect(readFileSync(csv, 'utf8').split('\n')).toEqual([
      'run,step,epoch,agent,reward,action,action.arr,action.b,action.big,action.f,action.i,action.mixed,action.nul,action.obj,action.s,action.tiny',
      'kinds,0,e1,a,0.0,,"[1,2]",true,,1.0,1,"""north""",,"{""k"":""v""}",x,',
      'kinds,0,e1,b,0.0,"""bare""",,,,,,,,,,',
      'kinds,1,e1,a,0.30000000000000004,,[],false,1e+300,2.5,-7,3,,,"y,""q""",',
      'kinds,1,e1,b,-1.0,,,,,,9007199254740991,,,,,',
      'kinds,2,e1,a,0.0,,,,,1e+21,,,,,"",5e-324',
      'kinds,2,e1,b,0.0,"[""list""]",,,,,,,,,,',
      '',
    ]);
  });
});

describe('exportTrace: progress while reading', () => {
  it('reports each pass run by run, steps rising to the run length, rows while writing', async () => {
    const seen: ExportProgress[] = [];
    const out = join(ROOT, 'progress.parquet');
    const r = await exportTrace(RUNS, { format: 'parquet', out, progressEveryMs: 0, progress: (p) => seen.push(p) });
    expect(r.rows).toBe(650 * 16);
    expect(seen.map((p) => `${p.phase} ${p.run} ${p.step}/${p.steps}`)).toEqual([
      'checking forage-walkers-1 256/600',
      'checking forage-walkers-1 512/600',
      'writing forage-walkers-1 256/600',
      'writing forage-walkers-1 512/600',
    ]);
    expect(seen.filter((p) => p.phase === 'writing').map((p) => p.rows)).toEqual([256 * 16, 512 * 16]);
    expect(seen.every((p) => p.runs === 2 && p.runIndex === 1)).toBe(true);
  });
});
