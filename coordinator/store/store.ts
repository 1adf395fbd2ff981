// The STATE-01 checkpoint store: one flat directory of FLYSESS1 generations and the canonical
// store manifest that commits them (docs/spec/checkpoint-store.md). It knows envelopes only as bytes plus a
// record; it is NOT the writer queue (writer.ts), nor capture/restore, nor any transport.
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, open, readdir, readFile, stat, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { canonicalBytes, canonicalDigest, parseCanonical, type JsonValue } from '../../core/formats/canonical-json.js';
import { type DecodedEnvelope, type EnvelopeManifest, type VerifiedEnvelope } from '../../core/formats/envelope.js';
import { DetsimError, isDetsimError } from '../../core/formats/errors.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import {
  readDigest,
  readId,
  readObject,
  readU64,
  refuseUnknownFields,
  type Digest,
  type Id,
  type U64,
} from '../../core/formats/scalars.js';
import { DurableFs, type ByteParts } from './durable-fs.js';
import { readFileRange, verifyEnvelopeFile, type ReadEnvelopeOptions } from './generation-reader.js';

export const STATE_FORMAT_ID = 'flysess-1';
export const STORE_MANIFEST_VERSION = 1;
export const STORE_MANIFEST_FILE = 'manifest.json';
export const STORE_MANIFEST_TMP = 'tmp-manifest.json';
export const GENERATION_SUFFIX = '.flysess';
export const DEFAULT_KEEP_GENERATIONS = 3;

/** One committed generation as the store manifest lists it (docs/spec/checkpoint-store.md; keys in canonical order). */
export interface GenerationRecord {
  readonly boundary: U64;
  readonly byteLength: U64;
  readonly checkpointId: Id;
  readonly compatibilityDigest: Digest;
  readonly envelopeDigest: Digest;
  readonly episodeId: Id;
  readonly epoch: Id;
  readonly file: string;
  readonly sessionId: Id;
}

/** A store's committed manifest (manifest.json): its generations and high-water mark. */
export interface StoreManifest {
  readonly generations: readonly GenerationRecord[];
  readonly highWater: Id | null;
  readonly stateFormatId: typeof STATE_FORMAT_ID;
  readonly storeManifestVersion: typeof STORE_MANIFEST_VERSION;
}

/** What a generation record says about its envelope; derived from the checkpoint manifest. */
export interface GenerationIdentity {
  readonly checkpointId: Id;
  readonly sessionId: Id;
  readonly epoch: Id;
  readonly episodeId: Id;
  readonly boundary: U64;
  readonly compatibilityDigest: Digest;
}

/** An encoded envelope as the store takes it: parts written in order (encodeEnvelopeParts output fits). */
export interface EnvelopeBytes extends ByteParts {
  readonly byteLength: number;
  /**
   * SHA-256 of the whole envelope computed over these very buffers (encodeEnvelopeParts does). When
   * given, the store records it without hashing the bytes a third time, unless the store was opened
   * with `rehash: true`, which hashes while writing and fails a mismatch before the rename. When
   * absent, the store always hashes while writing. The buffers must not change until the commit ends.
   */
  readonly envelopeDigest?: Digest;
}

/**
 * An envelope already written in full to the store's temp file `tmp-<checkpointId>.flysess`
 * (store-files-v1: workers wrote their payloads, the sealer hashed it and wrote the footer).
 * The store fsyncs and commits that file as it is; `envelopeDigest` is what the sealer computed.
 */
export interface WrittenEnvelope {
  readonly written: true;
  readonly byteLength: number;
  readonly envelopeDigest: Digest;
}

export const generationFile = (checkpointId: Id): string => `${checkpointId}${GENERATION_SUFFIX}`;
export const generationTemp = (checkpointId: Id): string => `tmp-${checkpointId}${GENERATION_SUFFIX}`;

/** The record fields a checkpoint manifest implies: the scope's session/epoch/step, the compatibility block digest. */
export function generationIdentityOf(manifest: EnvelopeManifest): GenerationIdentity {
  return {
    checkpointId: manifest.checkpointId,
    sessionId: manifest.sourceScope.sessionId,
    epoch: manifest.sourceScope.epoch,
    episodeId: manifest.episodeId,
    boundary: manifest.sourceScope.step,
    compatibilityDigest: canonicalDigest(manifest.compatibility),
  };
}

// ---------------------------------------------------------------------------------------------
// Store manifest: parse (strict) and build

const MANIFEST_FIELDS = ['generations', 'highWater', 'stateFormatId', 'storeManifestVersion'] as const;
const RECORD_FIELDS = [
  'boundary',
  'byteLength',
  'checkpointId',
  'compatibilityDigest',
  'envelopeDigest',
  'episodeId',
  'epoch',
  'file',
  'sessionId',
] as const;

function requireFields(obj: Record<string, unknown>, fields: readonly string[], where: string): void {
  refuseUnknownFields(obj, fields, where);
  for (const f of fields) {
    if (!Object.hasOwn(obj, f))
      throw new DetsimError('struct_missing_field', `${where}.${f} is missing`, `${where}.${f}`);
  }
}

function readRecord(value: unknown, where: string): GenerationRecord {
  const o = readObject(value, where);
  requireFields(o, RECORD_FIELDS, where);
  const checkpointId = readId(o.checkpointId, `${where}.checkpointId`);
  if (o.file !== generationFile(checkpointId)) {
    throw new DetsimError(
      'struct_store_manifest',
      `${where}.file is ${JSON.stringify(o.file)}, a generation of ${checkpointId} is ${JSON.stringify(generationFile(checkpointId))}`,
      `${where}.file`,
    );
  }
  return {
    boundary: readU64(o.boundary, `${where}.boundary`),
    byteLength: readU64(o.byteLength, `${where}.byteLength`),
    checkpointId,
    compatibilityDigest: readDigest(o.compatibilityDigest, `${where}.compatibilityDigest`),
    envelopeDigest: readDigest(o.envelopeDigest, `${where}.envelopeDigest`),
    episodeId: readId(o.episodeId, `${where}.episodeId`),
    epoch: readId(o.epoch, `${where}.epoch`),
    file: generationFile(checkpointId),
    sessionId: readId(o.sessionId, `${where}.sessionId`),
  };
}

function readManifestValue(value: JsonValue): StoreManifest {
  const o = readObject(value, 'manifest');
  refuseUnknownFields(o, MANIFEST_FIELDS, 'manifest');
  if (!Object.hasOwn(o, 'storeManifestVersion'))
    throw new DetsimError(
      'struct_missing_field',
      'manifest.storeManifestVersion is missing',
      'manifest.storeManifestVersion',
    );
  if (o.storeManifestVersion !== STORE_MANIFEST_VERSION) {
    throw new DetsimError(
      'struct_store_manifest_version',
      `manifest.storeManifestVersion is ${JSON.stringify(o.storeManifestVersion)}, only ${STORE_MANIFEST_VERSION} is supported`,
      'manifest.storeManifestVersion',
    );
  }
  requireFields(o, MANIFEST_FIELDS, 'manifest');
  if (o.stateFormatId !== STATE_FORMAT_ID) {
    throw new DetsimError(
      'struct_store_format_id',
      `manifest.stateFormatId is ${JSON.stringify(o.stateFormatId)}, not "${STATE_FORMAT_ID}"`,
      'manifest.stateFormatId',
    );
  }
  if (!Array.isArray(o.generations))
    throw new DetsimError('struct_store_manifest', 'manifest.generations is not an array', 'manifest.generations');
  const generations = o.generations.map((g, i) => readRecord(g, `manifest.generations[${i}]`));
  const seen = new Set<string>();
  for (const [i, g] of generations.entries()) {
    if (seen.has(g.checkpointId))
      throw new DetsimError(
        'struct_store_manifest',
        `manifest.generations[${i}] repeats checkpoint ${g.checkpointId}`,
        `manifest.generations[${i}].checkpointId`,
      );
    seen.add(g.checkpointId);
  }
  const highWater = o.highWater === null ? null : readId(o.highWater, 'manifest.highWater');
  if (highWater === null ? generations.length > 0 : !seen.has(highWater)) {
    throw new DetsimError(
      'struct_store_high_water',
      `manifest.highWater ${JSON.stringify(highWater)} names no listed generation (listed: ${[...seen].join(', ') || 'none'})`,
      'manifest.highWater',
    );
  }
  return { generations, highWater, stateFormatId: STATE_FORMAT_ID, storeManifestVersion: STORE_MANIFEST_VERSION };
}

/** Parse store manifest bytes strictly; every refusal names the file and the field. */
export function parseStoreManifest(bytes: Uint8Array, label = STORE_MANIFEST_FILE): StoreManifest {
  try {
    return readManifestValue(parseCanonical(bytes));
  } catch (e) {
    if (isDetsimError(e)) throw new DetsimError(e.reason, `${label}: ${e.message}`, e.field);
    throw e;
  }
}

export const EMPTY_STORE_MANIFEST: StoreManifest = {
  generations: [],
  highWater: null,
  stateFormatId: STATE_FORMAT_ID,
  storeManifestVersion: STORE_MANIFEST_VERSION,
};

// ---------------------------------------------------------------------------------------------
// Commit failures: a stable code per stage, so the writer can report Failed{reason}

/** Why a store commit did not become durable. */
export type CommitFailureReason =
  | 'checkpoint_exists'
  | 'generation_write_failed'
  | 'generation_length_mismatch'
  | 'generation_digest_mismatch'
  | 'generation_publish_failed'
  | 'stopped_before_manifest_commit'
  | 'manifest_write_failed'
  | 'manifest_rename_failed'
  | 'manifest_commit_uncertain';

/** A commit that did not become durable. `committed` is false for every reason but manifest_commit_uncertain. */
export class StoreCommitError extends Error {
  constructor(
    readonly reason: CommitFailureReason,
    message: string,
    readonly checkpointId: Id,
  ) {
    super(message);
    this.name = 'StoreCommitError';
  }
}

function describeError(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  return err && typeof err.code === 'string'
    ? `${err.code} (${err.syscall ?? 'io'})`
    : String((e as Error)?.message ?? e);
}

/** Options of one store commit (a test hook). */
export interface CommitOptions {
  /** Test hook (docs/spec/checkpoint-store.md, case 4): publish the generation, stop before the manifest commit. */
  readonly stopBeforeManifestCommit?: boolean;
}

/** A durable commit: the new record and the records rotated out. */
export interface CommitResult {
  readonly record: GenerationRecord;
  /** Records rotated out of the manifest by this commit. */
  readonly dropped: readonly GenerationRecord[];
  /** Files of dropped records whose unlink failed: a leak, never a lost checkpoint. */
  readonly unrotated: readonly string[];
}

/** The verification of one generation file. */
export interface GenerationCheck {
  readonly checkpointId: Id;
  readonly file: string;
  readonly ok: boolean;
  /** The failed check: file, byteLength, envelope, envelopeDigest, record.<field>. */
  readonly check?: string;
  readonly reason?: ReasonCode;
  readonly message?: string;
}

/** The verification of a whole store: whether it holds, and the check of each generation. */
export interface StoreVerifyReport {
  readonly ok: boolean;
  readonly generations: readonly GenerationCheck[];
  /** Listed when verify began, gone when read, and no longer listed then: a writer rotated them out (not an error). */
  readonly rotated: readonly Id[];
  /** Generation files in a directory without a store manifest (lost, or never committed): a failure. */
  readonly orphaned: readonly string[];
}

/** A generation's record and verified bytes (CheckpointStore.load: small envelopes, tools and tests). */
export interface LoadedGeneration {
  readonly record: GenerationRecord;
  readonly bytes: Buffer;
  readonly envelope: DecodedEnvelope;
}

/** A generation verified in bounded chunks: its record, where it is and what it holds; no payload in memory. */
export interface VerifiedGeneration {
  readonly record: GenerationRecord;
  /** The generation file's path (dir joined with record.file). */
  readonly path: string;
  readonly byteLength: number;
  readonly envelope: VerifiedEnvelope;
  /** The bytes of the ranges `options.keep` asked for, as the verify pass read them (by rangeKey). */
  readonly kept: ReadonlyMap<string, Buffer>;
}

/** Files in a store directory the manifest does not reference (never restore candidates). */
export interface StoreScan {
  /** `<id>.flysess` files the manifest does not list: never restore candidates. */
  readonly unreferenced: readonly string[];
  /** `tmp-*.flysess` and `tmp-manifest.json` left by an interrupted write. */
  readonly temporaries: readonly string[];
}

/** Options of {@link CheckpointStore.open}. */
export interface StoreOptions {
  /** Newest generations kept by rotation (default 3). */
  readonly keep?: number;
  readonly fs?: DurableFs;
  /** Create the directory if it does not exist (default false: a missing directory is an error). */
  readonly create?: boolean;
  /** Hash every generation while writing it even when the envelope brings its digest (default false). */
  readonly rehash?: boolean;
}

class Mutex {
  private tail: Promise<void> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

/**
 * The STATE-01 checkpoint store: a flat directory of FLYSESS1 generations committed by a canonical
 * `manifest.json` (durable write order, rotation to `keep`, verify, gc). Envelopes are bytes plus a record here;
 * open one with `CheckpointStore.open(dir)`. See docs/spec/checkpoint-envelope.md.
 */
export class CheckpointStore {
  private manifest: StoreManifest;
  private readonly lock = new Mutex();
  private readonly leaked: string[] = [];
  private commits = 0;

  private constructor(
    readonly dir: string,
    readonly keep: number,
    readonly fs: DurableFs,
    manifest: StoreManifest,
    readonly rehash: boolean,
  ) {
    this.manifest = manifest;
  }

  /** Open a store directory: a missing manifest is an empty store; an invalid one is an error naming what. */
  static async open(dir: string, options: StoreOptions = {}): Promise<CheckpointStore> {
    const keep = options.keep ?? DEFAULT_KEEP_GENERATIONS;
    if (!Number.isInteger(keep) || keep < 1)
      throw new DetsimError('struct_invalid_field', `keep must be a positive integer, got ${keep}`, 'keep');
    const fs = options.fs ?? new DurableFs();
    if (options.create) await ensureDir(dir, fs);
    const info = await stat(dir);
    if (!info.isDirectory()) throw new DetsimError('struct_invalid_field', `${dir} is not a directory`, 'dir');
    return new CheckpointStore(dir, keep, fs, await readManifestFile(dir), options.rehash ?? false);
  }

  /** The committed manifest as last read or written by this process. */
  snapshot(): StoreManifest {
    return this.manifest;
  }

  generations(): readonly GenerationRecord[] {
    return this.manifest.generations;
  }

  lookup(checkpointId: Id): GenerationRecord | null {
    return this.manifest.generations.find((g) => g.checkpointId === checkpointId) ?? null;
  }

  /** The most recently committed generation (not the highest boundary), or null before the first commit. */
  highWater(): GenerationRecord | null {
    return this.manifest.highWater === null ? null : this.lookup(this.manifest.highWater);
  }

  /** A restore candidate: the named listed generation, or the high-water one. Unlisted files never qualify. */
  select(checkpointId?: Id): GenerationRecord {
    if (checkpointId === undefined) {
      const hw = this.highWater();
      if (!hw) throw new DetsimError('ident_store_empty', `store ${this.dir} has no committed generation`, 'highWater');
      return hw;
    }
    readId(checkpointId, 'checkpointId');
    const found = this.lookup(checkpointId);
    if (!found) {
      throw new DetsimError(
        'ident_checkpoint_unknown',
        `checkpoint ${checkpointId} is not listed in ${join(this.dir, STORE_MANIFEST_FILE)}; an unreferenced file is never a restore candidate`,
        'checkpointId',
      );
    }
    return found;
  }

  /** Files this process failed to unlink during rotation. */
  unrotated(): readonly string[] {
    return [...this.leaked];
  }

  /** Manifest commits made by this process (for tests: a lost reply must not cause a second save). */
  commitCount(): number {
    return this.commits;
  }

  /** Re-read the manifest from disk (an operator or a previous run may have changed it). */
  async reload(): Promise<void> {
    await this.lock.run(async () => {
      this.manifest = await readManifestFile(this.dir);
    });
  }

  /** Write a generation and commit it: temp → fsync → rename → fsync dir → manifest (same) → rotate. */
  commit(
    identity: GenerationIdentity,
    envelope: EnvelopeBytes | WrittenEnvelope,
    options: CommitOptions = {},
  ): Promise<CommitResult> {
    return this.lock.run(() => this.commitLocked(identity, envelope, options));
  }

  private async commitLocked(
    identity: GenerationIdentity,
    envelope: EnvelopeBytes | WrittenEnvelope,
    options: CommitOptions,
  ): Promise<CommitResult> {
    const id = readId(identity.checkpointId, 'checkpointId');
    if (this.lookup(id)) {
      // A temp file written for this job is this job's alone: never leave it behind.
      if ('written' in envelope) await this.fs.abandon(join(this.dir, generationTemp(id)));
      // Renaming over a listed file would disturb a committed generation before the manifest commit.
      throw new StoreCommitError(
        'checkpoint_exists',
        `checkpoint ${id} is already committed in ${this.dir}; checkpoint ids are never reused`,
        id,
      );
    }
    const record = await this.writeGeneration(identity, envelope);
    if (options.stopBeforeManifestCommit) {
      throw new StoreCommitError(
        'stopped_before_manifest_commit',
        `${record.file} was renamed but the store manifest was not committed (test hook)`,
        id,
      );
    }
    const { next, dropped } = this.nextManifest(record);
    await this.commitManifest(next, id);
    this.commits += 1;
    const unrotated = await this.rotate(dropped, id);
    return { record, dropped, unrotated };
  }

  /** Generation steps 1-4; the temp file is abandoned on any failure or mismatch. */
  private async writeGeneration(
    identity: GenerationIdentity,
    envelope: EnvelopeBytes | WrittenEnvelope,
  ): Promise<GenerationRecord> {
    const id = identity.checkpointId;
    // Validate everything the record needs before a byte is written.
    const fields = {
      boundary: readU64(identity.boundary, 'boundary'),
      compatibilityDigest: readDigest(identity.compatibilityDigest, 'compatibilityDigest'),
      episodeId: readId(identity.episodeId, 'episodeId'),
      epoch: readId(identity.epoch, 'epoch'),
      sessionId: readId(identity.sessionId, 'sessionId'),
    };
    const given =
      envelope.envelopeDigest === undefined ? undefined : readDigest(envelope.envelopeDigest, 'envelopeDigest');
    const tmpPath = join(this.dir, generationTemp(id));
    let written;
    try {
      written =
        'written' in envelope
          ? await this.fs.syncWritten(tmpPath, id)
          : await this.fs.writeTemp(tmpPath, envelope, 'generation', id, { hash: this.rehash || given === undefined });
    } catch (e) {
      throw new StoreCommitError(
        'generation_write_failed',
        `writing ${generationTemp(id)} failed: ${describeError(e)}; the file is abandoned, nothing committed`,
        id,
      );
    }
    if (written.byteLength !== envelope.byteLength) {
      await this.fs.abandon(tmpPath);
      throw new StoreCommitError(
        'generation_length_mismatch',
        `${generationTemp(id)}: wrote ${written.byteLength} bytes, the envelope says ${envelope.byteLength}`,
        id,
      );
    }
    if (given !== undefined && written.sha256 !== null && written.sha256 !== given) {
      await this.fs.abandon(tmpPath);
      throw new StoreCommitError(
        'generation_digest_mismatch',
        `${generationTemp(id)}: bytes written hash to ${written.sha256}, the envelope says ${given}`,
        id,
      );
    }
    try {
      await this.fs.publish(this.dir, generationTemp(id), generationFile(id), 'generation', id);
    } catch (e) {
      throw new StoreCommitError(
        'generation_publish_failed',
        `publishing ${generationFile(id)} failed: ${describeError(e)}; nothing committed`,
        id,
      );
    }
    return {
      ...fields,
      byteLength: String(written.byteLength),
      checkpointId: id,
      envelopeDigest: written.sha256 ?? given!,
      file: generationFile(id),
    };
  }

  /** Rotation (docs/spec/checkpoint-store.md): append, set highWater, drop the oldest list entries beyond `keep`. */
  private nextManifest(record: GenerationRecord): { next: StoreManifest; dropped: GenerationRecord[] } {
    const all = [...this.manifest.generations.filter((g) => g.checkpointId !== record.checkpointId), record];
    const cut = Math.max(0, all.length - this.keep);
    return {
      next: { ...this.manifest, generations: all.slice(cut), highWater: record.checkpointId },
      dropped: all.slice(0, cut),
    };
  }

  /** Step 5: manifest temp → fsync → rename (the commit point) → fsync dir. */
  private async commitManifest(next: StoreManifest, id: Id): Promise<void> {
    const tmpPath = join(this.dir, STORE_MANIFEST_TMP);
    try {
      await this.fs.writeTemp(tmpPath, { parts: [canonicalBytes(next)] }, 'manifest', id);
    } catch (e) {
      throw new StoreCommitError(
        'manifest_write_failed',
        `writing ${STORE_MANIFEST_TMP} failed: ${describeError(e)}; ${generationFile(id)} stays unreferenced, nothing committed`,
        id,
      );
    }
    try {
      await this.fs.rename(tmpPath, join(this.dir, STORE_MANIFEST_FILE));
    } catch (e) {
      await this.fs.abandon(tmpPath);
      throw new StoreCommitError(
        'manifest_rename_failed',
        `renaming ${STORE_MANIFEST_TMP} failed: ${describeError(e)}; nothing committed`,
        id,
      );
    }
    // The rename happened: the manifest on disk is `next`, so memory follows it.
    this.manifest = next;
    await this.fs.step('manifest-renamed', id);
    try {
      await this.fs.fsyncDir(this.dir);
    } catch (e) {
      throw new StoreCommitError(
        'manifest_commit_uncertain',
        `fsync of ${this.dir} after the manifest rename failed: ${describeError(e)}; the commit of ${id} may not survive a power cut`,
        id,
      );
    }
    await this.fs.step('manifest-dir-synced', id);
  }

  /** Unlink rotated-out files only now, after the commit; failures leak files, never checkpoints. */
  private async rotate(dropped: readonly GenerationRecord[], id: Id): Promise<string[]> {
    const unrotated: string[] = [];
    for (const g of dropped) {
      try {
        await this.fs.unlink(join(this.dir, g.file));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') unrotated.push(g.file);
      }
      await this.fs.step('rotation-unlinked', id);
    }
    if (dropped.length > 0) {
      await this.fs.fsyncDir(this.dir).catch(() => undefined);
      await this.fs.step('rotation-dir-synced', id);
    }
    this.leaked.push(...unrotated);
    return unrotated;
  }

  /**
   * Read a listed generation into memory after checking it fully; throws the first failed check.
   * For small envelopes (tools, tests): verify and restore use verifyGeneration, which never holds one.
   */
  async load(checkpointId?: Id): Promise<LoadedGeneration> {
    const record = this.select(checkpointId);
    const g = await verifyGeneration(this.dir, record);
    const bytes = await readFileRange(g.path, 0, g.byteLength);
    const payloads = g.envelope.layout.entries.map((e) => ({
      name: e.name,
      bytes: bytes.subarray(e.offset, e.offset + e.byteLength),
      digest: e.digest,
    }));
    return { record, bytes, envelope: { ...g.envelope, payloads } };
  }

  /**
   * Re-read and decode every generation of one manifest snapshot (the one this store holds). A live
   * writer may rotate a generation out meanwhile: a listed file found missing is judged against the
   * manifest as it is now, and counts as rotated, not missing, if that no longer lists it. Generation
   * files without any store manifest are reported as orphaned.
   */
  async verify(): Promise<StoreVerifyReport> {
    const generations: GenerationCheck[] = [];
    const rotated: Id[] = [];
    for (const record of this.manifest.generations) {
      const check = await checkGeneration(this.dir, record);
      if (check.reason === 'audit_generation_missing' && !(await this.listedNow(record)))
        rotated.push(record.checkpointId);
      else generations.push(check);
    }
    const orphaned = await this.orphanedGenerations();
    return { ok: generations.every((g) => g.ok) && orphaned.length === 0, generations, rotated, orphaned };
  }

  /** Does the manifest on disk list this record right now? (A missing manifest lists nothing.) */
  private async listedNow(record: GenerationRecord): Promise<boolean> {
    return (await readManifestFile(this.dir)).generations.some((g) => g.checkpointId === record.checkpointId);
  }

  /** Generation files present while the directory has no store manifest (read after the listing, so a first commit racing us is not one). */
  private async orphanedGenerations(): Promise<string[]> {
    const names = (await readdir(this.dir)).sort();
    const generations = names.filter((n) => n.endsWith(GENERATION_SUFFIX) && !n.startsWith('tmp-'));
    if (generations.length === 0 || (await manifestExists(this.dir))) return [];
    return generations;
  }

  /** False when the directory holds no store manifest file (an empty store, or a lost manifest). */
  async hasManifest(): Promise<boolean> {
    return manifestExists(this.dir);
  }

  /** Unreferenced generations and temporaries in the directory (nothing is removed). */
  async scan(): Promise<StoreScan> {
    const listed = new Set(this.manifest.generations.map((g) => g.file));
    const names = (await readdir(this.dir)).sort();
    const temporaries = names.filter(
      (n) => n === STORE_MANIFEST_TMP || (n.startsWith('tmp-') && n.endsWith(GENERATION_SUFFIX)),
    );
    const unreferenced = names.filter((n) => n.endsWith(GENERATION_SUFFIX) && !n.startsWith('tmp-') && !listed.has(n));
    return { unreferenced, temporaries };
  }

  /**
   * Explicitly remove temporaries and unreferenced generations; returns the names removed. Never
   * automatic. Another process may commit while gc works (this in-process mutex cannot stop it), so
   * the manifest on disk is re-read right before each generation is deleted, and one it lists by
   * then is kept: gc never deletes a committed generation it scanned as unreferenced. A writer's
   * in-flight temporary can still be removed from under it (its commit then fails, honestly, and
   * nothing committed is lost); `detsim store gc` holds the run lock for a run's store so no writer
   * runs at all.
   */
  gc(): Promise<string[]> {
    return this.lock.run(async () => {
      this.manifest = await readManifestFile(this.dir);
      const { unreferenced, temporaries } = await this.scan();
      const removed: string[] = [];
      for (const name of [...temporaries, ...unreferenced].sort()) {
        if (name.endsWith(GENERATION_SUFFIX) && !name.startsWith('tmp-') && (await this.listsFileNow(name))) continue;
        await this.fs.unlink(join(this.dir, name));
        removed.push(name);
      }
      if (removed.length > 0) await this.fs.fsyncDir(this.dir);
      return removed;
    });
  }

  /** Re-read the manifest (adopting it) and say whether it lists this generation file. */
  private async listsFileNow(file: string): Promise<boolean> {
    this.manifest = await readManifestFile(this.dir);
    return this.manifest.generations.some((g) => g.file === file);
  }
}

async function ensureDir(dir: string, fs: DurableFs): Promise<void> {
  const made = await mkdir(dir, { recursive: true });
  if (made !== undefined) await fs.fsyncDir(dirname(made));
}

/**
 * The generation files in `dir` while it holds no store manifest (a lost manifest: every one is
 * unreferenced, never a restore candidate), sorted; [] when it has one, or none, or is not there.
 * The synchronous form of what `verify` reports as orphaned, for callers that check before opening.
 */
export function orphanedGenerationFiles(dir: string): string[] {
  if (!existsSync(dir) || existsSync(join(dir, STORE_MANIFEST_FILE))) return [];
  return readdirSync(dir)
    .filter((n) => n.endsWith(GENERATION_SUFFIX) && !n.startsWith('tmp-'))
    .sort();
}

async function manifestExists(dir: string): Promise<boolean> {
  try {
    await stat(join(dir, STORE_MANIFEST_FILE));
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
}

async function readManifestFile(dir: string): Promise<StoreManifest> {
  const path = join(dir, STORE_MANIFEST_FILE);
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return EMPTY_STORE_MANIFEST;
    throw e;
  }
  return parseStoreManifest(bytes, path);
}

function failed(record: GenerationRecord, check: string, reason: ReasonCode, message: string): GenerationCheck {
  return { checkpointId: record.checkpointId, file: record.file, ok: false, check, reason, message };
}

/** Every check of one generation against its record, in order; the first failure is reported. */
async function checkGeneration(dir: string, record: GenerationRecord): Promise<GenerationCheck> {
  try {
    await verifyGeneration(dir, record);
    return { checkpointId: record.checkpointId, file: record.file, ok: true };
  } catch (e) {
    if (e instanceof GenerationCheckError) return e.result;
    throw e;
  }
}

class GenerationCheckError extends DetsimError {
  constructor(readonly result: GenerationCheck) {
    super(result.reason!, `${result.file}: ${result.check}: ${result.message}`, result.check);
  }
}

const IDENTITY_FIELDS = ['checkpointId', 'sessionId', 'epoch', 'episodeId', 'boundary', 'compatibilityDigest'] as const;

/**
 * Check a generation against its record without holding it: the file's length, the FLYSESS1 checks
 * in order (read in bounded chunks), the envelope digest and the record fields; throws the first
 * failed check. `options` are the chunk size (tests) and a co-located worker's payload verdicts.
 */
export async function verifyGeneration(
  dir: string,
  record: GenerationRecord,
  options: ReadEnvelopeOptions = {},
): Promise<VerifiedGeneration> {
  const fail = (check: string, reason: ReasonCode, message: string): never => {
    throw new GenerationCheckError(failed(record, check, reason, message));
  };
  const path = join(dir, record.file);
  let fh: FileHandle;
  let size: number;
  try {
    fh = await open(path, 'r');
  } catch (e) {
    return fail('file', 'audit_generation_missing', `cannot read ${record.file}: ${describeError(e)}`);
  }
  try {
    try {
      size = await regularFileSize(fh);
    } catch (e) {
      return fail('file', 'audit_generation_missing', `cannot read ${record.file}: ${describeError(e)}`);
    }
    if (String(size) !== record.byteLength)
      fail('byteLength', 'audit_generation_length', `file has ${size} bytes, the store records ${record.byteLength}`);
    let envelope: VerifiedEnvelope;
    let kept: ReadonlyMap<string, Buffer>;
    try {
      ({ kept, ...envelope } = await verifyEnvelopeFile(fh, size, options));
    } catch (e) {
      if (isDetsimError(e)) return fail('envelope', e.reason, e.message);
      throw e;
    }
    if (envelope.envelopeDigest !== record.envelopeDigest) {
      fail(
        'envelopeDigest',
        'audit_generation_digest',
        `file SHA-256 is ${envelope.envelopeDigest}, the store records ${record.envelopeDigest}`,
      );
    }
    checkRecordFields(dir, record, envelope.manifest, fail);
    return { record, path, byteLength: size, envelope, kept };
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** The size of an opened regular file; anything else fails the way reading it would (e.g. EISDIR). */
async function regularFileSize(fh: FileHandle): Promise<number> {
  const info = await fh.stat();
  if (!info.isFile()) await fh.read(Buffer.alloc(1), 0, 1, 0);
  return info.size;
}

/** The record fields must be those the envelope manifest implies. */
function checkRecordFields(
  dir: string,
  record: GenerationRecord,
  manifest: EnvelopeManifest,
  fail: (check: string, reason: ReasonCode, message: string) => never,
): void {
  const implied = generationIdentityOf(manifest);
  for (const field of IDENTITY_FIELDS) {
    if (implied[field] !== record[field]) {
      fail(
        `record.${field}`,
        'audit_generation_record',
        `the envelope manifest implies ${field} ${JSON.stringify(implied[field])}, ${join(dir, STORE_MANIFEST_FILE)} records ${JSON.stringify(record[field])}`,
      );
    }
  }
}
