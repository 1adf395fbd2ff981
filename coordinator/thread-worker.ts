// The thread transport's worker: a TypeScript worker hosted in a worker_threads thread of the
// coordinator's process (`workers.transport: thread`), reached over a PortLink. It owns the
// thread's lifecycle: its heap limit (resourceLimits), its exit, crash or out-of-memory as a
// named death, its stderr tail, and terminate() as the kill that works even on a spinning model.
// Not the worker's code (workers/thread-main.ts) and not request tracking (core/protocol/client.ts).
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';
import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { PlannedWorker } from './config.js';
import type { Id } from '../core/formats/scalars.js';
import { PortLink, type ProcessExitInfo } from '../core/protocol/index.js';
import type { WorkerInstance } from './worker-instance.js';

const here = dirname(fileURLToPath(import.meta.url));
const fromSource = import.meta.url.endsWith('.ts');

/**
 * How to start the thread: dist/workers/thread-main.js from compiled code; from TS source (tsx,
 * vitest) a one-line bootstrap that registers tsx in the thread first, because Node 20 does not
 * apply a parent's module hooks (nor `--import` in a Worker's execArgv) to worker threads.
 */
function threadEntry(): { script: string | URL; eval: boolean } {
  if (!fromSource)
    return { script: pathToFileURL(join(resolve(here, '..', '..'), 'dist', 'workers', 'thread-main.js')), eval: false };
  const tsx = import.meta.resolve('tsx/esm/api');
  const main = pathToFileURL(join(resolve(here, '..'), 'workers', 'thread-main.ts')).href;
  return {
    script: `import(${JSON.stringify(tsx)}).then((m) => { m.register(); return import(${JSON.stringify(main)}); });`,
    eval: true,
  };
}

export interface ThreadWorkerOptions {
  sessionId: Id;
  models: readonly string[];
  storeDir?: string;
  heapMb: number;
  logger: Logger;
}

/** What a thread's 'error' event means, in one line for the failure message. */
function describeThreadError(e: Error & { code?: string }): string {
  if (e.code === 'ERR_WORKER_OUT_OF_MEMORY') return `ran out of memory (${e.message})`;
  return `threw ${e.name}: ${e.message}`;
}

export class ThreadWorker implements WorkerInstance {
  readonly kind = 'thread' as const;
  readonly exited: Promise<ProcessExitInfo>;
  exitInfo: ProcessExitInfo | undefined;
  readonly link: PortLink;
  private readonly thread: Worker;
  private readonly stderrTail: string[] = [];
  private error: string | undefined;

  constructor(
    readonly plan: PlannedWorker,
    opts: ThreadWorkerOptions,
  ) {
    const entry = threadEntry();
    this.thread = new Worker(entry.script, {
      eval: entry.eval,
      workerData: {
        role: plan.role,
        workerId: plan.workerId,
        sessionId: opts.sessionId,
        models: [...opts.models],
        ...(opts.storeDir !== undefined ? { storeDir: resolve(opts.storeDir) } : {}),
      },
      resourceLimits: { maxOldGenerationSizeMb: opts.heapMb },
      stdout: true,
      stderr: true,
      env: process.env,
    });
    this.link = new PortLink(`thread:${plan.workerId}`, this.thread);
    const { logger } = opts;
    createInterface({ input: this.thread.stderr }).on('line', (line) => {
      this.stderrTail.push(line);
      if (this.stderrTail.length > 20) this.stderrTail.shift();
      logger.warn({ workerId: plan.workerId, stderr: line }, 'worker stderr');
    });
    createInterface({ input: this.thread.stdout }).on('line', (line) =>
      logger.info({ workerId: plan.workerId, stdout: line }, 'worker stdout'),
    );
    this.thread.on('error', (e: Error) => {
      this.error ??= describeThreadError(e);
    });
    this.exited = new Promise((res) => {
      this.thread.once('exit', (code) => {
        this.exitInfo = this.error === undefined ? { code, signal: null } : { code, signal: null, error: this.error };
        logger.info({ workerId: plan.workerId, code, error: this.error }, 'worker thread exited');
        this.link.threadGone(`the worker thread ended (${this.error ?? `exit code ${code}`})`);
        res(this.exitInfo);
      });
    });
  }

  get pid(): number {
    return process.pid;
  }

  get alive(): boolean {
    return this.exitInfo === undefined;
  }

  describe(): string {
    return `thread ${this.thread.threadId}`;
  }

  lastStderr(): string {
    const t = this.stderrTail
      .filter((l) => l.trim() !== '')
      .slice(-3)
      .join(' | ');
    return t ? `; last stderr: ${t}` : '';
  }

  kill(): void {
    if (this.alive) void this.thread.terminate();
  }
}
