// Idempotency tables of the worker (docs/spec/lockstep.md "Idempotent calls"). StepCache: per-entry results of step
// mutations keyed by the operation key, kept for the current and previous step. LifecycleCache:
// whole replies of lifecycle calls kept until Worker.Acknowledge. No execution logic here.
import type { Scope } from '../core/formats/scalars.js';
import { LIFECYCLE_REPLY_LIMIT } from '../core/protocol/bodies.js';

export interface StepEntry<T> {
  /** Identity of the body under this key: bodyKey of the params entry (method and scope are in the key). */
  digest: string;
  result: T;
  /** The request that executed it (remembered after eviction, for RESULT_EXPIRED). */
  requestId: string;
}

/** How many request ids of evicted results are remembered. */
export const EXPIRED_MEMORY = 4096;

/** The operation key minus the constant parts (session and worker are fixed per process). */
export function opKey(scope: Scope, method: string, agentId: string | null): string {
  return `${scope.sessionId}\u0000${scope.epoch}\u0000${scope.step}\u0000${method}\u0000${agentId ?? ''}`;
}

/**
 * The identity of a params entry for the idempotency check: JSON.stringify of the entry as decoded
 * from its request body, which the body reader already proved canonical. Two entries decoded from
 * canonical text are equal exactly when these texts are (JSON.stringify prints decoded data one way
 * and it parses back to the same data), so the canonical writer's checks are not repeated per entry.
 */
export function bodyKey(entry: unknown): string {
  return JSON.stringify(entry);
}

export class StepCache<T> {
  private readonly entries = new Map<string, StepEntry<T>>();
  /** The keys put for each step, in the order they were put: eviction visits only old steps. */
  private readonly keysByStep = new Map<bigint, string[]>();
  private readonly expired = new Set<string>();
  /**
   * The remembered ids oldest first, as a ring over EXPIRED_MEMORY slots: forgetting the oldest by
   * taking a Set's first value walks over every id deleted before it, a cost that grew with the run.
   */
  private readonly expiredRing: string[] = [];
  private expiredOldest = 0;

  get(key: string): StepEntry<T> | undefined {
    return this.entries.get(key);
  }

  put(key: string, step: bigint, entry: StepEntry<T>): void {
    if (!this.entries.has(key)) {
      const keys = this.keysByStep.get(step);
      if (keys) keys.push(key);
      else this.keysByStep.set(step, [key]);
    }
    this.entries.set(key, entry);
  }

  /** Keep only results of steps >= minStep (the current and the previous step). */
  evictBefore(minStep: bigint): void {
    for (const [step, keys] of this.keysByStep) {
      if (step >= minStep) continue;
      this.keysByStep.delete(step);
      for (const key of keys) {
        const entry = this.entries.get(key);
        if (!entry) continue; // evicted with its agent
        this.entries.delete(key);
        this.rememberExpired(entry.requestId);
      }
    }
  }

  /** Remember an evicted result's request id, forgetting the oldest beyond EXPIRED_MEMORY. */
  private rememberExpired(requestId: string): void {
    if (this.expired.has(requestId)) return;
    this.expired.add(requestId);
    if (this.expiredRing.length < EXPIRED_MEMORY) {
      this.expiredRing.push(requestId);
      return;
    }
    this.expired.delete(this.expiredRing[this.expiredOldest]!);
    this.expiredRing[this.expiredOldest] = requestId;
    this.expiredOldest = (this.expiredOldest + 1) % EXPIRED_MEMORY;
  }

  /** Whether this request id executed a result that has since been evicted. */
  hasExpired(requestId: string): boolean {
    return this.expired.has(requestId);
  }

  /** Drop everything keyed to this agent (after a restore installs a new timeline). */
  evictAgent(agentId: string | null): void {
    const suffix = `\u0000${agentId ?? ''}`;
    for (const key of this.entries.keys()) if (key.endsWith(suffix)) this.entries.delete(key);
  }

  get size(): number {
    return this.entries.size;
  }
}

export interface LifecycleReply {
  digest: string;
  result: object;
  attachment?: Uint8Array;
  /**
   * store-files-v1: the payload a held Capture keeps for State.WritePayload (`pieces`, in order),
   * never sent in a reply and not hashed yet; the write hashes it, and only while the worker has
   * served no state-changing call since (`stateChanges`, the count at the capture).
   */
  held?: { readonly pieces: readonly Uint8Array[]; readonly stateChanges: number };
}

/** Lifecycle replies by request id, held until acknowledged; at LIMIT outstanding, new ones are BUSY. */
export class LifecycleCache {
  static readonly LIMIT = LIFECYCLE_REPLY_LIMIT;
  private readonly replies = new Map<string, LifecycleReply>();

  get(requestId: string): LifecycleReply | undefined {
    return this.replies.get(requestId);
  }

  put(requestId: string, reply: LifecycleReply): void {
    this.replies.set(requestId, reply);
  }

  get full(): boolean {
    return this.replies.size >= LifecycleCache.LIMIT;
  }

  get size(): number {
    return this.replies.size;
  }

  /** Release acknowledged replies; unknown ids are ignored. Returns how many were released. */
  acknowledge(requestIds: readonly string[]): number {
    let n = 0;
    for (const id of requestIds) if (this.replies.delete(id)) n++;
    return n;
  }
}
