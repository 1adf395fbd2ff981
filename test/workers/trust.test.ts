// The worker's trust boundary against real worker processes (docs/security.md): a stranger — a
// second gRPC client on a live worker's socket — is served nothing before its own Hello, learns
// neither the worker id nor the bound session from a refusal, and cannot make the worker import a
// model module it was not launched with; a worker refuses a non-loopback listen address.
// Not the Hello field checks (hello.test.ts) nor the Rust worker (test/cross-lang/).
import { spawnSync } from 'node:child_process';
import { connect } from 'node:net';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../coordinator/config.js';
import { launchedModelsFor } from '../../coordinator/launch/launcher.js';
import { CONTRACT_DIGEST, METHODS, WorkerClient } from '../../core/protocol/index.js';
import { CLI_MAIN } from '../cli-refusal.js';
import { REPO_ROOT, SESSION, STEP_60HZ, errorOf, resultOf, scope, spawnWorker, stopAll } from './harness.js';

afterAll(stopAll);

const WALKER = { agentId: 'a-walk', model: 'walker', params: {}, seed: 7, stepDuration: STEP_60HZ, observation: {} };
const MARKER_MODEL = join(REPO_ROOT, 'test/workers/fixtures/marker-model.ts');

/** Every method but Hello, with params a real client would send. */
const NOT_HELLO: [string, ReturnType<typeof scope> | null, Record<string, unknown>][] = [
  [METHODS.status, null, {}],
  [METHODS.shutdown, null, { reason: 'stranger' }],
  [METHODS.acknowledge, null, { requestIds: ['req-1'] }],
  [METHODS.agentInitialize, scope(0), { agents: [{ ...WALKER, agentId: 'intruder' }] }],
  [METHODS.agentPrepare, scope(0), { agents: [{ agentId: 'a-walk' }] }],
  [METHODS.capture, scope(0), { checkpointId: 'ck-x', agentId: 'a-walk' }],
];

describe.each([
  ['gRPC', [] as string[]],
  ['the socket wire', ['--wire', 'socket']],
])('a stranger on a live worker’s socket (%s)', (_wire, wireFlags) => {
  const wire = wireFlags.length > 0 ? ('socket' as const) : ('grpc' as const);
  it('is refused every method before its own Hello although the coordinator’s stream said Hello; the worker keeps serving', async () => {
    // On its Unix socket (a plaintext TCP worker refuses a stranger even sooner: no run secret, no
    // stream at all — test/workers/plaintext-secret.test.ts).
    const w = await spawnWorker('agent', 'w-live', ['--session', SESSION, ...wireFlags], true);
    resultOf(await w.client.call(METHODS.agentInitialize, scope(0), { agents: [WALKER] }));
    const stranger = await WorkerClient.connect(w.listen, { processExit: w.exited, label: 'stranger', wire });
    for (const [method, sc, params] of NOT_HELLO) {
      expect(errorOf(await stranger.callUnchecked(method, sc, params)), method).toEqual({
        code: 'INVALID_PHASE',
        message: `${method} before Worker.Hello`,
        mutation: 'none',
      });
    }
    // The Shutdown above did nothing: the worker and the coordinator's stream are untouched.
    expect(w.proc.exitCode).toBeNull();
    const status = resultOf<{ state: string; progressCounter: string }>(await w.client.call(METHODS.status, null, {}));
    expect(status.state).toBe('ready');
    const p = await w.client.call(METHODS.agentPrepare, scope(0), { agents: [{ agentId: 'a-walk' }] });
    expect(resultOf<{ agents: unknown[] }>(p).agents).toHaveLength(1);
    stranger.close();
    await w.stop();
  });

  it('learns neither the worker id nor the bound session from a refused Hello', async () => {
    const w = await spawnWorker('agent', 'w-secret-7', ['--session', 's-secret-9', ...wireFlags], false);
    const stranger = await WorkerClient.connect(w.listen, { processExit: w.exited, label: 'stranger', wire });
    const hello = {
      sessionId: 's-guess',
      expectedWorkerId: 'w-guess',
      role: 'agent',
      supportedMajors: [1],
      contractDigest: CONTRACT_DIGEST,
    };
    const wrongId = errorOf(await stranger.callUnchecked(METHODS.hello, null, hello));
    expect(wrongId).toEqual({
      code: 'IDENTITY_MISMATCH',
      message: 'workerId: params.expectedWorkerId does not name this worker',
      mutation: 'none',
    });
    const wrongSession = errorOf(
      await stranger.callUnchecked(METHODS.hello, null, { ...hello, expectedWorkerId: 'w-secret-7' }),
    );
    expect(wrongSession).toEqual({
      code: 'IDENTITY_MISMATCH',
      message: 'sessionId: params.sessionId is not the session this worker is bound to',
      mutation: 'none',
    });
    for (const e of [wrongId, wrongSession]) expect(e.message).not.toMatch(/secret/);
    // Still un-introduced after the refused Hellos.
    expect(errorOf(await stranger.call(METHODS.status, null, {})).code).toBe('INVALID_PHASE');
    stranger.close();
    await w.stop();
  });
});

describe('the socket wire against raw bytes', () => {
  /** Connect a raw socket to `listen`, write `bytes`; resolves once the worker closes it. */
  const rawSend = (listen: string, bytes: Buffer) =>
    new Promise<void>((resolve, reject) => {
      const s = connect(listen.replace(/^unix:/, ''));
      s.on('error', reject);
      s.on('connect', () => s.write(bytes));
      s.on('data', () => reject(new Error('the worker answered a stranger')));
      s.on('close', () => resolve());
    });
  const head = (body: number, attachment: number) => {
    const b = Buffer.alloc(8);
    b.writeUInt32BE(body, 0);
    b.writeUInt32BE(attachment, 4);
    return b;
  };

  it('an attachment before Hello, or a body past the limit, ends that connection from its header; the worker keeps serving its coordinator', async () => {
    const w = await spawnWorker('agent', 'w-raw', ['--session', SESSION, '--wire', 'socket'], true);
    // 1 GiB announced, 4 bytes sent: the worker must not wait for (or buffer) what the header claims.
    await rawSend(w.listen, Buffer.concat([head(7, 1024 * 1024 * 1024), Buffer.from('{"a":1}')]));
    await rawSend(w.listen, head(8 * 1024 * 1024 + 1, 0));
    expect(w.stderr()).toContain('framing error, stream ended: an attachment before Worker.Hello on this connection');
    expect(w.stderr()).toContain('framing error, stream ended: a body of 8388609 bytes exceeds 8388608');
    expect(w.proc.exitCode).toBeNull();
    expect(resultOf<{ state: string }>(await w.client.call(METHODS.status, null, {})).state).toBe('uninitialized');
    await w.stop();
  });

  it('--wire socket is refused on TCP and with --rendezvous, and --wire must be grpc or socket: one named line, exit 2', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dsw-wire-'));
    try {
      const run = (...args: string[]) =>
        spawnSync(
          process.execPath,
          ['--import', 'tsx', 'workers/main.ts', '--role', 'agent', '--worker-id', 'w1', '--no-parent-watch', ...args],
          { cwd: REPO_ROOT, encoding: 'utf8', timeout: 30_000 },
        );
      const unix = `unix:${join(dir, 'w.sock')}`;
      writeFileSync(join(dir, 't'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
      const socketOnly =
        'detsim: [struct_invalid_field] --wire socket is for a worker its coordinator starts on a unix socket (no TCP, no --rendezvous)\n';
      const tcp = run('--listen', '127.0.0.1:0', '--session', 's1', '--token-file', join(dir, 't'), '--wire', 'socket');
      expect([tcp.status, tcp.stderr]).toEqual([2, socketOnly]);
      const rdv = run('--listen', unix, '--rendezvous', dir, '--wire', 'socket');
      expect([rdv.status, rdv.stderr]).toEqual([2, socketOnly]);
      const bad = run('--listen', unix, '--wire', 'http2');
      expect([bad.status, bad.stderr]).toEqual([
        2,
        'detsim: [struct_invalid_field] --wire must be grpc or socket, not "http2"\n',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('listen addresses', () => {
  const worker = (listen: string) =>
    spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        'workers/main.ts',
        '--listen',
        listen,
        '--role',
        'agent',
        '--worker-id',
        'w1',
        '--no-parent-watch',
      ],
      { cwd: REPO_ROOT, encoding: 'utf8', timeout: 30_000 },
    );

  it('refuses 0.0.0.0, a LAN address, :: and a host name with one named line, exit 2, before listening', () => {
    for (const host of ['0.0.0.0', '192.168.1.10', '::', 'example.com', '127.0.0.256']) {
      const r = worker(`${host}:0`);
      expect(r.status, host).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(
        `detsim: [perm_listen_not_local] --listen: ${JSON.stringify(host)} is not a loopback address; without TLS a worker listens only on unix:/abs/path or a loopback host (127.0.0.0/8, ::1, localhost); any other host needs TLS and a bearer token (--tls-dir)\n`,
      );
    }
  });

  it('`detsim worker --listen 0.0.0.0:0` is refused the same way', () => {
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        'coordinator/cli/main.ts',
        'worker',
        '--listen',
        '0.0.0.0:0',
        '--role',
        'agent',
        '--worker-id',
        'w1',
        '--no-parent-watch',
      ],
      { cwd: REPO_ROOT, encoding: 'utf8', timeout: 30_000 },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^detsim: \[perm_listen_not_local\] --listen: "0\.0\.0\.0" is not a loopback address; /);
  });

  it('accepts any 127.0.0.0/8 address and localhost', async () => {
    for (const listen of ['127.0.0.2:0', 'localhost:0']) {
      const w = await spawnWorker('agent', 'w-lo', [], true, listen);
      expect(resultOf<{ state: string }>(await w.client.call(METHODS.status, null, {})).state).toBe('uninitialized');
      await w.stop();
    }
  });
});

describe('model modules', () => {
  it('a module path the worker was not launched with is refused by name and never imported; a launched one loads', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-marker-'));
    const marker = join(dir, 'imported');
    process.env.DETSIM_TEST_MARKER = marker;
    try {
      const bare = await spawnWorker('agent', 'w-bare');
      const refused = errorOf(
        await bare.client.call(METHODS.agentInitialize, scope(0), { agents: [{ ...WALKER, model: MARKER_MODEL }] }),
      );
      expect(refused).toEqual({
        code: 'INVALID_ARGUMENT',
        message: `params.agents[0].model: model ${JSON.stringify(MARKER_MODEL)} was not launched with this worker (perm_model_not_launched): a worker loads only the built-in models (walker, lif) and the model modules given to it at launch (--model); it was not loaded`,
        mutation: 'none',
      });
      // A relative spelling of the same file is the same refusal: nothing was imported.
      expect(
        errorOf(
          await bare.client.call(METHODS.agentInitialize, scope(0), {
            agents: [{ ...WALKER, model: './test/workers/fixtures/marker-model.ts' }],
          }),
        ).message,
      ).toMatch(/perm_model_not_launched/);
      expect(existsSync(marker)).toBe(false);
      await bare.stop();
      const launched = await spawnWorker('agent', 'w-launched', ['--model', MARKER_MODEL]);
      resultOf(
        await launched.client.call(METHODS.agentInitialize, scope(0), { agents: [{ ...WALKER, model: MARKER_MODEL }] }),
      );
      expect(existsSync(marker)).toBe(true);
      await launched.stop();
    } finally {
      delete process.env.DETSIM_TEST_MARKER;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the launcher gives each worker the module paths of the models it hosts, and no others', () => {
    const plan = resolveConfig(
      {
        sessionId: 'launch',
        masterSeed: '1',
        steps: 1,
        environment: { id: 'forage', model: 'forage' },
        agents: [
          { id: 'w-0', model: 'walker' },
          { id: 'm-0', model: './fixtures/marker-model.ts' },
          { id: 'r-0', model: './fixtures/readme-model.ts' },
        ],
        workers: { agentsPerWorker: 1 },
      },
      { baseDir: join(REPO_ROOT, 'test/workers') },
    );
    expect(plan.workers.map((w) => launchedModelsFor(plan, w))).toEqual([
      [],
      [],
      [MARKER_MODEL],
      [join(REPO_ROOT, 'test/workers/fixtures/readme-model.ts')],
    ]);
  });

  it('refuses a --model that is not a file, naming the flag, exit 2', () => {
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        'workers/main.ts',
        '--listen',
        'unix:/tmp/dsx-never.sock',
        '--role',
        'agent',
        '--worker-id',
        'w1',
        '--model',
        '/nonexistent/model.ts',
      ],
      { cwd: REPO_ROOT, encoding: 'utf8', timeout: 30_000 },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(
      'detsim: [struct_unknown_model] --model "/nonexistent/model.ts": no such model module file (/nonexistent/model.ts)\n',
    );
  });

  it('refuses a unix socket in a directory that does not exist: one line naming --listen, exit 2, no stack trace', () => {
    const r = spawnSync(
      process.execPath,
      [CLI_MAIN, 'worker', '--listen', 'unix:/no/such/dir/s.sock', '--role', 'agent', '--worker-id', 'w1'],
      { cwd: REPO_ROOT, encoding: 'utf8', timeout: 30_000 },
    );
    expect([r.status, r.stdout, r.stderr]).toEqual([
      2,
      '',
      'detsim: [struct_invalid_field] --listen unix:/no/such/dir/s.sock: the directory /no/such/dir does not exist\n',
    ]);
  });
});
