// The observations sidecar (`detsim run --trace-observations`) end to end on real runs made by the
// built CLI: the behaviour digest and ReproHash are those of the run without it; `trace export`
// to CSV and Parquet, read back by pyarrow, pandas and read_trace (the venv), holds obs.<field>
// columns whose every value is checked against the sidecar files read here by hand (gunzip, one line
// per step, in the index's segment order), never against the exporter; a tampered or missing
// sidecar is refused naming the file (and the step), nothing written; a resumed run and a fork
// export only their final history; nested observations flatten by the documented rule.
// NOT the export without the sidecar (export.test.ts) nor the trace reader (trace-store.test.ts).
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalize, sha256Hex, type JsonValue } from '../../core/formats/canonical-json.js';
import { detsimCli, expectCliRefusal } from '../cli-refusal.js';
import { ensurePythonWorker } from '../cross-lang/python-worker.js';
import { traceOf } from '../trace-read.js';
import { SegmentedTraceWriter, truncateSegmentedTrace } from '../../coordinator/trace/trace-store.js';
import { canonicalBehaviour, type TraceBehaviour } from '../../coordinator/trace/trace.js';
import { REPO_ROOT } from '../workers/harness.js';

type Row = Record<string, JsonValue>;
interface Read {
  columns: string[];
  types: string[];
  rows: Row[];
  error?: { reason: string; message: string };
}

const ROOT = mkdtempSync(join(tmpdir(), 'detsim-export-obs-'));
const OUT = join(ROOT, 'out');
const WITH = join(ROOT, 'with', 'forage-walkers-1');
const WITHOUT = join(ROOT, 'without', 'forage-walkers-1');
const FIXED = ['run', 'step', 'epoch', 'agent', 'reward', 'action.move'];
const OBS = ['obs.foodDx', 'obs.foodDy', 'obs.score', 'obs.x', 'obs.y'];

afterAll(() => rmSync(ROOT, { recursive: true, force: true }));

function runCli(args: string[]): { behaviourDigest: string; reproHash: string } {
  const r = detsimCli([...args, '--json'], 240_000);
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { behaviourDigest: string; reproHash: string };
}

let withFlag: { behaviourDigest: string; reproHash: string };
let withoutFlag: { behaviourDigest: string; reproHash: string };

beforeAll(() => {
  mkdirSync(OUT);
  // A checkpoint seals the open segment: six segments of 100 steps, each with its sidecar.
  const common = ['examples/forage-walkers.yaml', '--checkpoint-every', '100'];
  withFlag = runCli(['run', ...common, '--trace-observations', '--out', join(ROOT, 'with')]);
  withoutFlag = runCli(['run', ...common, '--out', join(ROOT, 'without')]);
}, 300_000);

function exportCli(source: string, out: string) {
  return detsimCli(['trace', 'export', source, '--out', out], 120_000);
}

function readBack(mode: 'parquet' | 'csv' | 'frame' | 'list', path: string): Read {
  const r = spawnSync(ensurePythonWorker(), [join(REPO_ROOT, 'test/trace/read_export.py'), mode, path], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    env: { ...process.env, PYTHONPATH: join(REPO_ROOT, 'workers/python') },
  });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Read;
}

/** The sidecar read by hand: each indexed segment's NNNNNN.observations.jsonl.gz, one parsed line per step. */
function sidecarOf(dir: string): { agentId: string; observation: Record<string, JsonValue> }[][] {
  const index = readFileSync(join(dir, 'trace', 'index.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean);
  const steps: { agentId: string; observation: Record<string, JsonValue> }[][] = [];
  for (const line of index) {
    const { segment } = JSON.parse(line) as { segment: string };
    const file = join(dir, 'trace', segment.replace(/\.jsonl\.gz$/, '.observations.jsonl.gz'));
    for (const l of gunzipSync(readFileSync(file)).toString('utf8').split('\n').filter(Boolean))
      steps.push(JSON.parse(l) as (typeof steps)[number]);
  }
  return steps;
}

/** The rows the export must hold: the trace's fixed and action columns, the sidecar's observation fields. */
function expectedRows(id: string, dir: string): Row[] {
  const sidecar = sidecarOf(dir);
  const trace = traceOf(dir);
  expect(sidecar.length).toBe(trace.length);
  const rows: Row[] = [];
  trace.forEach((t, i) => {
    const b = t.behaviour;
    for (const a of b.agents) {
      const reward = b.rewards.filter((r) => r.agentId === a.agentId).reduce((n, r) => n + r.value, 0);
      const o = sidecar[i]!.find((x) => x.agentId === a.agentId)!.observation;
      const row: Row = { run: id, step: Number(b.scope.step), epoch: b.scope.epoch, agent: a.agentId, reward };
      row['action.move'] = (a.decision as Record<string, JsonValue>).move!;
      for (const c of OBS) row[c] = o[c.slice('obs.'.length)]!;
      rows.push(row);
    }
  });
  return rows;
}

function expectTable(read: Read, columns: string[], rows: Row[]): void {
  expect(read.error).toBeUndefined();
  expect(read.columns).toEqual(columns);
  expect(read.rows.length).toBe(rows.length);
  for (let i = 0; i < rows.length; i++)
    if (canonicalize(read.rows[i]) !== canonicalize(rows[i])) expect(read.rows[i]).toEqual(rows[i]);
}

const copyOf = (name: string, from = WITH) => {
  const dir = join(ROOT, name, 'forage-walkers-1');
  cpSync(from, dir, { recursive: true });
  return dir;
};

describe('--trace-observations: physical data beside the trace', () => {
  it('moves no golden: the behaviour digest and ReproHash are those of the run without it', () => {
    expect(withFlag.behaviourDigest).toBe(withoutFlag.behaviourDigest);
    expect(withFlag.reproHash).toBe(withoutFlag.reproHash);
    expect(withFlag.behaviourDigest.startsWith('53667d62')).toBe(true);
    expect(withFlag.reproHash).toBe('0b07fd7e03e3e200');
    const steps = (dir: string) => traceOf(dir).map((t) => canonicalBehaviour(t.behaviour));
    expect(steps(WITH)).toEqual(steps(WITHOUT));
    expect(JSON.parse(readFileSync(join(WITH, 'run.json'), 'utf8')).traceObservations).toBe(true);
    expect('traceObservations' in JSON.parse(readFileSync(join(WITHOUT, 'run.json'), 'utf8'))).toBe(false);
    expect(readdirSync(join(WITHOUT, 'trace')).some((f) => f.includes('observations'))).toBe(false);
    const sidecars = readdirSync(join(WITH, 'trace')).filter((f) => f.endsWith('.observations.jsonl.gz'));
    expect(sidecars).toEqual([0, 1, 2, 3, 4, 5].map((n) => `00000${n}.observations.jsonl.gz`));
  });

  it("each sidecar line is the text the step's observationDigest hashes", () => {
    const trace = traceOf(WITH);
    sidecarOf(WITH).forEach((obs, i) =>
      expect(sha256Hex(canonicalize(obs))).toBe(trace[i]!.behaviour.observationDigest),
    );
  });
});

describe('trace export with the sidecar: obs.<field> columns, every value from the sidecar', () => {
  it('CSV, Parquet, the DataFrame and the list hold the observation of every step and agent', () => {
    const rows = expectedRows('forage-walkers-1', WITH);
    expect(rows.length).toBe(600 * 16);
    const csv = join(OUT, 'obs.csv');
    const c = exportCli(WITH, csv);
    expect(c.status, c.stderr).toBe(0);
    expect(c.stdout).toContain('11 columns');
    expect(c.stdout).toContain('obs.foodDx int64');
    expectTable(readBack('csv', csv), [...FIXED, ...OBS], rows);
    const pq = join(OUT, 'obs.parquet');
    expect(exportCli(WITH, pq).status).toBe(0);
    const fromPq = readBack('parquet', pq);
    expectTable(fromPq, [...FIXED, ...OBS], rows);
    expect(fromPq.types.slice(6)).toEqual(OBS.map(() => 'int64'));
    const frame = readBack('frame', WITH);
    expectTable(frame, [...FIXED, ...OBS], rows);
    expect(frame.types.slice(6)).toEqual(OBS.map(() => 'Int64'));
    expectTable(readBack('list', WITH), [...FIXED, ...OBS], rows);
  });

  it('a run without the sidecar exports as before: no obs columns', () => {
    const csv = join(OUT, 'plain.csv');
    expect(exportCli(WITHOUT, csv).status).toBe(0);
    expect(readFileSync(csv, 'utf8').split('\n')[0]).toBe(FIXED.join(','));
    expect(readBack('frame', WITHOUT).columns).toEqual(FIXED);
  });

  it('a resumed run exports only its final history: the abandoned sidecars never count', () => {
    const dir = copyOf('resumed');
    const r = detsimCli(['resume', dir, '--checkpoint', 'ckpt-e1-400'], 240_000);
    expect(r.status, r.stderr).toBe(0);
    const trace = readdirSync(join(dir, 'trace'));
    expect(trace.filter((f) => f.startsWith('abandoned-') && f.endsWith('.observations.jsonl.gz')).length).toBe(2);
    const rows = expectedRows('forage-walkers-1', dir);
    const csv = join(OUT, 'resumed.csv');
    expect(exportCli(dir, csv).status).toBe(0);
    const read = readBack('csv', csv);
    expectTable(read, [...FIXED, ...OBS], rows);
    expect(new Set(read.rows.map((x) => `${x.step}/${x.agent}`)).size).toBe(600 * 16);
    expect(read.rows.every((x) => x.epoch === ((x.step as number) < 400 ? 'e1' : 'e2'))).toBe(true);
    // Deterministic: the same observations as the uninterrupted run, step for step.
    const plain = expectedRows('forage-walkers-1', WITH);
    expect(read.rows.map(({ epoch: _e, ...x }) => x)).toEqual(plain.map(({ epoch: _e, ...x }) => x));
    expectTable(readBack('frame', dir), [...FIXED, ...OBS], rows);
  });

  it('a fork keeps the sidecar on and exports its own history', () => {
    const out = join(ROOT, 'forked');
    const r = detsimCli(['fork', WITH, '--checkpoint', 'ckpt-e1-500', '--out', out], 240_000);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(readFileSync(join(out, 'run.json'), 'utf8')).traceObservations).toBe(true);
    const csv = join(OUT, 'fork.csv');
    expect(exportCli(out, csv).status).toBe(0);
    const read = readBack('csv', csv);
    expectTable(read, [...FIXED, ...OBS], expectedRows('forked', out));
    const plain = expectedRows('forked', WITH);
    expect(read.rows.map(({ epoch: _e, ...x }) => x)).toEqual(plain.map(({ epoch: _e, ...x }) => x));
  });
});

describe('trace export with the sidecar: refusals leave nothing behind', () => {
  const sidecar = (dir: string, n: number) => join(dir, 'trace', `00000${n}.observations.jsonl.gz`);

  it('a value changed in the sidecar (a valid gzip) is refused naming the file and the step, by the CLI and read_trace', () => {
    const dir = copyOf('edited');
    const file = sidecar(dir, 1);
    const lines = gunzipSync(readFileSync(file)).toString('utf8').split('\n');
    lines[10] = lines[10]!.replace('"score":', '"score":1');
    writeFileSync(file, gzipSync(lines.join('\n')));
    const out = join(ROOT, 'edited-out');
    mkdirSync(out);
    for (const f of ['t.csv', 't.parquet']) {
      const line = expectCliRefusal(exportCli(dir, join(out, f)), 'audit_trace_observations_mismatch', file);
      expect(line).toContain('step 110:');
    }
    expect(readdirSync(out)).toEqual([]);
    const py = readBack('frame', dir).error!;
    expect(py.reason).toBe('audit_trace_observations_mismatch');
    expect(py.message).toContain(`${file}: step 110:`);
  });

  it('a flipped byte is refused naming the file; nothing written', () => {
    const dir = copyOf('flipped');
    const file = sidecar(dir, 2);
    const bytes = readFileSync(file);
    bytes.writeUInt8(bytes.readUInt8(bytes.length >> 1) ^ 0xff, bytes.length >> 1);
    writeFileSync(file, bytes);
    const out = join(ROOT, 'flipped-out');
    mkdirSync(out);
    expectCliRefusal(exportCli(dir, join(out, 't.csv')), 'audit_trace_observations_mismatch', file);
    expect(readdirSync(out)).toEqual([]);
    expect(readBack('list', dir).error?.reason).toBe('audit_trace_observations_mismatch');
  });

  it('a missing sidecar of a run that records one is refused as missing', () => {
    const dir = copyOf('missing');
    rmSync(sidecar(dir, 0));
    const out = join(ROOT, 'missing-out');
    mkdirSync(out);
    expectCliRefusal(exportCli(dir, join(out, 't.csv')), 'audit_trace_observations_missing', sidecar(dir, 0));
    expect(readdirSync(out)).toEqual([]);
    expect(readBack('frame', dir).error?.reason).toBe('audit_trace_observations_missing');
  });
});

/**
 * A trace of agents a and b with these observations per step, written by the real segment writer
 * with its sidecar (only the fields the export reads are meaningful; the digests are real).
 */
async function syntheticRun(dir: string, observations: JsonValue[][], segmentSteps: number): Promise<void> {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'run.json'), '{"traceObservations":true}');
  const w = new SegmentedTraceWriter(dir, { segmentSteps, observations: true });
  for (const [k, [a, b]] of observations.entries()) {
    const obsText = canonicalize([
      { agentId: 'a', observation: a },
      { agentId: 'b', observation: b },
    ]);
    const agent = (agentId: string) => ({ agentId, decision: { m: k }, decisionDigest: 'd' });
    const behaviour = {
      scope: { sessionId: 'synthetic', epoch: 'e1', step: String(k) },
      agents: [agent('a'), agent('b')],
      batchId: `batch-e1-${k}`,
      observationDigest: sha256Hex(obsText),
      rewards: [],
      eventIds: [],
    } as unknown as TraceBehaviour;
    const text = canonicalBehaviour(behaviour);
    await w.appendLine(`{"behaviour":${text},"operational":{}}`, text, obsText);
  }
  await w.close();
}

describe('trace export: the observation flattening rule', () => {
  it('nested objects become dotted columns, lists are skipped, mixed kinds are canonical JSON; CLI and read_trace agree', async () => {
    const dir = join(ROOT, 'nested');
    await syntheticRun(
      dir,
      [
        [
          { pos: { x: 1, y: 2.5 }, tags: [1, 2], name: 'a', flag: true, nul: null },
          { pos: { x: 3 }, grid: [[0]] },
        ],
        [{ pos: { x: -1, y: 4, deep: { k: 'v' } }, name: 'b,"q"', flag: false }, { name: 7 }],
      ],
      1,
    );
    const columns = [
      ...['run', 'step', 'epoch', 'agent', 'reward', 'action.m'],
      ...['obs.flag', 'obs.name', 'obs.nul', 'obs.pos.deep.k', 'obs.pos.x', 'obs.pos.y'],
    ];
    const row = (step: number, agent: string, cells: JsonValue[]): Row =>
      Object.fromEntries(columns.map((c, i) => [c, ['nested', step, 'e1', agent, 0, step, ...cells][i] ?? null]));
    const rows = [
      row(0, 'a', [true, '"a"', null, null, 1, 2.5]),
      row(0, 'b', [null, null, null, null, 3, null]),
      row(1, 'a', [false, '"b,\\"q\\""', null, 'v', -1, 4]),
      row(1, 'b', [null, '7', null, null, null, null]),
    ];
    const pq = join(OUT, 'nested.parquet');
    const r = exportCli(dir, pq);
    expect(r.status, r.stderr).toBe(0);
    const fromPq = readBack('parquet', pq);
    expectTable(fromPq, columns, rows);
    expect(fromPq.types.slice(6)).toEqual(['bool', 'string', 'string', 'string', 'int64', 'double']);
    expectTable(readBack('list', dir), columns, rows);
    expectTable(readBack('frame', dir), columns, rows);
    expect(existsSync(join(dir, 'trace', '000001.observations.jsonl.gz'))).toBe(true);
  });
});

describe('a trace cut inside a segment (recovery, an older trace) cuts its sidecar with it', () => {
  it("the resealed segment gets the kept steps' observations, the cut-off ones go; the export checks out", async () => {
    const dir = join(ROOT, 'cut');
    await syntheticRun(
      dir,
      Array.from({ length: 10 }, (_, k) => [{ v: k }, { v: 100 + k }]),
      4,
    );
    expect(truncateSegmentedTrace(dir, 6n)).toBe(4);
    const files = readdirSync(join(dir, 'trace')).filter((f) => f.endsWith('.observations.jsonl.gz'));
    expect(files).toEqual(['000000.observations.jsonl.gz', '000003.observations.jsonl.gz']);
    expect(
      gunzipSync(readFileSync(join(dir, 'trace', files[1]!)))
        .toString('utf8')
        .split('\n').length,
    ).toBe(3);
    const read = readBack('list', dir);
    expect(read.error).toBeUndefined();
    expect(read.rows.map((r) => [r.step, r.agent, r['obs.v']])).toEqual(
      Array.from({ length: 6 }, (_, k) => [
        [k, 'a', k],
        [k, 'b', 100 + k],
      ]).flat(),
    );
    const csv = join(OUT, 'cut.csv');
    expect(exportCli(dir, csv).status).toBe(0);
    expect(readBack('csv', csv).rows).toEqual(read.rows);
  });
});
