// The request/reply bookkeeping of coordinator/module-thread.ts over a real worker thread: concurrent
// requests each get their own answer, a DetsimError thrown on the thread arrives with its reason and
// field, and a thread that exits fails its open requests naming the thread, after which the next
// request starts a new one. The seal threads (store, trace) use it; their own tests cover their work.
import { describe, expect, it } from 'vitest';
import { DetsimError } from '../../core/formats/errors.js';
import { rpc } from './fixtures/rpc-thread.js';

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

  it('a thread that exits fails its open requests naming it; the next request starts a new thread', async () => {
    await expect(rpc.call({ exit: 3 })).rejects.toThrow('the test rpc thread exited (code 3)');
    expect(await rpc.call({ echo: 'again' })).toBe('echo again');
  });
});
