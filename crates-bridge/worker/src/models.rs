// The agent models this worker hosts (built-ins `walker` and `lif` from detsim-models) behind one
// enum, with what identity needs: versions, resolved params, tick duration. Not the host: ticks,
// idempotency and payloads are agent_host.rs. JavaScript module models cannot run here.
use crate::refusal::{ErrorCode, Mutation, Outcome, Refusal, obj};
use detsim_formats::{RationalNs, Value};
use detsim_models::{Lif, Walker, lif, walker};

pub const BUILTIN_AGENT_MODELS: [&str; 2] = ["walker", "lif"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    Walker,
    Lif,
}

impl ModelKind {
    /// Resolve a model spec as workers/models/registry.ts does, minus module loading.
    pub fn resolve(spec: &str) -> Result<ModelKind, String> {
        match spec {
            "walker" => Ok(ModelKind::Walker),
            "lif" => Ok(ModelKind::Lif),
            _ if spec.contains('/') || spec.ends_with(".js") || spec.ends_with(".ts") || spec.ends_with(".mjs") => {
                Err(format!(
                    "model {}: module models are JavaScript; the Rust worker hosts only the built-ins ({})",
                    crate::refusal::quoted(spec),
                    BUILTIN_AGENT_MODELS.join(", ")
                ))
            }
            _ => Err(format!(
                "model {}: not a built-in agent model ({}) nor a module path",
                crate::refusal::quoted(spec),
                BUILTIN_AGENT_MODELS.join(", ")
            )),
        }
    }

    pub fn model_version(self) -> &'static str {
        match self {
            ModelKind::Walker => walker::MODEL_VERSION,
            ModelKind::Lif => lif::MODEL_VERSION,
        }
    }

    pub fn plasticity_version(self) -> &'static str {
        match self {
            ModelKind::Walker => walker::PLASTICITY_VERSION,
            ModelKind::Lif => lif::PLASTICITY_VERSION,
        }
    }

    /// Neither built-in sets a tick: the SDK default of 1 ms.
    pub fn tick_duration(self) -> RationalNs {
        RationalNs::of(1_000_000, 1, "tickDuration").expect("1 ms is a valid duration")
    }

    /// Validate params and fill defaults (the value the profile digest covers); the message is the model's.
    pub fn resolve_params(self, params: &Value) -> Result<Value, String> {
        Ok(match self {
            ModelKind::Walker => obj(vec![(
                "explore",
                Value::Number(walker::resolve_params(params).map_err(|e| e.message)? as f64),
            )]),
            ModelKind::Lif => obj(vec![(
                "neurons",
                Value::Number(lif::resolve_params(params).map_err(|e| e.message)? as f64),
            )]),
        })
    }
}

/// A live model state.
#[derive(Debug, Clone)]
pub enum Brain {
    Walker(Walker),
    Lif(Lif),
}

fn failed(agent_id: &str, callback: &str, message: &str, mutation: Mutation) -> Refusal {
    Refusal::with_mutation(
        ErrorCode::BackendFailure,
        format!("agent {agent_id}: {callback} failed: {message}"),
        mutation,
    )
}

impl Brain {
    pub fn initialize(kind: ModelKind, agent_id: &str, seed: i32, params: &Value) -> Outcome<Brain> {
        let r = match kind {
            ModelKind::Walker => Walker::initialize(seed, params).map(Brain::Walker),
            ModelKind::Lif => Lif::initialize(seed, params).map(Brain::Lif),
        };
        r.map_err(|e| failed(agent_id, "initialize", &e.message, Mutation::None))
    }

    /// Run `ticks` ticks and return the decision object (walker {move}, lif {move, spikes}).
    pub fn prepare(&mut self, observation: &Value, ticks: u64) -> Value {
        match self {
            Brain::Walker(w) => obj(vec![("move", Value::String(w.prepare(observation).into()))]),
            Brain::Lif(l) => {
                let (mv, spikes) = l.prepare(observation, ticks);
                obj(vec![
                    ("move", Value::String(mv.into())),
                    (
                        "spikes",
                        Value::Array(spikes.iter().map(|n| Value::Number(*n as f64)).collect()),
                    ),
                ])
            }
        }
    }

    pub fn commit(&mut self, reward_values: &[f64]) {
        match self {
            Brain::Walker(w) => w.commit(reward_values),
            Brain::Lif(l) => l.commit(reward_values),
        }
    }

    /// The model's own captured state bytes (a msgpack map).
    pub fn capture(&self, agent_id: &str) -> Outcome<Vec<u8>> {
        let r = match self {
            Brain::Walker(w) => w.capture(),
            Brain::Lif(l) => l.capture(),
        };
        r.map_err(|e| failed(agent_id, "capture", &e.message, Mutation::None))
    }

    pub fn restore(kind: ModelKind, agent_id: &str, bytes: &[u8], params: &Value) -> Outcome<Brain> {
        let r = match kind {
            ModelKind::Walker => Walker::restore(bytes, params).map(Brain::Walker),
            ModelKind::Lif => Lif::restore(bytes, params).map(Brain::Lif),
        };
        r.map_err(|e| failed(agent_id, "restore", &e.message, Mutation::None))
    }
}
