// What detsim claims about a run in a Portable Evidence Bundle, and how each claim is re-checked
// from files: `facts` recomputes the values (ReproHash from the receipt and the trace it binds, the
// ledger's chain, the committed checkpoints, a verify attestation), export states them and verify
// compares them. Each claim carries its check and expected values in `extensions.detsim`. Not the
// PEBv1 records around them (records.ts) nor file resolution (run-view.ts).
import { canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import { type ReceiptFile, recomputeReproHash } from '../receipt/receipt.js';
import { ledgerEntries, verifyLedgerBytes } from '../store/ledger.js';
import type { AttestationFacts } from './attestation-facts.js';
import type { RunView } from './run-view.js';

export type CheckName = 'reprohash' | 'ledger' | 'checkpoints' | 'replay' | 'same-run' | 'prediction' | 'conformance';

/** The machine-checkable part of a detsim claim (claim.extensions.detsim). */
export interface ClaimCheck {
  check: CheckName;
  /** The run's folder in the bundle, e.g. `runs/forage-walkers-1`. */
  run: string;
  expected: Record<string, unknown>;
}

export interface ReproFacts {
  reproHash: string;
  behaviourDigest: string;
  sessionId: string;
  steps: string;
  masterSeed: string;
}

/** The receipt's ReproHash recomputed from its trace, refusing a receipt that records another. */
export function reproFacts(view: RunView): ReproFacts {
  const receipt = view.json('receipt.json') as unknown as ReceiptFile;
  const recomputed = recomputeReproHash(view.traceDir(), receipt);
  if (receipt.reproHash !== recomputed)
    throw new DetsimError(
      'audit_evidence_recheck_failed',
      `${view.bundlePath}/receipt.json records ReproHash ${String(receipt.reproHash)}, its trace recomputes to ${recomputed}`,
      'reproHash',
    );
  const summary = receipt.summary as Record<string, unknown>;
  const run = receipt.run as Record<string, unknown>;
  // The receipt holds run.json and summary.json as they were: the files beside it must say the same.
  sameAsReceipt(view, 'run.json', run);
  sameAsReceipt(view, 'summary.json', summary);
  return {
    reproHash: recomputed,
    behaviourDigest: String(summary.behaviourDigest),
    sessionId: String(run.sessionId),
    steps: String(summary.stepsDone),
    masterSeed: String(run.masterSeed),
  };
}

/** A run file the receipt embeds (run.json, summary.json), when present, must be the receipt's copy. */
function sameAsReceipt(view: RunView, rel: string, embedded: unknown): void {
  if (!view.has(rel)) return;
  let same = false;
  try {
    same = canonicalize(view.json(rel) as JsonValue) === canonicalize(embedded as JsonValue);
  } catch (e) {
    if (!(e instanceof DetsimError)) throw e;
  }
  if (!same)
    throw new DetsimError(
      'audit_evidence_recheck_failed',
      `${view.bundlePath}/${rel} is not the ${rel} its receipt.json records (changed or damaged after the run)`,
      rel,
    );
}

export interface LedgerFacts {
  lines: number;
  lastHash: string;
}

/** The run ledger's chain and head, refusing a broken one naming its line. */
export function ledgerFacts(view: RunView): LedgerFacts {
  const r = verifyLedgerBytes(
    view.bytes('ledger.jsonl'),
    view.has('ledger.head.json') ? view.bytes('ledger.head.json') : null,
  );
  if (!r.ok)
    throw new DetsimError(
      'audit_evidence_recheck_failed',
      `${view.bundlePath}/ledger.jsonl line ${r.problem!.line}: ${r.problem!.message}`,
      'ledger.jsonl',
    );
  return { lines: r.lines, lastHash: r.lastHash };
}

export interface CheckpointFact {
  checkpointId: string;
  file: string;
  envelopeDigest: string;
  byteLength: string;
}

/**
 * The generations the store keeps, each matched to the ledger's `committed` entry with the same
 * envelope digest; a generation file that is present (bundled, or in the run directory given) must
 * hash to it. A file referenced only is left to its digest (the ledger chain binds it).
 */
export function checkpointFacts(view: RunView): CheckpointFact[] {
  const manifest = view.json('store/manifest.json') as { generations?: CheckpointFact[] };
  const committed = committedDigests(view.bytes('ledger.jsonl'));
  return (manifest.generations ?? []).map((g) => {
    const fact = {
      checkpointId: g.checkpointId,
      file: g.file,
      envelopeDigest: g.envelopeDigest,
      byteLength: g.byteLength,
    };
    if (committed.get(g.checkpointId) !== g.envelopeDigest)
      throw new DetsimError(
        'audit_evidence_recheck_failed',
        `${view.bundlePath}/store/manifest.json: ${g.checkpointId} has envelope digest ${g.envelopeDigest}, the ledger commits ${committed.get(g.checkpointId) ?? 'no such checkpoint'}`,
        'store/manifest.json',
      );
    view.checkIfPresent(`store/${g.file}`, g.envelopeDigest);
    return fact;
  });
}

/** The run ledger's lines, parsed by the store's own reader. */
function ledgerLines(ledger: Uint8Array) {
  return ledgerEntries(ledger).map(
    (e) => e.line as { event: string; checkpointId?: string; epoch?: string; detail?: { envelopeDigest?: string } },
  );
}

/**
 * The envelope digest the ledger binds to each checkpoint id: the first `committed` or `restored`
 * entry naming it (a restore is written only after the checkpoint verified against that digest; a
 * fork's base checkpoint, copied from its parent, is bound only so).
 */
function committedDigests(ledger: Uint8Array): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of ledgerLines(ledger))
    if ((e.event === 'committed' || e.event === 'restored') && e.checkpointId && e.detail?.envelopeDigest)
      if (!out.has(e.checkpointId)) out.set(e.checkpointId, e.detail.envelopeDigest);
  return out;
}

/** The facts a check recomputes, as the values its claim states (`other`: the run a same-run claim compares with). */
export function factsOf(check: CheckName, view: RunView, other?: RunView): Record<string, unknown> {
  switch (check) {
    case 'same-run':
      return sameRunFacts(view, other!);
    case 'reprohash':
      return { ...reproFacts(view) };
    case 'ledger':
      return { ...ledgerFacts(view) };
    case 'checkpoints':
      return { generations: checkpointFacts(view) };
    case 'replay':
      return replayFacts(view);
    case 'prediction':
      return present(view.prediction(), view, 'a prediction of its configuration in attestation/ledger.jsonl');
    case 'conformance':
      return present(view.conformance(), view, 'the conformance file the attestation records');
  }
}

function present(facts: Record<string, unknown> | null, view: RunView, what: string): Record<string, unknown> {
  if (facts === null)
    throw new DetsimError('audit_evidence_not_present', `${view.bundlePath}: the claim needs ${what}`);
  return facts;
}

/** The attestation's replay of this run's configuration, at the ReproHash this run's receipt records. */
function replayFacts(view: RunView): Record<string, unknown> {
  const a: AttestationFacts | null = view.attestation();
  if (a === null)
    throw new DetsimError(
      'audit_evidence_not_present',
      `${view.bundlePath}: the replay claim needs an attestation with a passing replay of its configuration`,
    );
  const receipt = view.json('receipt.json') as { reproHash?: string };
  if (receipt.reproHash !== a.reproHash)
    throw new DetsimError(
      'audit_evidence_recheck_failed',
      `${view.bundlePath}/receipt.json records ReproHash ${String(receipt.reproHash)}, the attestation replayed ${a.reproHash}`,
      'reproHash',
    );
  return { ...a };
}

export interface RestoredFact {
  checkpointId: string;
  envelopeDigest: string;
  epoch: string;
}

/** The checkpoints a run was resumed from, as its ledger's `restored` entries record them. */
function restoredFrom(view: RunView): RestoredFact[] {
  if (!view.has('ledger.jsonl')) return [];
  return ledgerLines(view.bytes('ledger.jsonl'))
    .filter((e) => e.event === 'restored')
    .map((e) => ({
      checkpointId: String(e.checkpointId),
      envelopeDigest: String(e.detail?.envelopeDigest),
      epoch: String(e.epoch),
    }));
}

/** Two runs recompute to one ReproHash (e.g. a resumed run and the uninterrupted one): DIFF=0. */
function sameRunFacts(view: RunView, other: RunView): Record<string, unknown> {
  const a = reproFacts(view);
  const b = reproFacts(other);
  if (a.reproHash !== b.reproHash)
    throw new DetsimError(
      'audit_evidence_recheck_failed',
      `${view.bundlePath} (ReproHash ${a.reproHash}) and ${other.bundlePath} (${b.reproHash}) are not the same run: \`detsim diff\` names where they part`,
      'reproHash',
    );
  return { reproHash: a.reproHash, other: other.bundlePath, resumedFrom: restoredFrom(view) };
}

/**
 * A claim's statement: the sentence a reviewer reads, a function of the run's name in the bundle
 * (`runs/<name>`) and the claim's values only, so verify re-derives it from the recomputed values.
 */
export function statementOf(check: CheckName, name: string, f: Record<string, unknown>): string {
  switch (check) {
    case 'reprohash':
      return `Run ${name} (session ${String(f.sessionId)}, ${String(f.steps)} steps, master seed ${String(f.masterSeed)}) has ReproHash ${String(f.reproHash)} and behaviour digest ${String(f.behaviourDigest)}.`;
    case 'ledger':
      return `The ledger of run ${name} is one unbroken SHA-256 chain of ${String(f.lines)} entries ending in ${String(f.lastHash)}.`;
    case 'checkpoints':
      return `Run ${name} committed checkpoints ${(f.generations as { checkpointId: string }[]).map((g) => g.checkpointId).join(', ')} durably, with the envelope digests its ledger records.`;
    case 'same-run':
      return sameRunStatement(name, f);
    case 'prediction':
      return `Before any run, detsim verify ledgered its prediction for configuration ${String(f.subject)}: ReproHash ${String(f.predictedReproHash)} (attestation/ledger.jsonl line ${String(f.predictionLine)}, before its first evidence at line ${String(f.firstEvidenceLine)}); the runs ${String(f.result)} it.`;
    case 'conformance':
      return `detsim verify ran beside conformance file ${String(f.sha256)}: ${String(f.requirements)} spec requirements, ${String(f.passed)} passed, ${String(f.failed)} failed, ${String(f.untested)} untested, ${String(f.skipped)} skipped.`;
    case 'replay':
      return `detsim verify replayed configuration ${String(f.subject)} in ${String(f.runs)} fresh runs with DIFF=0 at ReproHash ${String(f.reproHash)} (verdict ${String(f.verdict)}, verdict hash ${String(f.verdictHash)}).`;
  }
}

function sameRunStatement(name: string, f: Record<string, unknown>): string {
  const from = (f.resumedFrom as { checkpointId: string; envelopeDigest: string; epoch: string }[]).map(
    (r) => `resumed from checkpoint ${r.checkpointId} (envelope digest ${r.envelopeDigest}) in epoch ${r.epoch}`,
  );
  const other = String(f.other).replace(/^runs\//, '');
  return `Run ${name}${from.length ? `, ${from.join(', then ')},` : ''} is the same run as run ${other}: DIFF=0 at ReproHash ${String(f.reproHash)}.`;
}
