// Where a claim's re-check reads a run's files: straight from a run directory (export), or from a
// bundle — a bundled file (its hash already checked), else a file the bundle references by digest
// taken from the run directory given with --run and checked against that digest. Tells "referenced,
// not present" (audit_evidence_not_present) from "present, wrong" (audit_evidence_file_hash).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import {
  type AttestationExtras,
  attestationFacts,
  type AttestationFacts,
  conformanceFacts,
  predictionFacts,
} from './attestation-facts.js';
import { fileDigest } from './bundle-reader.js';

export interface RunView {
  /** The run's folder in the bundle, e.g. `runs/forage-walkers-1`. */
  readonly bundlePath: string;
  has(rel: string): boolean;
  bytes(rel: string): Buffer;
  json(rel: string): unknown;
  /** A directory holding every trace file of the run, each checked. */
  traceDir(): string;
  /** A file that is present must hash to `sha256`; one referenced only is left to its digest. */
  checkIfPresent(rel: string, sha256: string): void;
  /** The verify attestation's facts about this run's configuration (null: none in the bundle). */
  attestation(): AttestationFacts | null;
  /** The prediction verify --predict ledgered for this run's configuration (null: none). */
  prediction(): Record<string, unknown> | null;
  /** The conformance file the attestation records (null: none carried). */
  conformance(): Record<string, unknown> | null;
}

/** The attestation that replayed a run: its bytes, its place in the bundle and the configuration. */
export interface AttestationRef {
  bytes: Uint8Array;
  path: string;
  subject: string;
  extras: AttestationExtras;
}

abstract class BaseView implements RunView {
  constructor(
    readonly bundlePath: string,
    private readonly attested: AttestationRef | null,
  ) {}
  abstract has(rel: string): boolean;
  abstract bytes(rel: string): Buffer;
  abstract traceDir(): string;
  abstract checkIfPresent(rel: string, sha256: string): void;
  json(rel: string): unknown {
    try {
      return parseStrict(this.bytes(rel));
    } catch (e) {
      if (e instanceof DetsimError && e.reason.startsWith('struct_'))
        throw new DetsimError(e.reason, `${this.bundlePath}/${rel}: ${e.message}`, rel);
      throw e;
    }
  }
  attestation(): AttestationFacts | null {
    const a = this.attested;
    return a === null ? null : attestationFacts(a.bytes, a.subject, a.path);
  }
  prediction(): Record<string, unknown> | null {
    const a = this.attested;
    return a === null ? null : predictionFacts(a.bytes, a.extras, a.subject, 'attestation/ledger.jsonl');
  }
  conformance(): Record<string, unknown> | null {
    const a = this.attested;
    return a === null ? null : conformanceFacts(a.bytes, a.extras.conformance, 'attestation/conformance.json');
  }
}

/** A run directory as it is on disk (export reads the run it describes). */
export class DirView extends BaseView {
  constructor(
    private readonly dir: string,
    bundlePath: string,
    attested: AttestationRef | null = null,
  ) {
    super(bundlePath, attested);
  }
  has(rel: string): boolean {
    return existsSync(join(this.dir, rel));
  }
  bytes(rel: string): Buffer {
    if (!this.has(rel))
      throw new DetsimError(
        'audit_evidence_not_present',
        `${join(this.dir, rel)} is missing from the run directory`,
        rel,
      );
    return readFileSync(join(this.dir, rel));
  }
  traceDir(): string {
    return this.dir;
  }
  checkIfPresent(rel: string, sha256: string): void {
    if (this.has(rel)) checkDigest(join(this.dir, rel), sha256, `${this.dir}/${rel}`);
  }
}

/**
 * The files a bundle references only: each one's recorded digest (its source record), and the
 * set of those this verify read from a --run directory and found to have it.
 */
export interface Referenced {
  readonly referenced: ReadonlyMap<string, string>;
  readonly checked: Set<string>;
}

/** A run inside a bundle, with the run directory given by --run for the files it references only. */
export class BundleView extends BaseView {
  constructor(
    private readonly root: string,
    bundlePath: string,
    private readonly present: ReadonlySet<string>,
    private readonly files: Referenced,
    private readonly runDir: string | null,
    attested: AttestationRef | null,
  ) {
    super(bundlePath, attested);
  }
  private full(rel: string): string {
    return `${this.bundlePath}/${rel}`;
  }
  has(rel: string): boolean {
    return this.present.has(this.full(rel)) || this.files.referenced.has(this.full(rel));
  }
  /** Where the bytes of `rel` are, checked: the bundle's copy, or the --run directory's against the digest. */
  private locate(rel: string): string {
    const full = this.full(rel);
    if (this.present.has(full)) return join(this.root, full);
    const digest = this.files.referenced.get(full);
    const hint = this.runDir === null ? ' (give the run directory with --run, or export with --include)' : '';
    const local = this.runDir === null ? null : join(this.runDir, rel);
    if (digest === undefined || local === null || !existsSync(local))
      throw new DetsimError('audit_evidence_not_present', `${full}: referenced, not present${hint}`, full);
    checkDigest(local, digest, `${full} (from ${local})`);
    this.files.checked.add(full);
    return local;
  }
  bytes(rel: string): Buffer {
    return readFileSync(this.locate(rel));
  }
  traceDir(): string {
    const prefix = this.full('trace/');
    const files = [...this.present, ...this.files.referenced.keys()].filter((p) => p.startsWith(prefix));
    const all = files.every((p) => this.present.has(p));
    for (const p of files) this.locate(p.slice(this.bundlePath.length + 1));
    return all ? join(this.root, this.bundlePath) : this.runDir!;
  }
  checkIfPresent(rel: string, sha256: string): void {
    const full = this.full(rel);
    const recorded = this.files.referenced.get(full);
    if (recorded !== undefined && recorded !== sha256)
      throw new DetsimError(
        'audit_evidence_file_hash',
        `${full}: archive/sources.jsonl records SHA-256 ${recorded}, the run binds ${sha256}`,
        full,
      );
    if (this.present.has(full)) checkDigest(join(this.root, full), sha256, full);
    else if (this.runDir !== null && existsSync(join(this.runDir, rel))) {
      checkDigest(join(this.runDir, rel), sha256, `${full} (from ${join(this.runDir, rel)})`);
      this.files.checked.add(full);
    }
  }
}

function checkDigest(path: string, sha256: string, shown: string): void {
  const actual = fileDigest(path).sha256;
  if (actual !== sha256)
    throw new DetsimError(
      'audit_evidence_file_hash',
      `${shown}: present, wrong: SHA-256 ${actual}, recorded ${sha256}`,
      shown,
    );
}
