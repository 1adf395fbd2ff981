// A `detsim verify` attestation as a report shows it beside a run: given with --attestation (the
// file, or the directory holding attestation.jsonl) or found at reports/attestation.jsonl under the
// current directory. Its verdict_hash is checked against its checks first (a changed check or
// verdict is refused); then the passing replay whose ReproHash is the run's, if any, is named.
// A found attestation with no such replay is not shown (it is about other runs). NOT the
// attestation's format (diff0/attestation.ts) and not the receipt verdict (read-run.ts).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { DetsimError } from '../../core/formats/errors.js';
import { attestationLines, checkedVerdict } from '../evidence/attestation-facts.js';

/** Where `detsim verify` writes by default, looked for when no --attestation is given. */
export const DEFAULT_ATTESTATION = join('reports', 'attestation.jsonl');

/** A checked attestation: its verdict and each passing replay's configuration and ReproHash. */
export interface AttestationSource {
  path: string;
  given: boolean;
  verdict: string;
  verdictHash: string;
  replays: { subject: string; reproHash: string; runs: number }[];
}

/** What the attestation says about one run. */
export interface AttestationMatch {
  path: string;
  verdict: string;
  verdictHash: string;
  /** The replay with the run's ReproHash, or null: the attestation replayed other configurations. */
  replay: { subject: string; reproHash: string; runs: number } | null;
  /** What it did replay (for the page when nothing matched). */
  replayed: string[];
}

/** Read and check an attestation: `given` (--attestation: a file or a verify output directory) or the default one if present. */
export function loadAttestation(given: string | undefined): AttestationSource | null {
  let path = given === undefined ? resolve(DEFAULT_ATTESTATION) : resolve(given);
  if (given === undefined && !existsSync(path)) return null;
  if (existsSync(path) && statSync(path).isDirectory()) path = join(path, 'attestation.jsonl');
  if (!existsSync(path))
    throw new DetsimError('struct_report_source', `--attestation: ${path} does not exist`, '--attestation');
  let lines: ReturnType<typeof attestationLines>;
  try {
    lines = attestationLines(readFileSync(path));
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError(e.reason, `${path}: ${e.message}`, '--attestation');
    throw e;
  }
  const verdict = checkedVerdict(lines, path);
  const replays = lines
    .filter((l) => l.type === 'check' && l.check === 'replay' && l.status === 'pass')
    .map((l) => {
      const d = (l.detail ?? {}) as { reproHash?: unknown; runs?: unknown };
      return { subject: String(l.subject), reproHash: String(d.reproHash), runs: Number(d.runs ?? 0) };
    });
  return {
    path,
    given: given !== undefined,
    verdict: String(verdict.verdict),
    verdictHash: String(verdict.verdict_hash),
    replays,
  };
}

/** The attestation's word on a run of ReproHash `reproHash` (null: a found attestation that is about other runs). */
export function matchAttestation(a: AttestationSource | null, reproHash: string | null): AttestationMatch | null {
  if (a === null) return null;
  const replay = a.replays.find((r) => reproHash !== null && r.reproHash === reproHash) ?? null;
  if (replay === null && !a.given) return null;
  return {
    path: a.path,
    verdict: a.verdict,
    verdictHash: a.verdictHash,
    replay,
    replayed: a.replays.map((r) => `${r.subject} (${r.reproHash})`),
  };
}
