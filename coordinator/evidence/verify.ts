// `detsim evidence verify`: a Portable Evidence Bundle checked in the order a reviewer would — regular
// files only, the manifest against its schema and its content hash, the file set and every file's
// SHA-256, every record against its schema, every reference, each claim's status and evidence
// (current, not truncated), then each detsim claim recomputed from the files. The first failing
// check is thrown as a DetsimError naming file, record and field. Not the CLI (cli/evidence-command.ts).
import { basename } from 'node:path';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { checkRelativePath, fileDigest, listBundleFiles, readJsonLines, readJsonObject } from './bundle-reader.js';
import { type ClaimCheck, factsOf, statementOf } from './claims.js';
import { BUNDLE_README, renderReport } from './records.js';
import {
  CONTENTS,
  consumerGuide,
  type ContentKey,
  MANIFEST_FILE,
  manifestContentHash,
  RECORD_SCHEMA,
  schemaProblem,
} from './pebv1.js';
import { type AttestationRef, BundleView, type Referenced } from './run-view.js';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';

type Rec = Record<string, unknown>;

export interface ClaimOutcome {
  id: string;
  statement: string;
  /** rechecked: a detsim claim recomputed from the files; checked: status, evidence and references only. */
  how: 'rechecked' | 'checked';
}

export interface VerifyOutcome {
  bundleId: string;
  files: number;
  claims: ClaimOutcome[];
  /** Referenced files not checked: no claim needed their bytes, or no --run directory had them. */
  notPresent: string[];
}

interface Loaded {
  root: string;
  manifest: Rec;
  present: Set<string>;
  records: Record<string, Rec[]>;
}

function fail(reason: ConstructorParameters<typeof DetsimError>[0], message: string, field?: string): never {
  throw new DetsimError(reason, message, field);
}

/** Steps 1–3: the manifest (schema, content hash) and the file set with every file's SHA-256. */
function checkFiles(root: string): { manifest: Rec; present: Set<string> } {
  const files = listBundleFiles(root);
  if (!files.includes(MANIFEST_FILE)) fail('audit_evidence_file_missing', `${MANIFEST_FILE} is missing`, MANIFEST_FILE);
  const manifest = readJsonObject(root, MANIFEST_FILE);
  const bad = schemaProblem('manifest', manifest);
  if (bad) fail('struct_evidence_schema', `${MANIFEST_FILE}: ${bad}`, MANIFEST_FILE);
  const stated = (manifest.bundle as Rec).content_hash;
  const hash = manifestContentHash(manifest);
  if (stated !== hash)
    fail(
      'audit_evidence_content_hash',
      `${MANIFEST_FILE}: bundle.content_hash is ${String(stated)}, the manifest hashes to ${hash}`,
      'bundle.content_hash',
    );
  const listed = (manifest.integrity as { file_hashes: Record<string, string> }).file_hashes;
  for (const rel of Object.values(manifest.contents as Record<string, string>))
    checkRelativePath(rel, `contents ${rel}`);
  const onDisk = new Set(files.filter((f) => f !== MANIFEST_FILE));
  for (const rel of Object.keys(listed).sort()) {
    checkRelativePath(rel, `integrity.file_hashes ${rel}`);
    if (!onDisk.has(rel))
      fail('audit_evidence_file_missing', `${rel} is listed in integrity.file_hashes and missing from the bundle`, rel);
  }
  for (const rel of onDisk)
    if (!(rel in listed))
      fail('audit_evidence_unlisted_file', `${rel} is in the bundle and not listed in integrity.file_hashes`, rel);
  for (const rel of [...onDisk].sort()) {
    const d = fileDigest(join(root, rel)).sha256;
    if (d !== listed[rel])
      fail(
        'audit_evidence_file_hash',
        `${rel}: present, wrong: SHA-256 ${d}, integrity.file_hashes records ${listed[rel]}`,
        rel,
      );
  }
  return { manifest, present: onDisk };
}

/** Step 4: every record of every JSON content file against its schema. */
function loadRecords(root: string, manifest: Rec): Record<string, Rec[]> {
  const contents = manifest.contents as Record<ContentKey, string>;
  const out: Record<string, Rec[]> = {};
  for (const key of Object.keys(RECORD_SCHEMA) as ContentKey[]) {
    const rel = contents[key];
    const rows =
      key === 'index' || key === 'policy' ? [{ line: 1, value: readJsonObject(root, rel) }] : readJsonLines(root, rel);
    out[key] = rows.map(({ line, value }) => {
      const bad = schemaProblem(RECORD_SCHEMA[key]!, value);
      if (bad) fail('struct_evidence_schema', `${rel} line ${line}: ${bad}`, rel);
      return value as Rec;
    });
  }
  return out;
}

const ids = (rows: Rec[] | undefined) => new Set((rows ?? []).map((r) => String(r.id)));

/** Step 5: every id a record names is a record of the bundle. */
function checkReferences(r: Record<string, Rec[]>): void {
  const have = {
    evidence: ids(r.evidence),
    observations: ids(r.observations),
    sources: ids(r.sources),
    claims: ids(r.claims),
  };
  const need = (set: Set<string>, list: unknown, who: string, what: string) => {
    for (const id of list as string[])
      if (!set.has(id)) fail('audit_evidence_dangling_ref', `${who}: ${what} ${id} is not in the bundle`, who);
  };
  for (const c of r.claims ?? []) {
    need(have.evidence, c.evidence_refs, `claim ${String(c.id)}`, 'evidence');
    need(have.evidence, c.counter_evidence_refs, `claim ${String(c.id)}`, 'counter-evidence');
    need(have.observations, c.observation_refs, `claim ${String(c.id)}`, 'observation');
  }
  for (const e of r.evidence ?? []) need(have.sources, e.source_refs, `evidence ${String(e.id)}`, 'source');
  for (const o of r.observations ?? []) need(have.sources, o.source_refs, `observation ${String(o.id)}`, 'source');
  const index = r.index![0]!;
  need(have.claims, index.claim_refs, CONTENTS.index, 'claim');
  need(have.evidence, index.evidence_refs, CONTENTS.index, 'evidence');
  need(have.observations, index.observation_refs, CONTENTS.index, 'observation');
}

/** Step 6: a claim stands only when supported by current, complete evidence. */
function checkClaimStatus(claim: Rec, evidence: Map<string, Rec>): void {
  const id = String(claim.id);
  const status = String(claim.status);
  if (status === 'conflicted' || status === 'unknown' || status === 'unsupported')
    fail('audit_evidence_unsupported', `claim ${id} is ${status}${counter(claim)}`, `claim ${id}`);
  for (const ref of claim.evidence_refs as string[]) {
    const ev = evidence.get(ref)!;
    const fresh = ev.freshness as Rec;
    if (fresh.status !== 'current')
      fail(
        'audit_evidence_stale',
        `evidence ${ref} of claim ${id} is ${String(fresh.status)}: ${String(fresh.effect)}`,
        `evidence ${ref}`,
      );
    if ((ev.integrity as Rec).truncated === true)
      fail(
        'audit_evidence_truncated',
        `evidence ${ref} of claim ${id} is truncated (full content: ${String((ev.integrity as Rec).blob_ref)})`,
        `evidence ${ref}`,
      );
  }
  if (status !== 'supported')
    fail('audit_evidence_unsupported', `claim ${id} is ${status}, not supported`, `claim ${id}`);
}

const counter = (c: Rec) =>
  (c.counter_evidence_refs as string[]).length > 0
    ? ` (counter-evidence ${(c.counter_evidence_refs as string[]).join(', ')})`
    : '';

function load(root: string): Loaded {
  const { manifest, present } = checkFiles(root);
  const records = loadRecords(root, manifest);
  checkReferences(records);
  return { root, manifest, present, records };
}

/** The run directory given with --run for a bundled run: the one named like it, or the only one. */
function runDirFor(bundlePath: string, runs: readonly string[], runCount: number): string | null {
  return (
    runs.find((d) => basename(d) === basename(bundlePath)) ?? (runs.length === 1 && runCount === 1 ? runs[0]! : null)
  );
}

const bundled = (b: Loaded, rel: string): Buffer | null =>
  b.present.has(rel) ? readFileSync(join(b.root, rel)) : null;

/** Step 7: a detsim claim's values recomputed from the files. */
function recheck(b: Loaded, claim: Rec, runs: readonly string[], files: Referenced): void {
  const spec = (claim.extensions as { detsim: ClaimCheck }).detsim;
  const runPaths = new Set(
    (b.records.claims ?? [])
      .map((c) => (c.extensions as { detsim?: ClaimCheck } | undefined)?.detsim?.run)
      .filter(Boolean),
  );
  const attested: AttestationRef | null = b.present.has('attestation/attestation.jsonl')
    ? {
        bytes: readFileSync(join(b.root, 'attestation/attestation.jsonl')),
        path: 'attestation/attestation.jsonl',
        subject: String(spec.expected.subject ?? ''),
        extras: {
          ledger: bundled(b, 'attestation/ledger.jsonl'),
          head: bundled(b, 'attestation/ledger.head.json'),
          conformance: bundled(b, 'attestation/conformance.json'),
        },
      }
    : null;
  const viewOf = (path: string) =>
    new BundleView(b.root, path, b.present, files, runDirFor(path, runs, runPaths.size), attested);
  const other = spec.check === 'same-run' ? viewOf(String(spec.expected.other)) : undefined;
  const actual = factsOf(spec.check, viewOf(spec.run), other);
  for (const [field, want] of Object.entries(spec.expected)) {
    if (canonicalize(actual[field] ?? null) !== canonicalize(want))
      fail(
        'audit_evidence_recheck_failed',
        `claim ${String(claim.id)}: ${field} recomputes to ${canonicalize(actual[field] ?? null)}, the claim states ${canonicalize(want)}`,
        `claim ${String(claim.id)}`,
      );
  }
  // The sentence a reviewer reads is the one these values give, not text beside them.
  const stated = statementOf(spec.check, spec.run.replace(/^runs\//, ''), actual);
  if (claim.statement !== stated)
    fail(
      'audit_evidence_recheck_failed',
      `claim ${String(claim.id)}: its statement is not the one its recomputed values give: ${JSON.stringify(stated)}`,
      `claim ${String(claim.id)}`,
    );
}

/**
 * The report of a detsim bundle is PEBv1's deterministic projection of its claims (records.ts
 * renderReport): a report that says something else is refused, as a PEBv1 validator refuses it.
 */
function checkReport(b: Loaded): void {
  const rel = (b.manifest.contents as Record<string, string>).report;
  if (rel === undefined || !b.present.has(rel)) return;
  const question = String(b.records.index![0]!.question);
  if (readFileSync(join(b.root, rel), 'utf8') !== renderReport(question, b.records.claims ?? []))
    fail(
      'audit_evidence_recheck_failed',
      `${rel} is not the projection of ${CONTENTS.claims} and the index's question (PEBv1's deterministic report)`,
      rel,
    );
  // The reading notes a reviewer is pointed to are fixed text too: PEBv1's guide and detsim's README.
  for (const [file, text] of [
    [CONTENTS.consumer_guide, consumerGuide()],
    ['README.md', BUNDLE_README],
  ] as const)
    if (b.present.has(file) && readFileSync(join(b.root, file), 'utf8') !== text)
      fail('audit_evidence_recheck_failed', `${file} is not the fixed text detsim writes (edited?)`, file);
}

/**
 * archive/sources.jsonl against the bundle: a source recorded as included is there with the
 * SHA-256 it records; one referenced only is not, and its digest is what the run binds
 * (a checkpoint's: the envelope digest its ledger records, held in BundleView.checkIfPresent).
 */
function checkSources(b: Loaded): void {
  const listed = (b.manifest.integrity as { file_hashes: Record<string, string> }).file_hashes;
  for (const s of b.records.sources ?? []) {
    const path = (s.locator as Rec).path;
    const hash = (s.integrity as Rec).content_hash;
    const own = (s.extensions as { detsim?: { included?: unknown } } | undefined)?.detsim;
    if (typeof path !== 'string' || own === undefined) continue;
    const where = `${CONTENTS.sources} ${String(s.id)} (${path})`;
    if (own.included === true && !b.present.has(path))
      fail('audit_evidence_file_missing', `${where}: recorded as included, missing from the bundle`, path);
    if (own.included === false && b.present.has(path))
      fail('audit_evidence_unlisted_file', `${where}: recorded as referenced only, and in the bundle`, path);
    if (b.present.has(path) && listed[path] !== hash)
      fail('audit_evidence_file_hash', `${where}: records SHA-256 ${String(hash)}, the file has ${listed[path]}`, path);
  }
}

/** Every check, in order; returns what was verified or throws the first failure. */
export function verifyBundle(root: string, runs: readonly string[] = []): VerifyOutcome {
  const b = load(root);
  checkSources(b);
  const referenced = new Map<string, string>();
  for (const s of b.records.sources ?? []) {
    const path = (s.locator as Rec).path;
    const hash = (s.integrity as Rec).content_hash;
    if (typeof path === 'string' && typeof hash === 'string' && !b.present.has(path)) referenced.set(path, hash);
  }
  const evidence = new Map((b.records.evidence ?? []).map((e) => [String(e.id), e]));
  const claims: ClaimOutcome[] = [];
  const checked = new Set<string>();
  for (const claim of b.records.claims ?? []) {
    checkClaimStatus(claim, evidence);
    const detsim = (claim.extensions as { detsim?: unknown } | undefined)?.detsim !== undefined;
    if (detsim) recheck(b, claim, runs, { referenced, checked });
    claims.push({ id: String(claim.id), statement: String(claim.statement), how: detsim ? 'rechecked' : 'checked' });
  }
  if (claims.some((c) => c.how === 'rechecked')) checkReport(b);
  // Referenced files no --run directory supplied (those it did were read and hashed above).
  const notPresent = [...referenced.keys()].filter((p) => p.startsWith('runs/') && !checked.has(p)).sort();
  return { bundleId: String((b.manifest.bundle as Rec).id), files: b.present.size + 1, claims, notPresent };
}
