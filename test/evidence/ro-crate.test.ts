// ro-crate-metadata.json for an evidence bundle (coordinator/evidence/ro-crate.ts), on a real run:
// `detsim run examples/mixed-python.yaml --checkpoint-every 40` (TypeScript, Rust and Python workers),
// its files laid out under run/ of a crate directory twice (trace segments and checkpoints held, and
// only referenced), the metadata written by roCrateMetadata, then read back by independent tools from
// PyPI in the Python venv (pinned in workers/python/pyproject.toml's `test` extra): the rocrate
// library loads it (test/evidence/ro_crate_tools.py), roc-validator's `rocrate-validator` CLI checks
// it against its process-run-crate-0.5 profile (and RO-Crate 1.1 beneath it) with no network (its
// HTTP cache seeded with a byte-exact copy of the RO-Crate 1.1 context, fixtures/), and `runcrate
// report` lists its actions. The TypeScript side checks digests against the files, that no absolute
// path of the machine gets in, and determinism. A Markdown report written here stands in for the
// exporter's own bundle files. NOT a test of the exporter (the bundle layout is the exporter's).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type CrateFile,
  PROCESS_RUN_CRATE_0_5,
  RO_CRATE_METADATA_FILE,
  redactPaths,
  roCrateMetadata,
} from '../../coordinator/evidence/ro-crate.js';
import { detsimCli } from '../cli-refusal.js';
import { tmpOut } from '../coordinator/helpers.js';
import { ensurePythonWorker, pythonWorkerSkip, VENV_PYTHON } from '../cross-lang/python-worker.js';
import { ensureRustWorker, rustWorkerSkip } from '../cross-lang/rust-worker.js';
import { REPO_ROOT } from '../workers/harness.js';

const VENV_BIN = dirname(VENV_PYTHON);
const TOOLS = join(REPO_ROOT, 'test/evidence/ro_crate_tools.py');
/** The RO-Crate 1.1 context as published (version 1.1.3, CC0-1.0), byte for byte. */
const CONTEXT = join(REPO_ROOT, 'test/evidence/fixtures/ro-crate-1.1-context.jsonld');
const CONTEXT_SHA256 = '4a8c4cbdfd73d3d11be5ebe135f6122a0fc711fd1433e4258a748c80cc257ab7';
const INSTALL = "workers/python/.venv/bin/pip install './workers/python[test]'";
const OPTS = { detsimVersion: '0.1.0', exportedAt: '2026-12-06T10:00:00.000Z' };
const AGENT = { id: 'https://orcid.org/0000-0002-1825-0097', name: 'Josiah Carberry' };

/** The run's files the bundle always copies; trace segments and checkpoints only when asked. */
const ALWAYS = ['run.json', 'receipt.json', 'summary.json', 'ledger.jsonl', 'ledger.head.json', 'trace/index.jsonl'];
const OPTIONAL = /^(trace\/.+\.gz|store\/.+\.flysess|store\/manifest\.json)$/;

type Entity = Record<string, any>;
const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)],
  );
}

/** Lay out a crate: the run's files under run/ (held or only referenced) and a stand-in bundle file. */
function layCrate(runDir: string, crateDir: string, holdAll: boolean): CrateFile[] {
  const optional = walk(runDir)
    .map((p) => relative(runDir, p))
    .filter((p) => OPTIONAL.test(p));
  const files: CrateFile[] = [];
  for (const rel of [...ALWAYS, ...optional]) {
    const bytes = readFileSync(join(runDir, rel));
    const present = holdAll || ALWAYS.includes(rel);
    if (present) {
      mkdirSync(dirname(join(crateDir, 'run', rel)), { recursive: true });
      writeFileSync(join(crateDir, 'run', rel), bytes);
    }
    files.push({ path: `run/${rel}`, sha256: sha256(bytes), bytes: bytes.length, present });
  }
  const report = '# Stand-in for the exporter’s report\n';
  writeFileSync(join(crateDir, 'report.md'), report);
  files.push({ path: 'report.md', sha256: sha256(report), bytes: Buffer.byteLength(report), present: true });
  return files;
}

function writeCrate(crateDir: string, meta: Record<string, unknown>): void {
  writeFileSync(join(crateDir, RO_CRATE_METADATA_FILE), JSON.stringify(meta, null, 2) + '\n');
}

function run(command: string, args: string[]) {
  const r = spawnSync(command, args, { encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20 });
  if (r.error) throw r.error;
  return r;
}

function tools(args: string[]): any {
  const r = run(VENV_PYTHON, [TOOLS, ...args]);
  if (r.status !== 0) throw new Error(`ro_crate_tools.py ${args.join(' ')} failed:\n${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** rocrate-validator (offline, from the seeded cache) at `level`: its JSON report. */
function validate(crateDir: string, cache: string, level: 'required' | 'recommended'): any {
  const report = join(dirname(cache), `report-${level}-${Math.random().toString(36).slice(2)}.json`);
  const args = ['-y', '--disable-color', 'validate', '--no-paging', '--offline', '--cache-path', cache];
  const r = run(join(VENV_BIN, 'rocrate-validator'), [
    ...args,
    ...['-p', 'process-run-crate-0.5', '-l', level, '-f', 'json', '-o', report, crateDir],
  ]);
  if (!existsSync(report)) throw new Error(`rocrate-validator wrote no report (exit ${r.status}):\n${r.stdout}`);
  const parsed = JSON.parse(readFileSync(report, 'utf8'));
  return { ...parsed, exitCode: r.status, output: r.stdout + r.stderr };
}

const issueIds = (report: any): string[] =>
  [...new Set<string>((report.issues ?? []).map((i: any) => i.check.identifier as string))].sort();

const entityOf = (meta: any, id: string): Entity => {
  const e = (meta['@graph'] as Entity[]).find((x) => x['@id'] === id);
  if (!e) throw new Error(`no entity ${id}`);
  return e;
};

/** Every string in a JSON value. */
function strings(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  if (Array.isArray(v)) return v.flatMap(strings);
  if (v && typeof v === 'object') return Object.entries(v).flatMap(([k, x]) => [k, ...strings(x)]);
  return [];
}

/** pino's run.log: the time of the first line with `msg`, and of the last, as ISO with +00:00. */
function logTimes(runDir: string, started: string, finished: string) {
  const lines = readFileSync(join(runDir, 'run.log'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { time: number; msg: string });
  const iso = (ms: number) => new Date(ms).toISOString().replace('Z', '+00:00');
  return {
    start: iso(lines.find((l) => l.msg === started)!.time),
    end: iso(lines.filter((l) => l.msg === finished).pop()!.time),
  };
}

describe.skipIf(pythonWorkerSkip !== null || rustWorkerSkip !== null)(
  'ro-crate-metadata.json of a real run (Process Run Crate 0.5), read back by independent tools',
  () => {
    let out: string;
    let runDir: string;
    let held: { dir: string; files: CrateFile[]; meta: any };
    let referenced: { dir: string; files: CrateFile[]; meta: any };
    let cache: string;

    beforeAll(() => {
      const probe = spawnSync(VENV_PYTHON, ['-c', 'import rocrate, rocrate_validator, runcrate'], { encoding: 'utf8' });
      if (probe.status !== 0)
        throw new Error(`the venv lacks the RO-Crate tools (${probe.stderr.trim().split('\n').pop()}): ${INSTALL}`);
      ensurePythonWorker();
      ensureRustWorker();
      out = tmpOut('detsim-ro-crate-');
      const r = detsimCli([
        'run',
        'examples/mixed-python.yaml',
        '--checkpoint-every',
        '40',
        '--out',
        join(out, 'runs'),
      ]);
      expect(r.status, r.stderr).toBe(0);
      runDir = join(out, 'runs', readdirSync(join(out, 'runs'))[0]!);
      const lay = (name: string, holdAll: boolean) => {
        const dir = join(out, name);
        mkdirSync(dir);
        const files = layCrate(runDir, dir, holdAll);
        const meta = roCrateMetadata(runDir, files, OPTS);
        writeCrate(dir, meta);
        return { dir, files, meta };
      };
      held = lay('crate-held', true);
      referenced = lay('crate-referenced', false);
      cache = join(out, 'validator', 'http_cache');
      mkdirSync(dirname(cache));
      const seeded = tools(['seed-cache', cache, CONTEXT]);
      expect(seeded).toEqual({ status: 200, sha256: CONTEXT_SHA256, fromCache: true });
    }, 180_000);

    afterAll(() => {
      if (out) rmSync(out, { recursive: true, force: true });
    });

    it('rocrate-validator, process-run-crate-0.5 profile, offline: no issue at REQUIRED level, trace and checkpoints held or referenced', () => {
      for (const crate of [held, referenced]) {
        const report = validate(crate.dir, cache, 'required');
        expect(report.issues ?? [], report.output).toEqual([]);
        expect(report.passed, report.output).toBe(true);
        expect(report.exitCode).toBe(0);
        expect(report.statistics.profiles).toEqual(['process-run-crate-0.5', 'ro-crate-1.1']);
        expect(report.statistics.total_checks).toBeGreaterThan(30);
        // Every check ran: none skipped for want of the network or of the context.
        expect(report.statistics.total_skipped_checks).toBe(0);
      }
    });

    it('detsim evidence export --ro-crate: the bundle is a valid Process Run Crate, verifies, and passes AET', () => {
      const bundle = join(out, 'bundle-ro-crate');
      const e = detsimCli(['evidence', 'export', runDir, bundle, '--ro-crate']);
      expect(e.status, e.stderr).toBe(0);
      const report = validate(bundle, cache, 'required');
      expect(report.issues ?? [], report.output).toEqual([]);
      expect(report.passed, report.output).toBe(true);
      const v = detsimCli(['evidence', 'verify', bundle]);
      expect(v.status, v.stderr).toBe(0);
      const manifest = JSON.parse(readFileSync(join(bundle, 'manifest.json'), 'utf8'));
      expect(Object.keys(manifest.integrity.file_hashes)).toContain('ro-crate-metadata.json');
      const aet = spawnSync(
        VENV_PYTHON,
        [
          '-c',
          'import sys; from pathlib import Path; from aet.bundle import validate_bundle; validate_bundle(Path(sys.argv[1]))',
          bundle,
        ],
        { encoding: 'utf8' },
      );
      expect(aet.status, aet.stderr).toBe(0);
      const meta = JSON.parse(readFileSync(join(bundle, 'ro-crate-metadata.json'), 'utf8'));
      const name = readdirSync(join(out, 'runs'))[0]!;
      expect(entityOf(meta, `runs/${name}/receipt.json`)['@type']).toBe('File');
    });

    it('rocrate-validator fails a crate whose root lacks its licence (the validation can fail)', () => {
      const dir = join(out, 'crate-no-licence');
      cpSync(referenced.dir, dir, { recursive: true });
      const meta = structuredClone(referenced.meta);
      delete entityOf(meta, './').license;
      writeCrate(dir, meta);
      const report = validate(dir, cache, 'required');
      expect(report.passed).toBe(false);
      expect(report.exitCode).not.toBe(0);
      expect((report.issues as any[]).map((i) => i.message).join('\n')).toMatch(/`license`/);
    });

    it('at RECOMMENDED level only the known gaps remain: no public url for detsim, no publisher, no agent unless one is given (then no affiliation)', () => {
      const gaps = ['process-run-crate-0.5_3.2', 'process-run-crate-0.5_5.1', 'ro-crate-1.1_22.3'];
      const noAgent = validate(referenced.dir, cache, 'recommended');
      expect(issueIds(noAgent), noAgent.output).toEqual(
        [...gaps, 'process-run-crate-0.5_8.6', 'ro-crate-1.1_22.2'].sort(),
      );
      const dir = join(out, 'crate-agent');
      cpSync(held.dir, dir, { recursive: true });
      writeCrate(dir, roCrateMetadata(runDir, held.files, { ...OPTS, agent: AGENT }));
      const withAgent = validate(dir, cache, 'recommended');
      // An author is then there; RO-Crate 1.1 also recommends an affiliation for one.
      const affiliation = ['ro-crate-1.1_30.2', 'ro-crate-1.1_30.3'];
      expect(issueIds(withAgent), withAgent.output).toEqual([...gaps, ...affiliation].sort());
    });

    it('the rocrate library loads it: the run CreateAction with detsim as instrument, the three worker runtimes, inputs and outputs', () => {
      const crate = tools(['load', held.dir]);
      expect(crate.root.conformsTo.map((c: any) => c.id)).toEqual([PROCESS_RUN_CRATE_0_5]);
      expect(crate.root.license.map((c: any) => c.id)).toEqual(['https://spdx.org/licenses/MIT']);
      expect(crate.root.mentions).toEqual(['#action/export', '#action/run']);
      const action = crate.actions.find((a: any) => a.id === '#action/run');
      expect(action.instrument).toEqual([{ id: '#detsim', type: ['SoftwareApplication'], value: null }]);
      const runtimes = action.softwareRequirements.map((s: any) => s.id.split('/')[1].split('-')[1]);
      expect(runtimes.sort()).toEqual(['py', 'rs', 'ts']);
      const recorded = JSON.parse(readFileSync(join(runDir, 'run.json'), 'utf8'));
      const objectIds = action.object.map((o: any) => o.id);
      expect(objectIds).toContain('run/run.json');
      const valueOf = (id: string) => action.object.find((o: any) => o.id === id)?.value;
      expect(valueOf('#param/masterSeed')).toBe(recorded.masterSeed);
      for (const a of recorded.agents) expect(valueOf(`#seed/agent/${a.agentId}`)).toBe(a.seed);
      expect(valueOf(`#seed/environment/${recorded.environment.environmentId}`)).toBe(recorded.environment.seed);
      const resultIds: string[] = action.result.map((o: any) => o.id);
      for (const f of ['run/receipt.json', 'run/summary.json', 'run/ledger.jsonl', 'run/trace/index.jsonl'])
        expect(resultIds).toContain(f);
      expect(resultIds.filter((id) => id.startsWith('run/store/') && id.endsWith('.flysess'))).toHaveLength(3);
      expect(resultIds.filter((id) => id.startsWith('run/trace/') && id.endsWith('.jsonl.gz'))).toHaveLength(3);
      expect(action.actionStatus).toBe('http://schema.org/CompletedActionStatus');
      expect(logTimes(runDir, 'run started', 'run finished')).toEqual({
        start: action.startTime,
        end: action.endTime,
      });
    });

    it('every held file: a File data entity whose sha256 and contentSize match the file (hashlib); hasPart holds exactly them', () => {
      for (const crate of [held, referenced]) {
        const loaded = tools(['load', crate.dir]);
        const heldPaths = crate.files.filter((f) => f.present).map((f) => f.path);
        expect(loaded.files.map((f: any) => f.id)).toEqual([...heldPaths].sort());
        expect(loaded.root.hasPart).toEqual([...heldPaths].sort());
        for (const f of loaded.files) {
          expect(f.exists, f.id).toBe(true);
          expect(f.declaredSha256, f.id).toBe(f.sha256);
          expect(f.declaredContentSize, f.id).toBe(String(f.bytes));
        }
        // And in TypeScript, against the bytes on disk.
        for (const path of heldPaths) {
          const e = entityOf(crate.meta, path);
          expect(e['@type']).toBe('File');
          expect(e.sha256).toBe(sha256(readFileSync(join(crate.dir, path))));
          expect(e.contentSize).toBe(String(statSync(join(crate.dir, path)).size));
        }
      }
    });

    it('a file not held is a contextual entity #<path> (CreativeWork) with the run file’s sha256 and size, absent from the crate', () => {
      const loaded = tools(['load', referenced.dir]);
      const notHeld = referenced.files.filter((f) => !f.present);
      expect(notHeld.length).toBe(3 + 3 + 3 + 1); // segments, repro files, checkpoints, store manifest
      for (const f of notHeld) {
        const c = loaded.contextual.find((x: any) => x.id === `#${f.path}`);
        expect(c, f.path).toBeDefined();
        expect(c.type).toEqual(['CreativeWork']);
        expect(c.exists).toBe(false);
        const onDisk = readFileSync(join(runDir, f.path.slice('run/'.length)));
        expect(c.sha256).toBe(sha256(onDisk));
        expect(c.contentSize).toBe(String(onDisk.length));
        expect(entityOf(referenced.meta, `#${f.path}`).description).toMatch(/Referenced, not included/);
      }
      const action = loaded.actions.find((a: any) => a.id === '#action/run');
      expect(action.result.map((r: any) => r.id)).toContain('#run/store/ckpt-e1-120.flysess');
    });

    it('runcrate report reads both actions: instrument, start and end, inputs and outputs', () => {
      const r = run(join(VENV_BIN, 'runcrate'), ['report', held.dir]);
      expect(r.status, r.stderr).toBe(0);
      const action = entityOf(held.meta, '#action/run');
      const runPart = r.stdout.slice(r.stdout.indexOf('action: #action/run'));
      expect(r.stdout).toContain('action: #action/export');
      expect(runPart).toContain('instrument: #detsim (SoftwareApplication)');
      expect(runPart).toContain(`started: ${action.startTime}`);
      expect(runPart).toContain(`ended: ${action.endTime}`);
      expect(runPart).toContain('    run/run.json\n');
      expect(runPart).toContain('    run/receipt.json\n');
      expect(runPart).toContain('    run/store/ckpt-e1-120.flysess\n');
      expect(runPart).toContain(`    ${JSON.parse(readFileSync(join(runDir, 'run.json'), 'utf8')).masterSeed}\n`);
    });

    it('no absolute path of the machine anywhere in it', () => {
      for (const crate of [held, referenced]) {
        const text = readFileSync(join(crate.dir, RO_CRATE_METADATA_FILE), 'utf8');
        for (const p of [runDir, out, tmpdir(), homedir(), REPO_ROOT]) expect(text).not.toContain(p);
        for (const s of strings(crate.meta)) {
          expect(s, s).not.toMatch(/^\/|^~\/|^[A-Za-z]:\\/);
          expect(s, s).not.toMatch(/[\s("'=]\/[A-Za-z.]/);
        }
      }
    });

    it('deterministic: the same run and files give the same bytes, in whatever order the files are listed', () => {
      const again = JSON.stringify(roCrateMetadata(runDir, held.files, OPTS));
      const reversed = JSON.stringify(roCrateMetadata(runDir, [...held.files].reverse(), OPTS));
      expect(again).toBe(JSON.stringify(held.meta));
      expect(reversed).toBe(again);
      const ids = (held.meta['@graph'] as Entity[]).map((e) => e['@id'] as string);
      expect(ids.slice(0, 2)).toEqual([RO_CRATE_METADATA_FILE, './']);
      expect(ids.slice(2)).toEqual([...ids.slice(2)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
      expect(new Set(ids).size).toBe(ids.length);
    });

    it('a failed, resumed run (edited copy of the run directory): FailedActionStatus with its error, times spanning both sessions, paths in its records redacted', () => {
      const copy = join(out, 'failed-run');
      cpSync(runDir, copy, { recursive: true });
      const summary = JSON.parse(readFileSync(join(copy, 'summary.json'), 'utf8'));
      const failure = { kind: 'write', workerId: null, agentIds: [], step: '57', phase: 'commit', message: 'x' };
      writeFileSync(join(copy, 'summary.json'), JSON.stringify({ ...summary, status: 'failed', failure }));
      const record = JSON.parse(readFileSync(join(copy, 'run.json'), 'utf8'));
      record.workers[0].runtime = 'custom/1.0 from /home/someone/worker';
      writeFileSync(join(copy, 'run.json'), JSON.stringify(record));
      // A resume appends its own session to run.log: the times then span both.
      const resumed = { level: 30, msg: 'resume started', time: Date.parse('2031-01-01T00:00:00Z') };
      const finished = { ...resumed, msg: 'resume finished', time: Date.parse('2031-01-01T00:01:00Z') };
      writeFileSync(join(copy, 'run.log'), `${JSON.stringify(resumed)}\n${JSON.stringify(finished)}\n`, { flag: 'a' });
      const meta = roCrateMetadata(copy, held.files, OPTS);
      const action = entityOf(meta, '#action/run');
      expect(action.actionStatus).toBe('http://schema.org/FailedActionStatus');
      expect(action.error).toBe('failed: write at step 57 (phase commit)');
      expect(action.startTime).toBe(logTimes(runDir, 'run started', 'run finished').start);
      expect(action.endTime).toBe('2031-01-01T00:01:00.000+00:00');
      expect(action.description).toContain('Resumed 1 time(s)');
      const text = JSON.stringify(meta);
      expect(text).not.toContain('/home/someone');
      expect(text).toContain('custom/1.0 from <path>');
      expect(text).not.toContain(copy);
    });

    it('refuses files that are not posix paths relative to the crate, bad digests or sizes, twice-listed paths', () => {
      const ok: CrateFile = { path: 'run/run.json', sha256: 'a'.repeat(64), bytes: 1, present: true };
      const bad: [Partial<CrateFile>, RegExp][] = [
        [{ path: '/etc/passwd' }, /posix path/],
        [{ path: '../run.json' }, /posix path/],
        [{ path: 'run\\run.json' }, /posix path/],
        [{ path: 'C:/x' }, /posix path/],
        [{ path: 'run//x' }, /posix path/],
        [{ sha256: 'A'.repeat(64) }, /sha256/],
        [{ bytes: -1 }, /bytes/],
      ];
      for (const [change, why] of bad)
        expect(() => roCrateMetadata(runDir, [{ ...ok, ...change }], OPTS), JSON.stringify(change)).toThrow(why);
      expect(() => roCrateMetadata(runDir, [ok, ok], OPTS)).toThrow(/listed twice/);
      expect(() => roCrateMetadata(runDir, [ok], { ...OPTS, exportedAt: 'yesterday' })).toThrow(/not a date/);
      expect(() => roCrateMetadata(join(out, 'nowhere'), [ok], OPTS)).toThrow(/run\.json: missing/);
    });
  },
);

describe('redactPaths', () => {
  it('replaces path-like runs in free text and leaves ids, versions and URLs alone', () => {
    expect(redactPaths('/tmp/x/y')).toBe('<path>');
    expect(redactPaths('at /home/u/w.py line 3')).toBe('at <path> line 3');
    expect(redactPaths('file=C:\\Users\\u\\m.py')).toBe('file=<path>');
    expect(redactPaths('(~/models/m.py)')).toBe('(<path>)');
    for (const keep of ['detsim-ts/v20.20.2', 'https://w3id.org/ro/crate/1.1', 'run/trace/index.jsonl', '50000000/3'])
      expect(redactPaths(keep)).toBe(keep);
  });
});
