// run.json's one schema: the resolved composition a run records (no physical data: no pids, paths
// or times). Its writer (run.ts runRecord) builds a RunJson, so the compiler holds it to this
// shape; its readers (checkpoint/run-record.ts: resume and replay) go through readRunJson, which
// refuses a record that does not have it, naming the field. NOT the rebuild of a RunPlan from the
// record (run-record.ts) and not the checks of what the values mean (config.ts, seeds, layout).
import { z } from 'zod';
import { DetsimError } from '../../core/formats/errors.js';
import { DEFAULT_THREAD_HEAP_MB, TRANSPORTS } from '../config.js';
import { DISPATCH_MODES } from './lockstep.js';

export const RUN_FORMAT = 'detsim-run-v1';

const Rational = z.object({ numerator: z.string(), denominator: z.string() });
const Params = z.record(z.string(), z.unknown());

/**
 * A participant's model: a built-in name, a module's path-free identity `module:<file>@sha256:<digest>`
 * (core/models/identity.ts; older records hold its absolute path), or `python:pkg.mod:Class`, with
 * `@sha256:<digest of its module's source>` for a user model. `modelPath`: where a module was (physical).
 */
const ModelFields = {
  model: z.string(),
  modelPath: z.string().optional(),
};

const RecordedEnvironment = z.object({
  environmentId: z.string(),
  ...ModelFields,
  modelVersion: z.string(),
  profileDigest: z.string(),
  params: Params.default({}),
  seed: z.number(),
  workerId: z.string(),
});

const RecordedAgent = z.object({
  agentId: z.string(),
  portId: z.string(),
  ...ModelFields,
  modelVersion: z.string(),
  plasticityVersion: z.string(),
  profileDigest: z.string(),
  datasetDigest: z.string(),
  tickDuration: Rational,
  params: Params.default({}),
  // Only when configured: the executor projection is part of the composition identity.
  actionFields: z.array(z.string()).optional(),
  seed: z.number(),
  workerId: z.string(),
});

const RecordedWorker = z.object({
  workerId: z.string(),
  role: z.enum(['environment', 'agent']),
  agentIds: z.array(z.string()),
  /** The Hello runtime ("detsim-ts/…", "detsim-rs/…"). */
  runtime: z.string(),
  buildDigest: z.string(),
  capabilities: z.array(z.string()),
});

/** One `--set` override as run.json records it (coordinator/overrides.ts). */
const RecordedOverride = z.object({ path: z.string(), value: z.unknown() });

/** A participant's params and profile digest as a fork's checkpoint holds them (checkpoint/fork-rebind.ts). */
const ParamsAt = z.object({ params: Params, profileDigest: z.string() });

/**
 * A fork's lineage (`detsim fork`, checkpoint/fork.ts): the parent run directory's name, the
 * checkpoint the fork started from and the overrides it applied; when they changed model params,
 * `atCheckpoint`: those participants' params and profile digests as the checkpoint holds them (what
 * a restore of it is verified against). Physical, like `overrides`.
 */
const ForkLineage = z.object({
  parent: z.string(),
  checkpoint: z.object({ id: z.string(), envelopeDigest: z.string(), boundary: z.string() }),
  overrides: z.array(RecordedOverride),
  atCheckpoint: z
    .object({ environment: ParamsAt.optional(), agents: z.record(z.string(), ParamsAt).optional() })
    .optional(),
  // A fork of a fork: the parent's own lineage, nested (the trace export reads each fork's overrides from it).
  parentFork: z.unknown().optional(),
});

/** The schema of run.json (format detsim-run-v1). */
export const RUN_JSON_SCHEMA = z.object({
  format: z.literal(RUN_FORMAT),
  sessionId: z.string(),
  masterSeed: z.string(),
  seedDerivation: z.string(),
  steps: z.number(),
  stepDuration: Rational,
  epoch: z.string(),
  // Older records may lack it: they ran concurrent.
  dispatch: z.enum(DISPATCH_MODES).default('concurrent'),
  protocol: z.object({ major: z.number(), minor: z.number(), contractDigest: z.string() }),
  environment: RecordedEnvironment,
  agents: z.array(RecordedAgent),
  workers: z.array(RecordedWorker),
  agentsPerWorker: z.number(),
  transport: z.enum(TRANSPORTS),
  // Older records lack it: the default limit.
  threadHeapMb: z.number().default(DEFAULT_THREAD_HEAP_MB),
  deadlines: z.object({ startupMs: z.number(), stepMs: z.number(), captureMs: z.number() }),
  seedCollisions: z.array(z.object({ seed: z.number(), agentIds: z.tuple([z.string(), z.string()]) })),
  // Only when the run was made with `--set` / `--master-seed`: the overrides, in order (physical).
  overrides: z.array(RecordedOverride).optional(),
  // Only in a fork's run.json: where it came from (physical).
  fork: ForkLineage.optional(),
  // Only when the run records its observations sidecar (`--trace-observations`; physical).
  traceObservations: z.literal(true).optional(),
});

export type RunJson = z.output<typeof RUN_JSON_SCHEMA>;
export type RecordedAgentJson = RunJson['agents'][number];
export type ForkLineageJson = NonNullable<RunJson['fork']>;

/** A field path as the refusals name it: `agents[1].seed`, `(top level)` for the record itself. */
function fieldPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(top level)';
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`)).join('');
}

/** run.json as a RunJson, or struct_invalid_field naming the first field that does not fit the schema. */
export function readRunJson(value: unknown): RunJson {
  const parsed = RUN_JSON_SCHEMA.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = fieldPath(issue.path);
  throw new DetsimError('struct_invalid_field', `${field}: ${issue.message}`, field);
}
