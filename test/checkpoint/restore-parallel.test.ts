// Restore stages and activates participants side by side over real worker processes: the calls
// overlap, and when two participants refuse, the refusal reported is the first in reference order
// (environment, then agents by id) even when the replies are forced to complete in the reverse
// order; a stage refusal taints every stager and nothing activates, an activation refusal fences
// the whole group (all-or-nothing unchanged).
import { afterEach, describe, expect, it } from 'vitest';
import { captureGroup } from '../../coordinator/checkpoint/capture.js';
import { restoreGroup, type RestoreHooks } from '../../coordinator/checkpoint/restore.js';
import { METHODS } from '../../core/protocol/index.js';
import { CheckpointRefusal } from '../../coordinator/checkpoint/refusal.js';
import { LIF, startSession, type Session } from './harness.js';

const open: Session[] = [];

/**
 * Hold lif-a's reply to `method` until lif-b's has arrived (at most 5 s: called one after the
 * other, lif-b would never be asked while lif-a waits); records who was asked and who completed.
 */
function reverseReplies(s: Session, method: string): { sent: string[]; completed: string[] } {
  const [a, b] = [s.fleet.agents[0]!, s.fleet.agents[1]!];
  expect([a.plan.agentIds, b.plan.agentIds]).toEqual([['lif-a'], ['lif-b']]);
  const completed: string[] = [];
  const sent: string[] = [];
  let bDone!: () => void;
  const bReplied = new Promise<void>((r) => (bDone = r));
  for (const w of s.fleet.all()) {
    const orig = w.client.call.bind(w.client);
    w.client.call = async (m, scope, params, o) => {
      sent.push(`${w.plan.workerId}:${m}`);
      const rep = await orig(m, scope, params, o);
      if (m !== method) return rep;
      if (w === a) await Promise.race([bReplied, new Promise((r) => setTimeout(r, 5000))]);
      completed.push(w.plan.workerId);
      if (w === b) bDone();
      return rep;
    };
  }
  return { sent, completed };
}
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

/**
 * A two-lif session stepped once and checkpointed, then restored with `hooks` while the replies
 * to `method` come back in reverse order: what was sent and completed, and what restore threw.
 */
async function restoreWithReversedReplies(method: string, hooks: RestoreHooks) {
  const s = await startSession(LIF(16));
  open.push(s);
  await s.group.step();
  const rec = await captureGroup(s.group, { checkpointId: 'ckpt-e1-1' });
  expect((await rec.ticket.wait(30_000)).kind).toBe('Committed');
  const [a, b] = [s.fleet.agents[0]!, s.fleet.agents[1]!];
  const { sent, completed } = reverseReplies(s, method);
  const e = await restoreGroup(s.group, { store: s.ck.store }, { epoch: 'e2', hooks }).then(
    () => null,
    (err: unknown) => err,
  );
  return { s, a, b, sent, completed, e };
}

describe('restore stages side by side', () => {
  it('[STORE-18] two refusing stagers answering in reverse order: the first in reference order is reported, the rest tainted, nobody activates', async () => {
    const bad = 'f'.repeat(64);
    const { s, a, b, sent, completed, e } = await restoreWithReversedReplies(METHODS.stageRestore, {
      beforeStage: (who, p) => (who === 'environment' ? p : { ...p, compatibilityDigest: bad }),
    });
    expect(e).toBeInstanceOf(CheckpointRefusal);
    if (!(e instanceof CheckpointRefusal)) return;
    // Every participant was asked; lif-b's refusal came back before lif-a's.
    expect([...completed].sort()).toEqual(
      s.fleet
        .all()
        .map((w) => w.plan.workerId)
        .sort(),
    );
    expect(completed.indexOf(b.plan.workerId)).toBeLessThan(completed.indexOf(a.plan.workerId));
    expect(e.participant).toBe('agent lif-a');
    expect(e.message).toMatch(/stage failed; nothing activates; tainted: environment\)$/);
    expect([...s.group.tainted]).toEqual(['environment']);
    expect(sent.filter((m) => m.endsWith(METHODS.activateRestore))).toEqual([]);
    await expect(s.group.step()).rejects.toMatchObject({ status: 'INVALID_PHASE' });
  }, 120_000);

  it('[STORE-19] two agents refusing activation, answering in reverse order: lif-a is reported, the group is fenced', async () => {
    const forged = 'rt-00000000000000000000000000000000';
    const { s, a, b, sent, completed, e } = await restoreWithReversedReplies(METHODS.activateRestore, {
      beforeActivate: (who, p) => (who === 'environment' ? p : { ...p, restoreToken: forged }),
    });
    expect(e).toBeInstanceOf(CheckpointRefusal);
    if (!(e instanceof CheckpointRefusal)) return;
    // The environment activated first and alone; both agents were asked, lif-b answered first.
    expect(sent.filter((m) => m.endsWith(METHODS.activateRestore))[0]).toBe(
      `${s.fleet.environment.plan.workerId}:${METHODS.activateRestore}`,
    );
    expect(completed.indexOf(b.plan.workerId)).toBeGreaterThanOrEqual(0);
    expect(completed.indexOf(b.plan.workerId)).toBeLessThan(completed.indexOf(a.plan.workerId));
    expect(e.participant).toBe('agent lif-a');
    expect(e.status).toBe('IDENTITY_MISMATCH');
    expect(e.message).toMatch(/activation of agent lif-a failed; the group is fenced/);
    expect(s.group.phase).toBe('fenced');
    expect([...s.group.tainted].sort()).toEqual(['agent lif-a', 'agent lif-b', 'environment']);
    await expect(s.group.step()).rejects.toMatchObject({ status: 'INVALID_PHASE' });
  }, 120_000);
});
