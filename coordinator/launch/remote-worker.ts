// A worker this coordinator did not start (found by rendezvous, possibly on another host), as the
// launcher and the lockstep watch it: no process of ours, so no pid, no stderr and nothing to kill.
// It counts as gone once its link ends (the worker left, or its host or network did) or once the
// coordinator closes the link (released: the worker itself exits on the coordinator's Shutdown).
// Not how it is found (rendezvous.ts) nor how it is connected and introduced (launcher.ts).
import type { PlannedWorker } from '../config.js';
import type { Link, LinkReceiver, ProcessExitInfo } from '../../core/protocol/index.js';
import type { WorkerInstance } from './worker-instance.js';

/** Why a remote worker counts as gone: its exit code is on its own host, not observable here. */
export const REMOTE_LINK_ENDED = 'its connection ended; a remote worker’s exit status is not visible from here';
export const REMOTE_RELEASED = 'released by the coordinator (a remote worker is not ours to kill)';

/**
 * The worker's own refusal of this coordinator's bearer token (`[ident_token_missing] …` or
 * `[ident_token_wrong] …`, the stream's UNAUTHENTICATED details), when that is why the link ended.
 */
export function tokenRefusalIn(why: string): string | undefined {
  return /\[ident_token_(missing|wrong)\] [^\n]*/.exec(why)?.[0];
}

/** A remote worker gone because it refused the token: the reason code and the worker's words. */
export function tokenRefusalOf(
  exit: ProcessExitInfo | undefined,
): { reason: 'ident_token_missing' | 'ident_token_wrong'; text: string } | undefined {
  const m = /^\[(ident_token_missing|ident_token_wrong)\] (.*)$/.exec(exit?.error ?? '');
  return m ? { reason: m[1] as 'ident_token_missing' | 'ident_token_wrong', text: m[2]! } : undefined;
}

export class RemoteWorker implements WorkerInstance {
  readonly kind = 'remote' as const;
  readonly pid = -1;
  readonly exited: Promise<ProcessExitInfo>;
  exitInfo: ProcessExitInfo | undefined;
  private settle!: (info: ProcessExitInfo) => void;

  constructor(
    readonly plan: PlannedWorker,
    /** Where its rendezvous record said it is. */
    readonly address: string,
  ) {
    this.exited = new Promise((res) => (this.settle = res));
  }

  get alive(): boolean {
    return this.exitInfo === undefined;
  }

  describe(): string {
    return `remote worker at ${this.address}`;
  }

  lastStderr(): string {
    return '';
  }

  /** Nothing to kill on another host: release it (its own Shutdown handling makes it exit). */
  kill(): void {
    this.gone(REMOTE_RELEASED);
  }

  /** `link`, watched: its end (either side) marks this worker gone. */
  watch(link: Link): Link {
    return {
      address: link.address,
      open: (receiver: LinkReceiver) =>
        link.open({
          message: (body, attachment) => receiver.message(body, attachment),
          ended: (kind, why) => {
            this.gone(tokenRefusalIn(why) ?? REMOTE_LINK_ENDED);
            receiver.ended(kind, why);
          },
        }),
      send: (body, attachment) => link.send(body, attachment),
      close: () => {
        link.close();
        this.gone(REMOTE_RELEASED);
      },
    };
  }

  private gone(error: string): void {
    if (this.exitInfo) return;
    this.exitInfo = { code: null, signal: null, error };
    this.settle(this.exitInfo);
  }
}
