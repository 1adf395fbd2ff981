// Worker.Hello against a real worker process: the expected worker is accepted; a different
// contract digest or worker id is IDENTITY_MISMATCH, an unsupported role or major UNSUPPORTED,
// each with a message naming the field (never this worker's id or bound session); nothing but
// Hello runs before Hello.
import { afterAll, describe, expect, it } from 'vitest';
import { CONTRACT_DIGEST, HelloRefusedError, METHODS } from '../../core/protocol/index.js';
import { SESSION, errorOf, resultOf, scope, spawnWorker, stopAll } from './harness.js';

afterAll(stopAll);

describe('Worker.Hello', () => {
  it('prints one ready line and accepts the expected identity', async () => {
    const w = await spawnWorker('agent', 'w-a', [], false);
    const ready = JSON.parse(w.readyLine) as { ready: boolean; listen: string; pid: number };
    expect(ready).toEqual({ ready: true, listen: w.listen, pid: w.proc.pid });
    expect(w.readyLine.startsWith('{"ready":true,')).toBe(true);
    const before = errorOf(await w.client.call(METHODS.agentPrepare, scope(0), { agents: [{ agentId: 'x' }] }));
    expect(before).toMatchObject({ code: 'INVALID_PHASE', mutation: 'none' });
    const hello = await w.client.hello({ sessionId: SESSION, workerId: 'w-a', role: 'agent' });
    expect(hello).toMatchObject({
      selectedMajor: 1,
      selectedMinor: 0,
      workerId: 'w-a',
      role: 'agent',
      contractDigest: CONTRACT_DIGEST,
    });
    // Without --store-dir: no payload files (read, written or prefetched), so no store-files-v1.
    expect(hello.capabilities).toEqual(['agent-step-v1', 'checkpoint-v1']);
    expect(hello.incarnationId).toMatch(/^inc-[0-9a-f]{16}$/);
    expect(hello.limits.maxMessageBytes).toBe(8 * 1024 * 1024);
    await w.stop();
  });

  it('refuses a different contract digest, worker id, role or major, naming the field', async () => {
    const w = await spawnWorker('environment', 'w-env', ['--session', SESSION], false);
    const refusal = (p: Promise<unknown>) =>
      p.then(
        () => {
          throw new Error('accepted');
        },
        (e: unknown) => e as HelloRefusedError,
      );
    const digest = await refusal(
      w.client.hello({ sessionId: SESSION, workerId: 'w-env', role: 'environment', contractDigest: 'a'.repeat(64) }),
    );
    expect(digest).toBeInstanceOf(HelloRefusedError);
    expect(digest.code).toBe('IDENTITY_MISMATCH');
    expect(digest.message).toMatch(/contractDigest/);
    expect(digest.field).toBe('contractDigest');
    const id = await refusal(w.client.hello({ sessionId: SESSION, workerId: 'w-other', role: 'environment' }));
    expect(id.code).toBe('IDENTITY_MISMATCH');
    expect(id.message).toMatch(/workerId/);
    const role = await refusal(w.client.hello({ sessionId: SESSION, workerId: 'w-env', role: 'agent' }));
    expect(role.code).toBe('UNSUPPORTED');
    expect(role.message).toMatch(/role/);
    expect(role.field).toBe('role');
    const session = await refusal(w.client.hello({ sessionId: 's-other', workerId: 'w-env', role: 'environment' }));
    expect(session.code).toBe('IDENTITY_MISMATCH');
    expect(session.message).toMatch(/sessionId/);
    const major = errorOf(
      await w.client.call(METHODS.hello, null, {
        sessionId: SESSION,
        expectedWorkerId: 'w-env',
        role: 'environment',
        supportedMajors: [2],
        contractDigest: CONTRACT_DIGEST,
      }),
    );
    expect(major).toMatchObject({ code: 'UNSUPPORTED', mutation: 'none' });
    expect(major.message).toMatch(/supportedMajors/);
    const cap = await refusal(
      w.client.hello({
        sessionId: SESSION,
        workerId: 'w-env',
        role: 'environment',
        requiredCapabilities: ['world-step-v1', 'pixel-observation-v1'],
      }),
    );
    expect(cap.code).toBe('UNSUPPORTED');
    expect(cap.message).toMatch(/pixel-observation-v1/);
    const ok = await w.client.hello({ sessionId: SESSION, workerId: 'w-env', role: 'environment' });
    expect(ok.capabilities).toEqual(['checkpoint-v1', 'world-step-v1']);
    await w.stop();
  });

  it('listens on TCP host:0 and announces the bound port', async () => {
    const w = await spawnWorker('agent', 'w-tcp', [], true, '127.0.0.1:0');
    expect(w.listen).toMatch(/^127\.0\.0\.1:[1-9][0-9]*$/);
    expect(resultOf<{ state: string }>(await w.client.call(METHODS.status, null, {})).state).toBe('uninitialized');
    await w.stop();
  });

  it('a stale socket file left by a SIGKILLed worker does not stop the next one binding there', async () => {
    const { existsSync, mkdtempSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const path = join(mkdtempSync(join(tmpdir(), 'dss-')), 'w.sock');
    const first = await spawnWorker('agent', 'w-stale1', [], true, `unix:${path}`);
    first.proc.kill('SIGKILL');
    await first.exited;
    expect(existsSync(path)).toBe(true); // nobody cleaned up
    const second = await spawnWorker('agent', 'w-stale2', [], true, `unix:${path}`);
    expect(resultOf<{ state: string }>(await second.client.call(METHODS.status, null, {})).state).toBe('uninitialized');
    await first.stop();
    await second.stop();
  });

  it('serves nothing before Hello: Status, Shutdown and Acknowledge are INVALID_PHASE; after Hello, Shutdown replies then the process exits 0', async () => {
    const w = await spawnWorker('agent', 'w-stop', [], false);
    for (const [method, params] of [
      [METHODS.status, {}],
      [METHODS.shutdown, { reason: 'done' }],
      [METHODS.acknowledge, { requestIds: ['req-1'] }],
    ] as const) {
      expect(errorOf(await w.client.callUnchecked(method, null, params))).toEqual({
        code: 'INVALID_PHASE',
        message: `${method} before Worker.Hello`,
        mutation: 'none',
      });
    }
    expect(w.proc.exitCode).toBeNull();
    await w.client.hello({ sessionId: SESSION, workerId: 'w-stop', role: 'agent' });
    const st = resultOf<{ state: string; progressCounter: string; currentScope: unknown }>(
      await w.client.call(METHODS.status, null, {}),
    );
    expect(st).toMatchObject({ state: 'uninitialized', progressCounter: '0', currentScope: null });
    expect(resultOf(await w.client.call(METHODS.shutdown, null, { reason: 'done' }))).toEqual({ stopping: true });
    expect(await w.exited).toEqual({ code: 0, signal: null });
  });

  it('refuses bad flags with one line and exit 2, before listening', async () => {
    const { spawnSync } = await import('node:child_process');
    const { REPO_ROOT } = await import('./harness.js');
    const r = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'workers/main.ts', '--listen', 'unix:relative.sock', '--role', 'agent', '--worker-id', 'w1'],
      { cwd: REPO_ROOT, encoding: 'utf8' },
    );
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/--listen.*absolute/);
    expect(r.stdout).toBe('');
    const long = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        'workers/main.ts',
        '--listen',
        `unix:/tmp/${'x'.repeat(120)}.sock`,
        '--role',
        'agent',
        '--worker-id',
        'w1',
      ],
      { cwd: REPO_ROOT, encoding: 'utf8' },
    );
    expect(long.status).toBe(2);
    expect(long.stderr).toMatch(/under 100/);
  });
});
