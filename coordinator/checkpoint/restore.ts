// Restore (docs/spec/checkpoint-store.md): select a checkpoint (by id or the store's high-water mark), read and
// verify it, check identities before staging anyone, stage the environment then the agents (side
// by side, bounded; the failure reported is the first in reference order: the environment, then
// agents by id) into a NEW epoch, activate them the same way (the environment alone, then the
// agents side by side, the same reporting rule), install the coordinator state and stop at Paused(k).
// Group install rule: any stage failure taints the stagers and nothing activates; any activation
// failure fences the group (nothing steps). NOT capture, NOT the CLI, NOT the store's file checks.
import { resolve } from 'node:path';
import { canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import {
  decodeEnvelope,
  rangeKey,
  type ClaimedRange,
  type EnvelopeManifest,
  type VerifiedEnvelope,
} from '../../core/formats/envelope.js';
import { isDetsimError } from '../../core/formats/errors.js';
import type { Digest, Id, Scope } from '../../core/formats/scalars.js';
import {
  CAPABILITIES,
  DEFAULT_MAX_ATTACHMENT_BYTES,
  METHODS,
  type ActivateRestoreParams,
  type JsonObject,
  type StageRestoreParams,
} from '../../core/protocol/index.js';
import {
  readClaimedRanges,
  readFileRange,
  type DelegatedDigests,
  type ReadEnvelopeOptions,
} from '../store/generation-reader.js';
import { verifyGeneration, type CheckpointStore } from '../store/store.js';
import { expectedAgentDigest, expectedEnvironmentDigest } from './compatibility.js';
import type { CheckpointGroup } from './group.js';
import { PAYLOAD_NAMES, readCoordinatorPayloads, type BehaviourPrefix } from './manifest.js';
import { CheckpointRefusal, participantOf, tooLargeToStream, type Participant } from './refusal.js';
import type { RestoreRebind } from './fork-rebind.js';
import { checkIdentity } from './restore-identity.js';
import { LifecycleSlots } from './lifecycle-slots.js';
import { firstRejection, settleFirstThenRest } from './side-by-side.js';
import { PlannedModels } from '../session/loaded-models.js';

/**
 * Where the checkpoint comes from: a store (named id or high-water; `loaded` when the caller
 * already read and verified it with loadCheckpoint), or envelope bytes as they are.
 */
export type RestoreSource =
  { store: CheckpointStore; checkpointId?: Id; loaded?: LoadedCheckpoint } | { bytes: Uint8Array; label?: string };

export interface RestoreHooks {
  /** Test hook: change the params of one participant's StageRestore or ActivateRestore before they go out. */
  beforeStage?: (participant: Participant, params: StageRestoreParams) => StageRestoreParams;
  beforeActivate?: (participant: Participant, params: ActivateRestoreParams) => ActivateRestoreParams;
  /** The longest payload sent as one attachment (default: the workers' limit, 2 GiB − 1; tests lower it). */
  maxAttachmentBytes?: number;
}

export interface RestoreOptions {
  /** The new epoch to restore into; never the current one. */
  epoch: Id;
  /** The behaviour digest's state the caller took from the trace it keeps: must equal the checkpoint's. */
  expectBehaviour?: BehaviourPrefix;
  hooks?: RestoreHooks;
  /** Extra fields for the ledger's `restored` event (e.g. the abandoned step range). */
  ledgerDetail?: Record<string, JsonValue>;
  /**
   * A fork's base checkpoint restored with new params (fork-rebind.ts): the identity checks run
   * against the composition the checkpoint holds, and the changed participants are told the new params.
   */
  rebind?: RestoreRebind;
}

export interface RestoredParticipant {
  participant: Participant;
  agentId: Id | null;
  workerId: Id;
  restoreToken: Id;
}

export interface RestoreReport {
  checkpointId: Id;
  boundary: bigint;
  /** The epoch the checkpoint was captured in, and the new one. */
  fromEpoch: Id;
  epoch: Id;
  envelopeDigest: Digest;
  byteLength: number;
  participants: RestoredParticipant[];
  behaviour: BehaviourPrefix;
  manifest: EnvelopeManifest;
}

export interface LoadedCheckpoint {
  envelope: VerifiedEnvelope;
  byteLength: number;
  label: string;
  /** The verified file's absolute path (a store generation), which local workers may read themselves. */
  path: string | null;
  /** One payload's bytes (a store generation's are read from the file now, one payload at a time). */
  readPayload(name: string): Promise<Uint8Array>;
}

/**
 * Read and verify the checkpoint; every refusal names the check (reason from the reader or the
 * store). A store generation is verified in bounded chunks (`read`: chunk size, co-located workers'
 * payload verdicts) and never held in memory.
 */
export async function loadCheckpoint(source: RestoreSource, read: ReadEnvelopeOptions = {}): Promise<LoadedCheckpoint> {
  if ('store' in source && source.loaded) return source.loaded;
  try {
    if ('store' in source) {
      const record = source.store.select(source.checkpointId);
      const g = await verifyGeneration(source.store.dir, record, read);
      const path = resolve(g.path);
      return {
        envelope: g.envelope,
        byteLength: g.byteLength,
        label: record.file,
        path,
        readPayload: async (name) => {
          const e = g.envelope.layout.entries.find((x) => x.name === name)!;
          // A range the verify pass kept is the very bytes it hashed: no second read of the file.
          return g.kept.get(rangeKey(e.offset, e.byteLength)) ?? readFileRange(path, e.offset, e.byteLength);
        },
      };
    }
    const decoded = decodeEnvelope(source.bytes);
    return {
      envelope: decoded,
      byteLength: source.bytes.byteLength,
      label: source.label ?? 'checkpoint',
      path: null,
      readPayload: async (name) => decoded.payloads.find((p) => p.name === name)!.bytes,
    };
  } catch (e) {
    if (isDetsimError(e)) {
      const label =
        'store' in source ? (source.checkpointId ?? 'high-water checkpoint') : (source.label ?? 'checkpoint');
      throw new CheckpointRefusal('INCOMPATIBLE_STATE', e.reason, `checkpoint refused: ${label}: ${e.message}`, {
        field: e.field,
      });
    }
    throw e;
  }
}

function preconditions(group: CheckpointGroup, epoch: Id): void {
  if (group.phase === 'capturing' || group.phase === 'restoring') {
    throw new CheckpointRefusal('INVALID_PHASE', 'perm_invalid_phase', `cannot restore while ${group.phase}`);
  }
  if (group.tainted.size > 0) {
    throw new CheckpointRefusal(
      'INVALID_PHASE',
      'perm_invalid_phase',
      `cannot restore over tainted participants (${[...group.tainted].sort().join(', ')}): replace them first`,
    );
  }
  if (epoch === group.epoch) {
    throw new CheckpointRefusal(
      'STALE_EPOCH',
      'ident_stale_epoch',
      `cannot restore into the current epoch ${epoch}: a restore always starts a new epoch`,
      { field: 'epoch' },
    );
  }
}

interface StagePlan {
  agentId: Id | null;
  participant: Participant;
  payloadName: string;
  compatibilityDigest: Digest;
}

/** Who is staged, in order, with the compatibility digest recomputed from the manifest row (never the payload). */
function stagePlan(m: EnvelopeManifest): StagePlan[] {
  const env = m.environment as Record<string, unknown>;
  const out: StagePlan[] = [
    {
      agentId: null,
      participant: 'environment',
      payloadName: String(env.payload),
      compatibilityDigest: expectedEnvironmentDigest({
        environmentId: String(env.environmentId),
        modelVersion: String(env.modelVersion),
        profileDigest: String(env.profileDigest),
        seed: env.seed as number,
        ports: m.portMap as { portId: Id; agentId: Id }[],
      }),
    },
  ];
  for (const a of m.agents) {
    const row = a as unknown as {
      agentId: Id;
      profileDigest: Digest;
      datasetDigest: Digest;
      modelVersion: string;
      plasticityVersion: string;
      seed: number;
      payload: string;
    };
    out.push({
      agentId: row.agentId,
      participant: participantOf(row.agentId),
      payloadName: row.payload,
      compatibilityDigest: expectedAgentDigest(row),
    });
  }
  return out;
}

/** Whether a payload is the coordinator's own (not the environment's or an agent's state). */
function isCoordinatorPayload(name: string): boolean {
  return name !== PAYLOAD_NAMES.world && !name.startsWith(PAYLOAD_NAMES.agent(''));
}

/** The coordinator's own payloads (every one but the participants' states), read into memory: they are small. */
/**
 * Refuse (audit_trace_prefix_mismatch) unless the run's trace before the checkpoint's boundary
 * gives the behaviour digest state the checkpoint recorded: resume asks before any worker starts.
 */
export async function checkTracePrefix(loaded: LoadedCheckpoint, expect: BehaviourPrefix): Promise<void> {
  const m = loaded.envelope.manifest;
  checkBehaviourPrefix(m, readCoordinatorPayloads(m, await coordinatorPayloads(loaded)).behaviour, expect);
}

const prefixText = (p: BehaviourPrefix) =>
  `${p.state.h} over ${p.state.length} bytes of ${p.steps} steps (rebased to ${p.baseEpoch})`;

function checkBehaviourPrefix(m: EnvelopeManifest, recorded: BehaviourPrefix, expect: BehaviourPrefix): void {
  if (canonicalize(expect) === canonicalize(recorded)) return;
  throw new CheckpointRefusal(
    'INCOMPATIBLE_STATE',
    'audit_trace_prefix_mismatch',
    `checkpoint refused: the run's trace before boundary ${m.sourceScope.step} gives the behaviour digest state ${prefixText(expect)}, the checkpoint recorded ${prefixText(recorded)}`,
    { field: 'task-ledger.behaviour' },
  );
}

async function coordinatorPayloads(loaded: LoadedCheckpoint): Promise<Map<string, Uint8Array>> {
  const m = loaded.envelope.manifest;
  const participants = new Set([PAYLOAD_NAMES.world, ...m.agents.map((a) => PAYLOAD_NAMES.agent(a.agentId as Id))]);
  const out = new Map<string, Uint8Array>();
  for (const e of loaded.envelope.layout.entries)
    if (!participants.has(e.name)) out.set(e.name, await loaded.readPayload(e.name));
  return out;
}

/**
 * Restore the group from a checkpoint into `opts.epoch`. On success the group is Paused(k) in the
 * new epoch (call group.resume() to step). On a refusal before staging nothing changed anywhere.
 */
export async function restoreGroup(
  group: CheckpointGroup,
  source: RestoreSource,
  opts: RestoreOptions,
): Promise<RestoreReport> {
  preconditions(group, opts.epoch);
  const sendable = opts.hooks?.maxAttachmentBytes ?? DEFAULT_MAX_ATTACHMENT_BYTES;
  await refuseUnsendableLayout(group, source, sendable);
  const prefetch = new Prefetch(group, source);
  try {
    const read: ReadEnvelopeOptions = { ...prefetch.readOptions(), keep: (r) => isCoordinatorPayload(r.name) };
    return await restoreLoaded(group, await loadCheckpoint(source, read), opts);
  } catch (e) {
    // A refusal or a failed stage may leave prefetched bytes no StageRestore used up: drop them.
    // (A restore that succeeds staged everyone, and each stage used up its participant's prefetch.)
    await prefetch.release();
    throw e;
  }
}

async function restoreLoaded(
  group: CheckpointGroup,
  loaded: LoadedCheckpoint,
  opts: RestoreOptions,
): Promise<RestoreReport> {
  const m = loaded.envelope.manifest;
  const { coord, plan } = await checkRestorable(group, loaded, opts);
  const k = BigInt(m.sourceScope.step);
  group.beginRestore();
  const r: RestoreContext = {
    group,
    loaded,
    m,
    opts,
    scope: group.scope(opts.epoch, k),
    slots: new LifecycleSlots((byWorker) => group.acknowledge(byWorker)),
  };
  const staged = await stageAll(r, plan);
  const observations = await activateAll(r, staged);
  // The environment's restored view must be the one the coordinator sealed at capture.
  if (canonicalize(observations) !== canonicalize(coord.observations)) {
    await fenceAll(
      r,
      staged,
      new CheckpointRefusal(
        'INCOMPATIBLE_STATE',
        'audit_restored_state',
        `the restored environment's observations differ from prior-inspection at boundary ${k}`,
        { participant: 'environment' },
      ),
      'install refused',
    );
  }
  // Install the coordinator state: observations at k, clocks, reward ledger, behaviour digest state; Paused(k).
  group.install(opts.epoch, k, observations!, coord);
  // The acknowledgements (best effort, they never throw) go out while the ledger line is made durable.
  const released = r.slots.releaseAll();
  try {
    await group.ledger?.append({
      event: 'restored',
      checkpointId: m.checkpointId,
      boundary: m.sourceScope.step,
      epoch: opts.epoch,
      sessionId: m.sourceScope.sessionId,
      detail: { ...opts.ledgerDetail, fromEpoch: m.sourceScope.epoch, envelopeDigest: loaded.envelope.envelopeDigest },
    });
  } finally {
    await released;
  }
  return {
    checkpointId: m.checkpointId,
    boundary: k,
    fromEpoch: m.sourceScope.epoch,
    epoch: opts.epoch,
    envelopeDigest: loaded.envelope.envelopeDigest,
    byteLength: loaded.byteLength,
    participants: staged,
    behaviour: coord.behaviour,
    manifest: m,
  };
}

/** One restore in flight: the group, the checkpoint, the scope it restores into, the counted replies. */
interface RestoreContext {
  readonly group: CheckpointGroup;
  readonly loaded: LoadedCheckpoint;
  readonly m: EnvelopeManifest;
  readonly opts: RestoreOptions;
  readonly scope: Scope;
  readonly slots: LifecycleSlots;
}

/**
 * Everything checked before any participant is asked: identity, the coordinator payloads (and the
 * behaviour digest state the caller expects), one participant payload per stager, and that each can be sent.
 */
async function checkRestorable(group: CheckpointGroup, loaded: LoadedCheckpoint, opts: RestoreOptions) {
  const m = loaded.envelope.manifest;
  const live = group.live();
  checkIdentity(m, opts.rebind ? { ...live, ...opts.rebind.checkpointComposition } : live);
  const names = new Set(loaded.envelope.layout.entries.map((e) => e.name));
  const coord = readCoordinatorPayloads(m, await coordinatorPayloads(loaded));
  if (opts.expectBehaviour) checkBehaviourPrefix(m, coord.behaviour, opts.expectBehaviour);
  const plan = stagePlan(m);
  for (const p of plan) {
    const want = p.agentId === null ? PAYLOAD_NAMES.world : PAYLOAD_NAMES.agent(p.agentId);
    if (p.payloadName !== want || !names.has(want)) {
      throw new CheckpointRefusal(
        'INCOMPATIBLE_STATE',
        'audit_coordinator_payload',
        `checkpoint refused: ${p.participant} payload ${JSON.stringify(p.payloadName)} is not the envelope's ${want}`,
        { field: 'payloads' },
      );
    }
  }
  refuseUnsendable(group, loaded, plan, opts.hooks?.maxAttachmentBytes ?? DEFAULT_MAX_ATTACHMENT_BYTES);
  return { coord, plan };
}

/** One lifecycle call on the worker of `agentId`, its reply counted until acknowledged. */
async function counted<T extends { requestId: string }>(
  r: RestoreContext,
  agentId: Id | null,
  call: () => Promise<T>,
): Promise<T> {
  const worker = r.group.workerOf(agentId);
  await r.slots.reserve(worker);
  const rep = await call().catch((e: unknown) => {
    r.slots.cancel(worker);
    throw e;
  });
  r.slots.fill(worker, rep.requestId);
  return rep;
}

/**
 * Stage the environment first, then the agents side by side (bounded), each independent of the
 * others; every agent is asked and awaited, so who staged does not depend on timing. Any refusal
 * taints every stager and nothing activates; the refusal reported is the first in reference
 * order (environment, then agents by id), whatever order the replies came in. A refusing
 * environment leaves nobody staged, so the same workers can retry with intact bytes.
 */
async function stageAll(r: RestoreContext, plan: readonly StagePlan[]): Promise<RestoredParticipant[]> {
  const { group, loaded, m, opts } = r;
  const models = new PlannedModels(group.plan);
  const stageOne = async (p: StagePlan): Promise<{ requestId: string; restoreToken: Id }> => {
    let params: StageRestoreParams = {
      checkpointId: m.checkpointId,
      agentId: p.agentId,
      sourceScope: m.sourceScope,
      compatibilityDigest: p.compatibilityDigest,
      payload: payloadRef(loaded, p.payloadName, group.workerOf(p.agentId).hello.capabilities),
    };
    const rebind = opts.rebind?.stage(p.agentId);
    if (rebind) params.rebind = rebind;
    params = opts.hooks?.beforeStage?.(p.participant, params) ?? params;
    // A worker that reads the verified file itself gets no attachment (no copy through the transport);
    // any other gets this one payload, read from the file for its call only.
    const attachment = 'file' in params.payload ? undefined : await loaded.readPayload(p.payloadName);
    const rep = await counted(r, p.agentId, () =>
      group.call(p.agentId, p.participant, METHODS.stageRestore, r.scope, params, attachment ? { attachment } : {}),
    );
    checkLoadedModel(group, models, p, rep.result.modelIdentity);
    return { requestId: rep.requestId, restoreToken: rep.result.restoreToken };
  };
  const settled = await settleFirstThenRest(plan, stageOne);
  const staged: RestoredParticipant[] = [];
  settled.forEach((res, i) => {
    if (res.status !== 'fulfilled') return;
    const p = plan[i]!;
    staged.push({
      participant: p.participant,
      agentId: p.agentId,
      workerId: group.workerOf(p.agentId).plan.workerId,
      restoreToken: res.value.restoreToken,
    });
  });
  const failed = firstRejection(settled);
  if (!failed) return staged;
  if (staged.length > 0) group.fence(staged.map((s) => s.participant));
  else group.abandonRestore();
  await r.slots.releaseAll();
  throw annotate(
    failed.reason,
    `stage failed; nothing activates${staged.length > 0 ? `; tainted: ${staged.map((s) => s.participant).join(', ')}` : '; nothing was staged'}`,
  );
}

/**
 * A worker that staged a user model from another copy than this machine's (a hand-started worker
 * on another host, coordinator/session/loaded-models.ts) is refused: the restore would splice
 * another model into the run under its recorded identity.
 */
function checkLoadedModel(group: CheckpointGroup, models: PlannedModels, p: StagePlan, reported: unknown): void {
  const { plan } = group;
  const model = p.agentId === null ? plan.environment.model : plan.agents.find((a) => a.agentId === p.agentId)!.model;
  const why = models.mismatch(model, reported, p.agentId === null ? 'environment model' : `agent ${p.agentId}'s model`);
  if (why === undefined) return;
  const workerId = group.workerOf(p.agentId).plan.workerId;
  throw new CheckpointRefusal(
    'INCOMPATIBLE_STATE',
    'ident_model_source_changed',
    `${p.participant} (${workerId}): ${why}`,
    {
      participant: p.participant,
      workerId,
      method: METHODS.stageRestore,
    },
  );
}

/** Fence the group (every stager tainted: nothing steps until a restore over replaced participants) and throw. */
async function fenceAll(r: RestoreContext, staged: RestoredParticipant[], e: unknown, what: string): Promise<never> {
  r.group.fence(staged.map((s) => s.participant));
  await r.slots.releaseAll();
  throw annotate(e, `${what}; the group is fenced (tainted: ${staged.map((s) => s.participant).join(', ')})`);
}

/**
 * Activate the environment, then the agents side by side (bounded), in the same reference order
 * as staging. Any failure fences the group; the failure reported is the first in reference order,
 * whatever order the replies came in. An environment that fails to activate is the only one asked.
 * Returns the environment's observations at the boundary.
 */
async function activateAll(
  r: RestoreContext,
  staged: RestoredParticipant[],
): Promise<{ agentId: Id; observation: JsonObject }[] | undefined> {
  const { group, m, opts } = r;
  let observations: { agentId: Id; observation: JsonObject }[] | undefined;
  const activateOne = async (s: RestoredParticipant): Promise<void> => {
    let params: ActivateRestoreParams = { restoreToken: s.restoreToken, agentId: s.agentId };
    params = opts.hooks?.beforeActivate?.(s.participant, params) ?? params;
    const rep = await counted(r, s.agentId, () =>
      group.call(s.agentId, s.participant, METHODS.activateRestore, r.scope, params),
    );
    const obs = checkActivation(m, s, rep.result);
    if (s.agentId === null) observations = obs;
  };
  const activated = await settleFirstThenRest(staged, activateOne);
  const activationFailed = firstRejection(activated);
  if (activationFailed) {
    const who = staged[activated.indexOf(activationFailed)]!.participant;
    await fenceAll(r, staged, activationFailed.reason, `activation of ${who} failed`);
  }
  return observations;
}

/**
 * An activation reply: the checkpoint and step restored must be the manifest's; the environment
 * returns its observations, an agent none. Returns the environment's observations.
 */
function checkActivation(
  m: EnvelopeManifest,
  s: RestoredParticipant,
  r: { checkpointId: unknown; committedStep: unknown; observation: unknown },
): { agentId: Id; observation: JsonObject }[] | undefined {
  if (r.checkpointId !== m.checkpointId || r.committedStep !== m.sourceScope.step) {
    throw new CheckpointRefusal(
      'IDENTITY_MISMATCH',
      'audit_restored_state',
      `${s.participant} activated checkpoint ${JSON.stringify(r.checkpointId)} at step ${JSON.stringify(r.committedStep)}, expected ${m.checkpointId} at ${m.sourceScope.step}`,
      { participant: s.participant },
    );
  }
  if (s.agentId === null) {
    const obs = (r.observation as { observations?: unknown } | null)?.observations;
    if (!Array.isArray(obs))
      throw new CheckpointRefusal(
        'INCOMPATIBLE_STATE',
        'audit_restored_state',
        'environment activation returned no observations',
        { participant: s.participant },
      );
    return obs as { agentId: Id; observation: JsonObject }[];
  }
  if (r.observation !== null)
    throw new CheckpointRefusal(
      'INCOMPATIBLE_STATE',
      'audit_restored_state',
      `${s.participant} activation returned an observation (agents return null)`,
      { participant: s.participant },
    );
  return undefined;
}

/**
 * The restore prefetch (store-files-v1): while the coordinator reads the generation for its
 * checks, each co-located participant whose worker offers it reads and hashes its own payload
 * range (a second process, so the two SHA-256 passes run side by side). Its verdict stands in for
 * check 5's hash of that range (a range it does not confirm is hashed by the coordinator, so
 * refusals read as before), and the StageRestore that follows the verification uses the bytes it
 * read. Nothing is staged early: staging, activation and their order are unchanged.
 */
class Prefetch {
  private readonly asked: { agentId: Id | null; participant: Participant }[] = [];

  constructor(
    private readonly group: CheckpointGroup,
    private readonly source: RestoreSource,
  ) {}

  /** The reader options: the delegate that asks the workers, when the source is a store file not yet read. */
  readOptions(): ReadEnvelopeOptions {
    if (!('store' in this.source) || this.source.loaded) return {};
    const { store, checkpointId } = this.source;
    // An unknown checkpoint is refused by loadCheckpoint, as always: nobody is asked.
    const record = store.lookup(checkpointId ?? store.snapshot().highWater ?? '');
    if (!record) return {};
    const path = resolve(store.dir, record.file);
    return { delegate: (claimed) => this.ask(claimed, path) };
  }

  private ask(claimed: readonly ClaimedRange[], path: string): DelegatedDigests {
    const out: DelegatedDigests = new Map();
    for (const r of claimed) {
      const agentId = this.participantOf(r.name);
      if (agentId === undefined || !this.offered(agentId)) continue;
      const participant = agentId === null ? 'environment' : participantOf(agentId);
      this.asked.push({ agentId, participant });
      const payload = {
        digest: r.digest,
        byteLength: String(r.length),
        file: { path, offset: String(r.offset) },
      };
      const call = this.group.call(agentId, participant, METHODS.prefetchPayload, this.scope(), { agentId, payload });
      out.set(
        rangeKey(r.offset, r.length),
        call.then((rep) => rep.result.matched === true),
      );
    }
    return out;
  }

  /** The participant a payload name belongs to (undefined: the coordinator's own payload, or unknown). */
  private participantOf(name: string): Id | null | undefined {
    if (name === PAYLOAD_NAMES.world) return null;
    return this.group.plan.agents.map((a) => a.agentId).find((id) => PAYLOAD_NAMES.agent(id) === name);
  }

  private offered(agentId: Id | null): boolean {
    return this.group.workerOf(agentId).hello.capabilities.includes(CAPABILITIES.storeFiles);
  }

  /** The group's present scope: a prefetch belongs to no restore epoch (it stages nothing). */
  private scope(): Scope {
    return this.group.scope(this.group.epoch, this.group.boundary);
  }

  /** Drop whatever each asked worker still holds (best effort: a failure here changes no outcome). */
  async release(): Promise<void> {
    for (const { agentId, participant } of this.asked) {
      await this.group
        .call(agentId, participant, METHODS.prefetchPayload, this.scope(), { agentId, payload: null })
        .catch(() => undefined);
    }
  }
}

/**
 * Layout only, before the verify pass reads a payload byte: a store generation whose table claims,
 * for a participant sent its payload as an attachment, more than a worker receives is refused now
 * (as refuseUnsendable refuses it after the checks, which would first read and hash all of it),
 * naming the first such participant in reference order: the environment, then agents by id. A file
 * that cannot be read, or claims no such range, is left to the checks, which refuse it by name.
 */
async function refuseUnsendableLayout(group: CheckpointGroup, source: RestoreSource, sendable: number): Promise<void> {
  if (!('store' in source) || source.loaded) return;
  const record = source.store.lookup(source.checkpointId ?? source.store.snapshot().highWater ?? '');
  if (!record) return;
  const claimed = (await readClaimedRanges(resolve(source.store.dir, record.file))) ?? [];
  const ids: (Id | null)[] = [null, ...group.plan.agents.map((a) => a.agentId).sort()];
  for (const agentId of ids) {
    const name = agentId === null ? PAYLOAD_NAMES.world : PAYLOAD_NAMES.agent(agentId);
    if (group.workerOf(agentId).hello.capabilities.includes(CAPABILITIES.storeFiles)) continue;
    const longest = Math.max(0, ...claimed.filter((r) => r.name === name).map((r) => r.length));
    if (longest > sendable) throw tooLargeToStream(participantOf(agentId), longest);
  }
}

/**
 * Before anything is staged: a payload that would have to travel as an attachment longer than a
 * worker receives (2 GiB − 1) refuses the restore, naming the first such participant in reference
 * order. Sent anyway, it would end the worker's stream mid-restore. (A store generation's layout was
 * already judged before it was read: refuseUnsendableLayout; this covers every source, verified.)
 */
function refuseUnsendable(
  group: CheckpointGroup,
  loaded: LoadedCheckpoint,
  plan: readonly StagePlan[],
  sendable: number,
): void {
  for (const p of plan) {
    const ref = payloadRef(loaded, p.payloadName, group.workerOf(p.agentId).hello.capabilities);
    if (!('file' in ref) && Number(ref.byteLength) > sendable)
      throw tooLargeToStream(p.participant, Number(ref.byteLength));
  }
}

/** The StageRestore payload ref: a range of the verified file for a worker that reads local files, else by attachment. */
function payloadRef(
  loaded: LoadedCheckpoint,
  name: string,
  capabilities: readonly string[],
): StageRestoreParams['payload'] {
  const entry = loaded.envelope.layout.entries.find((e) => e.name === name)!;
  const ref: StageRestoreParams['payload'] = { digest: entry.digest, byteLength: String(entry.byteLength) };
  // Every worker of a fleet runs on this machine (the launcher spawned it), so the path is valid there.
  if (loaded.path !== null && capabilities.includes(CAPABILITIES.storeFiles))
    ref.file = { path: loaded.path, offset: String(entry.offset) };
  return ref;
}

function annotate(e: unknown, what: string): unknown {
  if (e instanceof CheckpointRefusal) {
    return new CheckpointRefusal(e.status, e.reason, `${e.message} (${what})`, {
      field: e.field,
      participant: e.participant,
      mutation: e.mutation,
      workerCode: e.workerCode,
    });
  }
  return e;
}
