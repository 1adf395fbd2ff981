// LifecycleSlots: the coordinator's count of the lifecycle replies (Capture, StageRestore,
// ActivateRestore) each worker still caches for one capture or restore. A worker keeps at most
// LIFECYCLE_REPLY_LIMIT of them unacknowledged and refuses one more BUSY (session-protocol §3),
// while one worker may host more agents than that: before a call would overflow a worker's cache,
// its releasable replies are acknowledged. A held capture payload (store-files-v1) keeps its
// slot until it is written, so the last free slot is never given to one.
// NOT the calls themselves (group.ts) and NOT the worker's cache (workers/op-cache.ts).
import { LIFECYCLE_REPLY_LIMIT } from '../../core/protocol/index.js';
import type { LaunchedWorker } from '../launch/launcher.js';

interface Cached {
  requestId: string;
  /** Kept until the end: a held capture payload, not yet written into the envelope file. */
  held: boolean;
}

/** Acknowledges request ids on workers (CheckpointGroup.acknowledge: batched, best effort). */
export type Acknowledge = (byWorker: Map<LaunchedWorker, string[]>) => Promise<void>;

export class LifecycleSlots {
  private readonly cached = new Map<LaunchedWorker, Cached[]>();
  private readonly inFlight = new Map<LaunchedWorker, number>();
  private readonly releasing = new Map<LaunchedWorker, Promise<void>>();

  constructor(private readonly acknowledge: Acknowledge) {}

  /** Whether a call on `worker` may ask the worker to hold its payload (one slot stays releasable). */
  mayHold(worker: LaunchedWorker): boolean {
    const held = (this.cached.get(worker) ?? []).filter((c) => c.held).length;
    return held + (this.inFlight.get(worker) ?? 0) < LIFECYCLE_REPLY_LIMIT - 1;
  }

  /**
   * Reserve a slot before a lifecycle call on `worker`, releasing its releasable replies first
   * when the cache would overflow. Pair with {@link fill} (the call succeeded: its reply is
   * cached) or {@link cancel} (it failed: an error reply is not cached).
   */
  async reserve(worker: LaunchedWorker): Promise<void> {
    // Calls to one worker wait for a release in progress, so none overtakes its acknowledgement.
    for (let r = this.releasing.get(worker); r; r = this.releasing.get(worker)) await r;
    if (this.used(worker) >= LIFECYCLE_REPLY_LIMIT) {
      const all = this.cached.get(worker) ?? [];
      this.cached.set(
        worker,
        all.filter((c) => c.held),
      );
      const release = this.acknowledge(new Map([[worker, all.filter((c) => !c.held).map((c) => c.requestId)]]));
      this.releasing.set(worker, release);
      await release.finally(() => this.releasing.delete(worker));
    }
    this.inFlight.set(worker, (this.inFlight.get(worker) ?? 0) + 1);
  }

  fill(worker: LaunchedWorker, requestId: string, held = false): void {
    this.cancel(worker);
    this.cached.set(worker, [...(this.cached.get(worker) ?? []), { requestId, held }]);
  }

  cancel(worker: LaunchedWorker): void {
    this.inFlight.set(worker, Math.max(0, (this.inFlight.get(worker) ?? 0) - 1));
  }

  /** Acknowledge every cached reply (the capture or restore is over, whatever its outcome). */
  async releaseAll(): Promise<void> {
    const ids = [...this.cached].map(([w, cached]) => [w, cached.map((c) => c.requestId)] as const);
    this.cached.clear();
    await this.acknowledge(new Map(ids.filter(([, list]) => list.length > 0)));
  }

  private used(worker: LaunchedWorker): number {
    return (this.cached.get(worker)?.length ?? 0) + (this.inFlight.get(worker) ?? 0);
  }
}
