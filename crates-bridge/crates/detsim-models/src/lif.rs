// The built-in agent `lif` (workers/models/lif.ts), bit for bit in IEEE-754: a leaky
// integrate-and-fire network with Xorshift32 noise kicks and a 4-way spike-count readout. The
// normative RULES are in the TypeScript file's header. Not the worker: ticks come from the caller.
use crate::params::{model_error, only_int_param};
use crate::state_codec::{StateValue, decode_state, encode_state};
use crate::walker::{DIRECTIONS, food_offset, rng_seed};
use detsim_formats::json::Value;
use detsim_formats::{DetsimError, Xorshift32};

pub const MODEL_VERSION: &str = "lif-v1";
pub const PLASTICITY_VERSION: &str = "none-v1";
pub const KICKS_PER_TICK: usize = 300;
const MAX_NEURONS: u32 = 67_108_864;

/// {neurons: integer 4..67108864, default 1000}; nothing else.
pub fn resolve_params(params: &Value) -> Result<u32, DetsimError> {
    only_int_param(params, "neurons", 1000, 4, MAX_NEURONS)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Lif {
    pub rng: Xorshift32,
    pub membrane: Vec<f64>,
    pub baseline: Vec<f32>,
    pub reward_total: f64,
}

impl Lif {
    pub fn initialize(seed: i32, params: &Value) -> Result<Lif, DetsimError> {
        let n = resolve_params(params)? as usize;
        let mut rng = Xorshift32::new(rng_seed(seed));
        // Math.fround: round to nearest f32, as `as f32` does.
        let baseline = (0..n).map(|_| (rng.next_f64() * 0.06) as f32).collect();
        Ok(Lif {
            rng,
            membrane: vec![0.0; n],
            baseline,
            reward_total: 0.0,
        })
    }

    /// Run `ticks` 1-ms ticks; returns (move, spikes per direction).
    pub fn prepare(&mut self, observation: &Value, ticks: u64) -> (&'static str, [u64; 4]) {
        let mut drive = [0.0f64; 4];
        if let Some((dx, dy)) = food_offset(observation) {
            drive = [
                if dy < 0.0 { 0.05 } else { 0.0 },
                if dx > 0.0 { 0.05 } else { 0.0 },
                if dy > 0.0 { 0.05 } else { 0.0 },
                if dx < 0.0 { 0.05 } else { 0.0 },
            ];
        }
        let mut spikes = [0u64; 4];
        let n = self.membrane.len() as u32;
        for _ in 0..ticks {
            for _ in 0..KICKS_PER_TICK {
                let j = (self.rng.next_uint() % n) as usize;
                self.membrane[j] += 0.42;
            }
            for i in 0..self.membrane.len() {
                // Left to right, no fused multiply-add: (m * 0.9 + baseline) + drive.
                let mut m = self.membrane[i] * 0.9 + self.baseline[i] as f64 + drive[i & 3];
                if m >= 1.0 {
                    spikes[i & 3] += 1;
                    m = 0.0;
                }
                self.membrane[i] = m;
            }
        }
        let mut best = 0;
        for d in 1..4 {
            if spikes[d] > spikes[best] {
                best = d;
            }
        }
        (if spikes[best] == 0 { "stay" } else { DIRECTIONS[best] }, spikes)
    }

    pub fn commit(&mut self, reward_values: &[f64]) {
        for v in reward_values {
            self.reward_total += v;
        }
    }

    /// {baseline: f32 LE bytes, membrane: f64 LE bytes, neurons, rewardTotal, rng} as msgpack.
    pub fn capture(&self) -> Result<Vec<u8>, DetsimError> {
        encode_state(&StateValue::Map(vec![
            (
                "baseline".into(),
                StateValue::Bin(self.baseline.iter().flat_map(|x| x.to_le_bytes()).collect()),
            ),
            (
                "membrane".into(),
                StateValue::Bin(self.membrane.iter().flat_map(|x| x.to_le_bytes()).collect()),
            ),
            ("neurons".into(), StateValue::Number(self.membrane.len() as f64)),
            ("rewardTotal".into(), StateValue::Number(self.reward_total)),
            ("rng".into(), StateValue::Number(self.rng.state as f64)),
        ]))
    }

    /// The checks and messages of lif.ts `restore`, in its order.
    pub fn restore(bytes: &[u8], params: &Value) -> Result<Lif, DetsimError> {
        let decoded = decode_state(bytes)?;
        let empty = vec![];
        let members = match &decoded {
            StateValue::Map(m) => m,
            _ => &empty,
        };
        let get = |k: &str| members.iter().find(|(key, _)| key == k).map(|(_, v)| v);
        let n = resolve_params(params)? as usize;
        match get("neurons") {
            Some(StateValue::Number(x)) if *x == n as f64 => {}
            other => {
                let shown = match other {
                    Some(StateValue::Number(x)) => detsim_formats::json::serialize_number(*x).unwrap_or_default(),
                    None => "undefined".into(),
                    Some(_) => "a non-number".into(),
                };
                return Err(model_error(format!(
                    "lif payload: neurons {shown} differs from params.neurons {n}"
                )));
            }
        }
        let membrane = match get("membrane") {
            Some(StateValue::Bin(b)) if b.len() == n * 8 => b
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            _ => return Err(model_error("lif payload: membrane must be n * 8 bytes".into())),
        };
        let baseline = match get("baseline") {
            Some(StateValue::Bin(b)) if b.len() == n * 4 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            _ => return Err(model_error("lif payload: baseline must be n * 4 bytes".into())),
        };
        match (get("rewardTotal"), get("rng")) {
            (Some(StateValue::Number(total)), Some(StateValue::Number(rng))) => {
                // `d.rng | 0`: ToInt32 (non-finite is 0; otherwise truncate and wrap modulo 2^32).
                let state = if rng.is_finite() {
                    (rng.trunc().rem_euclid(4294967296.0) as u64 as u32) as i32
                } else {
                    0
                };
                Ok(Lif {
                    rng: Xorshift32 { state },
                    membrane,
                    baseline,
                    reward_total: *total,
                })
            }
            _ => Err(model_error("lif payload: rewardTotal and rng must be numbers".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use detsim_formats::parse_strict;

    #[test]
    fn spikes_follow_the_drive_and_capture_round_trips() {
        let params = parse_strict(br#"{"neurons":64}"#).unwrap();
        let mut lif = Lif::initialize(7, &params).unwrap();
        assert!(lif.baseline.iter().all(|b| (0.0..0.06).contains(b)));
        let east = parse_strict(br#"{"foodDx":2,"foodDy":0}"#).unwrap();
        let mut twin = lif.clone();
        let (mv, spikes) = lif.prepare(&east, 17);
        // Readout: the lowest direction with the most spikes.
        let best = (0..4).fold(0, |b, d| if spikes[d] > spikes[b] { d } else { b });
        assert_eq!(mv, DIRECTIONS[best]);
        assert!(spikes.iter().sum::<u64>() > 0);
        assert_eq!(twin.prepare(&east, 17), (mv, spikes)); // deterministic
        assert_eq!(twin.prepare(&east, 0), ("stay", [0, 0, 0, 0])); // no ticks, no spikes
        lif.commit(&[1.25]);
        let bytes = lif.capture().unwrap();
        assert_eq!(Lif::restore(&bytes, &params).unwrap(), lif);
        let other = parse_strict(br#"{"neurons":65}"#).unwrap();
        assert_eq!(
            Lif::restore(&bytes, &other).unwrap_err().message,
            "lif payload: neurons 64 differs from params.neurons 65"
        );
        assert_eq!(
            resolve_params(&parse_strict(br#"{"neurons":3}"#).unwrap())
                .unwrap_err()
                .message,
            "params.neurons: 3 must be an integer in [4, 67108864]"
        );
    }
}
