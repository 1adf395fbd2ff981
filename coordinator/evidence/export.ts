// `detsim evidence export`: plan the files of a run directory (or of the runs a verify attestation
// names), recompute every claim from them (a damaged receipt, trace or ledger is refused before
// anything is written), then write the bundle into a temporary sibling and rename it into place, so
// it appears whole or not at all. Not the records (records.ts) nor the checks (claims.ts).
import { createHash } from 'node:crypto';
import {
  closeSync,
  copyFileSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { canonicalize } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { findPackageRoot } from '../../core/protocol/contract.js';
import { fsyncDir } from '../durable-file.js';
import { observationsName } from '../trace/trace-store.js';
import { readJsonFile } from '../receipt/receipt.js';
import { type AttestationExtras, attestationLines, replayedSubjects } from './attestation-facts.js';
import { fileDigest } from './bundle-reader.js';
import { factsOf, statementOf, type CheckName } from './claims.js';
import {
  consumerGuide,
  CONTENTS,
  MANIFEST_FILE,
  manifestContentHash,
  PEB_PRODUCER_NAME,
  PEB_PROTOCOL,
  ZERO_HASH,
} from './pebv1.js';
import {
  type FileRole,
  type PlannedClaim,
  type PlannedFile,
  type PlannedRun,
  BUNDLE_README,
  indexRecord,
  POLICY,
  renderReport,
  runRecords,
  SCHEMA_URI,
  sourceRecords,
} from './records.js';
import { RO_CRATE_METADATA_FILE, roCrateMetadata } from './ro-crate.js';
import { type AttestationRef, DirView } from './run-view.js';
import { checkRunsParent } from '../session/run-dir.js';
import { orphanedGenerationFiles } from '../store/store.js';

/** Without --include, the trace is copied when it is at most this large, else referenced by digest. */
export const AUTO_INCLUDE_TRACE_BYTES = 64 * 1024 * 1024;
export const ATTESTATION_PATH = 'attestation/attestation.jsonl';

export interface ExportOptions {
  /** What to copy besides the small files; undefined: the trace when ≤ AUTO_INCLUDE_TRACE_BYTES. */
  include?: { trace: boolean; checkpoints: boolean };
  /** Another run directory of the same run (e.g. the uninterrupted one): bundled with a same-run claim. */
  sameAs?: string;
  /** The export time (physical): created_at, checked_at. */
  exportedAt?: string;
  /** Also write ro-crate-metadata.json (a Process Run Crate of the run; one run per bundle). */
  roCrate?: boolean;
}

export interface ExportPlan {
  runs: PlannedRun[];
  sources: { dir: string; bundlePath: string }[];
  files: PlannedFile[];
  exportedAt: string;
  version: string;
}

export interface ExportResult {
  bundleDir: string;
  bundleId: string;
  files: number;
  referenced: PlannedFile[];
  claims: { id: string; statement: string }[];
}

export function detsimVersion(): string {
  return (JSON.parse(readFileSync(join(findPackageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}

/** Refuse a destination that exists and is not an empty directory (nothing is written then). */
function checkDestination(dest: string): void {
  // Its parent must be a writable directory off /proc and /sys (a write there may never return).
  checkRunsParent(dirname(resolve(dest)), '<bundle-dir>', 'evidence bundles');
  if (!existsSync(dest)) return;
  if (!statSync(dest).isDirectory() || readdirSync(dest).length > 0)
    throw new DetsimError(
      'perm_evidence_bundle_exists',
      `${dest} exists and is not empty: a bundle is written into a new directory`,
      'bundle-dir',
    );
}

interface BundleLevelFile {
  from: string;
  rel: string;
  role: FileRole;
}

interface RunSource {
  dir: string;
  attested: AttestationRef | null;
  /** Files of the verify output directory the bundle carries under attestation/. */
  shared: BundleLevelFile[];
}

/** The conformance file the verdict line records: beside the attestation, or at its recorded path. */
function conformanceFile(source: string, attestation: Uint8Array): string | null {
  const verdict = attestationLines(attestation).find((l) => l.type === 'verdict');
  const path = (verdict?.conformance as { present?: boolean; path?: string } | undefined)?.path;
  if (typeof path !== 'string') return null;
  return [join(source, basename(path)), resolve(path)].find((p) => existsSync(p)) ?? null;
}

/** attestation.jsonl, and the prediction ledger and conformance file beside it when there are. */
function sharedFiles(source: string, attestation: Uint8Array): BundleLevelFile[] {
  const out: BundleLevelFile[] = [
    { from: join(source, 'attestation.jsonl'), rel: ATTESTATION_PATH, role: 'attestation' },
  ];
  for (const f of ['ledger.jsonl', 'ledger.head.json'])
    if (existsSync(join(source, f)))
      out.push({ from: join(source, f), rel: `attestation/${f}`, role: 'prediction-ledger' });
  const conformance = conformanceFile(source, attestation);
  if (conformance !== null) out.push({ from: conformance, rel: 'attestation/conformance.json', role: 'conformance' });
  return out;
}

function extrasOf(shared: BundleLevelFile[]): AttestationExtras {
  const bytes = (rel: string) => {
    const f = shared.find((x) => x.rel === rel);
    return f ? readFileSync(f.from) : null;
  };
  return {
    ledger: bytes('attestation/ledger.jsonl'),
    head: bytes('attestation/ledger.head.json'),
    conformance: bytes('attestation/conformance.json'),
  };
}

/** The runs a source names: itself (a run directory) or the first run of each replayed configuration. */
function runsOf(source: string): RunSource[] {
  if (existsSync(join(source, 'receipt.json'))) return [{ dir: source, attested: null, shared: [] }];
  const file = join(source, 'attestation.jsonl');
  if (!existsSync(file))
    throw new DetsimError(
      'struct_invalid_field',
      `${source} is neither a run directory (receipt.json) nor a verify output directory (attestation.jsonl)`,
      'source',
    );
  const bytes = readFileSync(file);
  const subjects = replayedSubjects(bytes);
  if (subjects.length === 0)
    throw new DetsimError(
      'audit_evidence_recheck_failed',
      `${file} records no passing replay to export`,
      'attestation.jsonl',
    );
  const shared = sharedFiles(source, bytes);
  const extras = extrasOf(shared);
  return subjects.map((s) => {
    const dir = s.runDirs.find((d) => existsSync(join(d, 'receipt.json')));
    if (dir === undefined)
      throw new DetsimError(
        'audit_evidence_not_present',
        `${file}: the runs of ${s.subject} (${s.runDirs.join(', ')}) are gone; export a run directory instead`,
        s.subject,
      );
    return { dir, attested: { bytes, path: ATTESTATION_PATH, subject: s.subject, extras }, shared };
  });
}

function planFile(dir: string, bundlePath: string, rel: string, role: FileRole, copy: boolean): PlannedFile {
  const from = join(dir, rel);
  const d = fileDigest(from);
  return { rel: `${bundlePath}/${rel}`, from, sha256: d.sha256, bytes: d.bytes, copy, role };
}

interface TraceSegment {
  segment: string;
  repro?: { file: string };
}

/** The files of one run: the small ones always copied, the trace and checkpoints as `include` says. */
function planRunFiles(dir: string, bundlePath: string, include: ExportOptions['include']): PlannedFile[] {
  const small: [string, FileRole][] = [
    ['receipt.json', 'receipt'],
    ['run.json', 'run-record'],
    ['summary.json', 'summary'],
    ['ledger.jsonl', 'ledger'],
    ['ledger.head.json', 'ledger-head'],
    ['trace/index.jsonl', 'trace-index'],
    ['store/manifest.json', 'store-manifest'],
  ];
  const files = small
    .filter(([rel]) => existsSync(join(dir, rel)))
    .map(([rel, role]) => planFile(dir, bundlePath, rel, role, true));
  const receipt = readJsonFile(join(dir, 'receipt.json'), 'receipt.json') as {
    trace?: { segments?: TraceSegment[] };
  };
  // Each segment with its repro file and, for a run made with --trace-observations, its observations
  // sidecar (every line hashes to its step's observationDigest: bound through the segment).
  const traceRels = (receipt.trace?.segments ?? []).flatMap((s) => [
    s.segment,
    ...(s.repro ? [s.repro.file] : []),
    ...(existsSync(join(dir, 'trace', observationsName(s.segment))) ? [observationsName(s.segment)] : []),
  ]);
  const trace = traceRels.map((f) => planFile(dir, bundlePath, `trace/${f}`, 'trace-segment', false));
  const traceBytes = trace.reduce((n, f) => n + f.bytes, 0);
  const copyTrace = include?.trace ?? traceBytes <= AUTO_INCLUDE_TRACE_BYTES;
  const store = existsSync(join(dir, 'store/manifest.json'))
    ? ((readJsonFile(join(dir, 'store/manifest.json'), 'store/manifest.json') as { generations?: { file: string }[] })
        .generations ?? [])
    : storeWithoutManifest(dir);
  const checkpoints = store.map((g) =>
    planFile(dir, bundlePath, `store/${g.file}`, 'checkpoint', include?.checkpoints ?? false),
  );
  return [...files, ...trace.map((f) => ({ ...f, copy: copyTrace })), ...checkpoints];
}

/**
 * No store/manifest.json: a run without checkpoints, or one copied without its store/ (no checkpoint
 * claim, as the bundle then has nothing to show for them); a store/ holding generation files
 * without its manifest is damaged, and refused as `store verify` refuses it.
 */
function storeWithoutManifest(dir: string): [] {
  const store = join(dir, 'store');
  const files = orphanedGenerationFiles(store);
  if (files.length > 0)
    throw new DetsimError(
      'audit_store_manifest_missing',
      `${join(store, 'manifest.json')}: missing, while ${files.length} generation file(s) remain in ${store}: the store is damaged (\`detsim store verify ${dir}\`)`,
      'store/manifest.json',
    );
  return [];
}

const ROLES: Record<CheckName, FileRole[]> = {
  reprohash: ['receipt', 'run-record', 'summary', 'trace-index', 'trace-segment'],
  ledger: ['ledger', 'ledger-head'],
  checkpoints: ['store-manifest', 'ledger', 'checkpoint'],
  replay: ['attestation', 'receipt'],
  'same-run': ['receipt', 'ledger', 'trace-index', 'trace-segment'],
  prediction: ['prediction-ledger', 'attestation'],
  conformance: ['conformance', 'attestation'],
};

/** Recompute every claim of one run from its files (export refuses what does not recompute). */
function planRun(src: RunSource, bundlePath: string, include: ExportOptions['include'], first: boolean): PlannedRun {
  const name = bundlePath.slice('runs/'.length);
  const files = planRunFiles(src.dir, bundlePath, include);
  for (const f of src.shared)
    files.push({ ...planFile(dirname(f.from), '', basename(f.from), f.role, true), rel: f.rel });
  const view = new DirView(src.dir, bundlePath, src.attested);
  const checks: CheckName[] = ['reprohash', 'ledger'];
  if (files.some((f) => f.role === 'store-manifest')) checks.push('checkpoints');
  if (src.attested) checks.push('replay');
  if (src.attested && view.prediction() !== null) checks.push('prediction');
  if (first && src.attested && view.conformance() !== null) checks.push('conformance');
  const claims: PlannedClaim[] = checks
    .filter((c) => c !== 'ledger' || view.has('ledger.jsonl'))
    .map((check) => {
      const facts = factsOf(check, view);
      return { check, facts, statement: statementOf(check, name, facts), roles: ROLES[check] };
    });
  const repro = claims[0]!.facts;
  return {
    name,
    bundlePath,
    files,
    claims,
    summary: `Run ${name}: session ${String(repro.sessionId)}, master seed ${String(repro.masterSeed)}, ${String(repro.steps)} steps (runs/${name}/run.json).`,
  };
}

/** The same-run claim of `a` against `b`, recomputed from both run directories. */
function addSameRun(a: PlannedRun, b: PlannedRun, aDir: string, bDir: string): void {
  const facts = factsOf('same-run', new DirView(aDir, a.bundlePath), new DirView(bDir, b.bundlePath));
  a.claims.push({
    check: 'same-run',
    facts,
    statement: statementOf('same-run', a.name, facts),
    roles: ROLES['same-run'],
    also: b.files,
  });
}

export function planExport(source: string, opts: ExportOptions = {}): ExportPlan {
  const srcs = runsOf(resolve(source));
  if (opts.sameAs !== undefined) {
    if (srcs.length !== 1 || srcs[0]!.attested !== null)
      throw new DetsimError(
        'struct_invalid_field',
        '--same-as compares two run directories: export a run directory with it',
        '--same-as',
      );
    if (!existsSync(join(opts.sameAs, 'receipt.json')))
      throw new DetsimError(
        'struct_invalid_field',
        `--same-as ${opts.sameAs} is not a run directory (no receipt.json)`,
        '--same-as',
      );
    srcs.push({ dir: resolve(opts.sameAs), attested: null, shared: [] });
  }
  const names = new Set<string>();
  const runs = srcs.map((s, i) => {
    let name = basename(s.dir);
    for (let i = 2; names.has(name); i++) name = `${basename(s.dir)}-${i}`;
    names.add(name);
    return planRun(s, `runs/${name}`, opts.include, i === 0);
  });
  if (opts.sameAs !== undefined) addSameRun(runs[0]!, runs[1]!, srcs[0]!.dir, srcs[1]!.dir);
  const files = [...new Map(runs.flatMap((r) => r.files).map((f) => [f.rel, f])).values()].sort((a, b) =>
    a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0,
  );
  const exportedAt = opts.exportedAt ?? new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
  return {
    runs,
    sources: srcs.map((s, i) => ({ dir: s.dir, bundlePath: runs[i]!.bundlePath })),
    files,
    exportedAt,
    version: detsimVersion(),
  };
}

/** ro-crate-metadata.json describing the run and every file of the bundle (manifest.json aside: it binds the crate). */
function roCrateText(plan: ExportPlan, texts: Map<string, string>): string {
  if (plan.runs.length !== 1)
    throw new DetsimError(
      'struct_invalid_field',
      `--ro-crate describes one run; this bundle holds ${plan.runs.length}: export a run directory`,
      '--ro-crate',
    );
  const own = [...texts].map(([rel, text]) => ({
    path: rel,
    sha256: fileDigestOfText(text),
    bytes: Buffer.byteLength(text),
    present: true,
  }));
  const run = plan.files.map((f) => ({ path: f.rel, sha256: f.sha256, bytes: f.bytes, present: f.copy }));
  const meta = roCrateMetadata(plan.sources[0]!.dir, [...own, ...run], {
    detsimVersion: plan.version,
    exportedAt: plan.exportedAt,
    runPrefix: `${plan.runs[0]!.bundlePath}/`,
  });
  return `${JSON.stringify(meta, null, 2)}\n`;
}

/** The content files and the manifest of a plan, as text by bundle path. */
function renderBundle(
  plan: ExportPlan,
  opts: ExportOptions,
): { texts: Map<string, string>; manifest: Record<string, unknown>; bundleId: string; question: string } {
  const recs = runRecords(plan.runs, plan.files, plan.exportedAt);
  const first = plan.runs[0]!.claims[0]!.facts;
  const bundleId = `detsim-${String(first.sessionId)}-${String(first.reproHash)}${plan.runs.length > 1 ? `-${plan.runs.length}runs` : ''}`;
  const question = `Do the recorded runs (${plan.runs.map((r) => r.name).join(', ')}) recompute to the ReproHash, ledger, checkpoints and replay outcome they state?`;
  const referenced = plan.files.filter((f) => !f.copy).length;
  const jsonl = (rows: unknown[]) => (rows.length === 0 ? '\n' : rows.map((r) => `${canonicalize(r)}\n`).join(''));
  const texts = new Map<string, string>([
    [CONTENTS.index, `${canonicalize(indexRecord(bundleId, question, recs, referenced))}\n`],
    [CONTENTS.claims, jsonl(recs.claims)],
    [CONTENTS.evidence, jsonl(recs.evidence)],
    [CONTENTS.observations, jsonl(recs.observations)],
    [CONTENTS.sources, jsonl(sourceRecords(plan.files))],
    [CONTENTS.diagnostics, '\n'],
    [CONTENTS.conflicts, '\n'],
    [CONTENTS.ledger, jsonl(recs.ledger)],
    [CONTENTS.policy, `${canonicalize(POLICY)}\n`],
    [CONTENTS.consumer_guide, consumerGuide()],
    ['README.md', BUNDLE_README],
    [CONTENTS.report, renderReport(question, recs.claims)],
  ]);
  if (opts.roCrate) texts.set(RO_CRATE_METADATA_FILE, roCrateText(plan, texts));
  return { texts, manifest: manifestOf(plan, bundleId, question, texts), bundleId, question };
}

function manifestOf(
  plan: ExportPlan,
  bundleId: string,
  question: string,
  texts: Map<string, string>,
): Record<string, unknown> {
  const hashes: [string, string][] = [...texts].map(([rel, text]) => [rel, fileDigestOfText(text)]);
  for (const f of plan.files) if (f.copy) hashes.push([f.rel, f.sha256]);
  hashes.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const manifest = {
    protocol: { ...PEB_PROTOCOL, schema_uri: SCHEMA_URI },
    bundle: { id: bundleId, created_at: plan.exportedAt, content_hash: ZERO_HASH },
    task: { task_id: bundleId, request: question },
    producer: { name: PEB_PRODUCER_NAME, version: `1.0 (written by detsim ${plan.version})` },
    investigation: {
      investigation_id: `inv-${bundleId}`,
      investigation_type: 'verification',
      question,
      scope: plan.runs.map((r) => r.bundlePath),
      limitations: plan.files.some((f) => !f.copy)
        ? ['Some run files are referenced by SHA-256 and not copied (see archive/sources.jsonl).']
        : [],
      completed: true,
    },
    contents: { ...CONTENTS },
    integrity: { algorithm: 'sha256', file_hashes: Object.fromEntries(hashes) },
    extensions: {
      detsim: { exporter: 'detsim', version: plan.version, referenced: plan.files.filter((f) => !f.copy).length },
    },
  };
  return { ...manifest, bundle: { ...manifest.bundle, content_hash: manifestContentHash(manifest) } };
}

function fileDigestOfText(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

function writeSynced(path: string, write: () => void): void {
  mkdirSync(dirname(path), { recursive: true });
  write();
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Write the bundle into `<dest>.partial-<pid>`, fsync every file and folder, then rename it to `dest`. */
export function exportBundle(source: string, dest: string, opts: ExportOptions = {}): ExportResult {
  checkDestination(dest);
  const plan = planExport(source, opts);
  const { texts, manifest, bundleId } = renderBundle(plan, opts);
  const tmp = `${resolve(dest)}.partial-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  try {
    for (const [rel, text] of texts) writeSynced(join(tmp, rel), () => writeFileSync(join(tmp, rel), text));
    for (const f of plan.files) if (f.copy) writeSynced(join(tmp, f.rel), () => copyFileSync(f.from, join(tmp, f.rel)));
    writeSynced(join(tmp, MANIFEST_FILE), () =>
      writeFileSync(join(tmp, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`),
    );
    syncDirs(tmp);
    if (existsSync(dest)) rmdirSync(dest);
    renameSync(tmp, dest);
    fsyncDir(dirname(resolve(dest)));
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  const recs = texts
    .get(CONTENTS.claims)!
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as { id: string; statement: string });
  return {
    bundleDir: dest,
    bundleId,
    files: texts.size + plan.files.filter((f) => f.copy).length + 1,
    referenced: plan.files.filter((f) => !f.copy),
    claims: recs.map((c) => ({ id: c.id, statement: c.statement })),
  };
}

function syncDirs(dir: string): void {
  for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) syncDirs(join(dir, e.name));
  fsyncDir(dir);
}
