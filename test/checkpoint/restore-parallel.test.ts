// Restore stages participants side by side over real worker processes: the stages overlap, and
// when two participants refuse, the refusal reported is the first in reference order (environment,
// then agents by id) even when the replies are forced to complete in the reverse order; every
// stager is tainted and nothing activates (all-or-nothing unchanged).
import { afterEach, describe, expect, it } from 'vitest';
import { captureGroup } from '../../coordinator/checkpoint/capture.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import { METHODS } from '../../core/protocol/index.js';
import { CheckpointRefusal } from '../../coordinator/checkpoint/refusal.js';
import { LIF, startSession, type Session } from './harness.js';

const open: Session[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

describe('restore stages side by side', () => {
  it('two refusing stagers answering in reverse order: the first in reference order is reported, the rest tainted, nobody activates', async () => {
    const s = await startSession(LIF(16));
    open.push(s);
    await s.group.step();
    const rec = await captureGroup(s.group, { checkpointId: 'ckpt-e1-1' });
    expect((await rec.ticket.wait(30_000)).kind).toBe('Committed');
    // lif-a's StageRestore reply is held back until lif-b's has arrived (at most 5 s: staged one
    // after the other, lif-b would never be asked while lif-a waits).
    const [a, b] = [s.fleet.agents[0]!, s.fleet.agents[1]!];
    expect([a.plan.agentIds, b.plan.agentIds]).toEqual([['lif-a'], ['lif-b']]);
    const completed: string[] = [];
    const sent: string[] = [];
    let bDone!: () => void;
    const bReplied = new Promise<void>((r) => (bDone = r));
    for (const w of s.fleet.all()) {
      const orig = w.client.call.bind(w.client);
      w.client.call = async (method, scope, params, o) => {
        sent.push(`${w.plan.workerId}:${method}`);
        const rep = await orig(method, scope, params, o);
        if (method !== METHODS.stageRestore) return rep;
        if (w === a) await Promise.race([bReplied, new Promise((r) => setTimeout(r, 5000))]);
        completed.push(w.plan.workerId);
        if (w === b) bDone();
        return rep;
      };
    }
    const bad = 'f'.repeat(64);
    const e = await restoreGroup(
      s.group,
      { store: s.ck.store },
      {
        epoch: 'e2',
        hooks: { beforeStage: (who, p) => (who === 'environment' ? p : { ...p, compatibilityDigest: bad }) },
      },
    ).then(
      () => null,
      (err: unknown) => err,
    );
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
});
