// The ReproHash of a receipt whose steps come one at a time: the same text `reproHash(receipt)`
// would hash with every step in memory (canonical.ts R1–R3, the epoch rebase of rebase.ts), fed to
// SHA-256 piece by piece, so a million-step run is sealed in flat memory. Steps come either as
// trace steps (walked here, step-repro.ts) or as repro texts made ahead of time (a segmented
// trace's repro files). NOT the classification (canonical.ts) nor the trace format (trace-store.ts).
import { createHash, type Hash } from 'node:crypto';
import { canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import { canonicalSplit, compareKeyValues, type CanonicalOptions, type UnknownField } from './canonical.js';
import { rebasedReceipt } from './rebase.js';
import { REPRO_HASH_HEX, reproHash } from './reprohash.js';
import { epochOf, rebaseStep, stepRepro, UnknownTally, type StepRepro } from './step-repro.js';

/** Stands in for the step list in the head's canonical text; a NUL never occurs in canonical receipt text otherwise. */
const STEPS_SENTINEL = '\u0000detsim-steps\u0000';

/** A step list that is not in increasing step order: the caller hashes it in memory instead (R2 sorts it). */
export class StepsOutOfOrder extends Error {}

/**
 * SHA-256 over a receipt head's canonical text with the step list spliced in: the head's text up
 * to its step list, then each step's repro text (comma-separated), then the rest of the head.
 */
export class ReproStepsHasher {
  private readonly hash: Hash;
  private readonly tail: string;
  private readonly unknown = new UnknownTally();
  private first = true;
  private base: string | undefined;
  private previousKey: unknown;

  /** `head` is a receipt without steps; `opts` classify as canonical.ts does (the published table by default). */
  constructor(
    head: Record<string, unknown>,
    private readonly opts: CanonicalOptions = {},
  ) {
    const headSplit = canonicalSplit({ ...head, steps: [STEPS_SENTINEL] }, opts);
    const text = canonicalize(headSplit.repro);
    const marker = canonicalize([STEPS_SENTINEL]);
    const at = text.indexOf(marker);
    if (at < 0 || text.indexOf(marker, at + 1) >= 0)
      throw new Error('streamedReproHash: the steps marker is not unique');
    this.hash = createHash('sha256').update(text.slice(0, at + 1), 'utf8');
    this.tail = text.slice(at + marker.length - 1);
    this.unknown.add(headSplit.unknownFields);
  }

  /**
   * A trace step as recorded: rebased onto the first step's epoch and walked here; returns its repro
   * text (for another hasher of the same steps). Throws StepsOutOfOrder.
   */
  addStep(raw: unknown): StepRepro {
    const step = rebaseStep(raw, (this.base ??= epochOf(raw)));
    const key = (step as { behaviour?: { scope?: { step?: unknown } } }).behaviour?.scope?.step;
    if (!this.first && compareKeyValues(this.previousKey, key) >= 0) throw new StepsOutOfOrder();
    this.previousKey = key;
    const r = stepRepro(step, this.opts);
    this.addTexts(r.text, r.unknownFields);
    return r;
  }

  /** Repro texts of consecutive steps made ahead of time (comma-separated, in step order), with their unknown fields. */
  addTexts(texts: string | Uint8Array, unknownFields: readonly UnknownField[]): void {
    if (texts.length === 0) return;
    if (!this.first) this.hash.update(',', 'utf8');
    if (typeof texts === 'string') this.hash.update(texts, 'utf8');
    else this.hash.update(texts);
    this.unknown.add(unknownFields);
    this.first = false;
  }

  finish(): { reproHash: string; unknownFields: UnknownField[] } {
    this.hash.update(this.tail, 'utf8');
    return { reproHash: this.hash.digest('hex').slice(0, REPRO_HASH_HEX), unknownFields: this.unknown.list() };
  }
}

/**
 * ReproHash over `head` (a receipt without steps) with `steps` as its step list. Steps must come
 * in strictly increasing `behaviour.scope.step` order (what every trace holds); otherwise
 * StepsOutOfOrder is thrown and nothing is returned.
 */
export function streamedReproHash(
  head: Record<string, unknown>,
  steps: Iterable<unknown>,
): { reproHash: string; unknownFields: UnknownField[] } {
  const hasher = new ReproStepsHasher(head);
  for (const raw of steps) hasher.addStep(raw);
  return hasher.finish();
}

/**
 * The ReproHash of `head` with the steps `steps()` gives, and their count, in one pass and flat
 * memory, `each` told every step and its repro text. Steps out of step order (an old trace: R2 sorts
 * them) or a classification table other than the published one hash the receipt whole instead, its
 * steps read again (with `each`, steps out of order throw StepsOutOfOrder and a custom table an Error).
 */
export function reproHashOfSteps(
  head: Record<string, unknown>,
  steps: () => Iterable<unknown>,
  opts: CanonicalOptions = {},
  each?: (step: unknown, repro: StepRepro, index: number) => void,
): { reproHash: string; unknownFields: UnknownField[]; steps: number } {
  const whole = () => {
    const receipt = rebasedReceipt({ ...head, steps: [...steps()] as JsonValue[] });
    const h = reproHash(receipt, opts);
    return { reproHash: h.reproHash, unknownFields: [...h.unknownFields], steps: receipt.steps.length };
  };
  if (opts.table !== undefined) {
    if (each) throw new Error('reproHashOfSteps: a custom classification table hashes the receipt whole');
    return whole();
  }
  const hasher = new ReproStepsHasher(head, opts);
  let n = 0;
  try {
    for (const step of steps()) {
      // Outside `each?.(…)`, which would skip its arguments.
      const repro = hasher.addStep(step);
      each?.(step, repro, n);
      n++;
    }
  } catch (e) {
    if (!(e instanceof StepsOutOfOrder) || each) throw e;
    return whole();
  }
  return { ...hasher.finish(), steps: n };
}
