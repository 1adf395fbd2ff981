// The field classification table of a run receipt (docs/spec/diff0.md R1): every field of run.json,
// of each trace step {behaviour, operational} and of summary.json is physical, repro or opaque.
// This is data plus lookup only; the walk that strips and normalises a receipt is canonical.ts.

/** How a receipt field is treated by the ReproHash (docs/spec/diff0.md "Terms"). */
export type FieldClass = 'physical' | 'repro' | 'opaque';

/** One row of the table. `path` names a field inside receipt.json: keys joined by '.', '[]' for list elements. */
export interface FieldRule {
  readonly path: string;
  readonly cls: FieldClass;
  /** Decimals for non-integer numbers below this field (R3); default DEFAULT_PRECISION. */
  readonly precision?: number;
  /** The value is free-form model JSON: everything below it has this class and is not listed. */
  readonly subtree?: boolean;
  /** For a list of objects: the stable sort key (a path inside each element), or 'as-written' when order is meaning. */
  readonly order?: string | 'as-written';
  readonly summary: string;
}

export const DEFAULT_PRECISION = 9;
export const RECEIPT_VERSION = 'detsim-receipt-v1';

/** The minimum physical set (docs/spec/diff0.md "Terms"); any field of that name anywhere is physical. */
export const PHYSICAL_NAMES: readonly string[] = [
  'ts',
  'timestamp',
  'elapsed',
  'duration',
  'started_at',
  'finished_at',
  'thread_order',
  'addr',
  'id_runtime',
  'pid',
  'uptime_s',
  'generated_at',
];

const R = (path: string, summary: string, extra: Partial<FieldRule> = {}): FieldRule => ({
  path,
  cls: 'repro',
  summary,
  ...extra,
});
const P = (path: string, summary: string, extra: Partial<FieldRule> = {}): FieldRule => ({
  path,
  cls: 'physical',
  summary,
  ...extra,
});
const O = (path: string, summary: string, extra: Partial<FieldRule> = {}): FieldRule => ({
  path,
  cls: 'opaque',
  summary,
  ...extra,
});

const RECEIPT_ROWS: FieldRule[] = [
  R('receiptVersion', 'receipt format version'),
  R('evidence_class', 'simulated | measured | third_party (enum, by value)'),
  P('measure_source', 'command or file a measured figure came from (null when simulated)'),
  P('measure_ts', 'when a measured figure was taken (null when simulated)'),
  P('generated_at', 'when the receipt was written'),
  P('reproHash', "derived: this receipt's ReproHash (a hash never covers itself)"),
  P('unknownFields', 'derived: the unclassified fields found (R1)', { subtree: true }),
  R('run', 'run.json: the resolved composition'),
  R('steps', 'the trace: one TransitionTrace per step (read from the trace; receipt.json binds it as `trace`)', {
    order: 'behaviour.scope.step',
  }),
  P('trace', 'the trace files bound by SHA-256 (format, steps, segments); digests cover physical fields', {
    subtree: true,
  }),
  R('steps[]', 'one TransitionTrace'),
  R('summary', 'summary.json'),
  P(
    'platformFingerprint',
    'where the run was finished: OS and kernel, CPU model and flags, Node and its flags, detsim version and commit, each worker runtime and build (platform.ts)',
    { subtree: true },
  ),
  R(
    'finalStateDigests',
    'reserved: null in this version (a run must hash alike with and without checkpoints; its end state is bound by the behaviour digest, each checkpoint by the ledger)',
    {
      order: 'participantId',
    },
  ),
  R('finalStateDigests[]', 'one participant'),
  R('finalStateDigests[].participantId', 'environment id or agent id'),
  O('finalStateDigests[].digest', 'SHA-256 of the state payload bytes'),
];

// run.json — the resolved composition (coordinator/session/run.ts runRecord).
const RUN_ROWS: FieldRule[] = [
  R('run.format', 'run.json format id'),
  R('run.sessionId', 'session id'),
  R('run.masterSeed', 'master seed, U64'),
  R('run.seedDerivation', 'seed derivation algorithm (seed-derivation-v1)'),
  R('run.steps', 'number of steps planned'),
  R('run.stepDuration', 'world step duration, RationalNs', { subtree: true }),
  R('run.epoch', 'epoch id of the run'),
  P('run.dispatch', 'sequential | concurrent | reversed: a scheduling choice; runs must agree across all three'),
  R('run.protocol', 'worker protocol version'),
  R('run.protocol.major', 'protocol major'),
  R('run.protocol.minor', 'protocol minor'),
  O('run.protocol.contractDigest', 'SHA-256 of worker.proto'),
  R('run.environment', 'the environment participant'),
  R('run.environment.environmentId', 'environment id'),
  R(
    'run.environment.model',
    'environment model (built-in name, python:pkg.mod:Class, or module:<file>@sha256:<content digest>)',
  ),
  P('run.environment.modelPath', "where the model module was (absolute path): not part of the model's identity"),
  R('run.environment.modelVersion', 'model identity: version'),
  O('run.environment.profileDigest', 'model identity: profile digest'),
  R('run.environment.params', 'environment model parameters', { subtree: true }),
  R('run.environment.seed', 'derived environment seed (i32)'),
  P('run.environment.workerId', 'worker process hosting it (process layout)'),
  R('run.agents', 'the agents', { order: 'agentId' }),
  R('run.agents[]', 'one agent'),
  R('run.agents[].agentId', 'agent id'),
  R('run.agents[].portId', 'environment port the agent drives'),
  R(
    'run.agents[].model',
    'agent model (built-in name, python:pkg.mod:Class, or module:<file>@sha256:<content digest>)',
  ),
  P('run.agents[].modelPath', "where the model module was (absolute path): not part of the model's identity"),
  R('run.agents[].modelVersion', 'model identity: version'),
  R('run.agents[].plasticityVersion', 'model identity: plasticity version'),
  O('run.agents[].profileDigest', 'model identity: profile digest'),
  O('run.agents[].datasetDigest', 'model identity: dataset digest'),
  R('run.agents[].tickDuration', 'agent tick, RationalNs', { subtree: true }),
  R('run.agents[].params', 'agent model parameters', { subtree: true }),
  R('run.agents[].seed', 'derived agent seed (i32)'),
  R(
    'run.agents[].actionFields',
    'decision fields that travel to the environment as the action (null: the whole decision)',
    { subtree: true },
  ),
  P('run.agents[].workerId', 'worker process hosting the agent (process layout, not behaviour)'),
  P('run.workers', 'worker processes: layout, runtime and build of the host (not behaviour)', { subtree: true }),
  P('run.agentsPerWorker', 'process layout'),
  P('run.transport', 'unix | tcp | thread | inline'),
  P('run.threadHeapMb', 'heap limit of each worker thread, MiB (resource policy)'),
  P('run.deadlines', 'step/startup/capture deadlines (wall-clock policy)', { subtree: true }),
  R('run.seedCollisions', 'agent ids whose derived seeds collide', { subtree: true }),
  P(
    'run.overrides',
    '`--set path=value` / `--master-seed` overrides, in order (coordinator/overrides.ts): the composition they resolved to is hashed, so a run with `--set x=1` is the same run as one whose config says x: 1',
    { subtree: true },
  ),
  P(
    'run.fork',
    "a fork's lineage: parent run directory, checkpoint (id, envelope digest, boundary), overrides (coordinator/checkpoint/fork.ts); a fork that changes nothing is the same run as its parent",
    { subtree: true },
  ),
  P(
    'run.traceObservations',
    "`--trace-observations`: the run keeps each step's observations beside its trace (trace/NNNNNN.observations.jsonl.gz), data the export reads, never hashed",
  ),
];

// trace.jsonl — TransitionTrace {behaviour, operational} (docs/spec/lockstep.md "The trace").
const TRACE_ROWS: FieldRule[] = [
  R('steps[].behaviour', 'must be identical across runs'),
  R('steps[].behaviour.scope', 'Scope {sessionId, epoch, step}'),
  R('steps[].behaviour.scope.sessionId', 'session id'),
  R('steps[].behaviour.scope.epoch', 'epoch id'),
  R('steps[].behaviour.scope.step', 'step k (U64)'),
  R('steps[].behaviour.agents', 'per-agent step results', { order: 'agentId' }),
  R('steps[].behaviour.agents[]', 'one agent'),
  R('steps[].behaviour.agents[].agentId', 'agent id'),
  O('steps[].behaviour.agents[].profileDigest', 'model profile digest'),
  R('steps[].behaviour.agents[].ticksAdvanced', 'ticks this step (U64)'),
  R('steps[].behaviour.agents[].brainTicks', 'ticks since start (U64)'),
  R('steps[].behaviour.agents[].remainder', 'tick accumulator remainder, RationalNs', { subtree: true }),
  R('steps[].behaviour.agents[].decision', 'the decision itself (model JSON)', { subtree: true }),
  O('steps[].behaviour.agents[].decisionDigest', 'digest of the decision'),
  R('steps[].behaviour.agents[].committedStep', 'k+1 (U64)'),
  R('steps[].behaviour.batchId', 'batch-<epoch>-<k>'),
  O('steps[].behaviour.controlDigest', 'digest of the action batch sent to Environment.Advance (port order)'),
  R('steps[].behaviour.acknowledgedBoundary', 'k+1'),
  O('steps[].behaviour.observationDigest', 'digest of the observations the environment returned'),
  O('steps[].behaviour.worldDigest', 'digest of the world state after the step'),
  R('steps[].behaviour.rewards', 'rewards of the step', { order: 'agentId' }),
  R('steps[].behaviour.rewards[]', 'one reward {agentId, eventId, ruleId, value}', { subtree: true }),
  R('steps[].behaviour.eventIds', 'event ids, task order'),
  R('steps[].behaviour.publishedBoundary', 'must equal acknowledgedBoundary'),
  P('steps[].operational', 'recorded, never compared'),
  P('steps[].operational.wallTimeNs', 'monotonic ns since the run started'),
  P('steps[].operational.prepareRequestIds', 'request ids of Prepare', { subtree: true }),
  P('steps[].operational.commitRequestIds', 'request ids of Commit', { subtree: true }),
  P('steps[].operational.advanceRequestId', 'request id of Advance'),
  P('steps[].operational.completionOrder', 'worker ids in reply arrival order, per phase', { subtree: true }),
  P('steps[].operational.pids', 'worker process ids', { subtree: true }),
];

// summary.json (coordinator/session/run.ts)
const SUMMARY_ROWS: FieldRule[] = [
  R('summary.format', 'summary.json format id'),
  R('summary.sessionId', 'session id'),
  R('summary.status', 'completed | failed | aborted (enum, by value)'),
  R('summary.stepsPlanned', 'steps planned'),
  R('summary.stepsDone', 'steps committed'),
  R('summary.epoch', 'epoch id'),
  R('summary.behaviourDigest', 'SHA-256 of the canonical behaviour traces'),
  P(
    'summary.behaviourDigestAlgorithm',
    'prose describing how behaviourDigest was computed (a resumed run also names its epoch rebase); the digest itself is repro',
  ),
  P('summary.failure', 'what failed, where (messages carry pids, paths and times)', { subtree: true }),
  P('summary.wallTimeMs', 'total wall time'),
  P('summary.stepsPerSecond', 'mean steps per second of stepping in the last session (wall-clock)'),
  P(
    'summary.rewards',
    'reward totals per agent and overall (coordinator/session/metrics.ts): behaviour, but already hashed step by step as steps[].behaviour.rewards; a repro summary field would move every recorded ReproHash',
    { subtree: true },
  ),
  R('summary.finalStateDigests', 'reserved, not written in this version (finalStateDigests is null)', {
    subtree: true,
  }),
  P(
    'summary.checkpoints',
    'checkpoint schedule and durability outcomes (coordinator/checkpoint; which saves became durable is physical)',
    { subtree: true },
  ),
  P(
    'summary.resume',
    'how a resumed run got here: checkpoint, epochs, abandoned steps (coordinator/checkpoint/resume.ts)',
    { subtree: true },
  ),
  P('summary.recoveries', 'how many lost workers the run recovered from (--max-restarts; a fault, not behaviour)'),
  P(
    'summary.recovery',
    'each recovery: worker, reason, step, checkpoint, epochs (coordinator/checkpoint/recovery.ts)',
    { subtree: true },
  ),
];

/** The table, in publication order. */
export const FIELD_TABLE: readonly FieldRule[] = [...RECEIPT_ROWS, ...RUN_ROWS, ...TRACE_ROWS, ...SUMMARY_ROWS];

const byPath = new Map<string, FieldRule>(FIELD_TABLE.map((r) => [r.path, r]));

/** Build a lookup for a table (the default one, or a test's variant). */
export function fieldLookup(table: readonly FieldRule[] = FIELD_TABLE): (path: string) => FieldRule | undefined {
  if (table === FIELD_TABLE) return (p) => byPath.get(p);
  const m = new Map<string, FieldRule>(table.map((r) => [r.path, r]));
  return (p) => m.get(p);
}

/** Join a parent pattern and a key (root has the empty pattern). */
export function childPath(parent: string, key: string): string {
  return parent === '' ? key : `${parent}.${key}`;
}

/** The table as text lines: class, precision, path, summary (what `detsim fields` prints). */
export function formatFieldTable(table: readonly FieldRule[] = FIELD_TABLE): string {
  const lines = [`# detsim receipt field table (${RECEIPT_VERSION}); unlisted fields are physical and reported`];
  for (const r of table) {
    const extra = [
      r.subtree ? 'subtree' : '',
      r.order ? `order=${r.order}` : '',
      r.precision !== undefined ? `precision=${r.precision}` : '',
    ]
      .filter(Boolean)
      .join(' ');
    lines.push(`${r.cls.padEnd(8)} ${r.path.padEnd(52)} ${r.summary}${extra ? ` [${extra}]` : ''}`);
  }
  lines.push(`# always physical by name: ${PHYSICAL_NAMES.join(', ')}`);
  lines.push(`# default precision for non-integers: ${DEFAULT_PRECISION} decimals`);
  return lines.join('\n');
}

/** Problems that make a table unusable: duplicate paths, orphan rows, a repro row with a physical name. Empty = valid. */
export function validateFieldTable(table: readonly FieldRule[]): string[] {
  const problems: string[] = [];
  if (table.length === 0) return ['the classification table is empty'];
  const paths = new Set<string>();
  for (const r of table) {
    if (paths.has(r.path)) problems.push(`${r.path}: listed twice`);
    paths.add(r.path);
    if (!['physical', 'repro', 'opaque'].includes(r.cls))
      problems.push(`${r.path}: class ${JSON.stringify(r.cls)} is not physical, repro or opaque`);
    const name = r.path.split('.').pop()!.replace(/\[\]$/, '');
    if (r.cls !== 'physical' && PHYSICAL_NAMES.includes(name))
      problems.push(`${r.path}: ${name} must be physical (docs/spec/diff0.md)`);
    if (r.precision !== undefined && !(Number.isInteger(r.precision) && r.precision >= 0 && r.precision <= 20))
      problems.push(`${r.path}: precision ${r.precision} is not 0..20`);
  }
  for (const p of paths) {
    const parent = p.endsWith('[]') ? p.slice(0, -2) : p.includes('.') ? p.slice(0, p.lastIndexOf('.')) : null;
    if (parent !== null && !paths.has(parent)) problems.push(`${p}: its parent ${parent} is not in the table`);
  }
  return problems;
}
