// Run configuration: read a YAML or JSON file, validate it (zod), and resolve it into a RunPlan
// (every agent id, port, seed and worker assignment). Refusals name the field and a reason code.
// NOT the run itself (run.ts) and not process handling (launcher.ts): nothing here starts anything.
import { accessSync, constants, readFileSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename, dirname, extname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { parseStrict } from '../core/formats/canonical-json.js';
import { DetsimError } from '../core/formats/errors.js';
import type { ReasonCode } from '../core/formats/reasons.js';
import { RationalNs, isId, isU64, type Id, type U64 } from '../core/formats/scalars.js';
import { deriveSeed, deriveSeeds, SEED_ALGORITHM, type SeedCollision } from '../core/formats/seed.js';
import { asSpecifiers, moduleGraph } from '../core/models/identity.js';
import { ParamError, checkModelParams } from '../core/models/params.js';

/** The envelope v1 bound: a checkpoint holds at most 60 agents. */
export const MAX_AGENTS = 60;
export const BUILTIN_AGENT_MODELS = ['walker', 'lif'] as const;
export const BUILTIN_ENVIRONMENT_MODELS = ['forage'] as const;
export const DEFAULT_DEADLINES = { startupMs: 15_000, stepMs: 5_000, captureMs: 30_000 } as const;
/** The one bound on a run's length, for a config's `steps` and every `--steps` flag alike (9 digits). */
export const MAX_STEPS = 999_999_999;
/** Node's timer limit: a longer setTimeout silently fires after 1 ms, so no deadline may exceed it. */
export const MAX_DEADLINE_MS = 2 ** 31 - 1;
/** The extensions Node (and tsx for TypeScript, from source only) imports as a module: anything else cannot be a model. */
export const MODEL_MODULE_EXTENSIONS = ['.js', '.mjs', '.cjs', '.ts', '.mts', '.cts'] as const;

// ---------------------------------------------------------------------------------------------
// Schema. Every object is strict: an unknown (e.g. misspelled) field is refused, never ignored.

const reason = (r: ReasonCode) => ({ params: { reason: r } });
const IdSchema = z.custom<string>(isId, {
  message: 'is not an Id (1-64 of a-z 0-9 . _ -, starting with a letter or digit)',
  ...reason('struct_invalid_id'),
});
const U64Schema = z.custom<string>(isU64, {
  message: 'is not a U64 (a decimal string, "0" or no leading zero, at most 18446744073709551615; quote it in YAML)',
  ...reason('struct_invalid_u64'),
});
const ParamsSchema = z.record(z.string(), z.unknown());
const PositiveInt = z.number().int().positive();
const StepsSchema = z
  .number()
  .int()
  .min(1, 'must be at least 1 (a run of 0 steps would do nothing)')
  .max(MAX_STEPS, `must be at most ${MAX_STEPS}`);
const DeadlineSchema = PositiveInt.max(
  MAX_DEADLINE_MS,
  `must be at most ${MAX_DEADLINE_MS} ms (2^31-1, the longest timer Node keeps)`,
);

/** A world step duration: exact RationalNs, a decimal ns string, or "N/D" ns. */
const WorldStepSchema = z.union([
  z.strictObject({ numerator: U64Schema, denominator: U64Schema }),
  z.string().regex(/^[1-9][0-9]*(\/[1-9][0-9]*)?$/, 'is not "<ns>" or "<num>/<den>" nanoseconds'),
]);

const ModelSchema = z.string().min(1);

/** The executor of Phase B: which decision fields become the action (default: the whole decision). */
const ActionFieldsSchema = z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'is not a field name')).min(1);

const ExplicitAgentSchema = z.strictObject({
  id: IdSchema,
  model: ModelSchema,
  params: ParamsSchema.optional(),
  port: IdSchema.optional(),
  actionFields: ActionFieldsSchema.optional(),
});

const AgentGroupSchema = z.strictObject({
  count: PositiveInt,
  prefix: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]{0,40}$/, 'is not an Id prefix (a-z 0-9 . _ -, starting with a letter or digit)'),
  model: ModelSchema,
  params: ParamsSchema.optional(),
  /** Port ids are `<portPrefix><n>` (default: the agent id itself). */
  portPrefix: z
    .string()
    .regex(/^[a-z0-9][a-z0-9._-]{0,40}$/)
    .optional(),
  actionFields: ActionFieldsSchema.optional(),
});

/** The worker runtimes an agent worker can use (`workers.runtime` in the config). */
export const WORKER_RUNTIMES = ['typescript', 'rust', 'python'] as const;
/** Runtimes the environment worker can run on (the Rust worker hosts agents only). */
export const ENVIRONMENT_RUNTIMES = ['typescript', 'python'] as const;
/**
 * `environment.transport`: `inline` hosts the (TypeScript) environment in the coordinator's own
 * thread whatever `workers.transport` says; `workers` puts it on `workers.transport`; absent, a
 * built-in TypeScript environment of a local run on threads or Unix-socket processes is inline, any
 * other on `workers.transport`
 * (launch/inline-worker.ts environmentInline).
 */
export const ENVIRONMENT_TRANSPORTS = ['inline', 'workers'] as const;
/** The runtime of one worker process: the TypeScript, Rust or Python worker. */
export type WorkerRuntimeName = (typeof WORKER_RUNTIMES)[number];
const isRuntime = (v: unknown): v is WorkerRuntimeName => (WORKER_RUNTIMES as readonly unknown[]).includes(v);
const WorkerRuntimeSchema = z.custom<WorkerRuntimeName | WorkerRuntimeName[]>(
  (v) => isRuntime(v) || (Array.isArray(v) && v.length > 0 && v.every(isRuntime)),
  {
    message: `must be ${WORKER_RUNTIMES.join(' or ')}, or a list of those with one entry per agent worker`,
    ...reason('struct_invalid_field'),
  },
);

export const TRANSPORTS = ['unix', 'tcp', 'thread', 'inline'] as const satisfies readonly Transport[];
/** The transports that host TypeScript workers in the coordinator's process (a thread, or its own thread). */
export const IN_COORDINATOR: readonly Transport[] = ['thread', 'inline'];
/** Where workers come from: started by the launcher (local) or found in a rendezvous directory. */
export const PLACEMENTS = ['local', 'rendezvous'] as const;
/** How long a rendezvous waits for its records unless workers.rendezvous.timeoutSeconds says otherwise. */
export const DEFAULT_RENDEZVOUS_TIMEOUT_SECONDS = 120;
/** Heap limit of one worker thread unless workers.threadHeapMb says otherwise (MiB). */
export const DEFAULT_THREAD_HEAP_MB = 2048;

/** How workers are started: `local` (child processes or threads of this coordinator) or `slurm` (srun job steps). */
export const LAUNCHERS = ['local', 'slurm'] as const;
export type LauncherKind = (typeof LAUNCHERS)[number];
/** `launcher: slurm`, or `launcher: { kind: slurm, srunArgs: [...] }` with extra srun flags for every worker step. */
const LauncherSchema = z.union([
  z.enum(LAUNCHERS),
  z.strictObject({ kind: z.enum(LAUNCHERS), srunArgs: z.array(z.string().min(1)).optional() }),
]);

const TopSchema = z.strictObject({
  sessionId: IdSchema,
  masterSeed: U64Schema,
  steps: StepsSchema,
  stepHz: PositiveInt.optional(),
  worldStepNs: WorldStepSchema.optional(),
  environment: z.strictObject({
    id: IdSchema,
    model: ModelSchema,
    params: ParamsSchema.optional(),
    runtime: z.enum(ENVIRONMENT_RUNTIMES).optional(),
    /** `inline`: the environment in the coordinator's thread, the agents on workers.transport (physical). */
    transport: z.enum(ENVIRONMENT_TRANSPORTS).optional(),
  }),
  agents: z.union([z.array(z.unknown()).min(1), z.record(z.string(), z.unknown())]),
  workers: z
    .strictObject({
      agentsPerWorker: PositiveInt.optional(),
      transport: z.enum(TRANSPORTS).optional(),
      /** Heap limit of each worker thread in MiB (workers.transport: thread). */
      threadHeapMb: z.number().int().min(16).max(65536).optional(),
      /** Agent worker runtime: one for all agent workers, or one per agent worker in plan order. */
      runtime: WorkerRuntimeSchema.optional(),
      /** local: the launcher starts every worker; rendezvous: it connects to workers started by hand. */
      placement: z.enum(PLACEMENTS).optional(),
      rendezvous: z
        .strictObject({
          dir: z.string().min(1),
          timeoutSeconds: z
            .number()
            .positive()
            .max(MAX_DEADLINE_MS / 1000, `must be at most ${MAX_DEADLINE_MS / 1000}`)
            .optional(),
          /** The per-run secret file plaintext TCP workers were started with (`--token-file`). */
          tokenFile: z.string().min(1).optional(),
        })
        .optional(),
      /**
       * Mutual TLS + bearer token on TCP workers: a `detsim certs` directory (physical: never hashed);
       * `{}` (no dir): a per-run set the coordinator makes in the run directory (launch-facts.ts).
       */
      tls: z.strictObject({ dir: z.string().min(1).optional() }).optional(),
    })
    .optional(),
  launcher: LauncherSchema.optional(),
  deadlines: z
    .strictObject({
      startupMs: DeadlineSchema.optional(),
      stepMs: DeadlineSchema.optional(),
      captureMs: DeadlineSchema.optional(),
    })
    .optional(),
  /** Recovery from a lost worker: `--max-restarts N` of `detsim run` overrides it (needs checkpoints). */
  recovery: z.strictObject({ maxRestarts: z.number().int().min(0).max(999_999_999) }).optional(),
});

export type RunConfigInput = z.infer<typeof TopSchema>;

// ---------------------------------------------------------------------------------------------
// The resolved plan: everything a run needs, with no defaults left implicit.

/**
 * How the coordinator reaches a worker: gRPC over a Unix socket or loopback TCP to a worker
 * process, a worker thread in the coordinator's process, or `inline` in the coordinator's own
 * thread with no isolation (trusted models only). The last two host TypeScript workers; Rust and
 * Python workers of such a run stay processes on Unix sockets. Physical: never part of a ReproHash.
 */
export type Transport = 'unix' | 'tcp' | 'thread' | 'inline';

/** One agent of a resolved plan: id, port, model, params, derived seed, worker and action fields. */
export interface PlannedAgent {
  agentId: Id;
  portId: Id;
  model: string;
  params: Record<string, unknown>;
  seed: number;
  workerId: Id;
  /** Decision fields sent to the environment as the action; null = the whole decision. */
  actionFields: string[] | null;
}

/** One worker process of a resolved plan: its id, role, the agents it hosts and its runtime. */
export interface PlannedWorker {
  workerId: Id;
  role: 'agent' | 'environment';
  /** Agents hosted, in port order (empty for the environment). */
  agentIds: Id[];
  /** Which worker implementation runs it: set on every agent worker (default typescript); on the environment only when `environment.runtime` names one. */
  runtime?: WorkerRuntimeName;
}

/**
 * A resolved, validated run configuration: what {@link loadConfig} and {@link resolveConfig} return
 * and {@link runSession} runs.
 */
export interface RunPlan {
  sessionId: Id;
  masterSeed: U64;
  seedAlgorithm: typeof SEED_ALGORITHM;
  steps: number;
  stepDuration: RationalNs;
  environment: { environmentId: Id; model: string; params: Record<string, unknown>; seed: number; workerId: Id };
  /** In port order (the declaration order of the config). */
  agents: PlannedAgent[];
  workers: PlannedWorker[];
  agentsPerWorker: number;
  transport: Transport;
  /** Set when the config named no workers.transport: `transport` is the local default (defaultTransport), which a Slurm launcher given later replaces (forLauncher). Not recorded. */
  transportDefault?: true;
  /**
   * `inline` (`environment.transport: inline`): the environment worker runs in the coordinator's own
   * thread, no isolation (trusted models only), while the agent workers use `transport`; `workers`:
   * on `transport`; absent: the default, inline for a built-in TypeScript environment of a local run on
   * threads or Unix-socket processes (environmentInline). TypeScript environments only. Physical like `transport`: recorded in
   * launch.json, never in run.json or a hash.
   */
  environmentTransport?: 'inline' | 'workers';
  /** Heap limit of each worker thread (MiB) when the transport is thread. */
  threadHeapMb: number;
  deadlines: { startupMs: number; stepMs: number; captureMs: number };
  seedCollisions: SeedCollision[];
  /** How workers are started; absent means local (launcher.ts). */
  launcher?: LauncherPlan;
  /**
   * Where Python user models are imported from (`--model-path` of each Python worker): the config
   * file's directory; for a recorded run, also where its run directory lies (model-source.ts).
   * Physical; only set when the plan has a Python user model.
   */
  modelDirs?: string[];
  /** `python:…` user model → SHA-256 of its module's source, found by the plan-time probe (launcher.ts). */
  modelDigests?: Record<string, string>;
  /**
   * `workers.placement: rendezvous`: every worker was started by hand and announces itself in `dir`;
   * absent: local (the launcher starts them). Physical: never recorded in run.json nor hashed.
   */
  rendezvous?: RendezvousPlacement;
  /**
   * Mutual TLS + bearer token for the workers (`workers.tls.dir` or `detsim run --tls-dir`, absolute):
   * physical like the transport, never in run.json, a hash or a trace (coordinator/launch/tls.ts).
   */
  tls?: { dir: string };
  /**
   * TLS with a per-run set the coordinator makes into the run directory before any worker starts
   * (`workers.tls: {}`, or launcher: slurm with placement rendezvous and no workers.tls): it becomes
   * `tls` once made (coordinator/launch/launch-facts.ts). Physical, like `tls`.
   */
  perRunTls?: true;
  /** `recovery.maxRestarts` when the config sets it (a run-time policy, never in run.json). */
  recovery?: { maxRestarts: number };
  /**
   * The `--set` overrides (overrides.ts) the plan was resolved with, in order: recorded in run.json
   * as `overrides` (physical: the resolved composition they produced is what is hashed).
   */
  overrides?: { path: string; value: unknown }[];
}

/** Workers found in a rendezvous directory: where, and how long to wait for all their records. */
export interface RendezvousPlacement {
  /** Absolute (a relative config value resolves against the config file's directory). */
  dir: string;
  timeoutMs: number;
  /**
   * Absolute: the secret the hand-started plaintext TCP workers hold (`--token-file`), presented on
   * every stream. A path, never the secret, is recorded (launch.json).
   */
  tokenFile?: string;
}

export const ENVIRONMENT_WORKER_ID = 'worker-env';

/**
 * How a run's workers are started (physical: never in run.json nor a ReproHash). `slurm`: each worker
 * process is one `srun` job step of the allocation `detsim run` runs in (coordinator/slurm/srun.ts).
 */
export type LauncherPlan = { kind: 'local' } | { kind: 'slurm'; srunArgs: string[] };

/** A config's `launcher` field as a plan; srun flags on a local launcher, or slurm with threads, are refused. */
function resolveLauncher(
  raw: NonNullable<RunConfigInput['launcher']>,
  workers: RunConfigInput['workers'],
): LauncherPlan {
  const kind = typeof raw === 'string' ? raw : raw.kind;
  const srunArgs = typeof raw === 'string' ? undefined : raw.srunArgs;
  if (kind === 'local') {
    if (srunArgs !== undefined)
      throw new DetsimError(
        'struct_invalid_field',
        'launcher.srunArgs: srun flags need kind slurm',
        'launcher.srunArgs',
      );
    return { kind };
  }
  if (workers?.transport !== undefined && IN_COORDINATOR.includes(workers.transport))
    throw new DetsimError(
      'struct_invalid_field',
      `launcher: slurm starts worker processes with srun; workers.transport: ${workers.transport} runs them in the coordinator`,
      'launcher',
    );
  // srun steps on other nodes register in the rendezvous directory and are reached over TCP (TLS).
  if (workers?.placement === 'rendezvous' && workers.transport === 'unix')
    throw new DetsimError(
      'struct_invalid_field',
      'workers.transport: unix cannot reach srun steps found by rendezvous (they may run on other nodes); use tcp',
      'workers.transport',
    );
  return { kind, srunArgs: srunArgs ?? [] };
}

// ---------------------------------------------------------------------------------------------

function pathText(path: readonly PropertyKey[]): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out === '' ? String(p) : `.${String(p)}`;
  return out === '' ? '(top level)' : out;
}

function joinPath(prefix: string, path: readonly PropertyKey[]): string {
  const rest = pathText(path);
  if (rest === '(top level)') return prefix;
  return rest.startsWith('[') ? `${prefix}${rest}` : `${prefix}.${rest}`;
}

/**
 * A field of the object schema at `parent` spelled within two edits of the unknown `key` and not
 * given (`agent` for `agents`, `worker` for `workers`), or undefined.
 */
function nearField(
  schema: z.ZodType,
  parent: readonly PropertyKey[],
  key: string,
  object: unknown,
): string | undefined {
  const given = (name: string) => typeof object === 'object' && object !== null && name in object;
  const near = [...keysAt(schema, parent)]
    .filter((name) => !given(name))
    .map((name) => ({ name, d: editDistance(key.toLowerCase(), name.toLowerCase()) }))
    .filter((c) => c.d <= 2)
    .sort((a, b) => a.d - b.d || (a.name < b.name ? -1 : 1));
  return near[0]?.name;
}

/** The keys of the object schema(s) at `path` inside `schema` (through optional, array and union). */
function keysAt(schema: z.ZodType, path: readonly PropertyKey[]): Set<string> {
  const keys = new Set<string>();
  const walk = (s: z.ZodType, rest: readonly PropertyKey[]): void => {
    if (s instanceof z.ZodOptional || s instanceof z.ZodNullable || s instanceof z.ZodDefault)
      return walk(s.unwrap() as z.ZodType, rest);
    if (s instanceof z.ZodUnion) return (s.options as z.ZodType[]).forEach((o) => walk(o, rest));
    if (s instanceof z.ZodArray)
      return typeof rest[0] === 'number' ? walk(s.element as z.ZodType, rest.slice(1)) : undefined;
    if (!(s instanceof z.ZodObject)) return;
    const shape = s.shape as Record<string, z.ZodType>;
    const next = typeof rest[0] === 'string' ? shape[rest[0]] : undefined;
    if (rest.length === 0) Object.keys(shape).forEach((k) => keys.add(k));
    else if (next) walk(next, rest.slice(1));
  };
  walk(schema, path);
  return keys;
}

/** Levenshtein distance (insert, delete, substitute), for short field names. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++)
      next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/** The first zod issue as a DetsimError naming the field path. */
function refusal(error: z.ZodError, prefix: string, schema: z.ZodType): DetsimError {
  // A misspelled field is the likeliest cause of a missing one: report unknown fields first.
  const issue = error.issues.find((i) => i.code === 'unrecognized_keys') ?? error.issues[0]!;
  const at = (path: readonly PropertyKey[]) => (prefix ? joinPath(prefix, path) : pathText(path));
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0]!;
    const field = at([...issue.path, key]);
    const meant = nearField(schema, issue.path, key, (issue as { input?: unknown }).input);
    const hint = meant === undefined ? '' : ` (did you mean ${JSON.stringify(meant)}?)`;
    return new DetsimError('struct_unknown_field', `${field}: unknown field ${JSON.stringify(key)}${hint}`, field);
  }
  const field = at(issue.path);
  const input = (issue as { input?: unknown }).input;
  // A required field that is not there: an Id or U64 (a custom check) says so too, not "is not an Id".
  if (input === undefined && (issue.code === 'invalid_type' || issue.code === 'custom')) {
    return new DetsimError('struct_missing_field', `${field}: required field is missing`, field);
  }
  const r = (issue as { params?: { reason?: ReasonCode } }).params?.reason ?? 'struct_invalid_field';
  const shown = r === 'struct_invalid_field' || input === undefined ? '' : `${JSON.stringify(input)} `;
  return new DetsimError(r, `${field}: ${shown}${issue.message}`, field);
}

function check<T>(schema: z.ZodType<T>, value: unknown, prefix: string): T {
  const r = schema.safeParse(value, { reportInput: true });
  if (!r.success) throw refusal(r.error, prefix, schema);
  return r.data;
}

/** Parse config text: JSON (strict: duplicate keys refused) when it looks like JSON, else YAML. */
export function parseConfigText(text: string, source: string): unknown {
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{')) {
    try {
      return parseStrict(text);
    } catch (e) {
      if (e instanceof DetsimError) throw new DetsimError(e.reason, `${source}: ${e.message}`, e.field);
      throw e;
    }
  }
  try {
    return parseYaml(text, { uniqueKeys: true, strict: true, prettyErrors: false });
  } catch (e) {
    const msg = (e as Error).message.split('\n')[0];
    throw new DetsimError('struct_invalid_field', `${source}: not valid YAML: ${msg}`, '(file)');
  }
}

/** A steps count from a config or a flag: a whole number from 1 to MAX_STEPS, or refused naming `field`. */
export function checkSteps(steps: number, field: string): number {
  if (!Number.isSafeInteger(steps) || steps < 1 || steps > MAX_STEPS) {
    throw new DetsimError(
      'struct_invalid_field',
      `${field}: ${steps} is not a whole number of steps from 1 to ${MAX_STEPS}`,
      field,
    );
  }
  return steps;
}

/** The config file's text; a directory or unreadable path is refused by name (never a stack trace). */
function readConfigFile(file: string): string {
  try {
    if (statSync(file).isDirectory())
      throw new DetsimError('struct_invalid_field', `${file} is a directory, not a config file`, '(file)');
    return readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code !== 'string') throw e;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code;
    throw new DetsimError('struct_invalid_field', `${file}: cannot read it (${why})`, '(file)');
  }
}

/** A config file parsed but not resolved: the document `--set` overrides apply to (overrides.ts). */
export function readConfigDocument(
  file: string,
  what = 'a config (a mapping with sessionId, steps, environment and agents)',
): unknown {
  const doc = parseConfigText(readConfigFile(file), file);
  // Not a mapping at all (a wrong file, e.g. a text file or a list): named by the file, not "(top level)".
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
    throw new DetsimError(
      'struct_invalid_field',
      `${file}: not ${what}, but ${doc === null ? 'empty' : Array.isArray(doc) ? 'a list' : `a ${typeof doc}`}`,
      '(file)',
    );
  return doc;
}

/** Read and resolve a config file; relative model paths resolve against the file's directory. */
export function loadConfig(file: string): RunPlan {
  return resolveConfig(readConfigDocument(file), { baseDir: dirname(resolve(file)) });
}

function isModelPath(model: string): boolean {
  return model.startsWith('./') || model.startsWith('../') || isAbsolute(model) || model.startsWith('file:');
}

/** A built-in model name stays as is; a module path becomes absolute and must be an importable module file. */
/** A Python model class, `python:package.module:Class`, loaded by a Python worker (runtime: python) only. */
const PYTHON_MODEL =
  /^python:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
export const isPythonModel = (model: string): boolean => model.startsWith('python:');

function resolveModel(model: string, builtins: readonly string[], field: string, baseDir: string): string {
  if (builtins.includes(model)) return model;
  if (isPythonModel(model)) {
    if (!PYTHON_MODEL.test(model))
      throw new DetsimError(
        'struct_unknown_model',
        `${field}: ${JSON.stringify(model)} is not python:package.module:Class`,
        field,
      );
    return model;
  }
  if (isModelPath(model)) {
    const path = model.startsWith('file:') ? filePath(model, field) : resolve(baseDir, model);
    checkModuleFile(path, JSON.stringify(model), field);
    return path;
  }
  throw new DetsimError(
    'struct_unknown_model',
    `${field}: unknown model ${JSON.stringify(model)} (built-in: ${builtins.join(', ')}; or a module path starting with ./ or /)`,
    field,
  );
}

/** A file: URL as a path; one naming a host or otherwise not a local file is refused by name. */
function filePath(url: string, field: string): string {
  try {
    return fileURLToPath(url);
  } catch {
    throw new DetsimError(
      'struct_unknown_model',
      `${field}: model module ${JSON.stringify(url)} is not a local file: URL`,
      field,
    );
  }
}

/**
 * Plan-time check of a model module, without running its code: it exists, is a readable regular
 * file, and has an extension the worker can import. (Its exports are checked by the worker.)
 */
function checkModuleFile(path: string, shown: string, field: string): void {
  const refuse = (why: string): never => {
    throw new DetsimError('struct_unknown_model', `${field}: model module ${shown} ${why} (${path})`, field);
  };
  let isFile: boolean;
  try {
    isFile = statSync(path).isFile();
    accessSync(path, constants.R_OK);
  } catch (e) {
    return refuse(
      (e as NodeJS.ErrnoException).code === 'ENOENT'
        ? 'does not exist'
        : `cannot be read (${(e as NodeJS.ErrnoException).code})`,
    );
  }
  if (!isFile) refuse('is not a file');
  if (!(MODEL_MODULE_EXTENSIONS as readonly string[]).includes(extname(path)))
    refuse(`is not a module (${MODEL_MODULE_EXTENSIONS.join(', ')})`);
  if (!FROM_SOURCE && !WORKERS_LOAD_TYPESCRIPT() && TYPESCRIPT_EXTENSIONS.includes(extname(path))) {
    const js = path.replace(/\.(m|c)?ts$/, (_m, k: string | undefined) => `.${k ?? ''}js`);
    refuse(
      `is TypeScript, which the built CLI does not load (Node 20 runs JavaScript): compile it first with \`npx -p typescript tsc --module nodenext --target es2022 ${basename(path)}\` and name ./${basename(js)} in the config`,
    );
  }
  const lost = asSpecifiers(path, moduleGraph(path).unloadable);
  if (lost.length > 0) refuse(`imports ${lost.join(', ')}, which ${lost.length === 1 ? 'is' : 'are'} not there`);
}

/** TypeScript module extensions: loaded only when detsim itself runs from source (tsx). */
const TYPESCRIPT_EXTENSIONS: readonly string[] = ['.ts', '.mts', '.cts'];
/** Whether this coordinator runs from its TypeScript source (tsx, the tests) rather than dist/. */
const FROM_SOURCE = import.meta.url.endsWith('.ts');
/** Whether TypeScript workers start with a module loader of their own (DETSIM_WORKER_NODE_ARGS, e.g. `--import tsx`). */
const WORKERS_LOAD_TYPESCRIPT = (): boolean =>
  /(^|\s)--(import|loader|experimental-loader)\b/.test(process.env.DETSIM_WORKER_NODE_ARGS ?? '');

/** The worker's own param check (core/models/params.ts), run before anything starts. */
function checkParams(
  kind: 'agent' | 'environment',
  model: string,
  params: Record<string, unknown>,
  field: string,
): void {
  try {
    checkModelParams(kind, model, params);
  } catch (e) {
    if (!(e instanceof ParamError)) throw e;
    throw new DetsimError(
      e.unknown ? 'struct_unknown_field' : 'struct_invalid_field',
      `${field}.${e.message}`,
      `${field}.${e.param}`,
    );
  }
}

function resolveStepDuration(cfg: RunConfigInput): RationalNs {
  if (cfg.stepHz !== undefined && cfg.worldStepNs !== undefined) {
    throw new DetsimError(
      'struct_invalid_field',
      'worldStepNs: give either stepHz or worldStepNs, not both',
      'worldStepNs',
    );
  }
  if (cfg.worldStepNs !== undefined) {
    const w = cfg.worldStepNs;
    const [n, d] = typeof w === 'string' ? (w.includes('/') ? w.split('/') : [w, '1']) : [w.numerator, w.denominator];
    const r = RationalNs.of(BigInt(n!), BigInt(d!), 'worldStepNs');
    if (r.isZero())
      throw new DetsimError('struct_invalid_rational', 'worldStepNs: a duration must be non-zero', 'worldStepNs');
    return r;
  }
  return RationalNs.of(1_000_000_000n, BigInt(cfg.stepHz ?? 60), 'stepHz');
}

interface ExpandedAgent {
  agentId: Id;
  portId: Id;
  model: string;
  params: Record<string, unknown>;
  actionFields: string[] | null;
  field: string;
}

function expandAgents(raw: unknown, baseDir: string): ExpandedAgent[] {
  const entries = Array.isArray(raw) ? raw : [raw];
  const out: ExpandedAgent[] = [];
  entries.forEach((entry, i) => {
    const field = Array.isArray(raw) ? `agents[${i}]` : 'agents';
    if (typeof entry === 'object' && entry !== null && 'count' in entry) {
      const g = check(AgentGroupSchema, entry, field);
      if (out.length + g.count > MAX_AGENTS) {
        throw new DetsimError(
          'size_agents_over_60',
          `${field}.count: more than ${MAX_AGENTS} agents in one composition (envelope v1 bound)`,
          `${field}.count`,
        );
      }
      const model = resolveModel(g.model, BUILTIN_AGENT_MODELS, `${field}.model`, baseDir);
      checkParams('agent', model, g.params ?? {}, field);
      // Zero-padded indexes keep id order equal to declaration order.
      const width = String(g.count - 1).length;
      for (let n = 0; n < g.count; n++) {
        const suffix = String(n).padStart(width, '0');
        const agentId = `${g.prefix}${suffix}`;
        if (!isId(agentId))
          throw new DetsimError(
            'struct_invalid_id',
            `${field}.prefix: ${JSON.stringify(agentId)} is not an Id`,
            `${field}.prefix`,
          );
        out.push({
          agentId,
          portId: g.portPrefix ? `${g.portPrefix}${suffix}` : agentId,
          model,
          params: g.params ?? {},
          actionFields: g.actionFields ?? null,
          field: `${field}.prefix`,
        });
      }
    } else {
      const a = check(ExplicitAgentSchema, entry, field);
      const model = resolveModel(a.model, BUILTIN_AGENT_MODELS, `${field}.model`, baseDir);
      checkParams('agent', model, a.params ?? {}, field);
      out.push({
        agentId: a.id,
        portId: a.port ?? a.id,
        model,
        params: a.params ?? {},
        actionFields: a.actionFields ?? null,
        field: `${field}.id`,
      });
    }
  });
  if (out.length > MAX_AGENTS) {
    throw new DetsimError(
      'size_agents_over_60',
      `agents: ${out.length} agents, more than ${MAX_AGENTS} in one composition (envelope v1 bound)`,
      'agents',
    );
  }
  return out;
}

function refuseDuplicates(agents: ExpandedAgent[]): void {
  const ids = new Map<string, string>();
  const ports = new Map<string, string>();
  for (const a of agents) {
    const prev = ids.get(a.agentId);
    if (prev !== undefined) {
      throw new DetsimError(
        'struct_duplicate_agent_id',
        `${a.field}: agent id ${JSON.stringify(a.agentId)} is repeated (first at ${prev}); equal ids would share a seed`,
        a.field,
      );
    }
    ids.set(a.agentId, a.field);
    const prevPort = ports.get(a.portId);
    if (prevPort !== undefined) {
      throw new DetsimError(
        'struct_invalid_field',
        `${a.field}: port ${JSON.stringify(a.portId)} is repeated (first at ${prevPort})`,
        a.field,
      );
    }
    ports.set(a.portId, a.field);
  }
}

/** What each runtime can host: Rust only the built-ins; Python the built-ins and python: classes; TypeScript all but python: classes. */
const HOSTS: Record<WorkerRuntimeName, string> = {
  typescript: 'the built-in models and TypeScript/JavaScript modules, not python: classes',
  rust: `only the built-in agent models (${BUILTIN_AGENT_MODELS.join(', ')})`,
  python: `only the built-in models and python:package.module:Class models`,
};
function hostable(runtime: WorkerRuntimeName, model: string): boolean {
  if (runtime === 'python') return !isAbsolute(model);
  if (runtime === 'rust') return (BUILTIN_AGENT_MODELS as readonly string[]).includes(model);
  return !isPythonModel(model);
}

/** Put each agent worker on its runtime (a list names one per agent worker, in plan order). */
function assignRuntimes(
  workers: PlannedWorker[],
  agents: PlannedAgent[],
  runtime: WorkerRuntimeName | WorkerRuntimeName[] | undefined,
): void {
  const onTypescript = agents.find((a) => isPythonModel(a.model));
  if (runtime === undefined) {
    // Every agent worker keeps the default, typescript, which cannot load a python: class.
    if (onTypescript)
      throw new DetsimError(
        'struct_invalid_field',
        `workers.runtime: agent ${onTypescript.agentId} uses ${onTypescript.model}, which needs runtime python for its worker`,
        'workers.runtime',
      );
    return;
  }
  const agentWorkers = workers.filter((w) => w.role === 'agent');
  if (Array.isArray(runtime) && runtime.length !== agentWorkers.length) {
    throw new DetsimError(
      'struct_invalid_field',
      `workers.runtime: ${runtime.length} runtimes listed for ${agentWorkers.length} agent workers (one per agent worker, in order)`,
      'workers.runtime',
    );
  }
  agentWorkers.forEach((w, i) => {
    w.runtime = Array.isArray(runtime) ? runtime[i]! : runtime;
    const foreign = agents.find((a) => a.workerId === w.workerId && !hostable(w.runtime!, a.model));
    if (foreign) {
      throw new DetsimError(
        'struct_invalid_field',
        `workers.runtime: ${w.workerId} runs on ${w.runtime}, which hosts ${HOSTS[w.runtime!]}; agent ${foreign.agentId} uses ${foreign.model}`,
        'workers.runtime',
      );
    }
  });
}

/** Validate a parsed config object and resolve it into a RunPlan. Throws DetsimError. */
export function resolveConfig(value: unknown, opts: { baseDir?: string } = {}): RunPlan {
  const baseDir = opts.baseDir ?? process.cwd();
  const cfg = check(TopSchema, value, '');
  const stepDuration = resolveStepDuration(cfg);
  const envModel = resolveModel(cfg.environment.model, BUILTIN_ENVIRONMENT_MODELS, 'environment.model', baseDir);
  checkParams('environment', envModel, cfg.environment.params ?? {}, 'environment');
  const agents = expandAgents(cfg.agents, baseDir);
  refuseDuplicates(agents);
  if (agents.some((a) => a.agentId === cfg.environment.id)) {
    throw new DetsimError(
      'struct_duplicate_agent_id',
      `environment.id: ${JSON.stringify(cfg.environment.id)} is also an agent id`,
      'environment.id',
    );
  }
  const derived = deriveSeeds(
    cfg.masterSeed,
    agents.map((a) => a.agentId),
  );
  const envSeed = deriveSeed(cfg.masterSeed, cfg.environment.id);
  const collisions = [...derived.collisions];
  for (const s of derived.seeds) {
    if (s.seed === envSeed) collisions.push({ seed: envSeed, agentIds: [cfg.environment.id, s.agentId] });
  }
  const agentsPerWorker = cfg.workers?.agentsPerWorker ?? defaultAgentsPerWorker(cfg, agents.length);
  const workers: PlannedWorker[] = [{ workerId: ENVIRONMENT_WORKER_ID, role: 'environment', agentIds: [] }];
  if (cfg.environment.runtime !== undefined) workers[0]!.runtime = cfg.environment.runtime;
  checkEnvironmentRuntime(envModel, cfg.environment.runtime);
  checkEnvironmentTransport(cfg.environment.transport, cfg.environment.runtime);
  const planned: PlannedAgent[] = agents.map((a, i) => {
    const w = Math.floor(i / agentsPerWorker);
    const workerId = `worker-${w}`;
    if (workers.length <= w + 1) workers.push({ workerId, role: 'agent', agentIds: [], runtime: 'typescript' });
    workers[w + 1]!.agentIds.push(a.agentId);
    return {
      agentId: a.agentId,
      portId: a.portId,
      model: a.model,
      params: a.params,
      seed: derived.seeds[i]!.seed,
      workerId,
      actionFields: a.actionFields,
    };
  });
  assignRuntimes(workers, planned, cfg.workers?.runtime);
  const rendezvous = resolvePlacement(cfg, baseDir);
  return {
    sessionId: cfg.sessionId,
    masterSeed: derived.masterSeed,
    seedAlgorithm: SEED_ALGORITHM,
    steps: cfg.steps,
    stepDuration,
    environment: {
      environmentId: cfg.environment.id,
      model: envModel,
      params: cfg.environment.params ?? {},
      seed: envSeed,
      workerId: ENVIRONMENT_WORKER_ID,
    },
    agents: planned,
    workers,
    agentsPerWorker,
    transport: cfg.workers?.transport ?? defaultTransport(cfg),
    ...(cfg.workers?.transport === undefined ? { transportDefault: true as const } : {}),
    ...(cfg.environment.transport ? { environmentTransport: cfg.environment.transport } : {}),
    threadHeapMb: cfg.workers?.threadHeapMb ?? DEFAULT_THREAD_HEAP_MB,
    deadlines: { ...DEFAULT_DEADLINES, ...cfg.deadlines },
    seedCollisions: collisions,
    ...(cfg.launcher !== undefined ? { launcher: resolveLauncher(cfg.launcher, cfg.workers) } : {}),
    ...(rendezvous ? { rendezvous } : {}),
    ...resolveTls(cfg, baseDir, rendezvous),
    ...(cfg.recovery ? { recovery: { maxRestarts: cfg.recovery.maxRestarts } } : {}),
    ...(hasPythonUserModel([envModel, ...planned.map((a) => a.model)]) ? { modelDirs: [baseDir] } : {}),
  };
}

/** Agents per worker where the layout is the user's (a list of runtimes, rendezvous, Slurm); the default's least group. */
export const AGENTS_PER_WORKER = 4;

/**
 * Agents per worker when the config names none. Workers the launcher starts on this machine: one
 * agent worker per core beside the coordinator's, never more than groups of AGENTS_PER_WORKER make
 * (16 agents: 4 workers on 5 cores or more, 1 on 2 cores). Each worker costs a wake-up per message
 * and the lockstep waits on the slowest, so on a small machine fewer, fuller workers step faster
 * (bench/README.md, "Performance of the transports"). Physical: the layout is in run.json, never in
 * a hash. A list of runtimes (one per worker), remote placement or Slurm keep groups of four: there
 * the layout is the user's, not this machine's.
 */
export function defaultAgentsPerWorker(cfg: RunConfigInput, agents: number, cores = availableParallelism()): number {
  const fixed = Array.isArray(cfg.workers?.runtime) || cfg.workers?.placement === 'rendezvous' || isSlurm(cfg);
  if (fixed) return AGENTS_PER_WORKER;
  const workers = Math.min(Math.ceil(agents / AGENTS_PER_WORKER), Math.max(1, cores - 1));
  return Math.max(AGENTS_PER_WORKER, Math.ceil(agents / workers));
}

/**
 * The transport when the config names none: a local run puts its TypeScript workers on threads of
 * the coordinator's process (Rust and Python workers keep processes on Unix sockets); Slurm keeps
 * Unix sockets; a TLS block (TLS is for TCP workers) and a rendezvous reach the workers over TCP. Threads
 * step 1.5–2.8× faster than processes on a small machine (bench/README.md, "Performance of the
 * transports") and hold the same isolation checks. Physical: run.json records it, no hash sees it.
 */
export function defaultTransport(cfg: RunConfigInput): Transport {
  if (cfg.workers?.placement === 'rendezvous' || cfg.workers?.tls !== undefined) return 'tcp';
  return isSlurm(cfg) ? 'unix' : 'thread';
}

/**
 * The plan started by `launcher` (a `--launcher` flag over the config's). srun starts worker
 * processes, so under Slurm a transport the config left to the local default (threads) becomes
 * Unix sockets, as if the config had named the launcher; a transport the config named stays (a
 * thread or inline one is then refused by name before anything starts: checkSlurmTransport).
 */
export function forLauncher(plan: RunPlan, launcher: LauncherPlan): RunPlan {
  const out: RunPlan = { ...plan, launcher };
  if (launcher.kind === 'slurm' && plan.transportDefault && IN_COORDINATOR.includes(plan.transport))
    out.transport = 'unix';
  return out;
}

/** Whether the config's launcher is Slurm (`launcher: slurm` or `{ kind: slurm, … }`). */
function isSlurm(cfg: RunConfigInput): boolean {
  return (typeof cfg.launcher === 'string' ? cfg.launcher : cfg.launcher?.kind) === 'slurm';
}

/** The environment's model must fit its runtime: a python: model needs python, which hosts no module path. */
function checkEnvironmentRuntime(envModel: string, runtime: string | undefined): void {
  if (isPythonModel(envModel) && runtime !== 'python')
    throw new DetsimError(
      'struct_invalid_field',
      `environment.runtime: the model ${envModel} needs runtime python`,
      'environment.runtime',
    );
  if (runtime === 'python' && isAbsolute(envModel))
    throw new DetsimError(
      'struct_invalid_field',
      `environment.runtime: python hosts only the built-in models and python:package.module:Class models; the environment uses ${envModel}`,
      'environment.runtime',
    );
}

/**
 * The plan with its environment inline (`inline`) or on the workers' transport (`workers`), whatever
 * the config said (`--environment-transport` of run and replay); checked like the config, naming `field`.
 */
export function withEnvironmentTransport(plan: RunPlan, chosen: 'inline' | 'workers', field: string): RunPlan {
  const out: RunPlan = { ...plan, environmentTransport: chosen };
  checkEnvironmentTransport(
    out.environmentTransport,
    out.workers.find((w) => w.role === 'environment')?.runtime,
    field,
  );
  return out;
}

/**
 * `environment.transport: inline` hosts the environment's TypeScript runtime in the coordinator's
 * thread: an environment on another runtime (Python) cannot be hosted so, and is refused by name.
 * Also checked on a resume's plan (its `--environment-transport` override: checkpoint/resume.ts).
 */
export function checkEnvironmentTransport(
  transport: 'inline' | 'workers' | undefined,
  runtime: string | undefined,
  field = 'environment.transport',
): void {
  if (transport === 'inline' && runtime !== undefined && runtime !== 'typescript')
    throw new DetsimError(
      'struct_invalid_field',
      `${field}: inline hosts a TypeScript environment in the coordinator's thread; environment.runtime is ${runtime}`,
      field,
    );
}

/** A `python:` model of the user's own (not one the detsim_worker package ships). */
export function isPythonUserModel(model: string): boolean {
  return isPythonModel(model) && !/^python:detsim_worker[.:]/.test(model);
}

const hasPythonUserModel = (models: readonly string[]): boolean => models.some(isPythonUserModel);

/**
 * workers.tls: a given set (`dir`), or a per-run set (`{}`, and the default of launcher: slurm with
 * placement rendezvous: workers that listen beyond loopback never serve plaintext). A per-run set
 * needs workers this coordinator starts, over TCP: hand-started workers need their set beforehand.
 */
function resolveTls(
  cfg: RunConfigInput,
  baseDir: string,
  rendezvous: RendezvousPlacement | undefined,
): Pick<RunPlan, 'tls' | 'perRunTls'> {
  const block = cfg.workers?.tls;
  if (block?.dir !== undefined) return { tls: { dir: resolve(baseDir, block.dir) } };
  const slurm = isSlurm(cfg);
  if (!block && !(slurm && rendezvous)) return {};
  if (rendezvous && !slurm)
    throw new DetsimError(
      'struct_missing_field',
      'workers.tls.dir: workers started by hand need their TLS set before the run (make it with detsim certs)',
      'workers.tls.dir',
    );
  if ((cfg.workers?.transport ?? defaultTransport(cfg)) !== 'tcp')
    throw new DetsimError(
      'struct_invalid_field',
      'workers.tls: TLS is for TCP workers; set workers.transport: tcp',
      'workers.transport',
    );
  return { perRunTls: true };
}

/** workers.placement and workers.rendezvous, which go together; a rendezvous reaches workers over TCP. */
function resolvePlacement(cfg: RunConfigInput, baseDir: string): RendezvousPlacement | undefined {
  const placement = cfg.workers?.placement ?? 'local';
  const block = cfg.workers?.rendezvous;
  if (placement === 'local') {
    if (block)
      throw new DetsimError(
        'struct_invalid_field',
        'workers.rendezvous: only used with workers.placement: rendezvous',
        'workers.rendezvous',
      );
    return undefined;
  }
  if (!block)
    throw new DetsimError(
      'struct_missing_field',
      'workers.rendezvous: required with workers.placement: rendezvous ({ dir, timeoutSeconds })',
      'workers.rendezvous',
    );
  if (cfg.workers?.transport !== undefined && IN_COORDINATOR.includes(cfg.workers.transport))
    throw new DetsimError(
      'struct_invalid_field',
      `workers.transport: ${cfg.workers.transport} cannot reach workers found by rendezvous (they are processes, possibly elsewhere)`,
      'workers.transport',
    );
  const seconds = block.timeoutSeconds ?? DEFAULT_RENDEZVOUS_TIMEOUT_SECONDS;
  return {
    dir: resolve(baseDir, block.dir),
    timeoutMs: Math.ceil(seconds * 1000),
    ...(block.tokenFile !== undefined ? { tokenFile: resolve(baseDir, block.tokenFile) } : {}),
  };
}
