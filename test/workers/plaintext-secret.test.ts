// A plaintext TCP worker and the local stranger (#28 item 14): a loopback port is open to every
// local user, so a plaintext TCP worker requires a per-run secret as the bearer token of every
// stream. Shown for the TypeScript, Python and Rust workers with a real stranger client: no token,
// or a wrong one, gets UNAUTHENTICATED and never a reply body, cannot Shutdown the worker, and the
// secret never appears on stderr; a hand-started TCP worker without --session and --token-file
// refuses to start, worded alike; and the launcher gives the workers of a `transport: tcp` run their
// secret in a 0600 file of a 0700 directory (never in argv or the environment), removed with the run.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { launchFleet } from '../../coordinator/launch/launcher.js';
import { logger, planOf } from '../checkpoint/harness.js';
import { pythonCommand, pythonWorkerSkip } from '../cross-lang/python-worker.js';
import { RUST_WORKER, ensureRustWorker, rustWorkerSkip } from '../cross-lang/rust-worker.js';
import { REPO_ROOT, type SpawnedWorker, launchWorker, stopAll } from './harness.js';
import { stranger } from './stranger.js';

afterAll(stopAll);

/** A stranger without TLS (stranger.ts): `token` if any, one request body. */
const plainStranger = (address: string, token?: string, method?: string) =>
  stranger(address, grpc.credentials.createInsecure(), token, method);

const runtimes: [string, () => { command: string; args: string[] }, boolean][] = [
  ['typescript', () => ({ command: process.execPath, args: [`${REPO_ROOT}/dist/workers/main.js`] }), false],
  ['python', pythonCommand, pythonWorkerSkip !== null],
  [
    'rust',
    () => {
      ensureRustWorker();
      return { command: RUST_WORKER, args: [] };
    },
    rustWorkerSkip !== null,
  ],
];

const UNBOUND =
  'detsim: [perm_plaintext_tcp_unbound] --listen: a plaintext TCP worker needs --session and --token-file (a per-run secret every stream must present; any local user can reach a loopback port); or listen on unix:/abs/path, or serve TLS (--tls-dir)\n';

describe.each(runtimes)('a plaintext TCP worker (%s) and a local stranger', (_runtime, command, skip) => {
  let w: SpawnedWorker;

  it.skipIf(skip)('serves its coordinator, which presents the secret', async () => {
    const { command: cmd, args } = command();
    // launchWorker gives a TCP worker --session s1 and --token-file (a fresh secret), as a user must.
    w = await launchWorker(cmd, args, { role: 'agent', workerId: 'w1', listenAt: '127.0.0.1:0' });
    expect(w.token).toMatch(/^[0-9a-f]{64}$/);
    expect((await w.client.hello({ sessionId: 's1', workerId: 'w1', role: 'agent' })).workerId).toBe('w1');
  });

  it.skipIf(skip)(
    'refuses a stream without the secret, or with a wrong one: UNAUTHENTICATED, no body, no Shutdown',
    async () => {
      expect(await plainStranger(w.listen)).toEqual({
        code: grpc.status.UNAUTHENTICATED,
        details:
          '[ident_token_missing] authorization: the call carries no bearer token; this worker serves only its run',
        frames: 0,
      });
      expect(await plainStranger(w.listen, 'f'.repeat(64), 'Worker.Shutdown')).toEqual({
        code: grpc.status.UNAUTHENTICATED,
        details: "[ident_token_wrong] authorization: the bearer token is not this worker's run token",
        frames: 0,
      });
      // Still serving its coordinator: the Shutdown never reached it.
      expect(w.proc.exitCode).toBeNull();
      expect(await w.client.call('Worker.Status', null, {})).toMatchObject({ reply: { type: 'result' } });
      expect(w.stderr()).not.toContain(w.token!);
      await w.stop();
    },
  );

  it.skipIf(skip)('refuses to start on TCP without --session and --token-file, worded alike', () => {
    const { command: cmd, args } = command();
    const base = [...args, '--listen', '127.0.0.1:0', '--role', 'agent', '--worker-id', 'w1', '--no-parent-watch'];
    for (const extra of [[], ['--session', 's1']]) {
      const r = spawnSync(cmd, [...base, ...extra], { encoding: 'utf8', cwd: REPO_ROOT, timeout: 30_000 });
      expect([r.status, r.stdout, r.stderr]).toEqual([2, '', UNBOUND]);
    }
  });
});

describe('the launcher and a transport: tcp run', () => {
  it('gives every worker the run secret in a 0600 file of a 0700 directory, never in argv or the environment', async () => {
    const plan = planOf('examples/lif-pair.yaml', (cfg) => (cfg.workers = { ...cfg.workers, transport: 'tcp' }));
    const fleet = await launchFleet(plan, { logger });
    let dir = '';
    try {
      for (const w of fleet.all()) {
        const pid = w.instance.pid!;
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        const file = argv[argv.indexOf('--token-file') + 1]!;
        dir = dirname(file);
        expect(statSync(file).mode & 0o777).toBe(0o600);
        expect(statSync(dir).mode & 0o777).toBe(0o700);
        const token = readFileSync(file, 'utf8').trim();
        expect(token).toMatch(/^[0-9a-f]{64}$/);
        expect(argv.join(' ')).not.toContain(token);
        expect(readFileSync(`/proc/${pid}/environ`, 'utf8')).not.toContain(token);
        // A stranger on its port without the secret gets nothing.
        expect((await plainStranger(w.address)).code).toBe(grpc.status.UNAUTHENTICATED);
      }
      // The coordinator's own streams carry it: the fleet said Hello and steps.
      expect(fleet.all().every((w) => w.hello.workerId === w.plan.workerId)).toBe(true);
    } finally {
      await fleet.shutdown();
    }
    expect(existsSync(dir)).toBe(false);
  }, 60_000);
});
