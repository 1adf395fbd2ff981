// The in-process test transport (and the bench's inline ceiling): agents and the environment
// stepped in the coordinator's own thread, with no transport at all. A worker is a WorkerRuntime in
// this process; its Link hands each request straight to the runtime's queue and each reply straight
// back (one microtask hop). The same envelopes, checks and hashing as every transport, so tests of
// lockstep, capture and restore logic run it without starting a process or a thread
// (test/coordinator/transports.test.ts holds it to the goldens). No isolation (a model that spins
// hangs the coordinator), TypeScript built-in models only, never a run option.
import type { PlannedWorker } from '../coordinator/config.js';
import type { StartContext, StartingWorker } from '../coordinator/launch/launcher.js';
import type { WorkerInstance } from '../coordinator/launch/worker-instance.js';
import { WorkerClient, type Link, type LinkReceiver, type ProcessExitInfo } from '../core/protocol/index.js';
import { RequestQueue } from '../workers/request-queue.js';
import { WorkerRuntime, type StreamState } from '../workers/runtime.js';

class InlineLink implements Link {
  private receiver: LinkReceiver | undefined;
  private over = false;
  private readonly stream: StreamState = { introduced: false };

  constructor(
    readonly address: string,
    private readonly queue: RequestQueue,
  ) {}

  open(receiver: LinkReceiver): void {
    this.receiver = receiver;
  }

  send(body: Uint8Array, attachment?: Uint8Array): Promise<void> {
    if (this.over) return Promise.reject(new Error('the inline link is closed'));
    const copy = attachment ? Buffer.from(attachment) : undefined;
    this.queue.enqueue(Buffer.from(body), copy, this.stream, (b, a) => {
      if (!this.over) this.receiver!.message(Buffer.from(b), a ? Buffer.from(a) : undefined);
    });
    return Promise.resolve();
  }

  close(): void {
    this.over = true;
  }
}

class InlineInstance implements WorkerInstance {
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
    return `inline host ${this.plan.workerId}`;
  }

  lastStderr(): string {
    return '';
  }

  kill(): void {
    if (!this.exitInfo) this.settle((this.exitInfo = { code: 0, signal: null }));
  }
}

/** A `startWorker` hook (SessionHooks) that hosts every worker inline. */
export function startInline(worker: PlannedWorker, ctx: StartContext): StartingWorker {
  const runtime = new WorkerRuntime({
    role: worker.role,
    workerId: worker.workerId,
    sessionId: ctx.plan.sessionId,
    models: [...ctx.models],
    ...(ctx.storeDir !== undefined ? { storeDir: ctx.storeDir } : {}),
  });
  const instance = new InlineInstance(worker);
  const queue = new RequestQueue(
    runtime,
    () => instance.kill(),
    () => undefined,
  );
  const link = new InlineLink(`inline:${worker.workerId}`, queue);
  const client = new WorkerClient(link, { processExit: instance.exited, label: worker.workerId });
  return { instance, connected: Promise.resolve({ client, address: link.address }) };
}
