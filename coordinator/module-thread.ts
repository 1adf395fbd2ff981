// A worker thread that runs the calling module itself (the seal threads of the store and of the
// trace), and the request/reply bookkeeping over it: from compiled JavaScript the thread loads the
// module's file; from TypeScript source (tests, tsx) it registers tsx first, because Node 20 does not
// carry --import loaders into worker threads. Each request gets an id, its reply settles that request
// whatever order replies come in, and a refusal (DetsimError) crosses the thread with its reason and field.
// NOT what a thread computes (each seal module keeps its own work) and not the worker transport.
import { fileURLToPath } from 'node:url';
import { parentPort, Worker, workerData } from 'node:worker_threads';
import { DetsimError, isDetsimError } from '../core/formats/errors.js';
import type { ReasonCode } from '../core/formats/reasons.js';

/** Marks the thread a module starts, so that importing the module in any other thread serves nothing. */
export type ThreadMark = Readonly<Record<string, number>>;

/** A thread running `moduleUrl` (pass `import.meta.url`) with `mark` as its workerData; unref'd. */
export function startModuleThread(moduleUrl: string, mark: ThreadMark): Worker {
  const w = moduleUrl.endsWith('.ts')
    ? new Worker(
        `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((t) => { t.register(); return import(${JSON.stringify(moduleUrl)}); });`,
        { eval: true, workerData: mark },
      )
    : new Worker(fileURLToPath(moduleUrl), { workerData: mark });
  w.unref();
  return w;
}

/** A handler's answer: the value, and the ArrayBuffers to move back instead of copying. */
export interface ThreadAnswer<Res> {
  value: Res;
  transfer?: ArrayBuffer[];
}

/** What crosses back for one request: its answer, or why it failed (a DetsimError keeps reason and field). */
type Reply<Res> =
  | { id: number; ok: true; value: Res }
  | { id: number; ok: false; reason: ReasonCode | null; message: string; field: string | undefined };

/** The failure a thread-side error becomes on this side: the same DetsimError, or a plain Error. */
function failureOf(r: Extract<Reply<unknown>, { ok: false }>): Error {
  return r.reason ? new DetsimError(r.reason, r.message, r.field) : new Error(r.message);
}

/**
 * Requests to a module's own thread, started on first use. While a request is open the thread
 * keeps the process alive; when the last one settles it no longer does. If the thread dies, every
 * open request fails naming it, and the next request starts a new thread.
 */
export class ModuleThreadRpc<Req, Res> {
  private thread: Worker | null = null;
  private nextId = 0;
  private readonly waiting = new Map<number, { resolve: (r: Res) => void; reject: (e: Error) => void }>();

  /** `name` says which thread in a failure ("the trace sealing thread exited (code 1)"). */
  constructor(
    private readonly moduleUrl: string,
    private readonly mark: ThreadMark,
    private readonly name: string,
  ) {}

  /** Send `request` (moving `transfer`, not copying it) and resolve with the thread's answer. */
  call(request: Req, transfer: readonly ArrayBuffer[] = []): Promise<Res> {
    const w = this.started();
    const id = this.nextId++;
    return new Promise<Res>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      w.ref();
      w.postMessage({ id, request }, [...transfer]);
    });
  }

  /**
   * Start the thread now, before its first request, so that its start-up (a worker thread and the
   * module's imports, ~50 ms of CPU) overlaps work that waits anyway instead of the first request's.
   */
  warm(): void {
    this.started();
  }

  /** The running thread's id (Worker.threadId), or undefined before it started or after it exited. */
  get threadId(): number | undefined {
    return this.thread?.threadId;
  }

  private started(): Worker {
    if (this.thread) return this.thread;
    const w = startModuleThread(this.moduleUrl, this.mark);
    w.on('message', (r: Reply<Res>) => this.settle(w, r));
    w.on('error', (e) => this.failAll(e));
    w.on('exit', (code) => this.failAll(new Error(`the ${this.name} thread exited (code ${code})`)));
    // A 'message' listener refs the thread again: a thread nothing is asking keeps no process alive.
    w.unref();
    this.thread = w;
    return w;
  }

  private settle(w: Worker, r: Reply<Res>): void {
    const p = this.waiting.get(r.id);
    this.waiting.delete(r.id);
    if (this.waiting.size === 0) w.unref();
    if (r.ok) p?.resolve(r.value);
    else p?.reject(failureOf(r));
  }

  private failAll(e: Error): void {
    this.thread = null;
    for (const p of this.waiting.values()) p.reject(e);
    this.waiting.clear();
  }
}

/** Whether this code runs on the thread startModuleThread started with `mark`. */
export function onModuleThread(mark: ThreadMark): boolean {
  const data = workerData as Record<string, unknown> | null;
  return parentPort !== null && Object.entries(mark).every(([k, v]) => data?.[k] === v);
}

/**
 * On the module's own thread: answer every request with `handle` (a throw or a rejection becomes the
 * request's failure). An answer may come later (a promise); requests are still handled in arrival order.
 */
export function serveModuleThread<Req, Res>(
  handle: (request: Req) => ThreadAnswer<Res> | Promise<ThreadAnswer<Res>>,
): void {
  const port = parentPort!;
  const fail = (id: number, e: unknown): void =>
    port.postMessage({
      id,
      ok: false,
      reason: isDetsimError(e) ? e.reason : null,
      message: e instanceof Error ? e.message : String(e),
      field: isDetsimError(e) ? e.field : undefined,
    } satisfies Reply<Res>);
  const reply = (id: number, answer: ThreadAnswer<Res>): void =>
    port.postMessage({ id, ok: true, value: answer.value } satisfies Reply<Res>, answer.transfer ?? []);
  port.on('message', ({ id, request }: { id: number; request: Req }) => {
    let answer: ThreadAnswer<Res> | Promise<ThreadAnswer<Res>>;
    try {
      answer = handle(request);
    } catch (e) {
      return fail(id, e);
    }
    if (answer instanceof Promise)
      answer.then(
        (a) => reply(id, a),
        (e: unknown) => fail(id, e),
      );
    else reply(id, answer);
  });
}
