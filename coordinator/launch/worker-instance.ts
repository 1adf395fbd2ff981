// One running worker as the coordinator watches it, whatever runs it: a child process (gRPC over a
// Unix socket or loopback TCP), a worker thread in this process, a worker started elsewhere and
// found by rendezvous (remote-worker.ts), or the bench's inline host.
// What the launcher, the lockstep and the checkpoint code need to name a death; nothing else.
// Not the link to the worker (core/protocol/link.ts) and not how it is started (launcher.ts).
import type { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import type { PlannedWorker } from '../config.js';
import type { ProcessExitInfo } from '../../core/protocol/index.js';

export interface WorkerInstance {
  readonly plan: PlannedWorker;
  /** 'process', 'thread', 'remote' (started elsewhere: rendezvous) or the bench's 'inline': physical, never in a hash. */
  readonly kind: 'process' | 'thread' | 'inline' | 'remote';
  /** The OS process that runs it (the coordinator's own for a thread). */
  readonly pid: number;
  /** Resolves once it has exited (a thread: ended, crashed or terminated). */
  readonly exited: Promise<ProcessExitInfo>;
  /** Set once it has exited. */
  readonly exitInfo: ProcessExitInfo | undefined;
  readonly alive: boolean;
  /** Who it is in a failure message: `process 1234`, `thread 3`. */
  describe(): string;
  /** `; last stderr: …` when it wrote any, else ''. */
  lastStderr(): string;
  /** Stop it now (SIGKILL a process, terminate a thread), even while it spins. */
  kill(): void;
}

/** The last lines a worker (process or thread) wrote to stderr, each also logged: for failure messages. */
export class StderrTail {
  private readonly lines: string[] = [];

  constructor(stderr: Readable, workerId: string, logger: Logger) {
    createInterface({ input: stderr }).on('line', (line) => {
      this.lines.push(line);
      if (this.lines.length > 20) this.lines.shift();
      logger.warn({ workerId, stderr: line }, 'worker stderr');
    });
  }

  /** `; last stderr: a | b | c` (the last three non-blank lines), or '' when there are none. */
  describe(): string {
    const t = this.lines
      .filter((l) => l.trim() !== '')
      .slice(-3)
      .join(' | ');
    return t ? `; last stderr: ${t}` : '';
  }
}
