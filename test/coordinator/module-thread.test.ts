// The request/reply bookkeeping of coordinator/module-thread.ts over a real worker thread: concurrent
// requests each get their own answer, a DetsimError thrown on the thread arrives with its reason and
// field, warm() starts the thread ahead of its first request, and a thread that exits fails its open requests naming the thread, after which the next
// request starts a new one. The seal threads (store, trace) use it; their own tests cover their work.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { DetsimError } from '../../core/formats/errors.js';
import { ModuleThreadRpc } from '../../coordinator/module-thread.js';
import { rpc, type Ask } from './fixtures/rpc-thread.js';

const rpcModuleUrl = new URL('./fixtures/rpc-thread.ts', import.meta.url).href;

describe('ModuleThreadRpc', () => {
  it('answers concurrent requests each with its own reply, and carries a refusal across as the same DetsimError', async () => {
    const asks = ['a', 'b', 'c', 'd'].map((echo) => rpc.call({ echo }));
    expect(await Promise.all(asks)).toEqual(['echo a', 'echo b', 'echo c', 'echo d']);
    const e = await rpc.call({ refuse: '--field' }).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(DetsimError);
    expect([(e as DetsimError).reason, (e as DetsimError).message, (e as DetsimError).field]).toEqual([
      'struct_invalid_field',
      'refused --field',
      '--field',
    ]);
  });

  it('warm() starts the thread before its first request, once; that thread answers it', async () => {
    const fresh = new ModuleThreadRpc<Ask, string>(rpcModuleUrl, { detsimTestRpcThread: 1 }, 'warm test rpc');
    expect(fresh.threadId).toBeUndefined();
    fresh.warm();
    const started = fresh.threadId;
    expect(started).toBeGreaterThan(0);
    fresh.warm();
    expect(fresh.threadId).toBe(started);
    expect(await fresh.call({ threadId: true })).toBe(String(started));
    await expect(fresh.call({ exit: 0 })).rejects.toThrow('the warm test rpc thread exited (code 0)');
  });

  it('a warmed thread that nothing asks keeps no process alive', () => {
    // A script that warms the thread and ends: the process must exit by itself (it used to hang).
    const script = `const m = await import(${JSON.stringify(rpcModuleUrl)}); m.rpc.warm(); if (m.rpc.threadId === undefined) process.exit(3);`;
    const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.error, 'the process did not exit by itself').toBeUndefined();
    expect([r.status, r.stderr]).toEqual([0, '']);
  });

  it('a thread that exits fails its open requests naming it; the next request starts a new thread', async () => {
    await expect(rpc.call({ exit: 3 })).rejects.toThrow('the test rpc thread exited (code 3)');
    expect(await rpc.call({ echo: 'again' })).toBe('echo again');
  });
});
