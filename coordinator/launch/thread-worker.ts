// The thread transport's worker: a TypeScript worker hosted in a worker_threads thread of the
// coordinator's process (`workers.transport: thread`), reached over a PortLink. It owns the
// thread's lifecycle: its heap limit (resourceLimits), its exit, crash or out-of-memory as a
// named death, its stderr tail, and terminate() as the kill that works even on a spinning model.
// Not the worker's code (workers/thread-main.ts) and not request tracking (core/protocol/client.ts).
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';
import { inspect } from 'node:util';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { PlannedWorker } from '../config.js';
import type { Id } from '../../core/formats/scalars.js';
import { PortLink, isThreadReady, type ProcessExitInfo } from '../../core/protocol/index.js';
import { StderrTail, type WorkerInstance } from './worker-instance.js';
import { FROM_SOURCE, PACKAGE_ROOT } from './package-root.js';

/**
 * What the thread runs: compiled, dist/workers/thread-main.js itself. From TS source (tsx, vitest)
 * a small evaluated bootstrap registers tsx's ESM and CommonJS loaders inside the thread (what
 * `--import tsx` does for a worker process) and then imports workers/thread-main.ts: a Worker
 * ignores `--import` in its execArgv here (Node 20), and with the ESM loader alone a .ts model in a
 * directory without package.json (CommonJS by Node's rules) would fail to load on a thread only.
 */
function threadEntry(): { entry: URL | string; evaluated: boolean } {
  if (FROM_SOURCE) {
    const main = pathToFileURL(join(PACKAGE_ROOT, 'workers', 'thread-main.ts')).href;
    const [esm, cjs] = [import.meta.resolve('tsx/esm/api'), import.meta.resolve('tsx/cjs/api')];
    return {
      entry: `Promise.all([import(${JSON.stringify(esm)}), import(${JSON.stringify(cjs)})]).then(([esm, cjs]) => { esm.register(); cjs.register(); return import(${JSON.stringify(main)}); });`,
      evaluated: true,
    };
  }
  return {
    entry: pathToFileURL(join(PACKAGE_ROOT, 'dist', 'workers', 'thread-main.js')),
    evaluated: false,
  };
}

export interface ThreadWorkerOptions {
  sessionId: Id;
  models: readonly string[];
  storeDir?: string;
  heapMb: number;
  logger: Logger;
}

/**
 * What a thread's 'error' event means, in one line for the failure message. The event carries
 * whatever the model threw, which need not be an Error (`throw null` arrives as null): reading it
 * must never throw here, in the coordinator's own thread.
 */
function describeThreadError(e: unknown): string {
  if (!(e instanceof Error)) return `threw a value that is not an Error: ${inspect(e, { depth: 1 }).slice(0, 200)}`;
  if ((e as { code?: unknown }).code === 'ERR_WORKER_OUT_OF_MEMORY') return `ran out of memory (${e.message})`;
  return `threw ${e.name}: ${e.message}`;
}

/** How long a terminated thread may take to end before it is abandoned (blocked outside JavaScript). */
export const THREAD_ABANDON_MS = 1_000;

/**
 * The young generation of a worker thread's heap (MiB): small enough that the nursery a step
 * allocates through stays in the CPU's caches. V8 sizes it from the old generation (48 MiB beside
 * the default 2 GiB); at 8 MiB a 16-walker agent thread spends ~17% less CPU a step and the step is
 * ~4% shorter (bench/README.md "Performance of the transports"). Large objects (a big model state)
 * live outside it; only scavenges get more frequent.
 */
export const THREAD_YOUNG_GENERATION_MB = 8;

export class ThreadWorker implements WorkerInstance {
  readonly kind = 'thread' as const;
  readonly exited: Promise<ProcessExitInfo>;
  exitInfo: ProcessExitInfo | undefined;
  /** Resolves once the thread checked its options and listens (THREAD_READY); open the link only then. */
  readonly ready: Promise<void>;
  readonly link: PortLink;
  private readonly thread: Worker;
  /** Kept from the start: a Worker's threadId reads -1 once it has exited, when a death is named. */
  private readonly threadId: number;
  private readonly stderrTail: StderrTail;
  private error: string | undefined;
  private readonly logger: Logger;
  private resolveExited!: (info: ProcessExitInfo) => void;

  constructor(
    readonly plan: PlannedWorker,
    opts: ThreadWorkerOptions,
  ) {
    const entry = threadEntry();
    this.thread = new Worker(entry.entry, {
      eval: entry.evaluated,
      workerData: {
        role: plan.role,
        workerId: plan.workerId,
        sessionId: opts.sessionId,
        models: [...opts.models],
        ...(opts.storeDir !== undefined ? { storeDir: resolve(opts.storeDir) } : {}),
      },
      resourceLimits: { maxOldGenerationSizeMb: opts.heapMb, maxYoungGenerationSizeMb: THREAD_YOUNG_GENERATION_MB },
      stdout: true,
      stderr: true,
      env: process.env,
    });
    this.threadId = this.thread.threadId;
    this.link = new PortLink(`thread:${plan.workerId}`, this.thread);
    const { logger } = opts;
    this.stderrTail = new StderrTail(this.thread.stderr, plan.workerId, logger);
    createInterface({ input: this.thread.stdout }).on('line', (line) =>
      logger.info({ workerId: plan.workerId, stdout: line }, 'worker stdout'),
    );
    this.thread.on('error', (e: unknown) => {
      this.error ??= describeThreadError(e);
    });
    this.logger = logger;
    this.ready = new Promise((res) => {
      const onMessage = (value: unknown): void => {
        if (!isThreadReady(value)) return;
        this.thread.off('message', onMessage);
        res();
      };
      this.thread.on('message', onMessage);
    });
    this.exited = new Promise((res) => (this.resolveExited = res));
    this.thread.once('exit', (code) => this.ended(code));
  }

  /** The thread is over (or abandoned): record how, end the link, resolve `exited`. Once. */
  private ended(code: number | null): void {
    if (this.exitInfo !== undefined) return; // an abandoned thread, ending at last
    this.exitInfo = this.error === undefined ? { code, signal: null } : { code, signal: null, error: this.error };
    this.logger.info({ workerId: this.plan.workerId, code, error: this.error }, 'worker thread exited');
    this.link.threadGone(`the worker thread ended (${this.error ?? `exit code ${code}`})`);
    this.resolveExited(this.exitInfo);
  }

  get pid(): number {
    return process.pid;
  }

  get alive(): boolean {
    return this.exitInfo === undefined;
  }

  describe(): string {
    return `thread ${this.threadId}`;
  }

  lastStderr(): string {
    return this.stderrTail.describe();
  }

  /**
   * Terminate the thread; its death then reads `terminated by the coordinator`, not terminate()'s
   * exit code 1. terminate() stops JavaScript, not a thread blocked in a system call (a model in
   * execSync, a blocking read): such a thread is abandoned after THREAD_ABANDON_MS, counted as
   * exited and unref'd, so the run ends and its coordinator is not held by it; the OS thread ends
   * when its call returns, or with the process.
   */
  kill(): void {
    if (!this.alive) return;
    this.error ??= 'terminated by the coordinator';
    void this.thread.terminate();
    const timer = setTimeout(() => this.abandon(), THREAD_ABANDON_MS);
    timer.unref();
    void this.exited.then(() => clearTimeout(timer));
  }

  private abandon(): void {
    if (!this.alive) return;
    this.logger.warn(
      { workerId: this.plan.workerId, waitedMs: THREAD_ABANDON_MS },
      'worker thread did not end when terminated (blocked outside JavaScript): abandoned',
    );
    this.thread.unref();
    this.error = `${this.error ?? 'terminated'}; still blocked outside JavaScript ${THREAD_ABANDON_MS} ms later, abandoned`;
    this.ended(null);
  }
}
