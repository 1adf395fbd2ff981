// The agent side of the Rust worker, as workers/agent-host.ts: hosts agents, implements the
// batched Agent.Initialize / Prepare / Commit with per-entry idempotency, and the agent side of
// State.Capture / StageRestore / ActivateRestore. Not Worker.* nor the transport (runtime.rs, server.rs),
// nor the request checks it shares (checks.rs).
use crate::capture_file::captured_payload;
use crate::checks::{
    AgentCompatibility, Rebind, agent_compatibility_digest, check_epoch, check_step, digest_of, first_mismatch, member,
    profile_digest, read_agent_id, read_stage_params, restore_token, session_scope, staged_payload,
};
use crate::models::{Brain, ModelKind};
use crate::payload::{self, to_state};
use crate::refusal::{ErrorCode, Mutation, Outcome, Refusal, obj, quoted, s, shown};
use crate::restore_prefetch::PrefetchedPayloads;
use detsim_formats::json::{canonicalize, sha256_hex};
use detsim_formats::scalars::{read_i32, read_id, read_object, read_request_id, read_u64, refuse_unknown_fields};
use detsim_formats::{RationalNs, Scope, Value};
use detsim_models::{StateValue, TickClock, decode_state, encode_state};
use std::collections::{BTreeMap, HashMap, HashSet};

const PAYLOAD_VERSION: f64 = 1.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Ready,
    Prepared,
    Failed,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Ready => "ready",
            Phase::Prepared => "prepared",
            Phase::Failed => "failed",
        }
    }
}

/// Everything fixed at Initialize: what the agent is.
#[derive(Debug, Clone)]
struct Identity {
    agent_id: String,
    model_spec: String,
    kind: ModelKind,
    strict: bool,
    params: Value,
    seed: i32,
    step_duration: RationalNs,
    tick_duration: RationalNs,
    profile_digest: String,
    dataset_digest: String,
    compatibility_digest: String,
}

/// Where the agent is on its timeline.
#[derive(Debug, Clone)]
struct Timeline {
    brain: Brain,
    clock: TickClock,
    observation: Value,
    epoch: String,
    committed_step: u64,
}

struct Slot {
    id: Identity,
    tl: Timeline,
    phase: Phase,
    /// Request ids that received this step's Prepare result (a retry may use a new id).
    prepared_ids: HashSet<String>,
    init_digest: String,
    init_result: Value,
}

struct Staged {
    token: String,
    checkpoint_id: String,
    scope: Scope,
    identity: Identity,
    timeline: Timeline,
}

pub struct HostReply {
    pub result: Value,
    pub attachment: Option<Vec<u8>>,
}

fn reply(result: Value) -> HostReply {
    HostReply {
        result,
        attachment: None,
    }
}

/// What the host needs from the runtime (workers/host-context.ts).
pub struct Ctx<'a> {
    pub session_id: &'a str,
    pub incarnation_id: &'a str,
    /// The run's checkpoint store (`--store-dir`): the only place store-files-v1 may read; None: no payload files.
    pub store_dir: Option<&'a str>,
    /// store-files-v1: payloads read and hashed ahead of their StageRestore (runtime.rs owns them).
    pub prefetched: &'a mut PrefetchedPayloads,
    pub progress: &'a mut dyn FnMut(),
}

/// SHA-256 of the text `detsim/no-dataset-v1`.
pub fn no_dataset_digest() -> String {
    sha256_hex(b"detsim/no-dataset-v1")
}

fn u64s(n: u64) -> Value {
    Value::String(n.to_string())
}

// ---- the batched Agent.* params -----------------------------------------------------------------

fn read_entries<'a>(
    params: &'a [(String, Value)],
    allowed: &[&str],
    method: &str,
) -> Outcome<Vec<&'a [(String, Value)]>> {
    refuse_unknown_fields(params, &["agents"], "params")?;
    let list = match member(params, "agents") {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => {
            return Err(Refusal::new(
                ErrorCode::InvalidArgument,
                format!("{method}: params.agents must be a non-empty list"),
            ));
        }
    };
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(list.len());
    for (i, raw) in list.iter().enumerate() {
        let e = read_object(Some(raw), &format!("params.agents[{i}]"))?;
        refuse_unknown_fields(e, allowed, &format!("params.agents[{i}]"))?;
        let id = read_id(member(e, "agentId"), &format!("params.agents[{i}].agentId"))?;
        if !seen.insert(id.to_string()) {
            return Err(Refusal::new(
                ErrorCode::InvalidArgument,
                format!("{method}: agent {id} appears twice"),
            ));
        }
        out.push(e);
    }
    Ok(out)
}

fn read_rewards(value: Option<&Value>, field: &str) -> Outcome<Vec<f64>> {
    let Some(Value::Array(items)) = value else {
        return Err(Refusal::new(
            ErrorCode::InvalidArgument,
            format!("{field} must be a list"),
        ));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, raw) in items.iter().enumerate() {
        let f = format!("{field}[{i}]");
        let r = read_object(Some(raw), &f)?;
        refuse_unknown_fields(r, &["eventId", "ruleId", "value"], &f)?;
        let value = match member(r, "value") {
            Some(Value::Number(n)) if n.is_finite() => *n,
            _ => {
                return Err(Refusal::new(
                    ErrorCode::InvalidArgument,
                    format!("{f}.value must be a finite number"),
                ));
            }
        };
        read_id(member(r, "eventId"), &format!("{f}.eventId"))?;
        read_id(member(r, "ruleId"), &format!("{f}.ruleId"))?;
        out.push(value);
    }
    Ok(out)
}

/// The operation key minus the constant parts (session and worker are fixed per process).
fn op_key(scope: &Scope, method: &str, agent_id: &str) -> String {
    format!(
        "{}\u{0}{}\u{0}{}\u{0}{}\u{0}{}",
        scope.session_id, scope.epoch, scope.step, method, agent_id
    )
}

struct StepEntry {
    step: u64,
    digest: String,
    result: Value,
}

struct PlanItem {
    agent_id: String,
    key: String,
    digest: String,
    cached: Option<Value>,
}

#[derive(Default)]
pub struct AgentHost {
    agents: BTreeMap<String, Slot>,
    staged: BTreeMap<String, Staged>,
    used_tokens: HashSet<String>,
    cache: HashMap<String, StepEntry>,
    /// The epoch of the last Initialize or activation (for Status).
    pub current_epoch: Option<String>,
}

impl AgentHost {
    pub fn state(&self) -> &'static str {
        if self.agents.is_empty() {
            return if self.staged.is_empty() {
                "uninitialized"
            } else {
                "staged-restore"
            };
        }
        let mut prepared = false;
        for a in self.agents.values() {
            if a.phase == Phase::Failed {
                return "failed";
            }
            if a.phase == Phase::Prepared {
                prepared = true;
            }
        }
        if prepared {
            "prepared"
        } else if self.staged.is_empty() {
            "ready"
        } else {
            "staged-restore"
        }
    }

    /// The lowest committed step over hosted agents (they move together).
    pub fn boundary(&self) -> Option<u64> {
        self.agents.values().map(|a| a.tl.committed_step).min()
    }

    // ---- Agent.Initialize -----------------------------------------------------------------------

    pub fn initialize(
        &mut self,
        method: &str,
        scope: &Option<Scope>,
        params: &[(String, Value)],
        ctx: &mut Ctx,
    ) -> Outcome<HostReply> {
        let scope = session_scope(scope, method, ctx.session_id)?;
        if scope.step != 0 {
            return Err(Refusal::new(
                ErrorCode::InvalidArgument,
                format!(
                    "Agent.Initialize: scope.step must be \"0\", not {}",
                    quoted(&scope.step.to_string())
                ),
            ));
        }
        let entries = read_entries(
            params,
            &["agentId", "model", "params", "seed", "stepDuration", "observation"],
            method,
        )?;
        // Validate and build every agent before installing any: a refusal leaves the worker untouched.
        let mut built: Vec<Slot> = Vec::new();
        let mut results = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let digest = digest_of(&obj(vec![
                ("method", s(method)),
                ("scope", scope.to_json()),
                ("entry", Value::Object(e.to_vec())),
            ]));
            let agent_id = member(e, "agentId").and_then(Value::as_str).unwrap_or_default();
            if let Some(existing) = self.agents.get(agent_id) {
                if existing.init_digest == digest && existing.tl.epoch == scope.epoch {
                    results.push(existing.init_result.clone());
                    continue;
                }
                return Err(Refusal::new(
                    ErrorCode::Conflict,
                    format!("Agent.Initialize: agent {agent_id} is already initialized with a different request"),
                ));
            }
            let slot = self.build_agent(e, i, &scope, digest)?;
            results.push(slot.init_result.clone());
            built.push(slot);
        }
        let any = !built.is_empty();
        for slot in built {
            self.agents.insert(slot.id.agent_id.clone(), slot);
        }
        if any {
            self.current_epoch = Some(scope.epoch.clone());
            (ctx.progress)();
        }
        Ok(reply(obj(vec![("agents", Value::Array(results))])))
    }

    fn build_agent(&self, e: &[(String, Value)], i: usize, scope: &Scope, init_digest: String) -> Outcome<Slot> {
        let field = format!("params.agents[{i}]");
        let agent_id = read_id(member(e, "agentId"), &format!("{field}.agentId"))?.to_string();
        let model_spec = match member(e, "model") {
            Some(Value::String(m)) if !m.is_empty() => m.clone(),
            _ => {
                return Err(Refusal::new(
                    ErrorCode::InvalidArgument,
                    format!("{field}.model must be a model name or module path"),
                ));
            }
        };
        let raw_params = read_object(member(e, "params"), &format!("{field}.params"))?;
        let seed = read_i32(member(e, "seed"), &format!("{field}.seed"))?;
        let step_duration = RationalNs::read_duration(member(e, "stepDuration"), &format!("{field}.stepDuration"))?;
        let observation =
            Value::Object(read_object(member(e, "observation"), &format!("{field}.observation"))?.to_vec());
        let identity = identity_for(&agent_id, &model_spec, raw_params, seed, step_duration, &field)?;
        let brain = Brain::initialize(identity.kind, &agent_id, seed, &identity.params)?;
        let clock = TickClock::new(step_duration, identity.tick_duration, RationalNs::ZERO, 0).map_err(|e| {
            Refusal::with_mutation(
                ErrorCode::BackendFailure,
                format!("agent {agent_id}: initialize failed: {}", e.message),
                Mutation::None,
            )
        })?;
        let init_result = obj(vec![
            ("agentId", s(&agent_id)),
            ("modelVersion", s(identity.kind.model_version())),
            ("plasticityVersion", s(identity.kind.plasticity_version())),
            ("profileDigest", s(&identity.profile_digest)),
            ("datasetDigest", s(&identity.dataset_digest)),
            ("tickDuration", identity.tick_duration.to_json()),
            ("committedStep", s("0")),
        ]);
        Ok(Slot {
            id: identity,
            tl: Timeline {
                brain,
                clock,
                observation,
                epoch: scope.epoch.clone(),
                committed_step: 0,
            },
            phase: Phase::Ready,
            prepared_ids: HashSet::new(),
            init_digest,
            init_result,
        })
    }

    // ---- Agent.Prepare --------------------------------------------------------------------------

    pub fn prepare(
        &mut self,
        method: &str,
        request_id: &str,
        scope: &Option<Scope>,
        params: &[(String, Value)],
        ctx: &mut Ctx,
    ) -> Outcome<HostReply> {
        let scope = session_scope(scope, method, ctx.session_id)?;
        let entries = read_entries(params, &["agentId"], method)?;
        let plan = self.plan_step(method, &scope, &entries, &|slot: &Slot| {
            if slot.phase != Phase::Ready {
                return Err(Refusal::new(
                    ErrorCode::InvalidPhase,
                    format!(
                        "agent {} is {}, not ready, at step {}",
                        slot.id.agent_id,
                        slot.phase.name(),
                        scope.step
                    ),
                ));
            }
            Ok(())
        })?;
        let mut out = Vec::with_capacity(plan.len());
        for p in plan {
            let slot = self.agents.get_mut(&p.agent_id).expect("planned agents exist");
            if let Some(cached) = p.cached {
                slot.prepared_ids.insert(request_id.to_string());
                out.push(cached);
                continue;
            }
            let ticks = match slot.tl.clock.advance() {
                Ok(t) => t,
                Err(e) => {
                    slot.phase = Phase::Failed;
                    return Err(Refusal::with_mutation(
                        ErrorCode::BackendFailure,
                        format!("agent {}: prepare failed: {}", slot.id.agent_id, e.message),
                        Mutation::Unknown,
                    ));
                }
            };
            let decision = slot.tl.brain.prepare(&slot.tl.observation, ticks);
            let remainder = slot
                .tl
                .clock
                .remainder()
                .map_err(|e| Refusal::with_mutation(ErrorCode::BackendFailure, e.message, Mutation::Unknown))?;
            let result = obj(vec![
                ("agentId", s(&slot.id.agent_id)),
                ("ticksAdvanced", u64s(ticks)),
                ("brainTicks", u64s(slot.tl.clock.brain_ticks)),
                ("remainder", remainder.to_json()),
                ("decision", decision),
            ]);
            slot.phase = Phase::Prepared;
            slot.prepared_ids = HashSet::from([request_id.to_string()]);
            self.cache.insert(
                p.key,
                StepEntry {
                    step: slot.tl.committed_step,
                    digest: p.digest,
                    result: result.clone(),
                },
            );
            (ctx.progress)();
            out.push(result);
        }
        Ok(reply(obj(vec![("agents", Value::Array(out))])))
    }

    // ---- Agent.Commit ---------------------------------------------------------------------------

    pub fn commit(
        &mut self,
        method: &str,
        scope: &Option<Scope>,
        params: &[(String, Value)],
        ctx: &mut Ctx,
    ) -> Outcome<HostReply> {
        let scope = session_scope(scope, method, ctx.session_id)?;
        let entries = read_entries(
            params,
            &["agentId", "preparedRequestId", "observation", "rewards"],
            method,
        )?;
        let mut parsed: HashMap<String, (String, Value, Vec<f64>)> = HashMap::new();
        for (i, e) in entries.iter().enumerate() {
            let f = format!("params.agents[{i}]");
            let prep = read_request_id(member(e, "preparedRequestId"), &format!("{f}.preparedRequestId"))?.to_string();
            let observation =
                Value::Object(read_object(member(e, "observation"), &format!("{f}.observation"))?.to_vec());
            let rewards = read_rewards(member(e, "rewards"), &format!("{f}.rewards"))?;
            let id = member(e, "agentId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            parsed.insert(id, (prep, observation, rewards));
        }
        let plan = self.plan_step(method, &scope, &entries, &|slot: &Slot| {
            if slot.phase != Phase::Prepared {
                return Err(Refusal::new(
                    ErrorCode::InvalidPhase,
                    format!(
                        "agent {} is {}, not prepared, at step {}",
                        slot.id.agent_id,
                        slot.phase.name(),
                        scope.step
                    ),
                ));
            }
            let prep = &parsed[&slot.id.agent_id].0;
            if !slot.prepared_ids.contains(prep) {
                return Err(Refusal::new(
                    ErrorCode::Conflict,
                    format!(
                        "agent {}: preparedRequestId {prep} is not the Prepare that prepared step {}",
                        slot.id.agent_id, scope.step
                    ),
                ));
            }
            Ok(())
        })?;
        let mut out = Vec::with_capacity(plan.len());
        for p in plan {
            if let Some(cached) = p.cached {
                out.push(cached);
                continue;
            }
            let slot = self.agents.get_mut(&p.agent_id).expect("planned agents exist");
            let (_, observation, rewards) = parsed.remove(&p.agent_id).expect("parsed above");
            let step = slot.tl.committed_step;
            slot.tl.brain.commit(&rewards);
            slot.tl.observation = observation;
            slot.tl.committed_step = step + 1;
            slot.phase = Phase::Ready;
            slot.prepared_ids.clear();
            let result = obj(vec![
                ("agentId", s(&slot.id.agent_id)),
                ("committedStep", u64s(step + 1)),
            ]);
            self.cache.insert(
                p.key,
                StepEntry {
                    step,
                    digest: p.digest,
                    result: result.clone(),
                },
            );
            (ctx.progress)();
            out.push(result);
        }
        // Keep results of the current and the previous step only.
        if let Some(b) = self.boundary()
            && b >= 2
        {
            self.cache.retain(|_, v| v.step >= b - 2);
        }
        Ok(reply(obj(vec![("agents", Value::Array(out))])))
    }

    /// Epoch, dedup (before any phase check), then step and phase checks; throws before anything mutates.
    fn plan_step(
        &self,
        method: &str,
        scope: &Scope,
        entries: &[&[(String, Value)]],
        phase_check: &dyn Fn(&Slot) -> Outcome<()>,
    ) -> Outcome<Vec<PlanItem>> {
        let mut plan = Vec::with_capacity(entries.len());
        for e in entries {
            let agent_id = member(e, "agentId").and_then(Value::as_str).unwrap_or_default();
            let slot = self.slot(agent_id)?;
            check_epoch(scope, &slot.tl.epoch, &format!("agent {agent_id}"))?;
            let key = op_key(scope, method, agent_id);
            // The key already fixes method and scope: the entry's canonical text identifies the body.
            let digest = canonicalize(&Value::Object(e.to_vec())).expect("parsed values are canonicalizable");
            if let Some(hit) = self.cache.get(&key) {
                if hit.digest != digest {
                    return Err(Refusal::new(
                        ErrorCode::Conflict,
                        format!(
                            "agent {agent_id}: {method} for step {} was already answered for a different body",
                            scope.step
                        ),
                    ));
                }
                plan.push(PlanItem {
                    agent_id: agent_id.to_string(),
                    key,
                    digest,
                    cached: Some(hit.result.clone()),
                });
                continue;
            }
            check_step(scope, slot.tl.committed_step, &format!("agent {agent_id}"))?;
            phase_check(slot)?;
            plan.push(PlanItem {
                agent_id: agent_id.to_string(),
                key,
                digest,
                cached: None,
            });
        }
        Ok(plan)
    }

    fn slot(&self, agent_id: &str) -> Outcome<&Slot> {
        let Some(slot) = self.agents.get(agent_id) else {
            if self.agents.is_empty() {
                return Err(Refusal::new(
                    ErrorCode::InvalidPhase,
                    format!("agent {agent_id} is not initialized on this worker"),
                ));
            }
            return Err(Refusal::new(
                ErrorCode::InvalidArgument,
                format!("agent {agent_id} is not hosted by this worker"),
            ));
        };
        if slot.phase == Phase::Failed {
            return Err(Refusal::new(
                ErrorCode::InvalidPhase,
                format!("agent {agent_id} failed earlier and must be restored"),
            ));
        }
        Ok(slot)
    }

    // ---- State.Capture --------------------------------------------------------------------------

    /// State.Capture, and whether it came out held. The payload is always the reply's attachment.
    /// `hold_from` is the size from which the capture is held (store-files-v1; capture-hold-from-v1
    /// names it, `hold: true` alone is 0): a held capture's payload the runtime keeps for
    /// State.WritePayload instead of sending it, and nothing is hashed here (the reply's payload is
    /// the size alone: the write gives the digest). A shorter payload, or no `hold_from`, is an
    /// ordinary capture: digest and size, the attachment sent.
    pub fn capture(
        &mut self,
        method: &str,
        scope: &Option<Scope>,
        params: &[(String, Value)],
        hold_from: Option<u64>,
        ctx: &mut Ctx,
    ) -> Outcome<(HostReply, bool)> {
        let scope = session_scope(scope, method, ctx.session_id)?;
        refuse_unknown_fields(params, &["checkpointId", "agentId"], "params")?;
        let checkpoint_id = read_id(member(params, "checkpointId"), "params.checkpointId")?.to_string();
        let agent_id = read_agent_id(params)?;
        let slot = self.slot(&agent_id)?;
        check_epoch(&scope, &slot.tl.epoch, &format!("agent {agent_id}"))?;
        let boundary = check_step(&scope, slot.tl.committed_step, &format!("agent {agent_id}"))?;
        if slot.phase != Phase::Ready {
            return Err(Refusal::new(
                ErrorCode::InvalidPhase,
                format!(
                    "agent {agent_id} is {}: capture only at a committed boundary",
                    slot.phase.name()
                ),
            ));
        }
        let model_state = decode_state(&slot.tl.brain.capture(&agent_id)?).map_err(|e| {
            Refusal::new(
                ErrorCode::BackendFailure,
                format!("agent {agent_id}: capture state cannot be encoded: {}", e.message),
            )
        })?;
        let id = &slot.id;
        let remainder = slot
            .tl
            .clock
            .remainder()
            .map_err(|e| Refusal::new(ErrorCode::BackendFailure, e.message))?;
        let json = |v: Value| to_state(&v);
        let payload = StateValue::Map(vec![
            ("payloadVersion".into(), StateValue::Number(PAYLOAD_VERSION)),
            ("kind".into(), StateValue::Str("agent".into())),
            ("agentId".into(), StateValue::Str(agent_id.clone())),
            ("checkpointId".into(), StateValue::Str(checkpoint_id.clone())),
            ("sourceScope".into(), json(scope.to_json())),
            ("committedStep".into(), StateValue::Str(boundary.to_string())),
            ("model".into(), StateValue::Str(id.model_spec.clone())),
            ("params".into(), json(id.params.clone())),
            ("strict".into(), StateValue::Bool(id.strict)),
            ("seed".into(), StateValue::Number(id.seed as f64)),
            ("stepDuration".into(), json(id.step_duration.to_json())),
            ("modelVersion".into(), StateValue::Str(id.kind.model_version().into())),
            (
                "plasticityVersion".into(),
                StateValue::Str(id.kind.plasticity_version().into()),
            ),
            ("profileDigest".into(), StateValue::Str(id.profile_digest.clone())),
            ("datasetDigest".into(), StateValue::Str(id.dataset_digest.clone())),
            (
                "accumulator".into(),
                json(obj(vec![
                    ("tickDuration", id.tick_duration.to_json()),
                    ("remainder", remainder.to_json()),
                    ("brainTicks", u64s(slot.tl.clock.brain_ticks)),
                ])),
            ),
            ("observation".into(), json(slot.tl.observation.clone())),
            ("state".into(), model_state),
        ]);
        let bytes = encode_state(&payload).map_err(|e| {
            Refusal::new(
                ErrorCode::BackendFailure,
                format!("agent {agent_id}: capture state cannot be encoded: {}", e.message),
            )
        })?;
        // Held or not is decided here, where the size is known, at every capture.
        let held = hold_from.is_some_and(|from| bytes.len() as u64 >= from);
        // Hash exactly the bytes that travel; never re-encode to verify.
        let digest = (!held).then(|| sha256_hex(&bytes));
        let result = obj(vec![
            ("checkpointId", s(&checkpoint_id)),
            ("agentId", s(&agent_id)),
            ("boundary", u64s(boundary)),
            ("compatibilityDigest", s(&id.compatibility_digest)),
            ("payload", captured_payload(digest, bytes.len())),
        ]);
        let reply = HostReply {
            result,
            attachment: Some(bytes),
        };
        Ok((reply, held))
    }

    // ---- State.StageRestore ---------------------------------------------------------------------

    pub fn stage_restore(
        &mut self,
        method: &str,
        scope: &Option<Scope>,
        params: &[(String, Value)],
        attachment: Option<&[u8]>,
        ctx: &mut Ctx,
    ) -> Outcome<HostReply> {
        let scope = session_scope(scope, method, ctx.session_id)?;
        let staged = read_stage_params(params, &scope)?;
        let agent_id = staged.agent_id.clone();
        let checkpoint_id = staged.checkpoint_id.clone();
        let live = self.agents.get(&agent_id);
        if let Some(live) = live {
            if live.phase == Phase::Prepared {
                return Err(Refusal::new(
                    ErrorCode::InvalidPhase,
                    format!("agent {agent_id} is prepared: restore only from ready or uninitialized"),
                ));
            }
            if scope.epoch == live.tl.epoch {
                return Err(Refusal::new(
                    ErrorCode::StaleEpoch,
                    format!(
                        "agent {agent_id}: the restore epoch {} must be new (it is the current epoch)",
                        scope.epoch
                    ),
                ));
            }
        }
        if self.staged.contains_key(&agent_id) {
            return Err(Refusal::new(
                ErrorCode::Conflict,
                format!("agent {agent_id} already has a staged restore"),
            ));
        }
        let bytes = staged_payload(attachment, &staged, ctx.store_dir, ctx.prefetched)?;
        let payload = read_payload(&bytes, &agent_id, &checkpoint_id, &staged.source_scope)?;
        let seed = match payload::get(&payload, "seed") {
            Some(StateValue::Number(n)) => *n as i32,
            _ => unreachable!("read_payload checked the seed"),
        };
        // Compatibility is recomputed from this worker's own config (or, on a fresh worker, from the
        // model code it would load) plus the payload's seed, never taken from the payload.
        let identity = match live {
            Some(live) => {
                let mut id = live.id.clone();
                id.compatibility_digest =
                    compatibility_of(&agent_id, &id.profile_digest, &id.dataset_digest, id.kind, seed);
                id.seed = seed;
                id
            }
            None => {
                let model = match payload::get(&payload, "model") {
                    Some(StateValue::Str(m)) => m.clone(),
                    _ => unreachable!("read_payload checked the model"),
                };
                let params = payload::get(&payload, "params")
                    .and_then(payload::to_json)
                    .unwrap_or(Value::Object(vec![]));
                let step_duration = payload::get(&payload, "stepDuration").and_then(payload::to_json);
                let step_duration = RationalNs::read(step_duration.as_ref(), "payload.stepDuration")?;
                let mut id = identity_for(
                    &agent_id,
                    &model,
                    params.as_object().unwrap_or(&[]),
                    seed,
                    step_duration,
                    "payload",
                )?;
                if let Some(StateValue::Bool(strict)) = payload::get(&payload, "strict") {
                    id.strict = *strict;
                }
                id
            }
        };
        let live_fields = [
            ("modelVersion", s(identity.kind.model_version())),
            ("plasticityVersion", s(identity.kind.plasticity_version())),
            ("datasetDigest", s(&identity.dataset_digest)),
            ("profileDigest", s(&identity.profile_digest)),
        ];
        let recorded = |field: &str| payload::get(&payload, field).and_then(payload::to_json);
        if let Some(mismatch) = first_mismatch(recorded, &live_fields) {
            return Err(Refusal::new(
                ErrorCode::IncompatibleState,
                format!("agent {agent_id}: {mismatch}"),
            ));
        }
        let compat = &staged.compatibility_digest;
        if identity.compatibility_digest != *compat {
            return Err(Refusal::new(
                ErrorCode::IncompatibleState,
                format!(
                    "agent {agent_id}: compatibilityDigest {compat} differs from the recomputed {} (seed {})",
                    identity.compatibility_digest, identity.seed
                ),
            ));
        }
        // A fork's new params: verified above under the payload's own, the state is restored with these.
        let identity = match &staged.rebind {
            Some(r) => rebound(identity, r)?,
            None => identity,
        };
        let timeline = timeline_from(&payload, &identity, &scope)?;
        let token = restore_token(&checkpoint_id, &scope, &staged.payload_digest, ctx.incarnation_id);
        self.staged.insert(
            agent_id.clone(),
            Staged {
                token: token.clone(),
                checkpoint_id: checkpoint_id.clone(),
                scope,
                identity,
                timeline,
            },
        );
        Ok(reply(obj(vec![
            ("checkpointId", s(&checkpoint_id)),
            ("agentId", s(&agent_id)),
            ("restoreToken", s(&token)),
        ])))
    }

    // ---- State.ActivateRestore ------------------------------------------------------------------

    pub fn activate_restore(
        &mut self,
        method: &str,
        scope: &Option<Scope>,
        params: &[(String, Value)],
        ctx: &mut Ctx,
    ) -> Outcome<HostReply> {
        let scope = session_scope(scope, method, ctx.session_id)?;
        refuse_unknown_fields(params, &["restoreToken", "agentId"], "params")?;
        let token = read_id(member(params, "restoreToken"), "params.restoreToken")?.to_string();
        let agent_id = read_agent_id(params)?;
        if self.used_tokens.contains(&token) {
            return Err(Refusal::new(
                ErrorCode::Conflict,
                format!("agent {agent_id}: restore token {token} was already activated"),
            ));
        }
        let Some(staged) = self.staged.get(&agent_id) else {
            return Err(Refusal::new(
                ErrorCode::InvalidPhase,
                format!("agent {agent_id}: nothing is staged to activate"),
            ));
        };
        if staged.token != token {
            return Err(Refusal::new(
                ErrorCode::IdentityMismatch,
                format!("agent {agent_id}: restore token {token} is not the staged one (the staged restore is kept)"),
            ));
        }
        if staged.scope.epoch != scope.epoch || staged.scope.step != scope.step {
            return Err(Refusal::new(
                ErrorCode::IdentityMismatch,
                format!(
                    "agent {agent_id}: scope {}/{} differs from the staged {}/{}",
                    scope.epoch, scope.step, staged.scope.epoch, staged.scope.step
                ),
            ));
        }
        let staged = self.staged.remove(&agent_id).expect("checked above");
        let old = self.agents.remove(&agent_id);
        let (init_digest, init_result) = old
            .map(|o| (o.init_digest, o.init_result))
            .unwrap_or_else(|| (String::new(), Value::Object(vec![])));
        self.agents.insert(
            agent_id.clone(),
            Slot {
                id: staged.identity,
                tl: staged.timeline,
                phase: Phase::Ready,
                prepared_ids: HashSet::new(),
                init_digest,
                init_result,
            },
        );
        self.used_tokens.insert(token);
        let suffix = format!("\u{0}{agent_id}");
        self.cache.retain(|k, _| !k.ends_with(&suffix));
        self.current_epoch = Some(scope.epoch.clone());
        (ctx.progress)();
        Ok(reply(obj(vec![
            ("checkpointId", s(&staged.checkpoint_id)),
            ("agentId", s(&agent_id)),
            ("committedStep", u64s(scope.step)),
            ("observation", Value::Null),
        ])))
    }
}

/// A fork's new params (workers/fork-rebind.ts): the identity they give, once the model accepts the
/// change (every changed resolved param in its fork_params) and it is the profile the fork recorded.
fn rebound(identity: Identity, rebind: &Rebind) -> Outcome<Identity> {
    let agent_id = &identity.agent_id;
    let mut next = identity_for(
        agent_id,
        &identity.model_spec,
        &rebind.params,
        identity.seed,
        identity.step_duration,
        "params.rebind",
    )?;
    next.strict = identity.strict;
    let accepted = next.kind.fork_params();
    let (before, after) = (
        identity.params.as_object().unwrap_or(&[]),
        next.params.as_object().unwrap_or(&[]),
    );
    let mut keys: Vec<&String> = before.iter().chain(after.iter()).map(|(k, _)| k).collect();
    keys.sort();
    keys.dedup();
    let changed = keys
        .into_iter()
        .find(|k| member(before, k) != member(after, k) && !accepted.contains(&k.as_str()));
    if let Some(k) = changed {
        let list = if accepted.is_empty() {
            "none".to_string()
        } else {
            accepted.join(", ")
        };
        return Err(Refusal::new(
            ErrorCode::IncompatibleState,
            format!(
                "agent {agent_id}: params.{k}: model {} does not accept a change on restore (it accepts: {list})",
                next.kind.model_version()
            ),
        ));
    }
    if next.profile_digest != rebind.profile_digest {
        return Err(Refusal::new(
            ErrorCode::IncompatibleState,
            format!(
                "agent {agent_id}: params.rebind.profileDigest {} differs from the recomputed {}",
                rebind.profile_digest, next.profile_digest
            ),
        ));
    }
    Ok(next)
}

/// Resolve the model and everything the profile and compatibility digests cover.
fn identity_for(
    agent_id: &str,
    model_spec: &str,
    raw_params: &[(String, Value)],
    seed: i32,
    step_duration: RationalNs,
    field: &str,
) -> Outcome<Identity> {
    let kind = ModelKind::resolve(model_spec)
        .map_err(|m| Refusal::new(ErrorCode::InvalidArgument, format!("{field}.model: {m}")))?;
    // The runtime's own `strict` flag is split off the model's params (built-ins default to strict).
    let mut strict = true;
    let mut params = Vec::with_capacity(raw_params.len());
    for (k, v) in raw_params {
        if k == "strict" {
            match v {
                Value::Bool(b) => strict = *b,
                _ => {
                    return Err(Refusal::new(
                        ErrorCode::InvalidArgument,
                        format!("{field}.params.strict must be true or false"),
                    ));
                }
            }
        } else {
            params.push((k.clone(), v.clone()));
        }
    }
    let params = kind
        .resolve_params(&Value::Object(params))
        .map_err(|m| Refusal::new(ErrorCode::InvalidArgument, format!("{field}.{m}")))?;
    let tick_duration = kind.tick_duration();
    let dataset_digest = no_dataset_digest();
    let profile = profile_digest(model_spec, kind.model_version(), &params);
    let compat = compatibility_of(agent_id, &profile, &dataset_digest, kind, seed);
    Ok(Identity {
        agent_id: agent_id.to_string(),
        model_spec: model_spec.to_string(),
        kind,
        strict,
        params,
        seed,
        step_duration,
        tick_duration,
        profile_digest: profile,
        dataset_digest,
        compatibility_digest: compat,
    })
}

fn compatibility_of(agent_id: &str, profile_digest: &str, dataset_digest: &str, kind: ModelKind, seed: i32) -> String {
    agent_compatibility_digest(&AgentCompatibility {
        agent_id,
        profile_digest,
        dataset_digest,
        model_version: kind.model_version(),
        plasticity_version: kind.plasticity_version(),
        seed,
    })
}

fn read_payload(
    bytes: &[u8],
    agent_id: &str,
    checkpoint_id: &str,
    source_scope: &Scope,
) -> Outcome<Vec<(String, StateValue)>> {
    let incompatible = |m: String| Refusal::new(ErrorCode::IncompatibleState, format!("agent {agent_id}: {m}"));
    let payload = match decode_state(bytes) {
        Ok(StateValue::Map(m)) => m,
        Ok(_) => {
            return Err(incompatible(
                "payload is not a state payload: payload: not an object".into(),
            ));
        }
        Err(e) => return Err(incompatible(format!("payload is not a state payload: {}", e.message))),
    };
    let get = |k: &str| payload::get(&payload, k);
    let expect = |field: &str, ok: bool, what: String| {
        if ok {
            Ok(())
        } else {
            Err(incompatible(format!("payload {field} {what}")))
        }
    };
    let js = |k: &str| shown(get(k).and_then(payload::to_json).as_ref());
    expect(
        "payloadVersion",
        matches!(get("payloadVersion"), Some(StateValue::Number(n)) if *n == PAYLOAD_VERSION),
        "must be 1".into(),
    )?;
    expect(
        "kind",
        matches!(get("kind"), Some(StateValue::Str(k)) if k == "agent"),
        "must be \"agent\"".into(),
    )?;
    expect(
        "agentId",
        matches!(get("agentId"), Some(StateValue::Str(k)) if k == agent_id),
        format!("is {}, not {agent_id}", js("agentId")),
    )?;
    expect(
        "checkpointId",
        matches!(get("checkpointId"), Some(StateValue::Str(k)) if k == checkpoint_id),
        format!("is {}, not {checkpoint_id}", js("checkpointId")),
    )?;
    let recorded_scope = get("sourceScope").and_then(payload::to_json).unwrap_or(Value::Null);
    expect(
        "sourceScope",
        digest_of(&recorded_scope) == digest_of(&source_scope.to_json()),
        "differs from params.sourceScope".into(),
    )?;
    let step = source_scope.step.to_string();
    expect(
        "committedStep",
        matches!(get("committedStep"), Some(StateValue::Str(k)) if *k == step),
        format!("is {}, not {step}", js("committedStep")),
    )?;
    expect(
        "model",
        matches!(get("model"), Some(StateValue::Str(_))),
        "must be a string".into(),
    )?;
    expect(
        "params",
        matches!(get("params"), Some(StateValue::Map(_))),
        "must be an object".into(),
    )?;
    expect(
        "observation",
        matches!(get("observation"), Some(StateValue::Map(_))),
        "must be an object".into(),
    )?;
    expect(
        "strict",
        matches!(get("strict"), Some(StateValue::Bool(_))),
        "must be a boolean".into(),
    )?;
    let seed = get("seed").and_then(payload::to_json);
    read_i32(seed.as_ref(), "payload.seed").map_err(|e| incompatible(e.message))?;
    Ok(payload)
}

/// Rebuild the timeline from a payload into new objects (the live agent is untouched until activation).
fn timeline_from(payload: &[(String, StateValue)], identity: &Identity, scope: &Scope) -> Outcome<Timeline> {
    let agent_id = &identity.agent_id;
    let incompatible = |m: String| Refusal::new(ErrorCode::IncompatibleState, format!("agent {agent_id}: {m}"));
    let clock = (|| -> Result<TickClock, String> {
        let acc = payload::get(payload, "accumulator").and_then(payload::to_json);
        let acc = read_object(acc.as_ref(), "payload.accumulator").map_err(|e| e.message)?;
        let tick = RationalNs::read_duration(member(acc, "tickDuration"), "payload.accumulator.tickDuration")
            .map_err(|e| e.message)?;
        if tick != identity.tick_duration {
            return Err(format!(
                "payload tickDuration {tick} differs from the model's {}",
                identity.tick_duration
            ));
        }
        let sd = payload::get(payload, "stepDuration").and_then(payload::to_json);
        let step = RationalNs::read_duration(sd.as_ref(), "payload.stepDuration").map_err(|e| e.message)?;
        if step != identity.step_duration {
            return Err(format!(
                "payload stepDuration {step} differs from this agent's {}",
                identity.step_duration
            ));
        }
        let remainder =
            RationalNs::read(member(acc, "remainder"), "payload.accumulator.remainder").map_err(|e| e.message)?;
        let brain_ticks =
            read_u64(member(acc, "brainTicks"), "payload.accumulator.brainTicks").map_err(|e| e.message)?;
        TickClock::new(step, tick, remainder, brain_ticks).map_err(|e| e.message)
    })()
    .map_err(incompatible)?;
    let observation = payload::get(payload, "observation")
        .and_then(payload::to_json)
        .ok_or_else(|| incompatible("payload observation must be an object".into()))?;
    let state = payload::get(payload, "state").cloned().unwrap_or(StateValue::Nil);
    let state_bytes = encode_state(&state).map_err(|e| {
        Refusal::new(
            ErrorCode::BackendFailure,
            format!("agent {agent_id}: restore failed: {}", e.message),
        )
    })?;
    let brain = Brain::restore(identity.kind, agent_id, &state_bytes, &identity.params)?;
    Ok(Timeline {
        brain,
        clock,
        observation,
        epoch: scope.epoch.clone(),
        committed_step: scope.step,
    })
}
