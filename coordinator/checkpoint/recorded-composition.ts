// Resume's check BEFORE anything starts: the composition run.json records must be the one the
// checkpoint was captured from, and must be consistent with itself. Every seed in run.json is
// re-derived from its masterSeed under its seed derivation (an edited masterSeed, environment or
// agent seed is named), then the checkpoint's manifest is compared with run.json field by field
// (session, compatibility block but the backend, port map, environment, agent ids, profiles and
// versions, seeds, composition digest). No worker is launched and nothing is written, so a refusal
// leaves the run directory as it was. NOT the live check at restore (restore-identity.ts, which
// runs again against the fresh workers) and NOT reading run.json (run-record.ts).
import { join } from 'node:path';
import type { EnvelopeManifest } from '../../core/formats/envelope.js';
import { deriveSeed, SEED_ALGORITHM } from '../../core/formats/seed.js';
import { RUN_FILES } from '../session/run-dir.js';
import { CheckpointRefusal } from './refusal.js';
import { checkIdentity } from './restore-identity.js';
import type { RecordedRun } from './run-record.js';

/** One seed run.json records, where it sits and the id it is derived from. */
interface RecordedSeed {
  field: string;
  id: string;
  recorded: unknown;
}

function recordedSeeds(rec: RecordedRun): RecordedSeed[] {
  const { plan } = rec;
  return [
    { field: 'environment.seed', id: plan.environment.environmentId, recorded: plan.environment.seed },
    ...plan.agents.map((a, i) => ({ field: `agents[${i}].seed`, id: a.agentId, recorded: a.seed as unknown })),
  ];
}

function refuse(runJson: string, field: string, message: string): never {
  throw new CheckpointRefusal(
    'IDENTITY_MISMATCH',
    'ident_seed_mismatch',
    `checkpoint refused: ${runJson}: ${message}`,
    { field },
  );
}

/**
 * run.json's seeds must be what its seed derivation gives for its masterSeed. When every seed
 * disagrees the masterSeed is what changed, and it is named; otherwise the first seed that does.
 */
export function checkRecordedSeeds(rec: RecordedRun, runDir: string): void {
  const runJson = join(runDir, RUN_FILES.run);
  const { plan } = rec;
  if (plan.seedAlgorithm !== SEED_ALGORITHM)
    refuse(
      runJson,
      'seedDerivation',
      `seedDerivation is ${JSON.stringify(plan.seedAlgorithm)}; detsim derives seeds with ${SEED_ALGORITHM}`,
    );
  const seeds = recordedSeeds(rec).map((s) => ({ ...s, derived: deriveSeed(plan.masterSeed, s.id) }));
  const wrong = seeds.filter((s) => s.recorded !== s.derived);
  if (wrong.length === 0) return;
  if (wrong.length === seeds.length) {
    refuse(
      runJson,
      'masterSeed',
      `masterSeed ${JSON.stringify(plan.masterSeed)} does not derive the seeds run.json records (${SEED_ALGORITHM} gives ${wrong[0]!.field} (${wrong[0]!.id}) ${wrong[0]!.derived}, run.json records ${JSON.stringify(wrong[0]!.recorded)}): it differs from the master seed the run used`,
    );
  }
  const w = wrong[0]!;
  refuse(
    runJson,
    w.field,
    `${w.field} (${w.id}) is ${JSON.stringify(w.recorded)}, but ${SEED_ALGORITHM} of masterSeed ${JSON.stringify(plan.masterSeed)} gives ${w.derived}`,
  );
}

/** Throws the first disagreement between run.json and the checkpoint (CheckpointRefusal, the field named). */
export function checkRecordedComposition(m: EnvelopeManifest, rec: RecordedRun, runDir: string): void {
  checkRecordedSeeds(rec, runDir);
  checkIdentity(
    m,
    { plan: rec.plan, identities: rec.identities, workers: [] },
    { against: `${RUN_FILES.run}'s`, withoutBackend: true },
  );
}
