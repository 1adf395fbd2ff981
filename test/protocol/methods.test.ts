// The method table (core/protocol/methods.ts, issue 12 item 4): a call's params are checked and its
// result inferred by method, and a worker handler must return its method's result body. The type
// checks are `@ts-expect-error` lines (`npm run typecheck` fails if one stops being an error); the
// calls go to a real worker process over gRPC and show the typed result is what comes back.
import { afterAll, describe, expect, expectTypeOf, it } from 'vitest';
import {
  ALL_METHODS,
  METHODS,
  type AgentPrepareParams,
  type ParamsOf,
  type ResultOf,
  type StatusResult,
  type WorkerState,
} from '../../core/protocol/index.js';
import type { Handlers } from '../../workers/runtime.js';
import { resultOf, scope, spawnWorker, stopAll } from '../workers/harness.js';

afterAll(stopAll);

describe('the method table', () => {
  it('types a call by its method: params checked, result inferred', async () => {
    const w = await spawnWorker('agent', 'w-typed');
    const status = resultOf(await w.client.call(METHODS.status, null, {}));
    expectTypeOf(status).toMatchTypeOf<StatusResult>();
    expectTypeOf(status.state).toEqualTypeOf<WorkerState>();
    expect(status.state).toBe('uninitialized');
    const ack = resultOf(await w.client.call(METHODS.acknowledge, null, { requestIds: ['req-1'] }));
    expectTypeOf(ack.acknowledged).toEqualTypeOf<number>();
    expect(ack.acknowledged).toBe(0);
    const wrongParams = () => [
      // @ts-expect-error Agent.Prepare takes { agents: { agentId }[] }
      w.client.call(METHODS.agentPrepare, scope(0), { agentIds: ['a'] }),
      // @ts-expect-error not a protocol method: only callUnchecked sends one
      w.client.call('Worker.Nope', null, {}),
    ];
    expect(wrongParams).toBeTypeOf('function');
    await w.stop();
  });

  it('ties each method of METHODS to its bodies', () => {
    expectTypeOf<ParamsOf<typeof METHODS.agentPrepare>>().toEqualTypeOf<AgentPrepareParams>();
    expectTypeOf<ResultOf<typeof METHODS.status>>().toEqualTypeOf<StatusResult>();
    expect(ALL_METHODS).toHaveLength(14);
  });

  it("refuses a worker handler whose result is not its method's", () => {
    const handlers: Pick<Handlers, typeof METHODS.status | typeof METHODS.acknowledge> = {
      [METHODS.acknowledge]: () => ({ result: { acknowledged: 1 } }),
      // @ts-expect-error a Worker.Status handler must return a StatusResult
      [METHODS.status]: () => ({ result: { acknowledged: 1 } }),
    };
    expect(Object.keys(handlers).sort()).toEqual([METHODS.acknowledge, METHODS.status]);
  });
});
