// The STATE-01 store on real files: commit sequence results, rotation, strict manifest open,
// selection (unreferenced files never qualify), verify (also beside a live writer, and of a store
// without its manifest), explicit gc (also racing a writer's commit), and injected ENOSPC/EIO.
import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { readdir, readFile, writeFile, copyFile, truncate } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { canonicalize, sha256Hex } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { DurableFs, errnoError, WRITE_SLICE, type FsOp } from '../../coordinator/store/durable-fs.js';
import { CheckpointStore, StoreCommitError, STORE_MANIFEST_FILE } from '../../coordinator/store/store.js';
import { makeCheckpoint, removeDir, tempDir } from './helpers.js';

let dir: string;
beforeEach(async () => {
  dir = await tempDir('store');
});
afterEach(async () => {
  await removeDir(dir);
});

async function commitN(store: CheckpointStore, ids: number[]): Promise<void> {
  for (const n of ids) {
    const c = makeCheckpoint(`ckpt-${n}`, n);
    await store.commit(c.identity, c.encoded);
  }
}

async function refusal(p: Promise<unknown> | (() => unknown)): Promise<DetsimError> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    if (e instanceof DetsimError) return e;
    throw e;
  }
  throw new Error('expected a DetsimError');
}

async function commitFailure(p: Promise<unknown>): Promise<StoreCommitError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof StoreCommitError) return e;
    throw e;
  }
  throw new Error('expected a StoreCommitError');
}

describe('commit and the store manifest', () => {
  it('[STORE-1] writes <id>.flysess and a canonical manifest.json naming it as highWater, no temporaries left', async () => {
    const store = await CheckpointStore.open(dir);
    const c = makeCheckpoint('ckpt-1', 2);
    const result = await store.commit(c.identity, c.encoded);
    const bytes = await readFile(join(dir, 'ckpt-1.flysess'));
    expect(sha256Hex(bytes)).toBe(c.encoded.envelopeDigest);
    const text = await readFile(join(dir, STORE_MANIFEST_FILE), 'utf8');
    const expected = {
      generations: [
        {
          boundary: '2',
          byteLength: String(c.encoded.byteLength),
          checkpointId: 'ckpt-1',
          compatibilityDigest: c.identity.compatibilityDigest,
          envelopeDigest: c.encoded.envelopeDigest,
          episodeId: 'episode-1',
          epoch: 'e1',
          file: 'ckpt-1.flysess',
          sessionId: 'demo',
        },
      ],
      highWater: 'ckpt-1',
      stateFormatId: 'flysess-1',
      storeManifestVersion: 1,
    };
    expect(text).toBe(canonicalize(expected));
    expect(result.record).toEqual(expected.generations[0]);
    expect((await readdir(dir)).sort()).toEqual(['ckpt-1.flysess', 'manifest.json']);
  });

  it('[STORE-2] a missing manifest is an empty store; reopening sees what was committed', async () => {
    const empty = await CheckpointStore.open(dir);
    expect(empty.generations()).toEqual([]);
    expect(empty.highWater()).toBeNull();
    await commitN(empty, [1, 2]);
    const again = await CheckpointStore.open(dir);
    expect(again.highWater()?.checkpointId).toBe('ckpt-2');
    expect(again.generations().map((g) => g.checkpointId)).toEqual(['ckpt-1', 'ckpt-2']);
  });

  it('[STORE-6, STORE-7] keeps the newest N and unlinks dropped files after the manifest commit', async () => {
    const store = await CheckpointStore.open(dir, { keep: 3 });
    await commitN(store, [1, 2, 3, 4, 5]);
    expect(store.generations().map((g) => g.checkpointId)).toEqual(['ckpt-3', 'ckpt-4', 'ckpt-5']);
    expect((await readdir(dir)).sort()).toEqual([
      'ckpt-3.flysess',
      'ckpt-4.flysess',
      'ckpt-5.flysess',
      'manifest.json',
    ]);
  });

  it('[STORE-1] highWater is the most recently committed generation, not the highest boundary', async () => {
    const store = await CheckpointStore.open(dir);
    await commitN(store, [5]);
    const older = makeCheckpoint('ckpt-e2-2', 2, { epoch: 'e2' });
    await store.commit(older.identity, older.encoded);
    expect(store.highWater()?.checkpointId).toBe('ckpt-e2-2');
  });

  it('[STORE-6] refuses to reuse a listed checkpoint id and leaves the committed file untouched', async () => {
    const store = await CheckpointStore.open(dir);
    await commitN(store, [1]);
    const before = await readFile(join(dir, 'ckpt-1.flysess'));
    const again = makeCheckpoint('ckpt-1', 9);
    const e = await commitFailure(store.commit(again.identity, again.encoded));
    expect(e.reason).toBe('checkpoint_exists');
    expect((await readFile(join(dir, 'ckpt-1.flysess'))).equals(before)).toBe(true);
  });

  it('[STORE-5] with rehash, a digest that does not match the bytes fails before the rename and commits nothing', async () => {
    const store = await CheckpointStore.open(dir, { rehash: true });
    const c = makeCheckpoint('ckpt-1', 1);
    const e = await commitFailure(store.commit(c.identity, { ...c.encoded, envelopeDigest: sha256Hex('other') }));
    expect(e.reason).toBe('generation_digest_mismatch');
    expect(await readdir(dir)).toEqual([]);
  });

  it('without a given digest the store hashes while writing; a given digest is recorded as is and verify() checks it', async () => {
    const store = await CheckpointStore.open(dir);
    const c = makeCheckpoint('ckpt-1', 1);
    const { envelopeDigest: _omit, ...noDigest } = c.encoded;
    const r1 = await store.commit(c.identity, noDigest);
    expect(r1.record.envelopeDigest).toBe(sha256Hex(await readFile(join(dir, 'ckpt-1.flysess'))));
    // A caller that lies about the digest gets a generation that never passes verification.
    const c2 = makeCheckpoint('ckpt-2', 2);
    await store.commit(c2.identity, { ...c2.encoded, envelopeDigest: sha256Hex('other') });
    const report = await store.verify();
    expect(report.generations.map((g) => [g.checkpointId, g.ok, g.check ?? null])).toEqual([
      ['ckpt-1', true, null],
      ['ckpt-2', false, 'envelopeDigest'],
    ]);
  });

  it('refuses an invalid record field before writing anything', async () => {
    const store = await CheckpointStore.open(dir);
    const c = makeCheckpoint('ckpt-1', 1);
    await expect(store.commit({ ...c.identity, boundary: '-1' }, c.encoded)).rejects.toMatchObject({
      reason: 'struct_invalid_u64',
    });
    expect(await readdir(dir)).toEqual([]);
  });

  it('streams a multi-MiB envelope in slices; it reads back and verifies', async () => {
    const store = await CheckpointStore.open(dir);
    const c = makeCheckpoint('ckpt-big', 3, { payloadBytes: 3 * WRITE_SLICE + 12345, fill: 0xa5 });
    const writes: FsOp[] = [];
    const traced = await CheckpointStore.open(dir, {
      rehash: true,
      fs: new DurableFs({ before: (op) => void (op.kind === 'write' && writes.push(op)) }),
    });
    await traced.commit(c.identity, c.encoded);
    expect(writes.length).toBeGreaterThanOrEqual(4);
    await store.reload();
    const loaded = await store.load();
    expect(loaded.envelope.envelopeDigest).toBe(c.encoded.envelopeDigest);
    expect(loaded.envelope.payloads.find((p) => p.name === 'agent-fly-a')?.bytes.byteLength).toBe(
      3 * WRITE_SLICE + 12345,
    );
    expect((await store.verify()).ok).toBe(true);
  });
});

describe('opening a store manifest is strict', () => {
  async function writeManifest(value: unknown): Promise<void> {
    await writeFile(join(dir, STORE_MANIFEST_FILE), canonicalize(value));
  }
  const valid = async () => {
    const s = await CheckpointStore.open(dir);
    await commitN(s, [1]);
    return JSON.parse(await readFile(join(dir, STORE_MANIFEST_FILE), 'utf8'));
  };

  it('[STORE-2] refuses unreadable JSON (not an empty store)', async () => {
    await writeFile(join(dir, STORE_MANIFEST_FILE), '{"generations":[');
    const e = await refusal(CheckpointStore.open(dir));
    expect(e.reason).toBe('struct_invalid_json');
    expect(e.message).toContain('manifest.json');
  });
  it('[STORE-2] refuses storeManifestVersion 2', async () => {
    await writeManifest({ ...(await valid()), storeManifestVersion: 2 });
    expect((await refusal(CheckpointStore.open(dir))).reason).toBe('struct_store_manifest_version');
  });
  it('[STORE-2] refuses another stateFormatId', async () => {
    await writeManifest({ ...(await valid()), stateFormatId: 'flysim-legacy' });
    expect((await refusal(CheckpointStore.open(dir))).reason).toBe('struct_store_format_id');
  });
  it('[STORE-2] refuses a highWater that names no listed generation', async () => {
    await writeManifest({ ...(await valid()), highWater: 'ckpt-9' });
    const e = await refusal(CheckpointStore.open(dir));
    expect(e.reason).toBe('struct_store_high_water');
    expect(e.message).toContain('ckpt-9');
  });
  it('[STORE-2] refuses a record whose file is not <checkpointId>.flysess', async () => {
    const m = await valid();
    m.generations[0].file = '../elsewhere.flysess';
    await writeManifest(m);
    const e = await refusal(CheckpointStore.open(dir));
    expect(e.reason).toBe('struct_store_manifest');
    expect(e.field).toBe('manifest.generations[0].file');
  });
  it('[STORE-2] refuses a record with a missing field, naming it', async () => {
    const m = await valid();
    delete m.generations[0].envelopeDigest;
    await writeManifest(m);
    const e = await refusal(CheckpointStore.open(dir));
    expect(e.reason).toBe('struct_missing_field');
    expect(e.field).toBe('manifest.generations[0].envelopeDigest');
  });
  it('[STORE-2] refuses a non-canonical manifest', async () => {
    await writeFile(join(dir, STORE_MANIFEST_FILE), JSON.stringify(await valid(), null, 2));
    expect((await refusal(CheckpointStore.open(dir))).reason).toBe('struct_not_canonical');
  });
});

describe('selection, verify and gc', () => {
  it('[STORE-4, STORE-8] select() is the high-water generation; an unreferenced file on disk is never a candidate', async () => {
    const store = await CheckpointStore.open(dir);
    expect((await refusal(() => store.select())).reason).toBe('ident_store_empty');
    await commitN(store, [1]);
    await copyFile(join(dir, 'ckpt-1.flysess'), join(dir, 'ckpt-7.flysess'));
    expect(store.select().checkpointId).toBe('ckpt-1');
    expect(store.select('ckpt-1').checkpointId).toBe('ckpt-1');
    const e = await refusal(() => store.select('ckpt-7'));
    expect(e.reason).toBe('ident_checkpoint_unknown');
    expect(e.message).toContain('never a restore candidate');
  });

  it('verify() names the generation and the failed check: flipped byte, truncation, missing file, record mismatch', async () => {
    const store = await CheckpointStore.open(dir, { keep: 4 });
    await commitN(store, [1, 2, 3, 4]);
    expect((await store.verify()).ok).toBe(true);
    const b1 = await readFile(join(dir, 'ckpt-1.flysess'));
    b1.writeUInt8(b1.readUInt8(b1.length - 60) ^ 0xff, b1.length - 60); // a payload byte
    await writeFile(join(dir, 'ckpt-1.flysess'), b1);
    await truncate(join(dir, 'ckpt-2.flysess'), 100);
    await removeDir(join(dir, 'ckpt-3.flysess'));
    // ckpt-4: the record claims another epoch than its envelope.
    const m = JSON.parse(await readFile(join(dir, STORE_MANIFEST_FILE), 'utf8'));
    m.generations[3].epoch = 'e9';
    await writeFile(join(dir, STORE_MANIFEST_FILE), canonicalize(m));
    await store.reload();
    const report = await store.verify();
    expect(report.ok).toBe(false);
    const byId = Object.fromEntries(report.generations.map((g) => [g.checkpointId, g]));
    expect(byId['ckpt-1']).toMatchObject({ ok: false, check: 'envelope', reason: 'audit_envelope_digest' });
    expect(byId['ckpt-2']).toMatchObject({ ok: false, check: 'byteLength', reason: 'audit_generation_length' });
    expect(byId['ckpt-3']).toMatchObject({ ok: false, check: 'file', reason: 'audit_generation_missing' });
    expect(byId['ckpt-4']).toMatchObject({ ok: false, check: 'record.epoch', reason: 'audit_generation_record' });
    await expect(store.load('ckpt-1')).rejects.toThrow(/ckpt-1.flysess: envelope/);
  });

  it('verify() catches a file replaced by another valid envelope of the same length (envelopeDigest)', async () => {
    const store = await CheckpointStore.open(dir);
    await commitN(store, [1]);
    const other = makeCheckpoint('ckpt-1', 1, { fill: 0x33 });
    await writeFile(join(dir, 'ckpt-1.flysess'), Buffer.concat(other.encoded.parts));
    const [g] = (await store.verify()).generations;
    expect(g).toMatchObject({ ok: false, check: 'envelopeDigest', reason: 'audit_generation_digest' });
  });

  it('[STORE-8] commits never clean up; gc() removes temporaries and unreferenced generations explicitly and lists them', async () => {
    const store = await CheckpointStore.open(dir);
    await commitN(store, [1, 2]);
    await writeFile(join(dir, 'tmp-ckpt-3.flysess'), 'half');
    await copyFile(join(dir, 'ckpt-1.flysess'), join(dir, 'ckpt-9.flysess'));
    await writeFile(join(dir, 'notes.txt'), 'operator notes');
    await commitN(store, [4]);
    await writeFile(join(dir, 'tmp-manifest.json'), '{');
    expect((await readdir(dir)).length).toBe(8);
    expect(await store.scan()).toEqual({
      unreferenced: ['ckpt-9.flysess'],
      temporaries: ['tmp-ckpt-3.flysess', 'tmp-manifest.json'],
    });
    expect(await store.gc()).toEqual(['ckpt-9.flysess', 'tmp-ckpt-3.flysess', 'tmp-manifest.json']);
    expect((await readdir(dir)).sort()).toEqual([
      'ckpt-1.flysess',
      'ckpt-2.flysess',
      'ckpt-4.flysess',
      'manifest.json',
      'notes.txt',
    ]);
    expect((await store.verify()).ok).toBe(true);
  });
});

describe('verify and gc beside a live writer, and a store that lost its manifest (issue 11 items 5, 12, 24)', () => {
  it('verify() against a store another process keeps committing and rotating: never a spurious missing generation', async () => {
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./children/commit-loop.ts', import.meta.url)), dir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    try {
      await new Promise<void>((res, rej) => {
        child.stdout!.on('data', (d: Buffer) => d.toString().includes('ready') && res());
        child.once('exit', (code) => rej(new Error(`commit-loop exited ${code}`)));
      });
      for (let i = 0; i < 60; i++) {
        const report = await (await CheckpointStore.open(dir, { keep: 2 })).verify();
        expect(
          report.generations.filter((g) => !g.ok),
          `verify ${i}`,
        ).toEqual([]);
        expect(report.generations.length + report.rotated.length).toBe(2);
      }
    } finally {
      child.kill('SIGKILL');
    }
  }, 60_000);

  it('verify() of a snapshot whose oldest generation a writer rotated out before it was read: rotated, not missing', async () => {
    await commitN(await CheckpointStore.open(dir, { keep: 2 }), [1, 2]);
    const verifier = await CheckpointStore.open(dir, { keep: 2 });
    await commitN(await CheckpointStore.open(dir, { keep: 2 }), [3]);
    expect(existsSync(join(dir, 'ckpt-1.flysess'))).toBe(false);
    const report = await verifier.verify();
    expect(report).toMatchObject({ ok: true, rotated: ['ckpt-1'], orphaned: [] });
    expect(report.generations.map((g) => [g.checkpointId, g.ok])).toEqual([['ckpt-2', true]]);
  });

  it('a generation removed while still listed stays audit_generation_missing (only rotation by the manifest excuses it)', async () => {
    const store = await CheckpointStore.open(dir);
    await commitN(store, [1, 2]);
    await removeDir(join(dir, 'ckpt-1.flysess'));
    const report = await store.verify();
    expect(report).toMatchObject({ ok: false, rotated: [] });
    expect(report.generations[0]).toMatchObject({
      checkpointId: 'ckpt-1',
      ok: false,
      reason: 'audit_generation_missing',
    });
  });

  it('verify() fails a directory of generations without a store manifest, naming them orphaned', async () => {
    const store = await CheckpointStore.open(dir);
    await commitN(store, [1, 2]);
    await writeFile(join(dir, 'tmp-ckpt-3.flysess'), 'half');
    await removeDir(join(dir, STORE_MANIFEST_FILE));
    const report = await (await CheckpointStore.open(dir)).verify();
    expect(report).toMatchObject({ ok: false, generations: [], orphaned: ['ckpt-1.flysess', 'ckpt-2.flysess'] });
    // Temporaries alone (a crash before the first commit) are an empty store, not a failure.
    await removeDir(join(dir, 'ckpt-1.flysess'));
    await removeDir(join(dir, 'ckpt-2.flysess'));
    expect(await (await CheckpointStore.open(dir)).verify()).toMatchObject({ ok: true, orphaned: [] });
  });

  it('gc() keeps a generation a writer committed after gc scanned it as unreferenced (manifest re-read before each deletion)', async () => {
    const writer = await CheckpointStore.open(dir);
    await commitN(writer, [1]);
    const before = await readFile(join(dir, STORE_MANIFEST_FILE));
    const late = makeCheckpoint('zz-2', 2);
    await writer.commit(late.identity, late.encoded);
    const after = await readFile(join(dir, STORE_MANIFEST_FILE));
    // The moment gc scans: zz-2 published, its manifest commit not yet on disk; a temporary sorts first.
    await writeFile(join(dir, STORE_MANIFEST_FILE), before);
    await writeFile(join(dir, 'tmp-ckpt-9.flysess'), 'half');
    let committed = false;
    const fs = new DurableFs({
      before(op) {
        if (op.kind !== 'unlink' || committed) return;
        committed = true; // the writer's manifest commit lands while gc deletes the temporary
        writeFileSync(join(dir, STORE_MANIFEST_FILE), after);
      },
    });
    expect(await (await CheckpointStore.open(dir, { fs })).gc()).toEqual(['tmp-ckpt-9.flysess']);
    expect(existsSync(join(dir, 'zz-2.flysess'))).toBe(true);
    expect((await (await CheckpointStore.open(dir)).verify()).ok).toBe(true);
  });
});

describe('write errors injected through the file layer', () => {
  /** A store whose file layer fails the first operation matching `when`, recording every op. */
  async function faulty(when: (op: FsOp) => boolean, code: 'ENOSPC' | 'EIO') {
    const ops: FsOp[] = [];
    let fired = false;
    const fs = new DurableFs({
      before(op) {
        ops.push(op);
        if (!fired && when(op)) {
          fired = true;
          throw errnoError(code, op);
        }
      },
    });
    return { store: await CheckpointStore.open(dir, { fs }), ops };
  }

  async function committedBaseline(): Promise<Buffer> {
    const s = await CheckpointStore.open(dir);
    await commitN(s, [1]);
    return readFile(join(dir, STORE_MANIFEST_FILE));
  }

  const cases: {
    name: string;
    code: 'ENOSPC' | 'EIO';
    when: (op: FsOp) => boolean;
    reason: string;
    leaves: string[];
  }[] = [
    {
      name: 'ENOSPC on the first generation write',
      code: 'ENOSPC',
      when: (op) => op.kind === 'write' && op.path.endsWith('tmp-ckpt-2.flysess'),
      reason: 'generation_write_failed',
      leaves: [],
    },
    {
      name: 'ENOSPC mid-file (second slice)',
      code: 'ENOSPC',
      when: (op) => op.kind === 'write' && (op.offset ?? 0) > 0,
      reason: 'generation_write_failed',
      leaves: [],
    },
    {
      name: 'EIO on the generation fsync',
      code: 'EIO',
      when: (op) => op.kind === 'fsync' && op.path.endsWith('tmp-ckpt-2.flysess'),
      reason: 'generation_write_failed',
      leaves: [],
    },
    {
      name: 'EIO on the generation rename',
      code: 'EIO',
      when: (op) => op.kind === 'rename' && op.path.endsWith('tmp-ckpt-2.flysess'),
      reason: 'generation_publish_failed',
      leaves: ['tmp-ckpt-2.flysess'],
    },
    {
      name: 'EIO on the directory fsync after the generation rename',
      code: 'EIO',
      when: (op) => op.kind === 'dir-fsync',
      reason: 'generation_publish_failed',
      leaves: ['ckpt-2.flysess'],
    },
    {
      name: 'ENOSPC on the manifest temp write',
      code: 'ENOSPC',
      when: (op) => op.kind === 'write' && op.path.endsWith('tmp-manifest.json'),
      reason: 'manifest_write_failed',
      leaves: ['ckpt-2.flysess'],
    },
    {
      name: 'EIO on the manifest temp fsync',
      code: 'EIO',
      when: (op) => op.kind === 'fsync' && op.path.endsWith('tmp-manifest.json'),
      reason: 'manifest_write_failed',
      leaves: ['ckpt-2.flysess'],
    },
    {
      name: 'EIO on the manifest rename',
      code: 'EIO',
      when: (op) => op.kind === 'rename' && op.path.endsWith('tmp-manifest.json'),
      reason: 'manifest_rename_failed',
      leaves: ['ckpt-2.flysess'],
    },
  ];

  for (const c of cases) {
    it(`[STORE-5] ${c.name}: the commit fails, is not retried on that file, and the last committed generation is untouched`, async () => {
      const manifestBefore = await committedBaseline();
      const genBefore = await readFile(join(dir, 'ckpt-1.flysess'));
      const { store, ops } = await faulty(c.when, c.code);
      const big = makeCheckpoint('ckpt-2', 2, { payloadBytes: WRITE_SLICE + 10 });
      const e = await commitFailure(store.commit(big.identity, big.encoded));
      expect(e.reason).toBe(c.reason);
      expect(e.message).toContain(c.code);
      // The failing op is the last write/fsync on its file: never retried, never followed by a manifest rename.
      const failedAt = ops.findIndex(c.when);
      const failedPath = ops[failedAt]!.path;
      const after = ops.slice(failedAt + 1);
      expect(after.filter((op) => (op.kind === 'write' || op.kind === 'fsync') && op.path === failedPath)).toEqual([]);
      expect(after.filter((op) => op.kind === 'rename' && op.path.endsWith('tmp-manifest.json'))).toEqual([]);
      // Disk: the manifest and the last committed generation are byte-identical; nothing else is referenced.
      expect((await readFile(join(dir, STORE_MANIFEST_FILE))).equals(manifestBefore)).toBe(true);
      expect((await readFile(join(dir, 'ckpt-1.flysess'))).equals(genBefore)).toBe(true);
      const names = (await readdir(dir)).sort();
      expect(names).toEqual(['ckpt-1.flysess', ...c.leaves, 'manifest.json'].sort());
      expect(store.highWater()?.checkpointId).toBe('ckpt-1');
      const reopened = await CheckpointStore.open(dir);
      expect(reopened.highWater()?.checkpointId).toBe('ckpt-1');
      expect((await reopened.verify()).ok).toBe(true);
      // The next save writes a fresh temp file and commits.
      const next = makeCheckpoint('ckpt-3', 3);
      await reopened.commit(next.identity, next.encoded);
      expect(reopened.highWater()?.checkpointId).toBe('ckpt-3');
    });
  }

  it('[STORE-5] EIO on the directory fsync after the manifest rename is reported as uncertain, and nothing is unlinked', async () => {
    const base = await CheckpointStore.open(dir, { keep: 1 });
    await commitN(base, [1]);
    let dirSyncs = 0;
    const fs = new DurableFs({
      before(op) {
        if (op.kind === 'dir-fsync' && ++dirSyncs === 2) throw errnoError('EIO', op);
      },
    });
    const store = await CheckpointStore.open(dir, { keep: 1, fs });
    const c = makeCheckpoint('ckpt-2', 2);
    const e = await commitFailure(store.commit(c.identity, c.encoded));
    expect(e.reason).toBe('manifest_commit_uncertain');
    // The rotated-out file is kept: if the rename is lost in a power cut, the old manifest still needs it.
    expect(existsSync(join(dir, 'ckpt-1.flysess'))).toBe(true);
  });

  it('[STORE-7] an unlink failure during rotation is recorded as unrotated, never a lost checkpoint', async () => {
    const fs = new DurableFs({
      before(op) {
        if (op.kind === 'unlink' && op.path.endsWith('ckpt-1.flysess')) throw errnoError('EACCES', op);
      },
    });
    const store = await CheckpointStore.open(dir, { keep: 1, fs });
    await commitN(store, [1]);
    const c = makeCheckpoint('ckpt-2', 2);
    const result = await store.commit(c.identity, c.encoded);
    expect(result.unrotated).toEqual(['ckpt-1.flysess']);
    expect(store.unrotated()).toEqual(['ckpt-1.flysess']);
    expect(store.highWater()?.checkpointId).toBe('ckpt-2');
    expect((await store.verify()).ok).toBe(true);
  });
});
