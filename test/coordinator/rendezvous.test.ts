// Rendezvous on one host (loopback): `detsim worker --rendezvous DIR` (and the Python and Rust
// workers) write one canonical record atomically, the same bytes for the same facts, and remove it on exit;
// `workers.placement: rendezvous` connects to hand-started workers (TypeScript and Python) and
// reproduces the golden ReproHash; the workers exit on the coordinator's Shutdown (never killed);
// a directory that never fills is refused naming the missing workers (exit 2, no run directory);
// a record for a wrong role, malformed or foreign, is refused naming the field; a stale record (its
// worker killed with -9) and a worker that answers Hello as another are refused before stepping (exit
// 2, no run directory); a missing rendezvous directory is refused alike by coordinator and worker.
// The multi-host case (network namespaces) is rendezvous-netns.test.ts.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveConfig, type RunPlan } from '../../coordinator/config.js';
import { runSession } from '../../coordinator/session/run.js';
import { MAX_RECORD_BYTES } from '../../coordinator/launch/rendezvous.js';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { CONTRACT_DIGEST, certificateFingerprint, readRendezvousRecord } from '../../core/protocol/index.js';
import { refusal } from '../refusal.js';
import { CLI_MAIN, expectCliRefusal } from '../cli-refusal.js';
import { ensurePythonWorker, pythonWorkerSkip } from '../cross-lang/python-worker.js';
import { RUST_WORKER, ensureRustWorker, rustWorkerSkip } from '../cross-lang/rust-worker.js';
import { REPO_ROOT } from '../workers/harness.js';
import {
  type HandWorker,
  HAND_SECRET,
  rendezvousConfig,
  secretFile,
  startHandWorker,
  stopAll,
} from './hand-workers.js';

/** What a hand-started plaintext TCP worker must be given (docs/security.md). */
const SECRET = ['--session', 'lif-pair', '--token-file', HAND_SECRET];
/** A plaintext TCP agent worker `w`, as a user must start one. */
const AGENT_W = ['--listen', '127.0.0.1:0', ...SECRET, '--role', 'agent', '--worker-id', 'w'];

const tempDir = (prefix: string): string => mkdtempSync(join(tmpdir(), prefix));
const golden = (name: string): { reproHash: string; steps: number } =>
  JSON.parse(readFileSync(join(REPO_ROOT, 'fixtures/golden', `${name}.json`), 'utf8'));

/** `detsim run <config>` as a child process (async: hand-started workers keep running meanwhile). */
function detsimRun(args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((res) => {
    const child = spawn(process.execPath, [CLI_MAIN, 'run', ...args], { cwd: REPO_ROOT });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (status) => res({ status, stdout, stderr }));
  });
}

/** lif-pair placed by rendezvous in `dir`, written as a config file beside it (not in it: it holds records only). */
function lifPairConfigFile(dir: string, timeoutSeconds: number): string {
  const cfg = join(dir, '..', `${dir.split('/').pop()}-cfg.json`);
  writeFileSync(cfg, JSON.stringify(rendezvousConfig('examples/lif-pair.yaml', dir, timeoutSeconds)));
  return cfg;
}

/** detsimRun's outcome in the shape expectCliRefusal reads. */
const asSpawnResult = (r: { status: number | null; stdout: string; stderr: string }) => ({
  ...r,
  pid: 0,
  output: [],
  signal: null,
});

/** lif-pair's three workers started by hand (plaintext) in `dir`, ready, by worker id. */
async function startLifPairWorkers(dir: string): Promise<Map<string, HandWorker>> {
  const workers = (['worker-env', 'worker-0', 'worker-1'] as const).map((workerId) =>
    startHandWorker({ workerId, role: workerId === 'worker-env' ? 'environment' : 'agent', rendezvous: dir }),
  );
  await Promise.all(workers.map((w) => w.ready));
  return new Map(workers.map((w) => [w.workerId, w]));
}

afterEach(stopAll);

describe('detsim worker --rendezvous', () => {
  it('writes one canonical record once listening (no temporary left) and removes it on exit', async () => {
    const dir = tempDir('ds-rv-');
    const w = startHandWorker({ workerId: 'worker-0', role: 'agent', rendezvous: dir, extra: ['--session', 's1'] });
    const listen = await w.ready;
    expect(readdirSync(dir)).toEqual(['worker-0.json']);
    const bytes = readFileSync(join(dir, 'worker-0.json'));
    const record = readRendezvousRecord(bytes, 'worker-0.json');
    expect(record).toEqual({
      format: 'detsim-rendezvous-v1',
      workerId: 'worker-0',
      role: 'agent',
      address: listen,
      session: 's1',
      contractDigest: CONTRACT_DIGEST,
      certificateFingerprint: null,
    });
    expect(bytes.toString('utf8')).toBe(`${canonicalize(record)}\n`);
    w.child.kill('SIGTERM');
    expect(await w.exited).toBe(0);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a hand-started worker whose terminal closes (SIGHUP) leaves cleanly and removes its record: TypeScript, Python, Rust', async () => {
    ensureRustWorker();
    const runtimes = [{}, { python: ensurePythonWorker() }, { rust: RUST_WORKER }];
    for (const runtime of runtimes) {
      const dir = tempDir('ds-rv-');
      const w = startHandWorker({ workerId: 'worker-0', role: 'agent', rendezvous: dir, ...runtime });
      await w.ready;
      expect(readdirSync(dir)).toEqual(['worker-0.json']);
      w.child.kill('SIGHUP');
      expect(await w.exited, JSON.stringify(runtime)).toBe(0);
      expect(readdirSync(dir), JSON.stringify(runtime)).toEqual([]);
    }
  }, 120_000);

  it('--advertise HOST:0 announces that host with the bound port; --advertise alone is refused', async () => {
    const dir = tempDir('ds-rv-');
    const w = startHandWorker({
      workerId: 'worker-env',
      role: 'environment',
      rendezvous: dir,
      extra: ['--advertise', '192.0.2.7:0'],
    });
    const port = (await w.ready).split(':')[1];
    const record = readRendezvousRecord(readFileSync(join(dir, 'worker-env.json')), 'worker-env.json');
    expect(record.address).toBe(`192.0.2.7:${port}`);
    const r = spawnSync(process.execPath, [CLI_MAIN, 'worker', ...AGENT_W, '--advertise', 'h:1'], {
      encoding: 'utf8',
      cwd: REPO_ROOT,
    });
    expect(r.status).toBe(2);
    expect(r.stderr.trim()).toBe('detsim: [struct_invalid_field] --advertise is only used with --rendezvous DIR');
  });

  it.skipIf(pythonWorkerSkip !== null)(
    'the Python worker writes the same record bytes (TLS fingerprint included) as the TypeScript worker, and removes it on exit',
    async () => {
      const python = ensurePythonWorker();
      const [tsDir, pyDir] = [tempDir('ds-rv-ts-'), tempDir('ds-rv-py-')];
      // With TLS on, so the certificate fingerprint is compared too.
      const tlsDir = join(tempDir('ds-rv-tls-'), 'set');
      expect(spawnSync(process.execPath, [CLI_MAIN, 'certs', tlsDir], { cwd: REPO_ROOT }).status).toBe(0);
      const extra = ['--advertise', '192.0.2.1:7000', '--tls-dir', tlsDir];
      const same = { workerId: 'worker-3', role: 'agent' as const, extra };
      const ts = startHandWorker({ ...same, rendezvous: tsDir });
      const py = startHandWorker({ ...same, rendezvous: pyDir, python });
      await Promise.all([ts.ready, py.ready]);
      const tsBytes = readFileSync(join(tsDir, 'worker-3.json'));
      expect(readRendezvousRecord(tsBytes, 'ts').certificateFingerprint).toMatch(/^[0-9a-f]{64}$/);
      expect(readFileSync(join(pyDir, 'worker-3.json')).equals(tsBytes)).toBe(true);
      expect(readdirSync(pyDir)).toEqual(['worker-3.json']);
      py.child.kill('SIGTERM');
      expect(await py.exited).toBe(0);
      expect(readdirSync(pyDir)).toEqual([]);
      // The flag refusals are worded alike too.
      const flags = [...AGENT_W];
      // A record that cannot be written (here: a directory is in its place) stops the worker, no temporary left.
      const blocked = tempDir('ds-rv-blocked-');
      mkdirSync(join(blocked, 'w.json'));
      for (const [extra, line] of [
        [['--advertise', 'h:1'], 'detsim: [struct_invalid_field] --advertise is only used with --rendezvous DIR'],
        [
          ['--rendezvous', join(pyDir, 'nope')],
          `detsim: [struct_invalid_field] --rendezvous "${join(pyDir, 'nope')}" is not an existing directory`,
        ],
        [
          ['--rendezvous', blocked],
          "detsim: [perm_write_failed] --rendezvous: cannot write this worker's record (EISDIR)",
        ],
      ] as const) {
        const r = spawnSync(python, ['-m', 'detsim_worker', ...flags, ...extra], { encoding: 'utf8', cwd: REPO_ROOT });
        expect([r.status, r.stderr.trim()]).toEqual([2, line]);
        const t = spawnSync(process.execPath, [CLI_MAIN, 'worker', ...flags, ...extra], {
          encoding: 'utf8',
          cwd: REPO_ROOT,
        });
        expect([t.status, t.stderr.trim()]).toEqual([2, line]);
      }
      expect(readdirSync(blocked)).toEqual(['w.json']);
    },
  );
});

describe('the Rust worker with --rendezvous', () => {
  const tlsSet = (): string => {
    const dir = join(tempDir('ds-rv-tls-'), 'set');
    expect(spawnSync(process.execPath, [CLI_MAIN, 'certs', dir], { cwd: REPO_ROOT }).status).toBe(0);
    return dir;
  };

  it.skipIf(rustWorkerSkip !== null)(
    'writes the same record bytes (TLS fingerprint included) as the TypeScript worker, removes it on exit, refuses alike',
    async () => {
      ensureRustWorker();
      const [tsDir, rsDir] = [tempDir('ds-rv-ts-'), tempDir('ds-rv-rs-')];
      const extra = ['--advertise', '192.0.2.1:7000', '--tls-dir', tlsSet(), '--session', 's1'];
      const same = { workerId: 'worker-3', role: 'agent' as const, extra };
      const ts = startHandWorker({ ...same, rendezvous: tsDir });
      const rs = startHandWorker({ ...same, rendezvous: rsDir, rust: RUST_WORKER });
      await Promise.all([ts.ready, rs.ready]);
      const tsBytes = readFileSync(join(tsDir, 'worker-3.json'));
      expect(readRendezvousRecord(tsBytes, 'ts').certificateFingerprint).toMatch(/^[0-9a-f]{64}$/);
      expect(readdirSync(rsDir)).toEqual(['worker-3.json']);
      expect(readFileSync(join(rsDir, 'worker-3.json')).toString()).toBe(tsBytes.toString());
      rs.child.kill('SIGTERM');
      expect(await rs.exited).toBe(0);
      expect(readdirSync(rsDir)).toEqual([]);
      // --advertise HOST:0 announces the port the Rust worker bound; a plaintext record has no fingerprint.
      const zero = startHandWorker({
        workerId: 'worker-4',
        role: 'agent',
        rendezvous: rsDir,
        rust: RUST_WORKER,
        extra: ['--advertise', '192.0.2.7:0'],
      });
      const port = (await zero.ready).split(':')[1];
      const record = readRendezvousRecord(readFileSync(join(rsDir, 'worker-4.json')), 'worker-4.json');
      expect(record).toEqual({
        format: 'detsim-rendezvous-v1',
        workerId: 'worker-4',
        role: 'agent',
        address: `192.0.2.7:${port}`,
        session: 'lif-pair',
        contractDigest: CONTRACT_DIGEST,
        certificateFingerprint: null,
      });
      zero.child.kill('SIGTERM');
      expect(await zero.exited).toBe(0);
      expect(readdirSync(rsDir)).toEqual([]);
      // The flag refusals are worded alike too; a record that cannot be written stops the worker.
      const flags = [...AGENT_W];
      const blocked = tempDir('ds-rv-blocked-');
      mkdirSync(join(blocked, 'w.json'));
      for (const extra of [
        ['--advertise', 'h:1'],
        ['--rendezvous', join(rsDir, 'nope')],
        ['--rendezvous', blocked],
        ['--rendezvous', rsDir, '--advertise', 'unix:/tmp/x.sock'],
        ['--rendezvous', rsDir, '--listen', '0.0.0.0:0', '--tls-dir', tlsSet()],
      ]) {
        const r = spawnSync(RUST_WORKER, [...flags, ...extra], { encoding: 'utf8', cwd: REPO_ROOT });
        const t = spawnSync(process.execPath, [CLI_MAIN, 'worker', ...flags, ...extra], {
          encoding: 'utf8',
          cwd: REPO_ROOT,
        });
        expect([r.status, r.stdout, r.stderr], extra.join(' ')).toEqual([2, '', t.stderr]);
        expect(r.stderr).toMatch(/^detsim: \[[a-z_]+\] --(rendezvous|advertise)[^\n]*\n$/);
      }
      expect(readdirSync(blocked)).toEqual(['w.json']);
    },
    60_000,
  );
});

describe('workers.placement: rendezvous', () => {
  it.skipIf(pythonWorkerSkip !== null)(
    'lif-pair on hand-started workers (TypeScript and Python) has its golden ReproHash; the workers exit on Shutdown',
    async () => {
      const python = ensurePythonWorker();
      const dir = tempDir('ds-rv-');
      const out = tempDir('ds-rv-out-');
      const workers = [
        startHandWorker({ workerId: 'worker-env', role: 'environment', rendezvous: dir }),
        startHandWorker({ workerId: 'worker-0', role: 'agent', rendezvous: dir, python }),
        startHandWorker({ workerId: 'worker-1', role: 'agent', rendezvous: dir, extra: ['--session', 'lif-pair'] }),
      ];
      const plan = resolveConfig(rendezvousConfig('examples/lif-pair.yaml', dir, 60), { baseDir: REPO_ROOT });
      const { reproHash, steps } = golden('lif-pair');
      const result = await runSession(plan, { outDir: out, steps, logLevel: 'warn' });
      expect(result.reproHash).toBe(reproHash);
      // Not killed: each left on the coordinator's Shutdown (exit 0) and took its record along.
      expect(await Promise.all(workers.map((w) => w.exited))).toEqual([0, 0, 0]);
      expect(readdirSync(dir)).toEqual([]);
    },
  );

  it.skipIf(rustWorkerSkip !== null)(
    'mixed-walkers on hand-started TLS workers (a Rust agent worker among them) has its golden ReproHash',
    async () => {
      ensureRustWorker();
      const dir = tempDir('ds-rv-');
      const out = tempDir('ds-rv-out-');
      const certs = join(tempDir('ds-rv-tls-'), 'set');
      expect(spawnSync(process.execPath, [CLI_MAIN, 'certs', certs], { cwd: REPO_ROOT }).status).toBe(0);
      const extra = ['--tls-dir', certs];
      const workers = [
        startHandWorker({ workerId: 'worker-env', role: 'environment', rendezvous: dir, extra }),
        startHandWorker({ workerId: 'worker-0', role: 'agent', rendezvous: dir, extra }),
        startHandWorker({ workerId: 'worker-1', role: 'agent', rendezvous: dir, extra, rust: RUST_WORKER }),
      ];
      const cfg = rendezvousConfig('examples/mixed-walkers.yaml', dir, 60);
      const plan = resolveConfig({ ...cfg, workers: { ...cfg.workers, tls: { dir: certs } } }, { baseDir: REPO_ROOT });
      const { reproHash, steps } = golden('mixed-walkers');
      const result = await runSession(plan, { outDir: out, steps, logLevel: 'warn' });
      expect(result.reproHash).toBe(reproHash);
      expect(await Promise.all(workers.map((w) => w.exited))).toEqual([0, 0, 0]);
      expect(readdirSync(dir)).toEqual([]);
    },
    1_500_000,
  );

  it('a directory that never fills: one line naming the missing workers, exit 2, no run directory', async () => {
    const dir = tempDir('ds-rv-');
    const out = tempDir('ds-rv-out-');
    const env = startHandWorker({ workerId: 'worker-env', role: 'environment', rendezvous: dir });
    await env.ready;
    const r = await detsimRun([lifPairConfigFile(dir, 1), '--out', out]);
    // First what it waits for (said once, so a quiet terminal is not a hang), then the refusal.
    const [waiting, ...rest] = r.stderr.trim().split('\n');
    expect(waiting).toBe(
      `waiting up to 1 s for 2 of 3 workers to announce themselves in ${dir}: worker-0, worker-1` +
        ` (start each with: detsim worker … --rendezvous ${dir})`,
    );
    const refused = { ...asSpawnResult(r), stderr: rest.join('\n') };
    const line = expectCliRefusal(refused, 'ident_rendezvous_timeout', 'workers.rendezvous');
    expect(line).toContain(`no record from worker-0, worker-1 in ${dir} within 1 s`);
    expect(readdirSync(out)).toEqual([]);
    // The worker that did come is left alone, record and all.
    expect(readdirSync(dir)).toEqual(['worker-env.json']);
  });

  it('--max-restarts with workers started by hand is refused before anything waits or is written', async () => {
    const dir = tempDir('ds-rv-');
    const out = tempDir('ds-rv-out-');
    const r = await detsimRun([
      lifPairConfigFile(dir, 1),
      '--out',
      out,
      '--checkpoint-every',
      '2',
      '--max-restarts',
      '1',
    ]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      "detsim: [struct_invalid_field] --max-restarts: a recovery starts replacement workers, and this run's workers are started by hand (workers.placement: rendezvous); run without it, and after a lost worker start fresh workers and `detsim resume` the run\n",
    );
    expect(readdirSync(out)).toEqual([]);
  });

  it('Ctrl-C while waiting: one line naming the workers still awaited, nothing written', async () => {
    const dir = tempDir('ds-rv-');
    const out = tempDir('ds-rv-out-');
    const child = spawn(process.execPath, [CLI_MAIN, 'run', lifPairConfigFile(dir, 60), '--out', out], {
      cwd: REPO_ROOT,
    });
    let stderr = '';
    const waiting = new Promise<void>((res) =>
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes('waiting up to 60 s')) res();
      }),
    );
    const exited = new Promise<number | null>((res) => child.once('exit', res));
    await waiting;
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(stderr.trim().split('\n').at(-1)).toBe(
      `detsim: the run was interrupted before it started (while waiting for worker-0, worker-1, worker-env in ${dir});` +
        ' nothing was written',
    );
    expect(readdirSync(out)).toEqual([]);
  });

  it('a stale record (its worker killed with -9): one line naming the worker as unreachable, exit 2, no run directory', async () => {
    const dir = tempDir('ds-rv-');
    const out = tempDir('ds-rv-out-');
    const workers = await startLifPairWorkers(dir);
    const killed = workers.get('worker-0')!;
    killed.child.kill('SIGKILL');
    await killed.exited;
    // SIGKILL leaves its record behind: it names an address where nobody listens any more.
    const where = join(dir, 'worker-0.json');
    const { address } = readRendezvousRecord(readFileSync(where), where);
    const r = await detsimRun([lifPairConfigFile(dir, 5), '--out', out]);
    expect(expectCliRefusal(asSpawnResult(r), 'ident_worker_unreachable', where)).toBe(
      `detsim: [ident_worker_unreachable] ${where}: address: worker worker-0 is unreachable at ${address} (ECONNREFUSED);` +
        ' a stale record if its worker is gone (remove the record and start the worker again)',
    );
    expect(readdirSync(out)).toEqual([]);
  });

  it('a record pointing at a TCP black hole (it connects, never answers): one line, exit 2, no run directory', async () => {
    const dir = tempDir('ds-rv-');
    const out = tempDir('ds-rv-out-');
    await startLifPairWorkers(dir);
    // A listener that accepts and never says a word: the connect succeeds, no HTTP/2 ever comes.
    const held: Socket[] = [];
    const hole = createServer((s) => void held.push(s));
    await new Promise<void>((r) => hole.listen(0, '127.0.0.1', r));
    const address = `127.0.0.1:${(hole.address() as AddressInfo).port}`;
    const where = join(dir, 'worker-0.json');
    writeFileSync(where, canonicalize({ ...readRendezvousRecord(readFileSync(where), where), address }));
    const cfg = lifPairConfigFile(dir, 5);
    const edited = JSON.parse(readFileSync(cfg, 'utf8')) as Record<string, any>;
    writeFileSync(cfg, JSON.stringify({ ...edited, deadlines: { ...edited.deadlines, startupMs: 2000 } }));
    try {
      const r = await detsimRun([cfg, '--out', out]);
      expect(expectCliRefusal(asSpawnResult(r), 'ident_worker_unreachable', where)).toMatch(
        new RegExp(
          `^detsim: \\[ident_worker_unreachable\\] ${where}: address: worker worker-0 is unreachable at ${address} \\(`,
        ),
      );
      expect(readdirSync(out)).toEqual([]);
    } finally {
      for (const s of held) s.destroy();
      hole.close();
    }
  });

  it('plaintext workers holding a secret the run lacks, or another one: refused by name, exit 2, no run directory', async () => {
    const dir = tempDir('ds-rv-');
    const out = tempDir('ds-rv-out-');
    await startLifPairWorkers(dir);
    const cfg = lifPairConfigFile(dir, 5);
    const base = JSON.parse(readFileSync(cfg, 'utf8')) as Record<string, any>;
    const withToken = (tokenFile: string | undefined) => {
      const { tokenFile: _t, ...rendezvous } = base.workers.rendezvous as Record<string, unknown>;
      writeFileSync(
        cfg,
        JSON.stringify({
          ...base,
          workers: { ...base.workers, rendezvous: tokenFile ? { ...rendezvous, tokenFile } : rendezvous },
        }),
      );
      return cfg;
    };
    const missing = await detsimRun([withToken(undefined), '--out', out]);
    expect(expectCliRefusal(asSpawnResult(missing), 'ident_token_missing', 'worker worker-')).toMatch(
      /refused this coordinator: authorization: the call carries no bearer token; this worker serves only its run \(give the run the secret the worker was started with: in plaintext workers\.rendezvous\.tokenFile, with TLS the token file of workers\.tls\.dir\); refused before the run started, nothing was written$/,
    );
    const wrong = await detsimRun([withToken(secretFile()), '--out', out]);
    expect(expectCliRefusal(asSpawnResult(wrong), 'ident_token_wrong', 'worker worker-')).toMatch(
      /refused this coordinator: authorization: the bearer token is not this worker's run token/,
    );
    // A token file that is not there: refused before anything is written, as a missing TLS set is.
    const gone = await detsimRun([withToken(join(dir, 'no-such-token')), '--out', out]);
    expect(gone.status).toBe(2);
    expect(gone.stderr.trim()).toBe(
      `detsim: [perm_tls_unreadable] workers.rendezvous.tokenFile: token ${join(dir, 'no-such-token')} cannot be read (ENOENT)`,
    );
    expect(readdirSync(out)).toEqual([]);
  });

  it('a worker that answers Hello as another worker is refused before stepping: exit 2, no run directory', async () => {
    const dir = tempDir('ds-rv-');
    const out = tempDir('ds-rv-out-');
    await startLifPairWorkers(dir);
    // worker-0's record now sends the coordinator to worker-1: a well-formed record, a live worker, the wrong one.
    const record = (id: string) => readRendezvousRecord(readFileSync(join(dir, `${id}.json`)), id);
    writeFileSync(
      join(dir, 'worker-0.json'),
      canonicalize({ ...record('worker-0'), address: record('worker-1').address }),
    );
    const r = await detsimRun([lifPairConfigFile(dir, 5), '--out', out]);
    expect(expectCliRefusal(asSpawnResult(r), 'ident_worker_mismatch', 'worker worker-0 (agents lif-a)')).toBe(
      'detsim: [ident_worker_mismatch] worker worker-0 (agents lif-a) is not the expected worker at phase hello:' +
        ' worker worker-0 refused Hello: IDENTITY_MISMATCH: workerId: params.expectedWorkerId does not name this worker;' +
        ' refused before the run started, nothing was written',
    );
    expect(readdirSync(out)).toEqual([]);
  });

  it('a record for the wrong role, a malformed one and a foreign session are refused naming the field', async () => {
    const dir = tempDir('ds-rv-');
    const plan = resolveConfig(rendezvousConfig('examples/lif-pair.yaml', dir, 5), { baseDir: REPO_ROOT });
    const record = (over: Record<string, unknown>) => ({
      format: 'detsim-rendezvous-v1',
      workerId: 'worker-0',
      role: 'agent',
      address: '127.0.0.1:9',
      session: null,
      contractDigest: CONTRACT_DIGEST,
      certificateFingerprint: null,
      ...over,
    });
    const refusedWith = async (text: string): Promise<{ reason: string; message: string }> => {
      writeFileSync(join(dir, 'worker-0.json'), text);
      const e = await runSession(plan, { outDir: tempDir('ds-rv-out-') }).then(
        () => undefined,
        (err: unknown) => err as { reason: string; message: string },
      );
      expect(e, 'accepted: expected a refusal').toBeDefined();
      return e!;
    };
    const where = join(dir, 'worker-0.json');
    const wrongRole = await refusedWith(JSON.stringify(record({ role: 'environment' })));
    expect(wrongRole.reason).toBe('ident_rendezvous_mismatch');
    expect(wrongRole.message).toBe(`${where}: role: the record says environment; the plan needs agent for worker-0`);
    const noAddress = record({});
    delete (noAddress as Record<string, unknown>).address;
    const missing = await refusedWith(JSON.stringify(noAddress));
    expect([missing.reason, missing.message]).toEqual([
      'struct_missing_field',
      `${where}: address: required field is missing`,
    ]);
    const foreign = await refusedWith(JSON.stringify(record({ session: 'another-run' })));
    expect([foreign.reason, foreign.message]).toEqual([
      'ident_rendezvous_mismatch',
      `${where}: session: the worker is bound to another session, not lif-pair`,
    ]);
    // An unknown field is refused without its name: record bytes are never echoed (docs/security.md).
    const extra = await refusedWith(JSON.stringify(record({ 'secret-3f9a': 1 })));
    expect(extra.reason).toBe('struct_unknown_field');
    expect(extra.message).toBe(
      `${where}: not a rendezvous record (a field this format does not define; fields: format, workerId, role, address, session, contractDigest, certificateFingerprint)`,
    );
    expect(extra.message).not.toContain('secret-3f9a');
    const garbage = await refusedWith('{"format": ');
    expect([garbage.reason, garbage.message]).toEqual([
      'struct_invalid_json',
      `${where}: not a rendezvous record (not strict JSON)`,
    ]);
  });

  it('a record that is a FIFO, a symlink to /dev/zero or too large is refused at once by name, never read whole', async () => {
    const plan = (dir: string) =>
      resolveConfig(rendezvousConfig('examples/lif-pair.yaml', dir, 30), { baseDir: REPO_ROOT });
    const refusedAt = async (make: (where: string) => void) => {
      const dir = tempDir('ds-rv-');
      const where = join(dir, 'worker-0.json');
      make(where);
      const started = Date.now();
      const e = await runSession(plan(dir), { outDir: tempDir('ds-rv-out-') }).then(
        () => undefined,
        (err: unknown) => err as { reason: string; message: string },
      );
      // Before the fix a FIFO blocked open() for good and /dev/zero was read until memory ran out.
      expect(Date.now() - started).toBeLessThan(10_000);
      return [e?.reason, e?.message.replace(where, '<record>')];
    };
    const notRegular = [
      'struct_invalid_field',
      '<record>: a rendezvous record must be a regular file, and this is not',
    ];
    expect(await refusedAt((where) => expect(spawnSync('mkfifo', [where]).status).toBe(0))).toEqual(notRegular);
    expect(await refusedAt((where) => symlinkSync('/dev/zero', where))).toEqual(notRegular);
    expect(await refusedAt((where) => writeFileSync(where, ' '.repeat(MAX_RECORD_BYTES + 1)))).toEqual([
      'struct_invalid_field',
      `<record>: a rendezvous record is at most ${MAX_RECORD_BYTES} bytes`,
    ]);
  });

  it('TLS: the certificate a worker presents must be the one its record names; a plaintext run refuses a TLS record', async () => {
    const dir = tempDir('ds-rv-');
    const tlsDir = join(tempDir('ds-rv-tls-'), 'set');
    const certs = spawnSync(process.execPath, [CLI_MAIN, 'certs', tlsDir], { cwd: REPO_ROOT, encoding: 'utf8' });
    expect(certs.status, certs.stderr).toBe(0);
    const w = startHandWorker({ workerId: 'worker-0', role: 'agent', rendezvous: dir, extra: ['--tls-dir', tlsDir] });
    await w.ready;
    const where = join(dir, 'worker-0.json');
    const real = readRendezvousRecord(readFileSync(where), where);
    expect(real.certificateFingerprint).toBe(certificateFingerprint(readFileSync(join(tlsDir, 'worker.pem'))));
    // The other two records of lif-pair only need to be well formed: worker-0 is checked first (id order).
    for (const [workerId, role] of [
      ['worker-1', 'agent'],
      ['worker-env', 'environment'],
    ] as const)
      writeFileSync(join(dir, `${workerId}.json`), canonicalize({ ...real, workerId, role }));
    const cfg = rendezvousConfig('examples/lif-pair.yaml', dir, 5);
    const tlsPlan = resolveConfig(
      { ...cfg, workers: { ...cfg.workers, tls: { dir: tlsDir } } },
      { baseDir: REPO_ROOT },
    );
    const refusedBy = async (plan: RunPlan): Promise<{ reason: string; message: string }> => {
      const out = tempDir('ds-rv-out-');
      const e = await runSession(plan, { outDir: out }).then(
        () => undefined,
        (err: unknown) => err as { reason: string; message: string },
      );
      expect(readdirSync(out)).toEqual([]);
      return e!;
    };
    writeFileSync(where, canonicalize({ ...real, certificateFingerprint: '0'.repeat(64) }));
    expect(await refusedBy(tlsPlan)).toMatchObject({
      reason: 'ident_rendezvous_mismatch',
      message: `${where}: certificateFingerprint: the worker at its recorded address presents another certificate than the record names`,
    });
    writeFileSync(where, canonicalize(real));
    expect(await refusedBy(resolveConfig(cfg, { baseDir: REPO_ROOT }))).toMatchObject({
      reason: 'ident_rendezvous_mismatch',
      message: `${where}: certificateFingerprint: the worker serves TLS; give the run its TLS directory (workers.tls.dir or --tls-dir)`,
    });
  });

  it('a rendezvous directory that does not exist is refused by name, by the coordinator and by a worker', async () => {
    const missing = join(tempDir('ds-rv-'), 'nope');
    const plan = resolveConfig(rendezvousConfig('examples/lif-pair.yaml', missing, 5), { baseDir: REPO_ROOT });
    const out = tempDir('ds-rv-out-');
    await expect(runSession(plan, { outDir: out })).rejects.toMatchObject({
      reason: 'struct_invalid_field',
      message: `workers.rendezvous.dir: ${missing} is not an existing directory`,
    });
    expect(readdirSync(out)).toEqual([]);
    const flags = [...AGENT_W, '--rendezvous', missing];
    const r = spawnSync(process.execPath, [CLI_MAIN, 'worker', ...flags], { encoding: 'utf8', cwd: REPO_ROOT });
    expect([r.status, r.stderr.trim()]).toEqual([
      2,
      `detsim: [struct_invalid_field] --rendezvous ${JSON.stringify(missing)} is not an existing directory`,
    ]);
  });

  it('config: placement and its block go together; thread cannot reach rendezvous workers', () => {
    const cfg = rendezvousConfig('examples/lif-pair.yaml', '/tmp', 5);
    const without = { ...cfg, workers: { ...cfg.workers, rendezvous: undefined } };
    expect(refusal(() => resolveConfig(without)).message).toBe(
      'workers.rendezvous: required with workers.placement: rendezvous ({ dir, timeoutSeconds })',
    );
    const local = { ...cfg, workers: { ...cfg.workers, placement: 'local' } };
    expect(refusal(() => resolveConfig(local)).field).toBe('workers.rendezvous');
    for (const transport of ['thread', 'inline']) {
      const inside = { ...cfg, workers: { ...cfg.workers, transport } };
      expect(refusal(() => resolveConfig(inside)).field).toBe('workers.transport');
    }
    const plan = resolveConfig({ ...cfg, workers: { ...cfg.workers, rendezvous: { dir: 'rv' } } }, { baseDir: '/x' });
    expect(plan.rendezvous).toEqual({ dir: '/x/rv', timeoutMs: 120_000 });
    expect(plan.transport).toBe('tcp');
    expect(resolveConfig({ ...cfg, workers: {} }).rendezvous).toBeUndefined();
  });
});
