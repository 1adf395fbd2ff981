// Authenticated TCP workers (issue 15 §1): `detsim certs` makes a per-run set; a TLS worker
// (TypeScript, Python and Rust, hand-started as a remote worker would be) serves only a client that
// presents the run's coordinator certificate and bearer token and names the session it is bound to.
// Each refusal is shown with a real stranger client — a grpc-js client built here with the wrong
// credentials — which gets a status and never a reply body, while the worker keeps serving its
// coordinator. Plaintext on a non-loopback host is refused at start.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readTlsMaterial, tlsPathsIn } from '../../core/formats/tls-dir.js';
import { CONTRACT_DIGEST, METHODS, WorkerClient, checkBearer } from '../../core/protocol/index.js';
import { makeCertSet } from '../../coordinator/launch/certs.js';
import { coordinatorCredentials } from '../../coordinator/launch/tls.js';
import { pythonCommand, pythonWorkerSkip } from '../cross-lang/python-worker.js';
import { RUST_WORKER, ensureRustWorker, rustWorkerSkip } from '../cross-lang/rust-worker.js';
import { REPO_ROOT, type SpawnedWorker, errorOf, launchWorker, resultOf, stopAll } from './harness.js';
import { stranger } from './stranger.js';

const root = mkdtempSync(join(tmpdir(), 'detsim-tls-'));
const RUN = join(root, 'run');
const OTHER = join(root, 'other');
beforeAll(() => {
  makeCertSet(RUN);
  makeCertSet(OTHER);
});
afterAll(async () => {
  await stopAll();
  rmSync(root, { recursive: true, force: true });
});

const material = (dir: string) => readTlsMaterial(tlsPathsIn(dir, 'coordinator'), 'test');
const tsWorker = { command: process.execPath, args: ['--import', 'tsx', 'workers/main.ts'] };

const rustWorker = () => {
  ensureRustWorker();
  return { command: RUST_WORKER, args: [] };
};

const runtimes: [string, () => { command: string; args: string[] }, boolean][] = [
  ['typescript', () => tsWorker, false],
  ['python', pythonCommand, pythonWorkerSkip !== null],
  ['rust', rustWorker, rustWorkerSkip !== null],
];
/** Runtimes whose worker names a refused handshake on stderr (grpcio gives the Python worker no hook). */
const namesHandshakes = (runtime: string) => runtime !== 'python';

describe.each(runtimes)('a TLS worker (%s) hand-started with --tls-dir', (runtime, command, skip) => {
  let w: SpawnedWorker;
  beforeAll(async () => {
    if (skip) return;
    const { command: cmd, args } = command();
    w = await launchWorker(cmd, args, {
      role: 'agent',
      workerId: 'w1',
      listenAt: '127.0.0.1:0',
      extra: ['--session', 's1', '--tls-dir', RUN, '--no-parent-watch'],
      credentials: coordinatorCredentials(RUN),
    });
  }, 60_000);

  /** The worker still serves its own coordinator after a refusal. */
  async function stillServes(): Promise<void> {
    expect(resultOf(await w.client.call(METHODS.status, null, {})).state).toBeTypeOf('string');
  }

  it.skipIf(skip)("serves the run's coordinator: Hello with the run's certificate, token and session", async () => {
    const hello = await w.client.hello({ sessionId: 's1', workerId: 'w1', role: 'agent' });
    expect(hello.workerId).toBe('w1');
  });

  it.skipIf(skip)('refuses a client without a certificate at the handshake: no reply body', async () => {
    const out = await stranger(w.listen, grpc.credentials.createSsl(material(RUN).ca), material(RUN).token);
    expect(out).toMatchObject({ code: grpc.status.UNAVAILABLE, frames: 0 });
    if (runtime !== 'python') expect(out.details).toMatch(/certificate required/);
    if (namesHandshakes(runtime))
      await expect.poll(() => w.stderr()).toMatch(/\[ident_no_client_certificate\] refused a TLS connection without/);
    await stillServes();
  });

  it.skipIf(skip)("refuses a certificate from another run's CA at the handshake: no reply body", async () => {
    const other = material(OTHER);
    const out = await stranger(
      w.listen,
      grpc.credentials.createSsl(material(RUN).ca, other.key, other.cert),
      material(RUN).token,
    );
    expect(out).toMatchObject({ code: grpc.status.UNAVAILABLE, frames: 0 });
    if (namesHandshakes(runtime))
      await expect
        .poll(() => w.stderr())
        .toMatch(/\[ident_foreign_certificate\] refused a client certificate this run's CA did not issue/);
    await stillServes();
  });

  it.skipIf(skip)('refuses a plaintext client: no reply body', async () => {
    const out = await stranger(w.listen, grpc.credentials.createInsecure(), material(RUN).token);
    expect(out).toMatchObject({ code: grpc.status.UNAVAILABLE, frames: 0 });
    if (namesHandshakes(runtime))
      await expect.poll(() => w.stderr()).toMatch(/\[ident_no_client_certificate\] refused a connection that did not/);
    await stillServes();
  });

  const sslOf = (dir: string) => {
    const m = material(dir);
    return grpc.credentials.createSsl(m.ca, m.key, m.cert);
  };

  it.skipIf(skip)('refuses a stream without a bearer token: UNAUTHENTICATED, named, no body', async () => {
    const out = await stranger(w.listen, sslOf(RUN));
    expect(out).toEqual({
      code: grpc.status.UNAUTHENTICATED,
      details: '[ident_token_missing] authorization: the call carries no bearer token; this worker serves only its run',
      frames: 0,
    });
    await expect.poll(() => w.stderr()).toMatch(/: \[ident_token_missing\] refused authorization: /);
    await stillServes();
  });

  it.skipIf(skip)('refuses a wrong bearer token (another run’s): UNAUTHENTICATED, named, no body', async () => {
    const out = await stranger(w.listen, sslOf(RUN), material(OTHER).token);
    expect(out).toEqual({
      code: grpc.status.UNAUTHENTICATED,
      details: "[ident_token_wrong] authorization: the bearer token is not this worker's run token",
      frames: 0,
    });
    expect(w.stderr()).not.toContain(material(OTHER).token);
    expect(w.stderr()).not.toContain(material(RUN).token);
    await stillServes();
  });

  it.skipIf(skip)('refuses the wrong session after authentication: named, without ids', async () => {
    const hello = {
      sessionId: 's-other',
      expectedWorkerId: 'w1',
      role: 'agent',
      supportedMajors: [1],
      contractDigest: CONTRACT_DIGEST,
    };
    const refused = errorOf(await w.client.callUnchecked(METHODS.hello, null, hello));
    expect(refused).toEqual({
      code: 'IDENTITY_MISMATCH',
      message: 'sessionId: params.sessionId is not the session this worker is bound to',
      mutation: 'none',
    });
    await stillServes();
  });
});

describe('checkBearer (constant-time token comparison)', () => {
  const token = 'a'.repeat(64);
  it('accepts exactly `Bearer <token>` and names every other case', () => {
    expect(checkBearer(token, `Bearer ${token}`)).toBeUndefined();
    expect(checkBearer(token, Buffer.from(`Bearer ${token}`))).toBeUndefined();
    expect(checkBearer(token, `Bearer ${'b'.repeat(64)}`)).toBe('ident_token_wrong');
    expect(checkBearer(token, `Bearer ${token}x`)).toBe('ident_token_wrong');
    expect(checkBearer(token, 'Bearer a')).toBe('ident_token_wrong');
    expect(checkBearer(token, undefined)).toBe('ident_token_missing');
    expect(checkBearer(token, 'Bearer ')).toBe('ident_token_missing');
    expect(checkBearer(token, `Basic ${token}`)).toBe('ident_token_missing');
  });
});

describe('starting a worker: TLS and the listen address', () => {
  const flags = (listen: string) => ['--listen', listen, '--role', 'agent', '--worker-id', 'w1'];
  const startWith = (worker: { command: string; args: string[] }, extra: string[], listen = '0.0.0.0:0') =>
    spawnSync(worker.command, [...worker.args, ...flags(listen), ...extra], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 30_000,
    });
  const start = (extra: string[], listen = '0.0.0.0:0') => startWith(tsWorker, extra, listen);
  /** startWith without blocking, so that several starts overlap. */
  const startAsync = (worker: { command: string; args: string[] }, extra: string[], listen = '0.0.0.0:0') =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((res) => {
      const p = spawn(worker.command, [...worker.args, ...flags(listen), ...extra], { cwd: REPO_ROOT });
      let [stdout, stderr] = ['', ''];
      p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      // 'close', not 'exit': only then has all of stderr been read.
      p.once('close', (status) => res({ status, stdout, stderr }));
    });

  /** Start `worker` on 0.0.0.0 with the run's set and say Hello through loopback with the coordinator's. */
  async function helloOnAllInterfaces(worker: { command: string; args: string[] }): Promise<void> {
    const w = spawn(worker.command, [...worker.args, ...flags('0.0.0.0:0'), '--tls-dir', RUN], {
      cwd: REPO_ROOT,
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const ready = await new Promise<string>((res) => createInterface({ input: w.stdout! }).once('line', res));
    const port = /^0\.0\.0\.0:([1-9][0-9]*)$/.exec((JSON.parse(ready) as { listen: string }).listen)![1];
    const client = await WorkerClient.connect(`127.0.0.1:${port}`, { credentials: coordinatorCredentials(RUN) });
    expect((await client.hello({ sessionId: 's1', workerId: 'w1', role: 'agent' })).workerId).toBe('w1');
    client.close();
    w.kill('SIGKILL');
  }

  it('listens on 0.0.0.0 with --tls-dir (ready line), and refuses it without, one named line, exit 2', async () => {
    await helloOnAllInterfaces(tsWorker);
    const r = start([]);
    expect([r.status, r.stdout]).toEqual([2, '']);
    expect(r.stderr).toBe(
      'detsim: [perm_listen_not_local] --listen: "0.0.0.0" is not a loopback address; without TLS a worker listens only on unix:/abs/path or a loopback host (127.0.0.0/8, ::1, localhost); any other host needs TLS and a bearer token (--tls-dir)\n',
    );
  });

  it('refuses a missing, malformed or partial TLS set naming the file or flag, exit 2, never echoing content', () => {
    const broken = join(root, 'broken');
    makeCertSet(broken);
    const secret = readFileSync(join(broken, 'worker-key.pem'), 'utf8');
    unlinkSync(join(broken, 'token'));
    let r = start(['--tls-dir', broken]);
    expect([r.status, r.stdout, r.stderr]).toEqual([
      2,
      '',
      `detsim: [perm_tls_unreadable] --tls-dir: token ${join(broken, 'token')} cannot be read (ENOENT)\n`,
    ]);
    writeFileSync(join(broken, 'token'), `${'t'.repeat(64)}\n`, { mode: 0o600 });
    writeFileSync(join(broken, 'worker.pem'), secret);
    r = start(['--tls-dir', broken]);
    expect(r.stderr).toBe(
      `detsim: [perm_tls_unreadable] --tls-dir: certificate ${join(broken, 'worker.pem')} is not a PEM certificate\n`,
    );
    expect(r.stderr).not.toContain('PRIVATE KEY');
    r = start(['--tls-cert', join(RUN, 'worker.pem')]);
    expect([r.status, r.stderr]).toEqual([
      2,
      'detsim: [struct_missing_field] --tls-ca is required with --tls-cert (or give --tls-dir DIR made by detsim certs)\n',
    ]);
    r = start(['--tls-dir', RUN], `unix:${join(root, 'w.sock')}`);
    expect([r.status, r.stderr]).toEqual([
      2,
      'detsim: [struct_invalid_field] --tls-dir: TLS is for TCP workers; a unix socket is reachable only from this machine\n',
    ]);
  });

  it.skipIf(rustWorkerSkip !== null)(
    'the Rust worker: serves on 0.0.0.0 with --tls-dir, and refuses every bad set word for word as TypeScript',
    async () => {
      const rust = rustWorker();
      await helloOnAllInterfaces(rust);
      const broken = join(root, 'broken-rs');
      makeCertSet(broken);
      const secret = readFileSync(join(broken, 'worker-key.pem'), 'utf8');
      const cases: [string[], string?][] = [
        [['--tls-dir', join(root, 'nowhere')]],
        [['--tls-cert', join(RUN, 'worker.pem')]],
        [['--tls-ca', join(RUN, 'ca.pem'), '--token-file', join(RUN, 'token')]],
        [['--tls-dir', '']],
        [['--tls-dir', RUN], `unix:${join(root, 'w.sock')}`],
        [['--tls-dir', RUN, '--token-file', join(RUN, 'worker.pem')]],
        [['--tls-dir', RUN, '--tls-cert', join(broken, 'worker-key.pem')]],
        [['--tls-dir', RUN, '--tls-key', join(RUN, 'worker.pem')]],
        [['--tls-dir', RUN, '--tls-ca', root]],
      ];
      // Side by side: each TypeScript worker start costs seconds of tsx.
      const outcomes = await Promise.all(
        cases.map(([extra, listen]) =>
          Promise.all([startAsync(tsWorker, extra, listen), startAsync(rust, extra, listen)]),
        ),
      );
      for (const [i, [ts, rs]] of outcomes.entries()) {
        expect([rs.status, rs.stdout, rs.stderr], cases[i]![0].join(' ')).toEqual([2, '', ts.stderr]);
        expect(ts.status).toBe(2);
        expect(rs.stderr).toMatch(/^detsim: \[[a-z_0-9]+\] [^\n]+\n$/);
        expect(rs.stderr).not.toContain(secret.split('\n')[1]!);
      }
    },
    60_000,
  );
});
