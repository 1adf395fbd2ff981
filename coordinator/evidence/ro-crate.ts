// ro-crate-metadata.json for an evidence bundle: the run as a Workflow Run RO-Crate of the Process
// Run Crate profile (RO-Crate 1.1, https://w3id.org/ro/wfrun/process/0.5), so the bundle can be
// deposited as research data (Zenodo, WorkflowHub). `roCrateMetadata(runDir, files, opts)` reads the
// run directory (run.json, summary.json, receipt.json, launch.json, and run.log for the start and end
// times) and returns the JSON-LD object; the caller writes it at the crate root.
//   - The crate root is the bundle directory. `files` lists every file of the bundle by its posix
//     path there (the run's own files under `run/`: `run/receipt.json`, `run/trace/000003.jsonl.gz`)
//     with its SHA-256 and size; `present: false` marks a file the bundle references but does not
//     hold (not copied): it is a contextual entity `#<path>` (CreativeWork, with sha256 and
//     contentSize, "referenced, not included"), never a File data entity, so validators that look
//     for local files do not miss it.
//   - The graph: the metadata descriptor, the root Dataset (conformsTo the profile, licence, hasPart
//     = the present files, mentions = the actions, author = the agent if given), a CreateAction for
//     the run (instrument: detsim, a SoftwareApplication whose softwareRequirements are one
//     SoftwareApplication per worker runtime and build digest; object: run/run.json and the master
//     seed, seed derivation, step count and duration and every participant's derived seed as
//     PropertyValue entities; result: every other file under run/; startTime/endTime from run.log;
//     actionStatus, and error for a failed run), and a CreateAction for the export (object: the
//     run's files; result: the bundle's own files; endTime: exportedAt).
//   - Deterministic: the same run directory, files and options give the same object (entities sorted
//     by @id after the descriptor and the root, keys sorted, lists sorted). No absolute path of the
//     machine: values taken from records are free text with path-like runs redacted; ids and names
//     come from the bundle's relative paths and the records' ids.
// NOT the bundle's layout or its copying and hashing (the exporter passes `files`), not a validator
// (the tests validate with independent RO-Crate tools), not ro-crate-preview.html.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { findPackageRoot } from '../../core/protocol/contract.js';
import { RUN_FILES } from '../session/run-dir.js';
import { readRunJson, type RunJson } from '../session/run-json.js';

export const RO_CRATE_METADATA_FILE = 'ro-crate-metadata.json';
export const RO_CRATE_1_1 = 'https://w3id.org/ro/crate/1.1';
export const PROCESS_RUN_CRATE_0_5 = 'https://w3id.org/ro/wfrun/process/0.5';
/** RO-Crate 1.1's context lacks `sha256`: mapped as RO-Crate 1.2 maps it (schema.org). */
export const RO_CRATE_CONTEXT = [`${RO_CRATE_1_1}/context`, { sha256: 'http://schema.org/sha256' }] as const;
/** Where the run's own files sit inside the crate. */
export const RUN_PREFIX = 'run/';

/** One file of the bundle: its posix path relative to the crate root, its SHA-256 (hex) and size. */
export interface CrateFile {
  path: string;
  sha256: string;
  bytes: number;
  /** false: referenced by digest and size only, not held in the crate. */
  present: boolean;
}

export interface RoCrateOptions {
  /** The detsim that exports (the CLI's version). */
  detsimVersion: string;
  /** When the crate is written (ISO 8601): the root's datePublished and the export's endTime. */
  exportedAt: string;
  /** SPDX identifier of the crate's licence; default: detsim's own (package.json `license`). */
  license?: string;
  /** Who ran and exported the run (a Person: an ORCID URI, or a `#local` id, and a name). */
  agent?: { id: string; name: string };
  /** The folder of the bundle that holds the run's files (default RUN_PREFIX; detsim's exporter: `runs/<run>/`). */
  runPrefix?: string;
}

type Entity = Record<string, unknown>;
type Ref = { '@id': string };

const ref = (id: string): Ref => ({ '@id': id });
/** Sorted references: one as a single value, as RO-Crate 1.1 recommends over a singleton list. */
function refs(ids: Iterable<string>): Ref | Ref[] {
  const out = [...new Set(ids)].sort(byCodeUnit).map(ref);
  return out.length === 1 ? out[0]! : out;
}
function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** An entity with `@id` and `@type` first and every other key sorted; undefined values dropped. */
function entity(id: string, type: string, props: Record<string, unknown>): Entity {
  const out: Entity = { '@id': id, '@type': type };
  for (const k of Object.keys(props).sort(byCodeUnit)) if (props[k] !== undefined) out[k] = props[k];
  return out;
}

/** Path-like runs in free text taken from a record (`/home/…`, `C:\…`, `~/…`) become `<path>`. */
export function redactPaths(text: string): string {
  return text.replace(/(^|[\s"'=(,;[])(?:~|[A-Za-z]:)?[/\\](?![/\\])[^\s"'),;\]]+/g, '$1<path>');
}

/**
 * A time as ISO 8601 in UTC with a numeric offset (`2026-12-06T00:23:33.005+00:00`): the Process Run
 * Crate validator's pattern takes `+00:00` and not `Z`. undefined when it is not a time.
 */
function isoTime(t: number | string): string | undefined {
  const at = new Date(t);
  return Number.isNaN(at.getTime()) ? undefined : at.toISOString().replace(/Z$/, '+00:00');
}

// ---- The files ----------------------------------------------------------------------------------

/** A crate path's @id: each segment percent-encoded (RO-Crate: URI paths relative to the root). */
const pathId = (path: string): string => path.split('/').map(encodeURIComponent).join('/');
/** A referenced file's @id: a local identifier, not a path a validator would look for. */
const referencedId = (path: string): string => `#${pathId(path)}`;
const fileId = (f: CrateFile): string => (f.present ? pathId(f.path) : referencedId(f.path));

function checkFiles(files: readonly CrateFile[]): CrateFile[] {
  const seen = new Set<string>();
  const out: CrateFile[] = [];
  for (const f of files) {
    const bad = (why: string): never => {
      throw new Error(`roCrateMetadata: file ${JSON.stringify(f.path)}: ${why}`);
    };
    const segments = f.path.split('/');
    if (f.path === '' || f.path.includes('\\') || segments.some((s) => s === '' || s === '.' || s === '..'))
      bad('not a posix path relative to the crate root');
    if (/^[A-Za-z]:/.test(f.path)) bad('not a posix path relative to the crate root');
    if (!/^[0-9a-f]{64}$/.test(f.sha256)) bad('sha256 is not 64 lowercase hex digits');
    if (!Number.isSafeInteger(f.bytes) || f.bytes < 0) bad('bytes is not a size');
    if (seen.has(f.path)) bad('listed twice');
    seen.add(f.path);
    if (f.path !== RO_CRATE_METADATA_FILE) out.push(f);
  }
  return out.sort((a, b) => byCodeUnit(a.path, b.path));
}

/** What a file of the run is, by its path under run/ (the run directory's own names). */
function describeRunFile(rel: string): string | undefined {
  const known: Record<string, string> = {
    'run.json':
      "The run record (detsim-run-v1): the resolved configuration, the master seed, every participant's derived seed and the workers.",
    'receipt.json':
      'The run receipt (detsim-receipt-v1): the run record, the trace bound by digest, the summary and the ReproHash.',
    'summary.json': 'The run summary: status, steps done, behaviour digest, checkpoints.',
    'launch.json': 'The physical launch facts: launcher, placement, TLS.',
    'ledger.jsonl': 'The checkpoint ledger: hash-chained lifecycle events of the checkpoints.',
    'ledger.head.json': "The head of the checkpoint ledger's hash chain.",
    'trace/index.jsonl': 'The trace index: one line per segment with its steps, size and SHA-256.',
    'store/manifest.json': 'The checkpoint store manifest: the kept checkpoint generations and their digests.',
    'trace.jsonl': 'The trace (older single-file format): one canonical line per step.',
  };
  if (known[rel]) return known[rel];
  if (/^trace\/\d+\.jsonl\.gz$/.test(rel))
    return 'A trace segment: the canonical transition lines of consecutive steps (gzip).';
  if (/^trace\/\d+\.repro\.gz$/.test(rel)) return "A trace segment's repro file: each step's ReproHash text (gzip).";
  if (/^trace\/\d+\.observations\.jsonl\.gz$/.test(rel))
    return "A trace segment's observations: each step's observations as canonical JSON, hashing to its observationDigest (gzip).";
  if (/^store\/[^/]+\.flysess$/.test(rel)) return 'A checkpoint (FLYSESS1 session file).';
  return undefined;
}

function encodingFormat(path: string): string | undefined {
  if (path.endsWith('.json')) return 'application/json';
  if (path.endsWith('.jsonl')) return 'application/jsonl';
  if (path.endsWith('.gz')) return 'application/gzip';
  if (path.endsWith('.md')) return 'text/markdown';
  if (path.endsWith('.flysess')) return 'application/octet-stream';
  return undefined;
}

function fileEntity(f: CrateFile, prefix: string): Entity {
  const rel = f.path.startsWith(prefix) ? f.path.slice(prefix.length) : undefined;
  const what =
    (rel !== undefined ? describeRunFile(rel) : undefined) ??
    (rel !== undefined ? 'A file of the run directory.' : 'A file of the evidence bundle (detsim evidence export).');
  const common = {
    contentSize: String(f.bytes),
    encodingFormat: encodingFormat(f.path),
    name: basename(f.path),
    sha256: f.sha256,
  };
  if (f.present) return entity(fileId(f), 'File', { ...common, description: what });
  return entity(fileId(f), 'CreativeWork', {
    ...common,
    alternateName: f.path,
    description: `${what} Referenced, not included: this crate does not hold the file; it is identified by its SHA-256 and size (bytes), at ${f.path} in a bundle that holds it.`,
  });
}

// ---- The run directory's records ----------------------------------------------------------------

interface Summary {
  status?: string;
  stepsDone?: number;
  stepsPlanned?: number;
  behaviourDigest?: string;
  failure?: { kind?: string; step?: string; phase?: string; workerId?: string | null } | null;
  checkpoints?: { every?: number; committed?: string[] } | null;
}

interface RunFacts {
  name: string;
  run: RunJson;
  summary: Summary | undefined;
  reproHash: string | undefined;
  launch: { launcher?: { kind?: string }; placement?: { kind?: string }; tls?: unknown } | undefined;
  times: { start?: string; end?: string; sessions: number };
}

function readJson(runDir: string, name: string): unknown {
  const path = join(runDir, name);
  return existsSync(path) ? parseStrict(readFileSync(path)) : undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function readRunFacts(runDir: string): RunFacts {
  const raw = readJson(runDir, RUN_FILES.run);
  if (raw === undefined)
    throw new DetsimError('struct_run_record', `${join(runDir, RUN_FILES.run)}: missing: not a run directory`);
  const summary = readJson(runDir, RUN_FILES.summary);
  const receipt = readJson(runDir, 'receipt.json');
  const launch = readJson(runDir, 'launch.json');
  const times = runTimes(runDir);
  if (times.end === undefined && isObject(receipt) && typeof receipt.generated_at === 'string')
    times.end = isoTime(receipt.generated_at);
  return {
    name: basename(runDir),
    run: readRunJson(raw),
    summary: isObject(summary) ? (summary as Summary) : undefined,
    reproHash: isObject(receipt) && typeof receipt.reproHash === 'string' ? receipt.reproHash : undefined,
    launch: isObject(launch) ? (launch as RunFacts['launch']) : undefined,
    times,
  };
}

/**
 * The run's start and end from run.log (pino lines, `time` in ms): the first `run started` /
 * `resume started` and the last `… finished`; `sessions` counts the starts (1 + resumes).
 */
function runTimes(runDir: string): RunFacts['times'] {
  const path = join(runDir, RUN_FILES.log);
  const times: RunFacts['times'] = { sessions: 0 };
  if (!existsSync(path)) return times;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    let rec: unknown;
    try {
      rec = JSON.parse(line);
    } catch {
      continue;
    }
    if (!isObject(rec) || typeof rec.time !== 'number' || typeof rec.msg !== 'string') continue;
    if (/^(run|resume) started$/.test(rec.msg)) {
      times.sessions += 1;
      times.start ??= isoTime(rec.time);
    } else if (/^(run|resume) finished$/.test(rec.msg)) times.end = isoTime(rec.time);
  }
  return times;
}

// ---- Inputs: the seeds and the recorded configuration -------------------------------------------

function property(id: string, name: string, value: string | number, description: string): Entity {
  return entity(id, 'PropertyValue', { name, value, description });
}

function inputEntities(run: RunJson): Entity[] {
  const d = run.stepDuration;
  const out = [
    property(
      '#param/masterSeed',
      'masterSeed',
      run.masterSeed,
      "The master seed every participant's seed derives from.",
    ),
    property('#param/seedDerivation', 'seedDerivation', run.seedDerivation, 'The seed derivation algorithm.'),
    property('#param/steps', 'steps', run.steps, 'Steps the run was configured to take.'),
    property(
      '#param/stepDuration',
      'stepDuration',
      `${d.numerator}/${d.denominator}`,
      'Simulated time per step, in nanoseconds (a rational).',
    ),
    property(
      `#seed/environment/${encodeURIComponent(run.environment.environmentId)}`,
      `seed of environment ${run.environment.environmentId}`,
      run.environment.seed,
      `Derived seed of the environment (worker ${run.environment.workerId}).`,
    ),
  ];
  for (const a of run.agents)
    out.push(
      property(
        `#seed/agent/${encodeURIComponent(a.agentId)}`,
        `seed of agent ${a.agentId}`,
        a.seed,
        `Derived seed of agent ${a.agentId} (worker ${a.workerId}).`,
      ),
    );
  return out;
}

// ---- Instruments: detsim and the worker runtimes ------------------------------------------------

const DETSIM_ID = '#detsim';

const RUNTIME_NAMES: Record<string, string> = {
  'detsim-ts': 'detsim TypeScript worker',
  'detsim-rs': 'detsim Rust worker',
  'detsim-py': 'detsim Python worker',
};

/**
 * detsim, the one instrument of both actions: consumers of the profile read `instrument` as one
 * tool (runcrate's report fails on a list), so the worker runtimes this run used are its
 * softwareRequirements (a MAY of the profile), not further instruments.
 */
function detsimEntity(run: RunJson, opts: RoCrateOptions, runtimeIds: string[]): Entity {
  return entity(DETSIM_ID, 'SoftwareApplication', {
    name: 'detsim',
    softwareVersion: opts.detsimVersion,
    softwareRequirements: runtimeIds.length ? refs(runtimeIds) : undefined,
    description:
      `Deterministic multi-agent simulation coordinator: seeded lockstep runs over gRPC, FLYSESS1 checkpoints, replay receipts. ` +
      `The version is the one that exported this crate; the run record pins worker protocol ${run.protocol.major}.${run.protocol.minor} (contract digest ${run.protocol.contractDigest}). ` +
      'Its softwareRequirements are the worker runtimes this run used.',
  });
}

/** One SoftwareApplication per (runtime, build digest) among the run's workers. */
function runtimeEntities(run: RunJson): Entity[] {
  const groups = new Map<string, { runtime: string; buildDigest: string; workers: string[] }>();
  for (const w of run.workers) {
    const key = `${w.runtime}\n${w.buildDigest}`;
    const g = groups.get(key) ?? { runtime: w.runtime, buildDigest: w.buildDigest, workers: [] };
    g.workers.push(`${w.workerId} (${w.role})`);
    groups.set(key, g);
  }
  return [...groups.values()].map((g) => {
    const runtime = redactPaths(g.runtime);
    const family = runtime.split('/')[0] ?? runtime;
    const slug = runtime.replace(/[^A-Za-z0-9._-]+/g, '-');
    return entity(`#worker-runtime/${slug}/${encodeURIComponent(g.buildDigest)}`, 'SoftwareApplication', {
      name: `${RUNTIME_NAMES[family] ?? 'detsim worker'} (${runtime})`,
      softwareVersion: runtime,
      identifier: redactPaths(g.buildDigest),
      description: `Worker runtime ${runtime}, build digest ${redactPaths(g.buildDigest)} (identifies this implementation of the worker contract). Ran workers ${g.workers.sort(byCodeUnit).join(', ')}.`,
    });
  });
}

// ---- The actions and the root ---------------------------------------------------------------------

const RUN_ACTION_ID = '#action/run';
const EXPORT_ACTION_ID = '#action/export';

// The profile's validator takes actionStatus as the IRI's text, as the profile's examples write it.
const COMPLETED = 'http://schema.org/CompletedActionStatus';
const FAILED = 'http://schema.org/FailedActionStatus';

function runDescription(f: RunFacts): string {
  const { run, summary: s } = f;
  const parts = [
    `A seeded detsim run of session ${run.sessionId}: environment ${run.environment.environmentId} and ${run.agents.length} agents in ${run.workers.length} workers over ${run.transport}, ${run.steps} steps planned, dispatch ${run.dispatch}, master seed ${run.masterSeed}.`,
  ];
  if (s)
    parts.push(`Status ${s.status ?? 'unknown'}: ${s.stepsDone ?? '?'} of ${s.stepsPlanned ?? run.steps} steps done.`);
  if (s?.behaviourDigest) parts.push(`Behaviour digest ${s.behaviourDigest}.`);
  if (f.reproHash) parts.push(`ReproHash ${f.reproHash}.`);
  if (s?.checkpoints?.every)
    parts.push(`Checkpoints every ${s.checkpoints.every} steps, ${s.checkpoints.committed?.length ?? 0} committed.`);
  if (f.times.sessions > 1) parts.push(`Resumed ${f.times.sessions - 1} time(s): the times span every session.`);
  const l = f.launch;
  if (l)
    parts.push(
      `Launched by the ${l.launcher?.kind ?? 'unknown'} launcher, placement ${l.placement?.kind ?? 'unknown'}, TLS ${l.tls ? 'on' : 'off'}.`,
    );
  return parts.map(redactPaths).join(' ');
}

function runStatus(s: Summary | undefined): Entity {
  if (!s || s.status === 'completed') return { actionStatus: s ? COMPLETED : undefined };
  const e = s.failure ?? {};
  const worker = e.workerId ? `, worker ${e.workerId}` : '';
  return {
    actionStatus: FAILED,
    error: redactPaths(
      `${s.status ?? 'failed'}: ${e.kind ?? 'failure'} at step ${e.step ?? '?'} (phase ${e.phase ?? '?'}${worker})`,
    ),
  };
}

function runAction(f: RunFacts, io: { inputs: string[]; results: string[]; agent: Entity | undefined }): Entity {
  return entity(RUN_ACTION_ID, 'CreateAction', {
    name: `detsim run ${f.name}`,
    description: runDescription(f),
    instrument: ref(DETSIM_ID),
    agent: io.agent && ref(io.agent['@id'] as string),
    object: refs(io.inputs),
    result: io.results.length ? refs(io.results) : undefined,
    startTime: f.times.start,
    endTime: f.times.end,
    ...runStatus(f.summary),
  });
}

function exportAction(
  io: { runFiles: string[]; bundleFiles: string[] },
  at: { exportedAt: string; agent: Entity | undefined },
): Entity {
  return entity(EXPORT_ACTION_ID, 'CreateAction', {
    name: 'detsim evidence export',
    description:
      "The export of the run directory into this evidence bundle: the run's files under run/ (copied, or referenced by SHA-256 and size), the bundle's own files beside them.",
    instrument: ref(DETSIM_ID),
    agent: at.agent && ref(at.agent['@id'] as string),
    object: refs(io.runFiles),
    result: io.bundleFiles.length ? refs(io.bundleFiles) : undefined,
    endTime: at.exportedAt,
    actionStatus: COMPLETED,
  });
}

/** The person who ran and exported the run: both actions' agent and the crate's author. */
function agentEntity(agent: RoCrateOptions['agent']): Entity | undefined {
  if (agent === undefined) return undefined;
  if (!/^(https?:\/\/\S+|#\S+)$/.test(agent.id))
    throw new Error(
      `roCrateMetadata: agent id ${JSON.stringify(agent.id)} is neither an http(s) URI (ORCID) nor #local`,
    );
  return entity(agent.id, 'Person', { name: agent.name });
}

/** detsim's own licence: package.json's `license`, or undefined. */
export function detsimLicense(): string | undefined {
  const pkg = parseStrict(readFileSync(join(findPackageRoot(), 'package.json')));
  return isObject(pkg) && typeof pkg.license === 'string' ? pkg.license : undefined;
}

function licenseEntities(opts: RoCrateOptions): { root: Entity; entities: Entity[] } {
  const spdx = opts.license ?? detsimLicense();
  if (spdx === undefined)
    return { root: { license: 'No licence declared: detsim declares none and the exporter set none.' }, entities: [] };
  const id = `https://spdx.org/licenses/${encodeURIComponent(spdx)}`;
  const origin =
    opts.license === undefined ? "detsim's own licence (its package.json), the default" : 'set by the exporter';
  return {
    root: { license: ref(id) },
    entities: [
      entity(id, 'CreativeWork', { name: spdx, identifier: spdx, description: `SPDX licence ${spdx}: ${origin}.` }),
    ],
  };
}

const idsOf = (es: readonly Entity[]): string[] => es.map((e) => e['@id'] as string);
const runFileTests = (prefix: string) => ({
  isRunFile: (f: CrateFile): boolean => f.path.startsWith(prefix),
  isRunRecord: (f: CrateFile): boolean => f.path === `${prefix}${RUN_FILES.run}`,
});

/**
 * The JSON-LD object for ro-crate-metadata.json (RO-Crate 1.1, Process Run Crate 0.5) of an evidence
 * bundle of the run in `runDir`, describing `files` (paths relative to the crate root; the run's own
 * under `run/`; an entry for ro-crate-metadata.json itself is left out). Reads run.json (required),
 * summary.json, receipt.json, launch.json and run.log. Throws (Error) on a file entry that is not a
 * relative posix path with a lowercase hex SHA-256 and a size, or listed twice.
 */
export function roCrateMetadata(
  runDir: string,
  files: readonly CrateFile[],
  opts: RoCrateOptions,
): Record<string, unknown> {
  const exportedAt = isoTime(opts.exportedAt);
  if (exportedAt === undefined) throw new Error(`roCrateMetadata: exportedAt ${opts.exportedAt} is not a date`);
  const facts = readRunFacts(runDir);
  const listed = checkFiles(files);
  const prefix = opts.runPrefix ?? RUN_PREFIX;
  const { isRunFile, isRunRecord } = runFileTests(prefix);
  const runFiles = listed.filter(isRunFile);
  const inputs = inputEntities(facts.run);
  const runtimes = runtimeEntities(facts.run);
  const agent = agentEntity(opts.agent);
  const actions = [
    runAction(facts, {
      inputs: [...runFiles.filter(isRunRecord).map(fileId), ...idsOf(inputs)],
      results: runFiles.filter((f) => !isRunRecord(f)).map(fileId),
      agent,
    }),
    exportAction(
      { runFiles: runFiles.map(fileId), bundleFiles: listed.filter((f) => !isRunFile(f)).map(fileId) },
      {
        exportedAt,
        agent,
      },
    ),
  ];
  const license = licenseEntities(opts);
  const root = entity('./', 'Dataset', {
    name: `detsim run ${facts.name}: evidence bundle`,
    description: rootDescription(facts, listed),
    datePublished: exportedAt,
    conformsTo: ref(PROCESS_RUN_CRATE_0_5),
    hasPart: refs(listed.filter((f) => f.present).map(fileId)),
    mentions: refs(idsOf(actions)),
    author: agent && ref(agent['@id'] as string),
    ...license.root,
  });
  const rest = [
    entity(PROCESS_RUN_CRATE_0_5, 'CreativeWork', { name: 'Process Run Crate', version: '0.5' }),
    ...license.entities,
    ...listed.map((f) => fileEntity(f, prefix)),
    ...inputs,
    detsimEntity(facts.run, opts, idsOf(runtimes)),
    ...runtimes,
    ...(agent ? [agent] : []),
    ...actions,
  ];
  return graph(root, rest);
}

/** The document: the metadata descriptor, the root, then every other entity by @id (one each). */
function graph(root: Entity, rest: Entity[]): Record<string, unknown> {
  const descriptor = entity(RO_CRATE_METADATA_FILE, 'CreativeWork', {
    about: ref('./'),
    conformsTo: ref(RO_CRATE_1_1),
  });
  const sorted = rest.sort((a, b) => byCodeUnit(a['@id'] as string, b['@id'] as string));
  for (let i = 1; i < sorted.length; i++)
    if (sorted[i]!['@id'] === sorted[i - 1]!['@id'])
      throw new Error(`roCrateMetadata: two entities with @id ${String(sorted[i]!['@id'])}`);
  return { '@context': [...RO_CRATE_CONTEXT], '@graph': [descriptor, root, ...sorted] };
}

function rootDescription(f: RunFacts, files: readonly CrateFile[]): string {
  const held = files.filter((x) => x.present).length;
  const referenced = files.length - held;
  return redactPaths(
    `Evidence of the seeded detsim run ${f.name} (session ${f.run.sessionId}, master seed ${f.run.masterSeed}), exported by detsim: ` +
      `the run's files under run/ and the evidence bundle's own files. ${held} file(s) held` +
      (referenced ? `, ${referenced} referenced, not included (identified by SHA-256 and size only).` : '.'),
  );
}
