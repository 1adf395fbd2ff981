// Evidence classes and the honesty checks H1/H2 (docs/spec/diff0.md "Evidence classes"): every
// receipt and reported figure says whether it is simulated, measured or third_party.
// This only judges the evidence fields; it never decides whether a measurement is true.
import type { ReasonCode } from '../../core/formats/reasons.js';

/** The values of a receipt's `evidence_class`: where its numbers come from. */
export const EVIDENCE_CLASSES = ['simulated', 'measured', 'third_party'] as const;
/** Where the figures of a receipt or report come from. */
export type EvidenceClass = (typeof EVIDENCE_CLASSES)[number];

/** The evidence fields every receipt carries: its class and, when measured, the source and time. */
export interface Evidence {
  readonly evidence_class: EvidenceClass;
  /** The command or file a measured figure came from; null when simulated. */
  readonly measure_source: string | null;
  /** When it was measured (ISO 8601); null when simulated. */
  readonly measure_ts: string | null;
}

export const SIMULATED: Evidence = { evidence_class: 'simulated', measure_source: null, measure_ts: null };

/** A receipt that breaks an honesty rule (H1, H2), with its reason code. */
export interface HonestyWarning {
  readonly check: 'H1' | 'H2';
  readonly reason: ReasonCode;
  readonly message: string;
}

/** Evidence for a measured figure: the source and time are required, so H1 cannot be produced here. */
export function measured(source: string, ts: string): Evidence {
  return { evidence_class: 'measured', measure_source: source, measure_ts: ts };
}

const present = (v: unknown) => typeof v === 'string' && v.length > 0;

/** H1/H2 on any object that claims to be evidence (a receipt, a benchmark figure). Empty = honest. */
export function honestyWarnings(obj: unknown, what = 'receipt'): HonestyWarning[] {
  const o = (obj !== null && typeof obj === 'object' ? obj : {}) as Record<string, unknown>;
  const cls = o.evidence_class;
  if (cls === undefined || cls === null) {
    return [{ check: 'H2', reason: 'hon_missing_evidence_class', message: `${what}: no evidence_class` }];
  }
  if (!EVIDENCE_CLASSES.includes(cls as EvidenceClass)) {
    return [
      {
        check: 'H2',
        reason: 'hon_missing_evidence_class',
        message: `${what}: evidence_class ${JSON.stringify(cls)} is not one of ${EVIDENCE_CLASSES.join(', ')}`,
      },
    ];
  }
  const out: HonestyWarning[] = [];
  if (cls === 'measured' || cls === 'third_party') {
    if (!present(o.measure_source))
      out.push({ check: 'H1', reason: 'hon_measured_no_source', message: `${what}: ${cls} without measure_source` });
    if (cls === 'measured' && !present(o.measure_ts))
      out.push({ check: 'H1', reason: 'hon_measured_no_ts', message: `${what}: measured without measure_ts` });
  } else if (o.measure_source != null || o.measure_ts != null) {
    out.push({
      check: 'H1',
      reason: 'hon_simulated_with_measure',
      message: `${what}: simulated but carries measure_source/measure_ts (they must be null)`,
    });
  }
  return out;
}
