// The store id end to end (docs/spec/capture-file.md, "Which workers are co-located"): the launcher
// keeps a token in `<store>/store-id` and passes it beside --store-dir. Workers that see another
// directory at the store's path (another node; here a wrapper swaps the path) do not offer
// store-files-v1, so their payloads stream and the checkpoint commits with the very bytes of a
// co-located one, and restores. Without the token (as before it existed) the same workers took the
// directory for the store, and every capture failed on a temp file they could not see.
import { mkdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { captureGroup } from '../../coordinator/checkpoint/capture.js';
import { storeDirOf } from '../../coordinator/checkpoint/checkpointing.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import { CAPABILITIES, STORE_ID_FILE, STORE_ID_PATTERN } from '../../core/protocol/index.js';
import type { WorkerCommand } from '../../coordinator/launch/launcher.js';
import { LIF, startSession, tmpDir, type Session } from './harness.js';

const WRAPPER = fileURLToPath(new URL('./fixtures/store-elsewhere.sh', import.meta.url));

const open: Session[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

/** A session whose worker processes see `elsewhere` at the store's path (keeping or dropping --store-id). */
async function sessionElsewhere(mode: 'keep' | 'drop-id'): Promise<Session> {
  const elsewhere = join(tmpDir('detsim-other-node-'), 'store');
  mkdirSync(elsewhere);
  const wrapCommand = (cmd: WorkerCommand): WorkerCommand => ({
    command: 'bash',
    args: [WRAPPER, elsewhere, mode, cmd.command, ...cmd.args],
  });
  // Every worker a process (the environment too: by default forage would run in this process, which sees the store).
  // 8,192 neurons: the agents' payloads pass 64 KiB, so co-located workers hold them (capture-hold-from-v1).
  const s = await startSession({ ...LIF(8192), environmentTransport: 'workers' }, { wrapCommand });
  open.push(s);
  return s;
}

async function commit(s: Session, id: string): Promise<{ kind: string; message?: string }> {
  await s.group.step();
  const rec = await captureGroup(s.group, { checkpointId: id }).catch((e: Error) => ({ refused: e }));
  if ('refused' in rec) return { kind: 'Refused', message: rec.refused.message };
  return (await rec.ticket.wait(60_000)) as { kind: string; message?: string };
}

describe('the store id', () => {
  it('workers that see another directory at the store path stream their payloads: the same committed bytes, and the group restores', async () => {
    const here = await startSession(LIF(8192));
    open.push(here);
    const token = readFileSync(join(storeDirOf(here.runDir), STORE_ID_FILE), 'latin1');
    expect(token).toMatch(STORE_ID_PATTERN);
    for (const w of here.fleet.all()) expect(w.hello.capabilities).toContain(CAPABILITIES.storeFiles);
    expect(await commit(here, 'ckpt-e1-1')).toMatchObject({ kind: 'Committed' });

    const away = await sessionElsewhere('keep');
    for (const w of away.fleet.all()) expect(w.hello.capabilities).not.toContain(CAPABILITIES.storeFiles);
    expect(await commit(away, 'ckpt-e1-1')).toMatchObject({ kind: 'Committed' });
    const file = (s: Session): Buffer => readFileSync(join(storeDirOf(s.runDir), 'ckpt-e1-1.flysess'));
    expect(file(away).equals(file(here))).toBe(true);
    // The restore sends each payload as an attachment, and the group steps on as the co-located one does.
    await restoreGroup(away.group, { store: away.ck.store }, { epoch: 'e2' });
    await restoreGroup(here.group, { store: here.ck.store }, { epoch: 'e2' });
    away.group.resume();
    here.group.resume();
    expect(await commit(away, 'ckpt-e2-2')).toMatchObject({ kind: 'Committed' });
    expect(await commit(here, 'ckpt-e2-2')).toMatchObject({ kind: 'Committed' });
    const second = (s: Session): Buffer => readFileSync(join(storeDirOf(s.runDir), 'ckpt-e2-2.flysess'));
    expect(second(away).equals(second(here))).toBe(true);
  }, 180_000);

  it('without the store id (the launch before it), the same workers took that directory for the store and the capture failed', async () => {
    const away = await sessionElsewhere('drop-id');
    for (const w of away.fleet.all()) expect(w.hello.capabilities).toContain(CAPABILITIES.storeFiles);
    const outcome = await commit(away, 'ckpt-e1-1');
    expect(outcome.kind).not.toBe('Committed');
    expect(outcome.message).toContain('State.WritePayload');
    expect(away.ck.store.highWater()).toBeNull();
  }, 180_000);
});
