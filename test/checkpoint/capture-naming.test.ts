// Which participant a failed capture names, and how, must not depend on completion order
// (coordinator/checkpoint/group.ts call, capture.ts), over real worker processes:
// - a worker killed during its State.Capture whose broken stream is seen BEFORE its exit (forced:
//   the call fails at once, the kill is still in flight) is named by its death, exactly as when
//   the exit is seen first — not by whichever of the two events happened to arrive first;
// - when two participants refuse, the one named is the first in reference order (environment, then
//   agents by id) even when the later one's refusal is forced to arrive first.
import { afterEach, describe, expect, it } from 'vitest';
import { captureGroup } from '../../coordinator/checkpoint/capture.js';
import { CheckpointRefusal } from '../../coordinator/checkpoint/refusal.js';
import { METHODS, WorkerCallError } from '../../core/protocol/index.js';
import { rejectionOf } from '../refusal.js';
import { LIF, startSession, type Session } from './harness.js';

const T = 120_000;
const open: Session[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

async function steppedSession(): Promise<Session> {
  const s = await startSession(LIF(16));
  open.push(s);
  await s.group.step();
  return s;
}

describe('capture failure naming', () => {
  it(
    "a worker's stream breaks before its exit is seen: the capture still names its death",
    async () => {
      const s = await steppedSession();
      const victim = s.fleet.agents[1]!;
      expect(victim.instance.kind).toBe('process');
      victim.client.call = async (method) => {
        if (method !== METHODS.capture) throw new Error(`unexpected ${method}`);
        // SIGKILL goes out; the stream failure is reported before the exit can be observed.
        victim.instance.kill();
        throw new WorkerCallError('stream-ended', 'the session stream ended', 'test', method, undefined);
      };
      const e = await rejectionOf(captureGroup(s.group, { checkpointId: 'ckpt-e1-1' }), CheckpointRefusal);
      expect(e.participant).toBe('agent lif-b');
      expect(e.message).toMatch(
        /^agent lif-b \(worker-1\): State\.Capture failed: process \d+ exited \(signal SIGKILL\)$/,
      );
    },
    T,
  );

  it(
    "two participants refuse, lif-b's refusal forced to arrive first: lif-a (first in reference order) is named",
    async () => {
      const s = await steppedSession();
      const [a, b] = [s.fleet.agents[0]!, s.fleet.agents[1]!];
      expect([a.plan.agentIds, b.plan.agentIds]).toEqual([['lif-a'], ['lif-b']]);
      let bDone!: () => void;
      const bRefused = new Promise<void>((r) => (bDone = r));
      for (const w of [a, b]) {
        const orig = w.client.call.bind(w.client);
        w.client.call = async (method, scope, params, o) => {
          const rep = await orig(method, scope, params, o);
          if (method !== METHODS.capture) return rep;
          // lif-a's refusal waits for lif-b's (at most 2 s: captured one after the other, lif-b is
          // not asked while lif-a is waiting).
          if (w === a) await Promise.race([bRefused, new Promise((r) => setTimeout(r, 2000))]);
          if (w === b) bDone();
          const error = { code: 'FAILED', message: 'forced', mutation: 'none' };
          return { ...rep, reply: { ...rep.reply, type: 'error', error } } as unknown as typeof rep;
        };
      }
      const e = await rejectionOf(captureGroup(s.group, { checkpointId: 'ckpt-e1-1' }), CheckpointRefusal);
      expect(e.participant).toBe('agent lif-a');
      expect(e.message).toBe('agent lif-a (worker-0) refused State.Capture: FAILED: forced');
    },
    T,
  );
});
