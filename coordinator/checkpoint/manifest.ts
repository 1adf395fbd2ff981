// The checkpoint manifest (docs/spec/checkpoint-envelope.md) and the coordinator's own
// payloads, sealed as canonical JSON: task-ledger, prior-inspection, executor-<agentId>,
// coordinator-admission. Building them at capture and reading them back at restore.
// NOT the envelope bytes (formats/envelope.ts) and NOT the store.
import { canonicalBytes, parseCanonical, type JsonValue } from '../../core/formats/canonical-json.js';
import type {
  EnvelopeManifest,
  EnvelopePayloadInput,
  LayoutPayloadInput,
  SizedPayloadInput,
} from '../../core/formats/envelope.js';
import { DetsimError } from '../../core/formats/errors.js';
import {
  RationalNs,
  readId,
  readObject,
  readU64,
  type Digest,
  type Id,
  type RationalNsJson,
  type Scope,
  type U64,
} from '../../core/formats/scalars.js';
import type { JsonObject } from '../../core/protocol/index.js';
import { readSha256State, type Sha256State } from '../trace/sha256-state.js';
import { CheckpointRefusal } from './refusal.js';
import {
  compatibilityBlock,
  compositionDigest,
  EPISODE_ID,
  EXECUTOR_ID,
  INSPECTION_SCHEMA,
  liveAgentRows,
  liveEnvironment,
  portMapOf,
  SCHEDULER_ID,
  type LiveComposition,
} from './compatibility.js';

export const COORDINATOR_PAYLOAD_VERSION = 1;
export const PAYLOAD_NAMES = {
  world: 'world',
  agent: (id: Id) => `agent-${id}`,
  taskLedger: 'task-ledger',
  priorInspection: 'prior-inspection',
  executor: (id: Id) => `executor-${id}`,
  admission: 'coordinator-admission',
} as const;

/** Per-agent clock facts at the boundary (from the last committed step's trace; zero at boundary 0). */
export interface AgentClock {
  brainTicks: U64;
  remainder: RationalNsJson;
}

/**
 * Behaviour of the run before the boundary, rebased to baseEpoch: the behaviour digest's SHA-256
 * state after `steps` steps (trace/sha256-state.ts). Resume checks the trace it keeps against it
 * and the digest continues from it.
 */
export interface BehaviourPrefix {
  baseEpoch: Id;
  steps: U64;
  state: Sha256State;
}

/** What the coordinator knows at a committed boundary and seals into its payloads. */
export interface CoordinatorState {
  boundary: bigint;
  epoch: Id;
  observations: { agentId: Id; observation: JsonObject }[];
  clocks: Map<Id, AgentClock>;
  /** Running reward totals per agent, and how many events were issued so far. */
  rewardTotals: Map<Id, number>;
  eventsIssued: bigint;
  behaviour: BehaviourPrefix;
}

/** Captured participant payloads: the environment first, then agents sorted by id. */
/** One participant's captured state and the SHA-256 it reported (checked when the envelope is sealed). */
export type CapturedPayload =
  | { bytes: Uint8Array; digest?: Digest }
  /** store-files-v1: the participant holds the bytes and writes them into the envelope file itself. */
  | Omit<SizedPayloadInput, 'name'>;

export interface ParticipantPayloads {
  world: CapturedPayload;
  agents: ({ agentId: Id } & CapturedPayload)[];
}

const byId = <T extends { agentId: Id }>(a: T, b: T) => (a.agentId < b.agentId ? -1 : a.agentId > b.agentId ? 1 : 0);

/** The coordinator payloads in envelope order, as canonical JSON bytes. */
export function coordinatorPayloads(live: LiveComposition, state: CoordinatorState): EnvelopePayloadInput[] {
  const k = state.boundary.toString();
  const rows = liveAgentRows(live);
  const watermarks = { lastSourceStep: k, issued: state.eventsIssued.toString() };
  const taskLedger = {
    payloadVersion: COORDINATOR_PAYLOAD_VERSION,
    kind: 'task-ledger',
    committedStep: k,
    rewardTotals: rows.map((r) => ({ agentId: r.agentId, total: state.rewardTotals.get(r.agentId) ?? 0 })),
    eventsIssued: state.eventsIssued.toString(),
    behaviour: state.behaviour,
  };
  const prior = {
    payloadVersion: COORDINATOR_PAYLOAD_VERSION,
    kind: 'prior-inspection',
    inspectionSchema: INSPECTION_SCHEMA,
    boundary: k,
    observations: [...state.observations].sort(byId),
  };
  const actionFields = new Map(live.plan.agents.map((a) => [a.agentId, a.actionFields ?? null]));
  const executors = rows.map((r) => ({
    name: PAYLOAD_NAMES.executor(r.agentId),
    bytes: canonicalBytes({
      payloadVersion: COORDINATOR_PAYLOAD_VERSION,
      kind: 'executor',
      agentId: r.agentId,
      portId: r.portId,
      executor: EXECUTOR_ID,
      actionFields: actionFields.get(r.agentId) ?? null,
      committedStep: k,
    }),
  }));
  const admission = {
    payloadVersion: COORDINATOR_PAYLOAD_VERSION,
    kind: 'coordinator',
    committedStep: k,
    admission: { audienceInput: 'none-configured', admitted: [] },
    eventWatermarks: watermarks,
    agents: rows.map((r) => ({
      agentId: r.agentId,
      portId: r.portId,
      workerId: r.workerId,
      profile: r.profileDigest,
      seed: r.seed,
      committedStep: k,
      ...clockOf(state, r.agentId),
    })),
  };
  return [
    { name: PAYLOAD_NAMES.taskLedger, bytes: canonicalBytes(taskLedger) },
    { name: PAYLOAD_NAMES.priorInspection, bytes: canonicalBytes(prior) },
    ...executors,
    { name: PAYLOAD_NAMES.admission, bytes: canonicalBytes(admission) },
  ];
}

function clockOf(state: CoordinatorState, agentId: Id): AgentClock {
  return state.clocks.get(agentId) ?? { brainTicks: '0', remainder: { numerator: '0', denominator: '1' } };
}

/** The manifest (without `payloads`, which the encoder fills from the table) and every payload in order. */
export function buildCheckpoint(
  live: LiveComposition,
  checkpointId: Id,
  state: CoordinatorState,
  captured: ParticipantPayloads,
): { manifest: Omit<EnvelopeManifest, 'payloads'>; payloads: LayoutPayloadInput[] } {
  const { plan } = live;
  const k = state.boundary.toString();
  const sourceScope: Scope = { sessionId: plan.sessionId, epoch: state.epoch, step: k };
  const env = liveEnvironment(live);
  const rows = liveAgentRows(live);
  const manifest = {
    envelopeVersion: 1 as const,
    checkpointId,
    sourceScope,
    episodeId: EPISODE_ID,
    worldTime: plan.stepDuration.mulInt(state.boundary).toJSON(),
    schedulerId: SCHEDULER_ID,
    compositionDigest: compositionDigest(live, state.epoch),
    portMap: portMapOf(plan) as unknown as JsonValue[],
    compatibility: compatibilityBlock(live) as unknown as { [k: string]: JsonValue },
    agents: rows.map((r) => ({
      agentId: r.agentId,
      profileDigest: r.profileDigest,
      datasetDigest: r.datasetDigest,
      modelVersion: r.modelVersion,
      plasticityVersion: r.plasticityVersion,
      seed: r.seed,
      ...clockOf(state, r.agentId),
      compatibilityDigest: r.compatibilityDigest,
      payload: PAYLOAD_NAMES.agent(r.agentId),
    })) as unknown as { [k: string]: JsonValue }[],
    coordinator: {
      taskLedger: PAYLOAD_NAMES.taskLedger,
      priorInspection: PAYLOAD_NAMES.priorInspection,
      executorState: rows.map((r) => ({ agentId: r.agentId, payload: PAYLOAD_NAMES.executor(r.agentId) })),
      admissionState: PAYLOAD_NAMES.admission,
      eventWatermarks: { lastSourceStep: k, issued: state.eventsIssued.toString() },
    },
    environment: {
      workerId: env.workerId,
      environmentId: env.environmentId,
      modelVersion: env.modelVersion,
      profileDigest: env.profileDigest,
      seed: env.seed,
      compatibilityDigest: env.compatibilityDigest,
      payload: PAYLOAD_NAMES.world,
    },
    helperState: [],
  };
  const agentPayloads = new Map(captured.agents.map((a) => [a.agentId, a]));
  const payloads: LayoutPayloadInput[] = [
    { name: PAYLOAD_NAMES.world, ...captured.world },
    ...rows.map((r) => {
      const { agentId: _agentId, ...payload } = agentPayloads.get(r.agentId)!;
      return { name: PAYLOAD_NAMES.agent(r.agentId), ...payload };
    }),
    ...coordinatorPayloads(live, state),
  ];
  return { manifest, payloads };
}

// ---------------------------------------------------------------------------------------------
// Reading the coordinator payloads back at restore (before any participant is staged).

export interface RestoredCoordinatorState {
  boundary: bigint;
  observations: { agentId: Id; observation: JsonObject }[];
  rewardTotals: Map<Id, number>;
  eventsIssued: bigint;
  behaviour: BehaviourPrefix;
  clocks: Map<Id, AgentClock>;
}

function bad(name: string, what: string): never {
  throw new CheckpointRefusal('INCOMPATIBLE_STATE', 'audit_coordinator_payload', `payload ${name}: ${what}`, {
    field: `payloads.${name}`,
  });
}

function readPayloadJson(
  payloads: Map<string, Uint8Array>,
  name: string,
  kind: string,
  k: string,
): Record<string, JsonValue> {
  const bytes = payloads.get(name);
  if (!bytes) bad(name, 'is missing from the envelope');
  let o: Record<string, JsonValue>;
  try {
    o = readObject(parseCanonical(bytes), name) as Record<string, JsonValue>;
  } catch (e) {
    bad(name, `is not canonical JSON: ${(e as Error).message}`);
  }
  if (o.payloadVersion !== COORDINATOR_PAYLOAD_VERSION)
    bad(name, `payloadVersion is ${JSON.stringify(o.payloadVersion)}, not ${COORDINATOR_PAYLOAD_VERSION}`);
  if (o.kind !== kind) bad(name, `kind is ${JSON.stringify(o.kind)}, not ${JSON.stringify(kind)}`);
  const step = o.committedStep ?? o.boundary;
  if (step !== k) bad(name, `is for boundary ${JSON.stringify(step)}, the checkpoint is at ${k}`);
  return o;
}

/** Validate every coordinator payload against the manifest and return the state to install. */
export function readCoordinatorPayloads(
  manifest: EnvelopeManifest,
  payloads: Map<string, Uint8Array>,
): RestoredCoordinatorState {
  const k = manifest.sourceScope.step;
  const agentIds = manifest.agents.map((a) => a.agentId as Id);
  const sameIds = (got: Id[], name: string) => {
    if (got.length !== agentIds.length || got.some((id, i) => id !== agentIds[i]))
      bad(name, `covers agents [${got.join(', ')}], the manifest lists [${agentIds.join(', ')}]`);
  };
  try {
    const { ledger, totals, behaviour } = readTaskLedger(payloads, k, sameIds);
    const observations = readPriorInspection(payloads, k, sameIds);
    for (const id of agentIds) {
      const ex = readPayloadJson(payloads, PAYLOAD_NAMES.executor(id), 'executor', k);
      if (ex.agentId !== id || ex.executor !== EXECUTOR_ID)
        bad(
          PAYLOAD_NAMES.executor(id),
          `is for ${JSON.stringify(ex.agentId)} with executor ${JSON.stringify(ex.executor)}`,
        );
    }
    const clocks = readAdmissionClocks(manifest, payloads, k, sameIds);
    return {
      boundary: BigInt(k),
      observations,
      rewardTotals: new Map(totals.map((t) => [t.agentId, t.total])),
      eventsIssued: BigInt(readU64(ledger.eventsIssued, 'eventsIssued')),
      behaviour,
      clocks,
    };
  } catch (e) {
    if (e instanceof CheckpointRefusal) throw e;
    if (e instanceof DetsimError)
      throw new CheckpointRefusal(
        'INCOMPATIBLE_STATE',
        'audit_coordinator_payload',
        `coordinator payload: ${e.message}`,
        { field: e.field },
      );
    throw e;
  }
}

type SameIds = (got: Id[], name: string) => void;

/** The task ledger: reward totals for the manifest's agents and the behaviour digest's state at the boundary. */
function readTaskLedger(payloads: Map<string, Uint8Array>, k: U64, sameIds: SameIds) {
  const ledger = readPayloadJson(payloads, PAYLOAD_NAMES.taskLedger, 'task-ledger', k);
  const totals = ledger.rewardTotals as unknown as { agentId: Id; total: number }[];
  if (!Array.isArray(totals) || totals.some((t) => typeof t.total !== 'number'))
    bad(PAYLOAD_NAMES.taskLedger, 'rewardTotals is not a list of {agentId, total}');
  sameIds(
    totals.map((t) => t.agentId),
    PAYLOAD_NAMES.taskLedger,
  );
  const b = readObject(ledger.behaviour, 'behaviour');
  if (b.state === undefined && b.digest !== undefined)
    throw new CheckpointRefusal(
      'INCOMPATIBLE_STATE',
      'struct_legacy_run',
      `payload ${PAYLOAD_NAMES.taskLedger}: records the behaviour chain of an older detsim, not the behaviour digest's state; this detsim does not resume it (verify, diff and replay still read the run)`,
      { field: `payloads.${PAYLOAD_NAMES.taskLedger}.behaviour` },
    );
  const behaviour: BehaviourPrefix = {
    baseEpoch: readId(b.baseEpoch, 'behaviour.baseEpoch'),
    steps: readU64(b.steps, 'behaviour.steps'),
    state: readSha256State(b.state, 'behaviour.state'),
  };
  if (behaviour.steps !== k)
    bad(PAYLOAD_NAMES.taskLedger, `behaviour covers ${behaviour.steps} steps, the boundary is ${k}`);
  return { ledger, totals, behaviour };
}

/** The prior inspection: each agent's last observation, for the manifest's agents. */
function readPriorInspection(payloads: Map<string, Uint8Array>, k: U64, sameIds: SameIds) {
  const prior = readPayloadJson(payloads, PAYLOAD_NAMES.priorInspection, 'prior-inspection', k);
  if (prior.inspectionSchema !== INSPECTION_SCHEMA)
    bad(
      PAYLOAD_NAMES.priorInspection,
      `inspectionSchema is ${JSON.stringify(prior.inspectionSchema)}, not ${INSPECTION_SCHEMA}`,
    );
  const observations = prior.observations as unknown as { agentId: Id; observation: JsonObject }[];
  if (!Array.isArray(observations)) bad(PAYLOAD_NAMES.priorInspection, 'observations is not a list');
  sameIds(
    observations.map((o) => o.agentId),
    PAYLOAD_NAMES.priorInspection,
  );
  return observations;
}

/** The admission payload: each agent's seed (the manifest's) and tick clock. */
function readAdmissionClocks(
  manifest: EnvelopeManifest,
  payloads: Map<string, Uint8Array>,
  k: U64,
  sameIds: SameIds,
): Map<Id, AgentClock> {
  const adm = readPayloadJson(payloads, PAYLOAD_NAMES.admission, 'coordinator', k);
  const admAgents = adm.agents as unknown as {
    agentId: Id;
    seed: number;
    brainTicks: U64;
    remainder: RationalNsJson;
  }[];
  if (!Array.isArray(admAgents)) bad(PAYLOAD_NAMES.admission, 'agents is not a list');
  sameIds(
    admAgents.map((a) => a.agentId),
    PAYLOAD_NAMES.admission,
  );
  const clocks = new Map<Id, AgentClock>();
  admAgents.forEach((a, i) => {
    const row = manifest.agents[i]!;
    if (a.seed !== row.seed)
      bad(
        PAYLOAD_NAMES.admission,
        `agent ${a.agentId} seed ${a.seed} differs from the manifest's ${JSON.stringify(row.seed)}`,
      );
    RationalNs.read(a.remainder, `agents[${i}].remainder`);
    clocks.set(a.agentId, { brainTicks: readU64(a.brainTicks, `agents[${i}].brainTicks`), remainder: a.remainder });
  });
  return clocks;
}
