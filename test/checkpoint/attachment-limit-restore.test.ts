// The 2 GiB − 1 attachment limit on restore at its real default (#29 item 6), nothing lowered: a
// store generation whose table declares an agent payload of 2 GiB (one byte over) for a worker that
// is sent its payload as an attachment is refused by the coordinator from the envelope's layout
// alone (UNSUPPORTED, size_message_too_large, one line naming the agent), before the verify pass
// reads a byte of any payload (the bytes this process read, /proc/self/io rchar, stay under 1 MiB;
// the measure's control: reading 64 MiB of the file's hole moves it by as much), before any
// StageRestore goes out; the group steps on and then restores its real checkpoint. The generation
// is a real checkpoint of real streamed workers (no store dir, so every payload would travel as an
// attachment, chunked in 1 MiB frames: the limit is the reassembled attachment's, not a gRPC
// message's) laid out again by the product's layoutEnvelopeHead with that one payload declared by
// size: a sparse file of a few KiB on disk, committed through the store's commit of a written
// envelope. Its big payload's digest and the footer's prefix digest are not computed (that takes
// passes over 2 GiB): a restore that read the file first would refuse it on the footer digest after
// reading 2 GiB, which is what happened before the layout check. The control: exactly the limit
// passes the layout check and the next check judges the file. Not the workers' frame assembler (the
// same constant: test/cross-lang/attachment-limit.test.ts), not a capture (too-large-to-stream.test.ts,
// with the limit lowered), not a resume (it verifies the checkpoint before any worker starts).
import {
  appendFileSync,
  closeSync,
  ftruncateSync,
  openSync,
  readFileSync,
  readSync,
  statSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { captureGroup } from '../../coordinator/checkpoint/capture.js';
import { storeDirOf } from '../../coordinator/checkpoint/checkpointing.js';
import { CheckpointRefusal } from '../../coordinator/checkpoint/refusal.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import { generationIdentityOf, generationTemp } from '../../coordinator/store/store.js';
import { envelopeFooter, layoutEnvelopeHead, type LayoutPayloadInput } from '../../core/formats/envelope.js';
import { DEFAULT_MAX_ATTACHMENT_BYTES } from '../../core/protocol/index.js';
import { LIF, startSession, type Session } from './harness.js';

const open: Session[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

const LIMIT = 2 * 1024 * 1024 * 1024 - 1;

/** Bytes this process has read through read(2) and its kin so far (page cache and holes included). */
const bytesRead = (): number => Number(/^rchar: (\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'))![1]);

async function refusalOf(p: Promise<unknown>): Promise<CheckpointRefusal> {
  const e = await p.then(
    () => new Error('not refused'),
    (err: unknown) => err,
  );
  if (!(e instanceof CheckpointRefusal)) throw e;
  return e;
}

/**
 * Commit `checkpointId`: the session's committed checkpoint `from` laid out again with `agent-lif-a`'s
 * payload declared as `declared` bytes (a hole in a sparse file) and every other payload as captured.
 */
async function commitDeclared(s: Session, from: string, checkpointId: string, declared: number): Promise<string> {
  const real = await s.ck.store.load(from);
  const { payloads: _, ...manifest } = { ...real.envelope.manifest, checkpointId };
  const inputs: LayoutPayloadInput[] = real.envelope.payloads.map((p) =>
    p.name === 'agent-lif-a'
      ? { name: p.name, byteLength: declared, digest: 'ab'.repeat(32) }
      : { name: p.name, bytes: p.bytes },
  );
  const { head, layout } = layoutEnvelopeHead(manifest, inputs);
  const path = join(storeDirOf(s.runDir), generationTemp(checkpointId));
  const fd = openSync(path, 'w');
  try {
    ftruncateSync(fd, layout.totalBytes);
    writeSync(fd, head, 0, head.length, 0);
    for (const p of real.envelope.payloads)
      if (p.name !== 'agent-lif-a') {
        const at = layout.entries.find((e) => e.name === p.name)!.offset;
        writeSync(fd, p.bytes, 0, p.bytes.length, at);
      }
    // The footer's prefix digest is left unhashed (zeros): check 2 refuses the file if it is ever read.
    writeSync(fd, envelopeFooter(layout.totalBytes, Buffer.alloc(32)), 0, 48, layout.footerOffset);
  } finally {
    closeSync(fd);
  }
  expect(layout.entries.find((e) => e.name === 'agent-lif-a')!.byteLength).toBe(declared);
  await s.ck.store.commit(generationIdentityOf({ ...real.envelope.manifest, checkpointId }), {
    written: true,
    byteLength: layout.totalBytes,
    envelopeDigest: '0'.repeat(64),
  });
  const file = join(storeDirOf(s.runDir), `${checkpointId}.flysess`);
  // Sparse: the hole takes no disk.
  expect(statSync(file).size).toBe(layout.totalBytes);
  expect(statSync(file).blocks * 512).toBeLessThan(4 * 1024 * 1024);
  return file;
}

describe('the attachment limit on restore, at its real default', () => {
  it('a generation declaring a 2 GiB agent payload for a streamed worker is refused from its layout, before a payload byte is read; exactly the limit is not', async () => {
    expect(DEFAULT_MAX_ATTACHMENT_BYTES).toBe(LIMIT);
    const s = await startSession(LIF(64), { streamed: true });
    open.push(s);
    await s.group.step();
    const rec = await captureGroup(s.group, { checkpointId: 'ckpt-e1-1' });
    expect(await rec.ticket.wait(60_000)).toMatchObject({ kind: 'Committed' });
    await s.group.step();

    const over = await commitDeclared(s, 'ckpt-e1-1', 'ckpt-over', LIMIT + 1);
    const before = bytesRead();
    const e = await refusalOf(restoreGroup(s.group, { store: s.ck.store, checkpointId: 'ckpt-over' }, { epoch: 'e2' }));
    const read = bytesRead() - before;
    expect([e.status, e.reason, e.participant, e.mutation]).toEqual([
      'UNSUPPORTED',
      'size_message_too_large',
      'agent lif-a',
      'none',
    ]);
    expect(e.message).toBe(
      `agent lif-a: its payload of ${LIMIT + 1} bytes is larger than one streamed attachment (at most ${LIMIT} bytes); a worker that shares the coordinator's store moves a payload of any size through the envelope file instead (docs/spec/capture-file.md)`,
    );
    expect(e.message).not.toContain('\n');
    // No payload byte read: the envelope's head (64 KiB) and little else. A read of the hole is
    // counted like any other (the measure's control): 64 MiB of it move rchar by as much.
    expect(read).toBeLessThan(1024 * 1024);
    const hole = Buffer.alloc(64 * 1024 * 1024);
    const fd = openSync(over, 'r');
    const holeBefore = bytesRead();
    try {
      expect(readSync(fd, hole, 0, hole.length, 1024 * 1024 * 1024)).toBe(hole.length);
    } finally {
      closeSync(fd);
    }
    expect(bytesRead() - holeBefore).toBeGreaterThanOrEqual(hole.length);
    // The coordinator refused before any StageRestore went out: the group stands ready and steps.
    expect(s.group.phase).toBe('ready');
    await s.group.step();

    // The control: exactly the limit passes the layout check, and the next check judges the file:
    // here the generation's length, which no longer is the one the store recorded.
    const edge = await commitDeclared(s, 'ckpt-e1-1', 'ckpt-edge', LIMIT);
    appendFileSync(edge, Buffer.alloc(8));
    const c = await refusalOf(restoreGroup(s.group, { store: s.ck.store, checkpointId: 'ckpt-edge' }, { epoch: 'e2' }));
    expect([c.status, c.reason]).toEqual(['INCOMPATIBLE_STATE', 'audit_generation_length']);
    expect(s.group.phase).toBe('ready');

    // Nothing was staged anywhere (a staged restore would make this one CONFLICT): the real checkpoint restores.
    await restoreGroup(s.group, { store: s.ck.store, checkpointId: 'ckpt-e1-1' }, { epoch: 'e2' });
    s.group.resume();
    await s.group.step();
  }, 120_000);
});
