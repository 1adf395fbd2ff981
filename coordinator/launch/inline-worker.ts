// The inline transport's instance (`workers.transport: inline`, the SyncVectorEnv of detsim): a
// TypeScript worker's runtime in the coordinator's own thread (workers/inline-host.ts, loaded by
// path: the coordinator never imports workers/), reached through a Link with no thread hop. The
// fastest transport and the only one without isolation: a model that spins hangs the coordinator,
// one that exits ends it, one that corrupts shared state corrupts the run — for trusted models
// only (docs/security.md). Its "death" is only ever a kill or a Shutdown. Also the environment alone
// (`environment.transport: inline`), its agents on any transport or placement. NOT the runtime itself.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BUILTIN_ENVIRONMENT_MODELS, type PlannedWorker, type RunPlan } from '../config.js';
import { WorkerClient, type Link, type ProcessExitInfo } from '../../core/protocol/index.js';
import type { WorkerInstance } from './worker-instance.js';
import { FROM_SOURCE, PACKAGE_ROOT } from './package-root.js';

/**
 * Whether `worker` runs inline, in the coordinator's own thread: every TypeScript worker of an inline
 * run (`workers.transport: inline`), and a TypeScript environment that environmentInline places so.
 */
export function runsInline(plan: RunPlan, worker: PlannedWorker): boolean {
  if ((worker.runtime ?? 'typescript') !== 'typescript') return false;
  return plan.transport === 'inline' || (worker.role === 'environment' && environmentInline(plan));
}

/**
 * Whether the environment runs in the coordinator's thread: as `environment.transport` says, and
 * without it, when the environment is a built-in model (detsim's own code, as trusted as the
 * coordinator) on the TypeScript runtime of a local run on threads or worker processes over Unix
 * sockets — a round trip a step less (bench/README.md). A module of the researcher's own, a Python
 * environment, TCP, Slurm and rendezvous keep it on the workers' transport.
 */
export function environmentInline(plan: RunPlan): boolean {
  if (plan.environmentTransport !== undefined) return plan.environmentTransport === 'inline';
  const env = plan.workers.find((w) => w.role === 'environment');
  return (
    (env?.runtime ?? 'typescript') === 'typescript' &&
    (BUILTIN_ENVIRONMENT_MODELS as readonly string[]).includes(plan.environment.model) &&
    (plan.transport === 'thread' || plan.transport === 'unix') &&
    plan.launcher?.kind !== 'slurm' &&
    plan.rendezvous === undefined
  );
}

/** workers/inline-host.ts's entry, as the coordinator may see it (by path, structurally typed). */
interface InlineHostModule {
  inlineWorkerLink(
    spec: {
      role: PlannedWorker['role'];
      workerId: string;
      sessionId: string;
      models: readonly string[];
      storeDir?: string;
    },
    onStop: () => void,
  ): Link;
}

/** The host module: dist/workers/inline-host.js, or the TypeScript source under tsx (tests). */
function hostUrl(): string {
  const path = FROM_SOURCE
    ? join(PACKAGE_ROOT, 'workers', 'inline-host.ts')
    : join(PACKAGE_ROOT, 'dist', 'workers', 'inline-host.js');
  return pathToFileURL(path).href;
}

export class InlineWorker implements WorkerInstance {
  readonly kind = 'inline' as const;
  readonly pid = process.pid;
  exitInfo: ProcessExitInfo | undefined;
  readonly exited: Promise<ProcessExitInfo>;
  private settle!: (info: ProcessExitInfo) => void;

  constructor(readonly plan: PlannedWorker) {
    this.exited = new Promise((res) => (this.settle = res));
  }

  get alive(): boolean {
    return this.exitInfo === undefined;
  }

  describe(): string {
    return `inline worker ${this.plan.workerId} (in the coordinator's thread)`;
  }

  lastStderr(): string {
    return '';
  }

  /** Stops it: nothing more reaches its runtime (the link is closed by the client). */
  kill(): void {
    if (!this.exitInfo) this.settle((this.exitInfo = { code: 0, signal: null }));
  }
}

/** Start an inline worker: its runtime in this thread, a client on the link to it. */
export function startInlineWorker(
  worker: PlannedWorker,
  ctx: { sessionId: string; models: readonly string[]; storeDir?: string },
): { instance: InlineWorker; connected: Promise<{ client: WorkerClient; address: string }> } {
  const instance = new InlineWorker(worker);
  const connected = (async () => {
    const host = (await import(hostUrl())) as InlineHostModule;
    const link = host.inlineWorkerLink(
      {
        role: worker.role,
        workerId: worker.workerId,
        sessionId: ctx.sessionId,
        models: ctx.models,
        ...(ctx.storeDir !== undefined ? { storeDir: ctx.storeDir } : {}),
      },
      () => instance.kill(),
    );
    const client = new WorkerClient(link, { processExit: instance.exited, label: worker.workerId });
    return { client, address: link.address };
  })();
  return { instance, connected };
}
