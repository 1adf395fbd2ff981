// Files a restore must refuse with the check named and nothing staged: a FLYSIM01 legacy file, a
// truncated file, a checkpoint of another composition, and one of another master seed (all real
// captures, from inline workers (workers.transport: inline): the refusals are the coordinator's,
// before any participant is staged). Also the store path: an unlisted id is never a candidate.
import { describe, expect, it } from 'vitest';
import { captureGroup } from '../../coordinator/checkpoint/capture.js';
import { CheckpointRefusal } from '../../coordinator/checkpoint/refusal.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import { encodeLegacyFlysim } from '../../core/formats/legacy-flysim.js';
import { planOf, startSession, type Session } from './harness.js';

const lif = (neurons: number, masterSeed = '7') =>
  planOf('examples/lif-pair.yaml', (c) => {
    c.masterSeed = masterSeed;
    for (const a of c.agents) a.params = { neurons };
  });

async function captured(s: Session, id: string): Promise<Buffer> {
  await s.group.step();
  const rec = await captureGroup(s.group, { checkpointId: id });
  expect((await rec.ticket.wait(30_000)).kind).toBe('Committed');
  return (await s.ck.store.load(id)).bytes;
}

function stateCalls(s: Session): string[] {
  const sent: string[] = [];
  for (const w of s.fleet.all()) {
    const orig = w.client.call.bind(w.client);
    w.client.call = (method, scope, params, o) => {
      if (method.startsWith('State.')) sent.push(method);
      return orig(method, scope, params, o);
    };
  }
  return sent;
}

async function refused(s: Session, source: Parameters<typeof restoreGroup>[1]): Promise<CheckpointRefusal> {
  const e = await restoreGroup(s.group, source, { epoch: 'e2' }).then(
    () => null,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(CheckpointRefusal);
  return e as CheckpointRefusal;
}

describe('restore refuses foreign and damaged files before staging anyone', () => {
  it('[STORE-16, STORE-17] FLYSIM01, truncated, another composition, another seed, unlisted id', async () => {
    const live = await startSession(lif(16), { inline: true });
    const other = await startSession(lif(24), { inline: true });
    const seeded = await startSession(lif(16, '8'), { inline: true });
    try {
      const own = await captured(live, 'ckpt-e1-1');
      const foreignComposition = await captured(other, 'ckpt-e1-1');
      const foreignSeed = await captured(seeded, 'ckpt-e1-1');
      const sent = stateCalls(live);

      const legacy = await refused(live, {
        bytes: encodeLegacyFlysim({ note: 'old' }, [{ name: 'world', bytes: Buffer.from('x') }]),
        label: 'old.checkpoint',
      });
      expect(legacy.reason).toBe('struct_envelope_legacy_format');
      expect(legacy.message).toMatch(/check 1/);
      expect(legacy.message).toMatch(/FLYSIM01/);

      const truncated = await refused(live, { bytes: own.subarray(0, own.length - 100), label: 'cut.flysess' });
      expect(truncated.message).toMatch(/check 2/);

      const comp = await refused(live, { bytes: foreignComposition });
      expect(comp.reason).toBe('ident_compatibility_mismatch');
      expect(comp.message).toMatch(/compatibility content differs/);

      const seed = await refused(live, { bytes: foreignSeed });
      expect(seed.reason).toBe('ident_seed_mismatch');
      expect(seed.message).toMatch(/environment seed/);

      const unknown = await refused(live, { store: live.ck.store, checkpointId: 'ckpt-e1-9' });
      expect(unknown.reason).toBe('ident_checkpoint_unknown');

      expect(sent).toEqual([]);
      expect(live.group.tainted.size).toBe(0);
      expect(live.group.phase).toBe('ready');
      // The live group is untouched: it keeps stepping in e1.
      expect((await live.group.step()).behaviour.scope).toMatchObject({ epoch: 'e1', step: '1' });
    } finally {
      await Promise.all([live.close(), other.close(), seeded.close()]);
    }
  }, 240_000);
});
