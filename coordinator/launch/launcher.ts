// The local launcher: starts one environment worker and the agent workers of a RunPlan, each on its
// transport (a child process on a short Unix socket or loopback TCP, waiting for its ready line; or
// a worker thread for `workers.transport: thread`), connects a WorkerClient over its link and says
// Hello; shuts them all down on completion, failure or abort, and never leaves an orphan process or
// thread. The starter is a parameter (LaunchOptions.startWorker); workers already running elsewhere
// (rendezvous: LaunchOptions.existing) are connected to instead, and never killed. NOT the step loop.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import type { PlannedWorker, RunPlan } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';
import { readTokenFile } from '../../core/formats/tls-dir.js';
import type { Id } from '../../core/formats/scalars.js';
import {
  CONTRACT_DIGEST,
  HelloRefusedError,
  METHODS,
  WorkerCallError,
  WorkerClient,
  GrpcConnectError,
  connectGrpcLink,
  describeExit,
  type HelloResult,
  type ProcessExitInfo,
} from '../../core/protocol/index.js';
import { dieWithCoordinator } from './parent-death.js';
import { RemoteWorker, tokenRefusalOf } from './remote-worker.js';
import { RunFailure, type RunPhase } from '../session/run-failure.js';
import { createSocketDir } from './socket-dir.js';
import { ThreadWorker } from './thread-worker.js';
import { runsInline, startInlineWorker } from './inline-worker.js';
import { type CoordinatorTls, checkWorkerTls, tlsChannelTo } from './tls.js';
import { probeReason, probeWorker } from './worker-probe.js';
import { StderrTail, type WorkerInstance } from './worker-instance.js';
import { ensureStoreId } from '../store/store-id.js';
import { FROM_SOURCE, PACKAGE_ROOT } from './package-root.js';
import { checkPythonWorker, pythonInterpreter } from './python-runtime.js';
import { checkModuleParams } from './module-probe.js';
import { binaryStaleness } from './rust-binary.js';
import { NODE_POOL_FLAG } from './node-flag.js';

export { pythonInterpreter, pythonWorkerInstallCommand } from './python-runtime.js';
export { runsInline } from './inline-worker.js';

/** How to start one worker process: the command and its arguments before the worker flags. */
export interface WorkerCommand {
  command: string;
  args: string[];
}

export interface LaunchOptions {
  logger: Logger;
  signal?: AbortSignal;
  /** Test hook: replace the command for some workers (e.g. one that never becomes ready). */
  commandFor?: (worker: PlannedWorker) => WorkerCommand | undefined;
  /** The run's checkpoint store, passed as `--store-dir`: the only place workers may read restore payloads from. */
  storeDir?: string;
  /**
   * Start some workers another way (the bench's inline host): return undefined to leave a worker
   * to the plan's transport.
   */
  startWorker?: (worker: PlannedWorker, ctx: StartContext) => StartingWorker | undefined;
  /** `--verbose`: Python workers include a model's traceback in its failure (never without it). */
  verbose?: boolean;
  /**
   * Workers that are already running (started by hand, found by rendezvous: coordinator/launch/rendezvous.ts),
   * by worker id: the launcher connects to them instead of starting them, and never kills them.
   */
  existing?: ReadonlyMap<Id, ExistingWorker>;
  /** Test hook: the longest reply attachment a process worker's link receives (default 2 GiB − 1). */
  maxAttachmentBytes?: number;
}

/** A worker started elsewhere: where to connect, and the certificate it must present (TLS), if any. */
export interface ExistingWorker {
  address: string;
  certificateFingerprint: string | null;
}

/** What starting one worker needs besides the worker itself. */
export interface StartContext {
  plan: RunPlan;
  logger: Logger;
  signal?: AbortSignal;
  storeDir?: string;
  /** The store's token (store/store-id.ts), passed beside `--store-dir`. */
  storeId?: string;
  /** Test hook: the longest reply attachment a process worker's link receives (default 2 GiB − 1). */
  maxAttachmentBytes?: number;
  /** The model modules this worker may load (its `--model` flags). */
  models: readonly string[];
  /**
   * When the start-up deadline (plan.deadlines.startupMs from launch) runs out, in performance.now()
   * ms: a monotonic clock, so a wall-clock step neither shortens nor stretches start-up.
   */
  deadlineAt: number;
  /** A TLS run (plan.tls): how the coordinator reaches its workers (mutual TLS + bearer token). */
  tls?: CoordinatorTls;
  /** The address a process worker is to listen on (a Unix socket in the run's socket dir, or loopback TCP). */
  listen?: string;
  /** A plaintext TCP run's per-run secret: what its workers require on every stream. */
  secret?: PlainSecret;
}

/**
 * The per-run secret of plaintext TCP workers (docs/security.md): a loopback port is open to every
 * local user, so each worker requires this bearer token on every stream. The launcher makes it
 * (random, in a 0600 file of the run's private 0700 directory, handed over as `--token-file`, never
 * in argv or the environment); hand-started workers get it from `workers.rendezvous.tokenFile`.
 */
export interface PlainSecret {
  /** Secret: never logged. */
  token: string;
  /** The file the launcher wrote it to (absent: a hand-started worker's file, given in the config). */
  file?: string;
}

/** A plaintext TCP run's secret: made for the workers the launcher starts, read for rendezvous ones. */
function plainSecretFor(
  plan: RunPlan,
  tls: CoordinatorTls | undefined,
  privateDir: string | undefined,
): PlainSecret | undefined {
  if (tls !== undefined || plan.transport !== 'tcp') return undefined;
  if (privateDir === undefined)
    return plan.rendezvous?.tokenFile === undefined
      ? undefined
      : { token: readTokenFile(plan.rendezvous.tokenFile, 'workers.rendezvous.tokenFile') };
  const token = randomBytes(32).toString('hex');
  const file = join(privateDir, 'token');
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return { token, file };
}

/** A worker being started: its instance at once, its connected client once it is up. */
export interface StartingWorker {
  instance: WorkerInstance;
  connected: Promise<{ client: WorkerClient; address: string }>;
}

/**
 * The default worker command: `node --v8-pool-size=0 <pkg>/dist/workers/main.js` from compiled code, or
 * `node … --import tsx <pkg>/workers/main.ts` when the coordinator itself runs from TS source.
 */
export function defaultWorkerCommand(): WorkerCommand {
  const extra = [NODE_POOL_FLAG, ...nodeArgsFromEnv()];
  if (FROM_SOURCE) {
    const root = PACKAGE_ROOT;
    return {
      command: process.execPath,
      args: [...extra, '--import', import.meta.resolve('tsx'), join(root, 'workers', 'main.ts')],
    };
  }
  return { command: process.execPath, args: [...extra, join(PACKAGE_ROOT, 'dist', 'workers', 'main.js')] };
}

/**
 * Extra Node flags for TypeScript worker processes from $DETSIM_WORKER_NODE_ARGS (space-separated),
 * e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile workers (Node refuses those in NODE_OPTIONS).
 */
function nodeArgsFromEnv(): string[] {
  return (process.env.DETSIM_WORKER_NODE_ARGS ?? '').split(' ').filter((a) => a.length > 0);
}

/** The command that builds the Rust worker (run once; `detsim run` never builds). */
export const RUST_WORKER_BUILD_COMMAND = 'bash scripts/build-rust-worker.sh';

/** Where the Rust agent worker binary is: $DETSIM_RUST_WORKER, else crates-bridge/worker/target/release/detsim-worker-rs. */
export function rustWorkerPath(): string {
  const fromEnv = process.env.DETSIM_RUST_WORKER;
  if (fromEnv) return resolve(fromEnv);
  const root = PACKAGE_ROOT;
  return join(root, 'crates-bridge', 'worker', 'target', 'release', 'detsim-worker-rs');
}

/**
 * Refuse a plan that puts workers on Rust when the binary is missing, or is not a build of this
 * detsim's sources (built before an upgrade: it would speak an older protocol), before anything
 * starts; the message names the path, why, and the one command that builds it.
 */
export function checkWorkerBinaries(plan: RunPlan): void {
  checkPythonWorker(plan);
  checkModuleParams(plan, defaultWorkerCommand());
  if (!plan.workers.some((w) => w.runtime === 'rust')) return;
  const path = rustWorkerPath();
  if (!existsSync(path)) {
    throw new DetsimError(
      'struct_invalid_field',
      `workers.runtime: rust needs the Rust worker binary, which is missing (${path}); build it once with: ${RUST_WORKER_BUILD_COMMAND}`,
      'workers.runtime',
    );
  }
  // Without cargo's dep-info beside it (a binary copied elsewhere) there is nothing to compare.
  const stale = existsSync(`${path}.d`) ? binaryStaleness(path) : null;
  if (stale !== null)
    throw new DetsimError(
      'struct_invalid_field',
      `workers.runtime: rust: the Rust worker binary is not a build of this detsim's sources (${stale}); rebuild it with: ${RUST_WORKER_BUILD_COMMAND}`,
      'workers.runtime',
    );
}

/**
 * `cmd` with `--store-dir <dir> --store-id <token>` appended when the run has a checkpoint store:
 * the worker reads and writes checkpoint files only there, and only if that directory holds the
 * token (store/store-id.ts), i.e. it is this very store and not a same-named one on another node.
 */
export function withStore(cmd: WorkerCommand, ctx: Pick<StartContext, 'storeDir' | 'storeId'>): WorkerCommand {
  if (ctx.storeDir === undefined) return cmd;
  const id = ctx.storeId === undefined ? [] : ['--store-id', ctx.storeId];
  return { command: cmd.command, args: [...cmd.args, '--store-dir', resolve(ctx.storeDir), ...id] };
}

/** `cmd` with `--token-file <file>` appended on a plaintext TCP run: the worker requires the run's secret. */
export function withSecret(cmd: WorkerCommand, secret: PlainSecret | undefined): WorkerCommand {
  return secret?.file === undefined ? cmd : { command: cmd.command, args: [...cmd.args, '--token-file', secret.file] };
}

/** `cmd` with `--tls-dir <dir>` appended on a TLS run: the worker serves mutual TLS with the run's token. */
export function withTlsDir(cmd: WorkerCommand, plan: RunPlan): WorkerCommand {
  return plan.tls === undefined ? cmd : { command: cmd.command, args: [...cmd.args, '--tls-dir', plan.tls.dir] };
}

/**
 * The command for one planned worker: the Rust binary for rust, `python -m detsim_worker` for python
 * (with `--verbose` when asked: model tracebacks in failures; `--model-path DIR` for each directory
 * its models are imported from, plan.modelDirs), else TypeScript.
 */
export function workerCommandFor(
  worker: PlannedWorker,
  typescript: WorkerCommand = defaultWorkerCommand(),
  verbose = false,
  modelDirs: readonly string[] = [],
): WorkerCommand {
  if (worker.runtime === 'rust') return { command: rustWorkerPath(), args: [] };
  if (worker.runtime === 'python') {
    const paths = modelDirs.flatMap((d) => ['--model-path', d]);
    return { command: pythonInterpreter(), args: ['-m', 'detsim_worker', ...(verbose ? ['--verbose'] : []), ...paths] };
  }
  return typescript;
}

// ---------------------------------------------------------------------------------------------
// Last-resort orphan guard: whatever happens to the run, live children die with the coordinator.

const liveChildren = new Set<ChildProcess>();
let exitGuardInstalled = false;

function guardChild(child: ChildProcess): void {
  if (!exitGuardInstalled) {
    exitGuardInstalled = true;
    process.on('exit', () => {
      for (const c of liveChildren) {
        try {
          c.kill('SIGKILL');
        } catch {
          // already gone
        }
      }
    });
  }
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
}

/** One spawned worker process: its ready line, exit, and the tail of its stderr for diagnosis. */
export class WorkerProcess implements WorkerInstance {
  readonly kind = 'process' as const;
  /** What it speaks on its socket (physical, logged with the spawned workers): started with `--wire socket`, or gRPC. */
  readonly wire: 'grpc' | 'socket';
  readonly child: ChildProcess;
  readonly exited: Promise<ProcessExitInfo>;
  exitInfo: ProcessExitInfo | undefined;
  private readonly stderrTail: StderrTail;
  private readyLine: Promise<{ listen: string; pid: number }>;

  constructor(
    readonly plan: PlannedWorker,
    cmd: WorkerCommand,
    listen: string,
    sessionId: Id,
    logger: Logger,
    models: readonly string[] = [],
    wire: 'grpc' | 'socket' = 'grpc',
  ) {
    const modelFlags = models.flatMap((m) => ['--model', m]);
    this.wire = wire;
    const args = [
      ...cmd.args,
      '--listen',
      listen,
      '--role',
      plan.role,
      '--worker-id',
      plan.workerId,
      '--session',
      sessionId,
      ...modelFlags,
      ...(wire === 'socket' ? ['--wire', 'socket'] : []),
    ];
    // stdin stays a pipe: a worker can treat its end as "the coordinator is gone"; and the kernel
    // kills it when the coordinator dies, even while it spins or is stopped.
    const tethered = dieWithCoordinator({ command: cmd.command, args });
    this.child = spawn(tethered.command, tethered.args, { stdio: ['pipe', 'pipe', 'pipe'] });
    guardChild(this.child);
    this.exited = new Promise((res) => {
      this.child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        logger.info({ workerId: plan.workerId, code, signal }, 'worker exited');
        res(this.exitInfo);
      });
      this.child.once('error', (e) => {
        logger.error({ workerId: plan.workerId, err: e.message }, 'worker spawn error');
        if (!this.exitInfo) {
          this.exitInfo = { code: -1, signal: null };
          res(this.exitInfo);
        }
      });
    });
    this.child.stdin?.on('error', () => undefined);
    this.stderrTail = new StderrTail(this.child.stderr!, plan.workerId, logger);
    const lines = createInterface({ input: this.child.stdout! });
    this.readyLine = new Promise((res) => {
      let seen = false;
      lines.on('line', (line) => {
        if (!seen) {
          try {
            const msg = JSON.parse(line) as { ready?: unknown; listen?: unknown; pid?: unknown };
            if (msg.ready === true && typeof msg.listen === 'string') {
              seen = true;
              return res({ listen: msg.listen, pid: typeof msg.pid === 'number' ? msg.pid : (this.child.pid ?? -1) });
            }
          } catch {
            // not the ready line
          }
        }
        logger.info({ workerId: plan.workerId, stdout: line }, 'worker stdout');
      });
    });
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get alive(): boolean {
    return this.exitInfo === undefined;
  }

  describe(): string {
    return `process ${this.pid}`;
  }

  lastStderr(): string {
    return this.stderrTail.describe();
  }

  /** Resolve with the announced address once the ready line arrives; fail on exit, deadline or abort. */
  ready(deadlineMs: number, signal?: AbortSignal): Promise<string> {
    return untilReady(
      this,
      this.readyLine.then((r) => r.listen),
      'no ready line',
      deadlineMs,
      signal,
    );
  }

  kill(sig: NodeJS.Signals = 'SIGKILL'): void {
    if (this.alive) {
      try {
        this.child.kill(sig);
      } catch {
        // already gone
      }
    }
  }
}

/**
 * Resolve with what `announced` yields once the worker said it is ready (a process's ready line, a
 * thread's ready message); fail as never-ready when it exits first, when the start-up deadline
 * passes (`silence` names what never came), or on abort.
 */
async function untilReady<T>(
  w: WorkerInstance,
  announced: Promise<T>,
  silence: string,
  deadlineMs: number,
  signal?: AbortSignal,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const ctx = {
    workerId: w.plan.workerId,
    agentIds: w.plan.agentIds,
    step: null,
    phase: 'startup' as RunPhase,
  };
  try {
    return await Promise.race([
      announced,
      w.exited.then((info) => {
        throw new RunFailure(
          'never-ready',
          `its ${w.kind} exited before it was ready (${describeExit(info)})${w.lastStderr()}`,
          ctx,
        );
      }),
      new Promise<never>((_, rej) => {
        timer = setTimeout(
          () =>
            rej(
              new RunFailure(
                'never-ready',
                `${silence} within the start-up deadline of ${deadlineMs} ms${w.lastStderr()}`,
                ctx,
              ),
            ),
          deadlineMs,
        );
      }),
      new Promise<never>((_, rej) => {
        onAbort = () => rej(new RunFailure('aborted', 'the run was interrupted', ctx));
        if (signal?.aborted) onAbort();
        signal?.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    if (timer) clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
  }
}

export interface LaunchedWorker {
  plan: PlannedWorker;
  /** The process or thread that runs it. */
  instance: WorkerInstance;
  client: WorkerClient;
  hello: HelloResult;
  /** Where it is: `unix:/…`, `127.0.0.1:port` or `thread:<workerId>`. */
  address: string;
}

/** The live workers (processes, threads) of one run, connected and introduced. */
export class Fleet {
  private stopping: Promise<void> | undefined;

  constructor(
    readonly environment: LaunchedWorker,
    /** Agent workers in plan order (worker-0, worker-1, …). */
    readonly agents: LaunchedWorker[],
    private readonly instances: WorkerInstance[],
    private readonly socketDir: string | undefined,
    private readonly logger: Logger,
  ) {}

  all(): LaunchedWorker[] {
    return [this.environment, ...this.agents];
  }

  pids(): { workerId: Id; pid: number }[] {
    return this.instances.map((p) => ({ workerId: p.plan.workerId, pid: p.pid }));
  }

  /** Ask every live worker to stop, wait briefly, then kill whatever is left. Idempotent. */
  shutdown(reason: Id = 'run-complete', graceMs = 2_000): Promise<void> {
    this.stopping ??= shutdownInstances(this.instances, this.all(), reason, graceMs, this.socketDir, this.logger);
    return this.stopping;
  }

  /**
   * Fence the fleet (a recovery replaces it): close every client at once, so nothing more is sent
   * and a late reply is dropped, then kill every worker without asking and wait for the exits.
   * Idempotent, and a later shutdown() is this one.
   */
  fence(reason: Id): Promise<void> {
    this.stopping ??= (async () => {
      for (const w of this.all()) w.client.close();
      await killAll(this.instances, 0);
      if (this.socketDir) rmSync(this.socketDir, { recursive: true, force: true });
      this.logger.info({ reason }, 'workers fenced');
    })();
    return this.stopping;
  }
}

async function shutdownInstances(
  processes: WorkerInstance[],
  connected: LaunchedWorker[],
  reason: Id,
  graceMs: number,
  socketDir: string | undefined,
  logger: Logger,
): Promise<void> {
  await Promise.all(
    connected.map(async (w) => {
      if (!w.instance.alive) return;
      try {
        await w.client.call(METHODS.shutdown, null, { reason }, { deadlineMs: graceMs });
      } catch {
        // a stalled or dead worker is killed below
      }
    }),
  );
  for (const w of connected) w.client.close();
  await killAll(processes, graceMs);
  if (socketDir) rmSync(socketDir, { recursive: true, force: true });
  logger.info({ reason }, 'workers stopped');
}

/** Wait up to graceMs for the workers to exit, then kill the rest and wait for their exit. */
async function killAll(processes: WorkerInstance[], graceMs: number): Promise<void> {
  const live = processes.filter((p) => p.alive);
  if (live.length === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(live.map((p) => p.exited)), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
  if (timer) clearTimeout(timer);
  for (const p of processes) p.kill();
  await Promise.all(processes.map((p) => p.exited));
}

/**
 * The model modules one worker may load (its `--model` flags): the module paths (absolute after
 * config resolution; built-in names are not paths) of the agents it hosts, or of the environment.
 * A worker is never told about modules it does not host, so it can load nothing else.
 */
export function launchedModelsFor(plan: RunPlan, worker: PlannedWorker): string[] {
  const specs =
    worker.role === 'environment'
      ? [plan.environment.model]
      : plan.agents.filter((a) => a.workerId === worker.workerId).map((a) => a.model);
  return [...new Set(specs.filter((m) => isAbsolute(m) || m.startsWith('python:')))].sort();
}

function listenAddress(plan: RunPlan, socketDir: string | undefined, index: number): string {
  if (plan.transport === 'tcp') return '127.0.0.1:0';
  return `unix:${join(socketDir!, `w${index}.sock`)}`;
}

/**
 * Whether `worker` runs as a thread: the thread transport hosts TypeScript workers (but an inline
 * environment: runsInline); Rust and Python keep processes.
 */
export function runsOnThread(plan: RunPlan, worker: PlannedWorker): boolean {
  return plan.transport === 'thread' && (worker.runtime ?? 'typescript') === 'typescript' && !runsInline(plan, worker);
}

/** Whether `worker` runs in the coordinator's process at all (a thread or inline): no socket, no process. */
function runsInCoordinator(plan: RunPlan, worker: PlannedWorker): boolean {
  return runsOnThread(plan, worker) || runsInline(plan, worker);
}

/** Translate a client failure into a RunFailure naming the worker, its agents, step and phase. */
export function callFailure(
  e: unknown,
  w: { plan: PlannedWorker; instance: WorkerInstance },
  step: string | null,
  phase: RunPhase,
  deadlineMs?: number,
): RunFailure {
  const ctx = { workerId: w.plan.workerId, agentIds: w.plan.agentIds, step, phase };
  if (e instanceof RunFailure) return e;
  if (e instanceof HelloRefusedError) return RunFailure.ofIdentity('ident_worker_mismatch', e.message, ctx);
  if (e instanceof WorkerCallError) {
    const exit = w.instance.exitInfo;
    // A hand-started worker that refused this run's token: an identity refusal (nothing written).
    const token = tokenRefusalOf(exit);
    if (token)
      return RunFailure.ofIdentity(
        token.reason,
        `${w.instance.describe()} refused this coordinator: ${token.text} (give the run the secret the worker was started with: in plaintext workers.rendezvous.tokenFile, with TLS the token file of workers.tls.dir)`,
        ctx,
      );
    if (e.kind === 'process-exited' || (exit && e.kind !== 'deadline')) {
      return new RunFailure(
        'worker-exited',
        `${w.instance.describe()} exited (${exit ? describeExit(exit) : 'unknown'})${w.instance.lastStderr()}`,
        ctx,
      );
    }
    if (e.kind === 'deadline')
      return new RunFailure(
        'deadline',
        `no reply within the ${phase === 'hello' ? 'start-up' : 'step'} deadline${deadlineMs ? ` of ${deadlineMs} ms` : ''} (${e.method ?? 'call'} ${e.requestId ?? ''})`.trim(),
        ctx,
      );
    if (e.kind === 'never-connected') return new RunFailure('never-ready', e.message, ctx);
    if (e.kind === 'stream-ended' || e.kind === 'closed') return new RunFailure('stream-ended', e.message, ctx);
    return new RunFailure('protocol', e.message, ctx);
  }
  return new RunFailure('protocol', e instanceof Error ? e.message : String(e), ctx);
}

/** This run's socket directory; stale ones left by SIGKILLed coordinators are swept first. */
function socketDirFor(logger: Logger): string {
  const { dir, swept } = createSocketDir();
  if (swept.length > 0) logger.info({ swept }, 'removed socket directories of coordinators that are gone');
  return dir;
}

/** How long a broken stream waits for its worker's process exit before the failure is named. */
export const EXIT_DIAGNOSIS_MS = 500;

/** Resolve once `proc` has exited or `ms` passed, whichever comes first. */
export async function exitWithin(proc: WorkerInstance, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([proc.exited, new Promise((r) => (timer = setTimeout(r, ms)))]);
  if (timer) clearTimeout(timer);
}

/**
 * callFailure, with death diagnosed from the process rather than the stream: a killed worker's
 * socket breaks (UNAVAILABLE, stream ended) a moment before its exit is observed, so a transport
 * failure first waits briefly for the exit and, when it comes, says the worker died and how.
 * A deadline is named at once: a worker that is still there but silent did not die.
 */
export async function diagnoseCallFailure(
  e: unknown,
  w: { plan: PlannedWorker; instance: WorkerInstance },
  step: string | null,
  phase: RunPhase,
  deadlineMs?: number,
): Promise<RunFailure> {
  if (e instanceof WorkerCallError && e.kind !== 'deadline' && w.instance.alive)
    await exitWithin(w.instance, EXIT_DIAGNOSIS_MS);
  return callFailure(e, w, step, phase, deadlineMs);
}

/**
 * Whether a worker process speaks the socket wire (core/protocol/socket-wire.ts) instead of gRPC: a
 * worker (TypeScript, Python or Rust) this coordinator starts with its own command on a Unix socket
 * of the run's private directory. TCP, TLS, hand-started and rendezvous workers speak gRPC.
 */
export function speaksSocketWire(listen: string, ctx: Pick<StartContext, 'tls'>): boolean {
  return listen.startsWith('unix:') && ctx.tls === undefined;
}

/** Start one worker as a child process on its socket: ready line, then a client over gRPC or the socket wire. */
export function startProcess(
  worker: PlannedWorker,
  ctx: StartContext,
  cmd: WorkerCommand,
  listen: string,
  socketWire = false,
): StartingWorker {
  const proc = new WorkerProcess(
    worker,
    withSecret(withTlsDir(withStore(cmd, ctx), ctx.plan), ctx.secret),
    listen,
    ctx.plan.sessionId,
    ctx.logger,
    ctx.models,
    socketWire ? 'socket' : 'grpc',
  );
  const connected = (async () => {
    const address = await proc.ready(ctx.plan.deadlines.startupMs, ctx.signal);
    if (ctx.tls) await refuseForeignWorker(address, ctx, worker);
    try {
      const client = await WorkerClient.connect(address, {
        processExit: proc.exited,
        label: worker.workerId,
        connectTimeoutMs: Math.max(1, ctx.deadlineAt - performance.now()),
        ...(socketWire ? { wire: 'socket' as const } : {}),
        ...(ctx.tls ? tlsChannelTo(ctx.tls, address) : {}),
        ...(ctx.secret ? { token: ctx.secret.token } : {}),
        ...(ctx.maxAttachmentBytes !== undefined ? { maxAttachmentBytes: ctx.maxAttachmentBytes } : {}),
      });
      return { client, address };
    } catch (e) {
      throw await diagnoseCallFailure(e, { plan: worker, instance: proc }, null, 'startup');
    }
  })();
  return { instance: proc, connected };
}

/** A TLS worker whose identity does not match this run's set is named at once, not after a connect timeout. */
async function refuseForeignWorker(address: string, ctx: StartContext, worker: PlannedWorker): Promise<void> {
  const probe = await probeWorker(address, ctx.tls!.material, Math.max(1, ctx.deadlineAt - performance.now()));
  if (probe.ok) return;
  const where = { workerId: worker.workerId, agentIds: worker.agentIds, step: null, phase: 'startup' as const };
  // Its ready line named this address: a worker that does not answer there failed to start.
  if (probe.kind === 'unreachable')
    throw new RunFailure('never-ready', `no connection at ${address} (${probe.message})`, where);
  throw RunFailure.ofIdentity(probeReason(probe.kind), probe.message, where);
}

/** Start one TypeScript worker as a thread of this process: a client over its port once it is ready. */
function inlineContext(ctx: StartContext) {
  return {
    sessionId: ctx.plan.sessionId,
    models: ctx.models,
    ...(ctx.storeDir !== undefined ? { storeDir: ctx.storeDir } : {}),
  };
}

function startThread(worker: PlannedWorker, ctx: StartContext): StartingWorker {
  const thread = new ThreadWorker(worker, {
    sessionId: ctx.plan.sessionId,
    models: ctx.models,
    heapMb: ctx.plan.threadHeapMb,
    logger: ctx.logger,
    ...(ctx.storeDir !== undefined ? { storeDir: ctx.storeDir } : {}),
  });
  const connected = (async () => {
    // Like a process's ready line: a thread that refuses its options exits before it is ready.
    await untilReady(thread, thread.ready, 'no ready message', ctx.plan.deadlines.startupMs, ctx.signal);
    const client = new WorkerClient(thread.link, { processExit: thread.exited, label: worker.workerId });
    return { client, address: thread.link.address };
  })();
  return { instance: thread, connected };
}

/**
 * Connect to a worker started elsewhere (rendezvous): no process of ours to wait for, a client as
 * soon as its channel is ready within the start-up deadline; the usual Hello follows.
 */
function connectExisting(worker: PlannedWorker, ctx: StartContext, found: ExistingWorker): StartingWorker {
  const remote = new RemoteWorker(worker, found.address);
  const connected = (async () => {
    const timeoutMs = Math.max(1, ctx.deadlineAt - performance.now());
    try {
      const link = await connectGrpcLink(found.address, {
        connectTimeoutMs: timeoutMs,
        ...(ctx.tls ? tlsChannelTo(ctx.tls, found.address) : {}),
        ...(ctx.secret ? { token: ctx.secret.token } : {}),
      });
      const client = new WorkerClient(remote.watch(link), { processExit: remote.exited, label: worker.workerId });
      return { client, address: found.address };
    } catch (e) {
      if (!(e instanceof GrpcConnectError)) throw e;
      throw new RunFailure(
        'never-ready',
        `${remote.describe()} (its rendezvous record) never connected within ${Math.round(timeoutMs)} ms`,
        { workerId: worker.workerId, agentIds: worker.agentIds, step: null, phase: 'startup' },
      );
    }
  })();
  return { instance: remote, connected };
}

/** Say Hello to a started worker within what is left of the start-up deadline. */
async function introduce(
  plan: RunPlan,
  starting: StartingWorker,
  deadlineAt: number,
  connected: LaunchedWorker[],
): Promise<LaunchedWorker> {
  const { instance } = starting;
  const { client, address } = await starting.connected;
  const w: LaunchedWorker = {
    plan: instance.plan,
    instance,
    client,
    address,
    hello: undefined as unknown as HelloResult,
  };
  connected.push(w);
  const remaining = Math.max(1, deadlineAt - performance.now());
  try {
    w.hello = await client.hello({
      sessionId: plan.sessionId,
      workerId: instance.plan.workerId,
      role: instance.plan.role,
      contractDigest: CONTRACT_DIGEST,
      deadlineMs: remaining,
    });
  } catch (e) {
    throw await diagnoseCallFailure(e, w, null, 'hello', remaining);
  }
  return w;
}

/**
 * Start, connect and Hello every worker of the plan, each on its transport. On any failure every
 * worker already started is stopped before the RunFailure is thrown.
 */
export async function launchFleet(plan: RunPlan, opts: LaunchOptions): Promise<Fleet> {
  const { logger } = opts;
  const checked = { ...plan, workers: plan.workers.filter((w) => !opts.existing?.has(w.workerId)) };
  checkWorkerBinaries(checked);
  // The probe's Python model digests go into run.json (model-source.ts): keep them on the run's plan.
  if (checked.modelDigests) plan.modelDigests = checked.modelDigests;
  const tls = checkWorkerTls(plan);
  const spawns = plan.workers.some((w) => !runsInCoordinator(plan, w) && !opts.existing?.has(w.workerId));
  const needsSockets = plan.transport !== 'tcp' && plan.workers.some((w) => !runsInCoordinator(plan, w));
  // The run's private 0700 directory: its Unix sockets, or a plaintext TCP run's secret file.
  const needsSecretFile = plan.transport === 'tcp' && tls === undefined && spawns;
  const socketDir = needsSockets || needsSecretFile ? socketDirFor(logger) : undefined;
  const secret = plainSecretFor(plan, tls, needsSecretFile ? socketDir : undefined);
  const base = defaultWorkerCommand();
  const deadlineAt = performance.now() + plan.deadlines.startupMs;
  const storeId = opts.storeDir === undefined ? undefined : ensureStoreId(opts.storeDir);
  const starting = plan.workers.map((w, i) => {
    const ctx: StartContext = { plan, logger, models: launchedModelsFor(plan, w), deadlineAt };
    if (socketDir !== undefined || plan.transport === 'tcp') ctx.listen = listenAddress(plan, socketDir, i);
    if (opts.signal) ctx.signal = opts.signal;
    if (opts.storeDir !== undefined) ctx.storeDir = opts.storeDir;
    if (storeId !== undefined) ctx.storeId = storeId;
    if (opts.maxAttachmentBytes !== undefined) ctx.maxAttachmentBytes = opts.maxAttachmentBytes;
    if (tls) ctx.tls = tls;
    if (secret) ctx.secret = secret;
    // Before any starter: an inline environment stays in this thread under Slurm or rendezvous too.
    if (runsInline(plan, w) && !opts.commandFor?.(w)) return startInlineWorker(w, inlineContext(ctx));
    const custom = opts.startWorker?.(w, ctx);
    if (custom) return custom;
    const found = opts.existing?.get(w.workerId);
    if (found) return connectExisting(w, ctx, found);
    if (runsOnThread(plan, w) && !opts.commandFor?.(w)) return startThread(w, ctx);
    const own = opts.commandFor?.(w);
    const cmd = own ?? workerCommandFor(w, base, opts.verbose, plan.modelDirs);
    const listen = listenAddress(plan, socketDir, i);
    return startProcess(w, ctx, cmd, listen, own === undefined && speaksSocketWire(listen, ctx));
  });
  const instances = starting.map((s) => s.instance);
  logger.info(
    {
      workers: instances.map((p) => ({
        workerId: p.plan.workerId,
        pid: p.pid,
        runs: p.kind,
        ...(p instanceof WorkerProcess ? { wire: p.wire } : {}),
        agents: p.plan.agentIds,
      })),
    },
    'workers spawned',
  );
  const connected: LaunchedWorker[] = [];
  const attempts = starting.map(async (s) => {
    const w = await introduce(plan, s, deadlineAt, connected);
    const { instance, address, hello } = w;
    logger.info(
      { workerId: w.plan.workerId, pid: instance.pid, runs: instance.kind, listen: address, hello },
      'worker ready',
    );
    return w;
  });
  try {
    const launched = await Promise.all(attempts);
    return new Fleet(launched[0]!, launched.slice(1), instances, socketDir, logger);
  } catch (e) {
    // The first failure is the cause (or, when the shared start-up budget ran out, the one the
    // budget rule names); kill everyone, let the other attempts settle, then clean up.
    const cause = ranOutOfStartup(e) ? await whoRanOutOfStartup(attempts, e) : e;
    logger.error({ err: (cause as Error).message }, 'launch failed');
    for (const p of instances) p.kill();
    await Promise.allSettled(attempts);
    for (const w of connected) w.client.close();
    await killAll(instances, 0);
    if (socketDir) rmSync(socketDir, { recursive: true, force: true });
    throw cause;
  }
}

/** How long past the first start-up deadline the others may take to report theirs. */
const STARTUP_SETTLE_GRACE_MS = 2_000;

function ranOutOfStartup(e: unknown): e is RunFailure {
  return e instanceof RunFailure && (e.kind === 'never-ready' || e.kind === 'deadline');
}

/**
 * Every worker shares one start-up budget, so when it runs out on a slow machine a healthy worker's
 * Hello and a silent worker's ready line time out together, in timer order. Which one reports
 * must not depend on that race: once the others settle (each is bounded by the same budget), the
 * first worker in plan order that never became ready is the cause, else the first that failed.
 */
export async function whoRanOutOfStartup(
  attempts: Promise<unknown>[],
  first: RunFailure,
  graceMs = STARTUP_SETTLE_GRACE_MS,
): Promise<unknown> {
  let grace: NodeJS.Timeout | undefined;
  const settled = await Promise.race([
    Promise.allSettled(attempts),
    new Promise<undefined>((done) => (grace = setTimeout(() => done(undefined), graceMs))),
  ]);
  clearTimeout(grace);
  if (settled === undefined) return first;
  const failures = settled.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  return failures.find((f) => f instanceof RunFailure && f.kind === 'never-ready') ?? failures[0] ?? first;
}
