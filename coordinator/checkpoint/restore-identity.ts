// The identity checks a restore makes before staging anyone (docs/spec/checkpoint-store.md, restore step 2): session,
// episode, scheduler, the compatibility block field by field (first mismatch named), port map,
// environment, agent ids, each agent's profile and seed, then the composition digest. Each
// refusal carries a stable ident_* reason. NOT reading the file and NOT talking to workers.
import { canonicalize } from '../../core/formats/canonical-json.js';
import type { EnvelopeManifest } from '../../core/formats/envelope.js';
import type { ReasonCode } from '../../core/formats/reasons.js';
import {
  COMPATIBILITY_FIELDS,
  compatibilityBlock,
  compatibilityFieldName,
  compositionDigest,
  EPISODE_ID,
  liveAgentRows,
  liveEnvironment,
  portMapOf,
  SCHEDULER_ID,
  type CompatibilityBlock,
  type LiveComposition,
} from './compatibility.js';
import { CheckpointRefusal, type CheckpointStatus } from './refusal.js';

function refuse(status: CheckpointStatus, reason: ReasonCode, field: string, message: string): never {
  throw new CheckpointRefusal(status, reason, `checkpoint refused: ${message}`, { field });
}

const show = (v: unknown) => (v === undefined ? 'nothing' : canonicalize(v as never));

export interface IdentityCheckOptions {
  /** Whose composition the checkpoint is compared with, as messages say it (default "the live"). */
  against?: string;
  /** Leave the backend digest out: it needs the workers' Hello, which a check before launch does not have. */
  withoutBackend?: boolean;
}

/** Throws the first identity mismatch between a checkpoint manifest and the live (or recorded) composition. */
export function checkIdentity(m: EnvelopeManifest, live: LiveComposition, opts: IdentityCheckOptions = {}): void {
  const { plan } = live;
  const the = opts.against ?? 'the live';
  if (m.sourceScope.sessionId !== plan.sessionId)
    refuse(
      'IDENTITY_MISMATCH',
      'ident_session_mismatch',
      'sourceScope.sessionId',
      `session ${show(m.sourceScope.sessionId)}, ${the} session is ${show(plan.sessionId)}`,
    );
  if (m.episodeId !== EPISODE_ID)
    refuse(
      'IDENTITY_MISMATCH',
      'ident_episode_mismatch',
      'episodeId',
      `episode ${show(m.episodeId)}, ${the} episode is ${show(EPISODE_ID)}`,
    );
  if (m.schedulerId !== SCHEDULER_ID)
    refuse(
      'INCOMPATIBLE_STATE',
      'ident_scheduler_mismatch',
      'schedulerId',
      `scheduler ${show(m.schedulerId)}, detsim runs ${SCHEDULER_ID}`,
    );

  checkCompatibility(m, live, the, opts);

  const ports = portMapOf(plan);
  if (canonicalize(m.portMap) !== canonicalize(ports))
    refuse(
      'IDENTITY_MISMATCH',
      'ident_port_map_mismatch',
      'portMap',
      `port map ${show(m.portMap)} differs from ${the} ${show(ports)}`,
    );

  checkEnvironment(m, live, the);
  checkAgents(m, live, the);

  // Everything above in one digest (and the protocol contract): a last guard, never the first named.
  const comp = compositionDigest(live, m.sourceScope.epoch);
  if (m.compositionDigest !== comp)
    refuse(
      'IDENTITY_MISMATCH',
      'ident_composition_mismatch',
      'compositionDigest',
      `composition digest ${m.compositionDigest} differs from ${the} ${comp}`,
    );
}

/**
 * The block to hold a checkpoint against: the composition's, or — for a checkpoint an older detsim
 * took, which named a module model by its absolute path in the content and patch digests — the
 * same block computed that way, when the checkpoint has exactly those two (compatibility.ts).
 */
function byPathIfTakenSo(m: EnvelopeManifest, live: LiveComposition, block: CompatibilityBlock): CompatibilityBlock {
  const got = m.compatibility as Record<string, unknown>;
  if (got.contentDigest === block.contentDigest && got.patchDigest === block.patchDigest) return block;
  const byPath = compatibilityBlock(live, true);
  return got.contentDigest === byPath.contentDigest && got.patchDigest === byPath.patchDigest ? byPath : block;
}

/** The compatibility block field by field (the backend digest unless left out), and no unknown field. */
function checkCompatibility(m: EnvelopeManifest, live: LiveComposition, the: string, opts: IdentityCheckOptions): void {
  const block = byPathIfTakenSo(m, live, compatibilityBlock(live));
  for (const f of COMPATIBILITY_FIELDS) {
    if (opts.withoutBackend && f === 'backendDigest') continue;
    const got = (m.compatibility as Record<string, unknown>)[f];
    if (got !== block[f]) {
      refuse(
        'INCOMPATIBLE_STATE',
        'ident_compatibility_mismatch',
        `compatibility.${f}`,
        `compatibility ${compatibilityFieldName(f)} differs: the checkpoint has ${show(got)}, ${the} composition ${show(block[f])}`,
      );
    }
  }
  const extra = Object.keys(m.compatibility).filter((k) => !(COMPATIBILITY_FIELDS as readonly string[]).includes(k));
  if (extra.length > 0)
    refuse(
      'INCOMPATIBLE_STATE',
      'ident_compatibility_mismatch',
      `compatibility.${extra[0]}`,
      `compatibility has an unknown field ${show(extra[0])}`,
    );
}

/** The environment's identity fields and its seed. */
function checkEnvironment(m: EnvelopeManifest, live: LiveComposition, the: string): void {
  const env = liveEnvironment(live);
  const menv = m.environment as Record<string, unknown>;
  for (const f of ['workerId', 'environmentId', 'modelVersion', 'profileDigest'] as const) {
    if (menv[f] !== env[f])
      refuse(
        'IDENTITY_MISMATCH',
        'ident_environment_mismatch',
        `environment.${f}`,
        `environment ${f} ${show(menv[f])} differs from ${the} ${show(env[f])}`,
      );
  }
  if (menv.seed !== env.seed)
    refuse(
      'IDENTITY_MISMATCH',
      'ident_seed_mismatch',
      'environment.seed',
      `environment seed ${show(menv.seed)} differs from ${the} seed ${env.seed}`,
    );
}

/** The agent set, then each agent's profile fields and seed, in manifest order. */
function checkAgents(m: EnvelopeManifest, live: LiveComposition, the: string): void {
  const rows = liveAgentRows(live);
  const got = m.agents.map((a) => a.agentId);
  const want = rows.map((r) => r.agentId);
  if (canonicalize(got) !== canonicalize(want))
    refuse(
      'IDENTITY_MISMATCH',
      'ident_agent_set_mismatch',
      'agents',
      `agents [${got.join(', ')}] differ from ${the} [${want.join(', ')}]`,
    );
  m.agents.forEach((a, i) => {
    const r = rows[i]!;
    for (const f of ['profileDigest', 'datasetDigest', 'modelVersion', 'plasticityVersion'] as const) {
      if (a[f] !== r[f])
        refuse(
          'IDENTITY_MISMATCH',
          'ident_profile_mismatch',
          `agents[${i}].${f}`,
          `agent ${r.agentId} ${f} ${show(a[f])} differs from ${the} slot's ${show(r[f])}`,
        );
    }
    if (a.seed !== r.seed)
      refuse(
        'IDENTITY_MISMATCH',
        'ident_seed_mismatch',
        `agents[${i}].seed`,
        `agent ${r.agentId} seed ${show(a.seed)} differs from ${the} slot's ${r.seed}`,
      );
  });
}
