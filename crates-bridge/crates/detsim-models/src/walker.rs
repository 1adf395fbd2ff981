// The built-in agent `walker` (workers/models/walker.ts), bit for bit: one Xorshift32 draw per
// step, a greedy move toward food with random exploration, and a reward total. The normative
// RULES are in the TypeScript file's header. Not the worker: no ticks, idempotency or wire here.
use crate::params::{model_error, only_int_param};
use crate::state_codec::{StateValue, decode_state, encode_state};
use detsim_formats::json::Value;
use detsim_formats::{DetsimError, Xorshift32};

pub const MODEL_VERSION: &str = "walker-v1";
pub const PLASTICITY_VERSION: &str = "none-v1";
/// Seed 0 would lock Xorshift32 at 0 forever: the built-in models substitute this constant.
pub const ZERO_SEED_SUBSTITUTE: i32 = 0x2545f491;
/// The four moving directions in index order 0..3.
pub const DIRECTIONS: [&str; 4] = ["north", "east", "south", "west"];

pub fn rng_seed(seed: i32) -> i32 {
    if seed == 0 { ZERO_SEED_SUBSTITUTE } else { seed }
}

/// The model's params: {explore: integer 1..1024, default 8}; nothing else.
pub fn resolve_params(params: &Value) -> Result<u32, DetsimError> {
    only_int_param(params, "explore", 8, 1, 1024)
}

/// Food offset fields of an observation (moves.ts foodOffset): both present as integers, or none.
pub fn food_offset(observation: &Value) -> Option<(f64, f64)> {
    match (observation.get("foodDx"), observation.get("foodDy")) {
        (Some(Value::Number(dx)), Some(Value::Number(dy))) if dx.fract() == 0.0 && dy.fract() == 0.0 => {
            Some((*dx, *dy))
        }
        _ => None,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Walker {
    pub rng: Xorshift32,
    pub explore: u32,
    pub reward_total: f64,
}

impl Walker {
    pub fn initialize(seed: i32, params: &Value) -> Result<Walker, DetsimError> {
        Ok(Walker {
            rng: Xorshift32::new(rng_seed(seed)),
            explore: resolve_params(params)?,
            reward_total: 0.0,
        })
    }

    /// Exactly one draw per step; returns the move of the decision {move}.
    pub fn prepare(&mut self, observation: &Value) -> &'static str {
        let r = self.rng.next_uint();
        match food_offset(observation) {
            Some((dx, dy)) if !r.is_multiple_of(self.explore) => {
                if dx == 0.0 && dy == 0.0 {
                    "stay"
                } else if dx.abs() >= dy.abs() {
                    if dx > 0.0 { "east" } else { "west" }
                } else if dy > 0.0 {
                    "south"
                } else {
                    "north"
                }
            }
            _ => DIRECTIONS[((r >> 3) % 4) as usize],
        }
    }

    /// Rewards in the given order, f64 addition.
    pub fn commit(&mut self, reward_values: &[f64]) {
        for v in reward_values {
            self.reward_total += v;
        }
    }

    /// {rewardTotal: f64, rng: i32 state} as msgpack with sorted keys.
    pub fn capture(&self) -> Result<Vec<u8>, DetsimError> {
        encode_state(&StateValue::Map(vec![
            ("rewardTotal".into(), StateValue::Number(self.reward_total)),
            ("rng".into(), StateValue::Number(self.rng.state as f64)),
        ]))
    }

    pub fn restore(bytes: &[u8], params: &Value) -> Result<Walker, DetsimError> {
        let StateValue::Map(members) = decode_state(bytes)? else {
            return Err(model_error(
                "walker payload: rewardTotal and rng must be numbers".into(),
            ));
        };
        let get = |k: &str| members.iter().find(|(key, _)| key == k).map(|(_, v)| v);
        match (get("rewardTotal"), get("rng")) {
            (Some(StateValue::Number(total)), Some(StateValue::Number(rng))) if rng.fract() == 0.0 => {
                // `d.rng | 0`: ToInt32 (wrap modulo 2^32).
                let state = (rng.rem_euclid(4294967296.0) as u64 as u32) as i32;
                Ok(Walker {
                    rng: Xorshift32 { state },
                    explore: resolve_params(params)?,
                    reward_total: *total,
                })
            }
            _ => Err(model_error(
                "walker payload: rewardTotal and rng must be numbers".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use detsim_formats::parse_strict;

    #[test]
    fn params_default_bound_and_refuse_unknown_fields() {
        assert_eq!(resolve_params(&parse_strict(b"{}").unwrap()).unwrap(), 8);
        assert_eq!(
            resolve_params(&parse_strict(br#"{"explore":null}"#).unwrap()).unwrap(),
            8
        );
        assert_eq!(
            resolve_params(&parse_strict(br#"{"explore":1024}"#).unwrap()).unwrap(),
            1024
        );
        let e = resolve_params(&parse_strict(br#"{"explore":0}"#).unwrap()).unwrap_err();
        assert_eq!(e.message, "params.explore: 0 must be an integer in [1, 1024]");
        let e = resolve_params(&parse_strict(br#"{"explor":3}"#).unwrap()).unwrap_err();
        assert_eq!(e.message, "params: unknown field \"explor\" (allowed: explore)");
    }

    #[test]
    fn one_draw_per_step_and_greedy_moves_toward_food() {
        let params = parse_strict(br#"{"explore":1024}"#).unwrap();
        let mut w = Walker::initialize(22222, &params).unwrap();
        let mut reference = Xorshift32::new(22222);
        let east = parse_strict(br#"{"foodDx":3,"foodDy":-1}"#).unwrap();
        for _ in 0..50 {
            let r = reference.next_uint();
            let m = w.prepare(&east);
            assert_eq!(
                m,
                if r.is_multiple_of(1024) {
                    DIRECTIONS[((r >> 3) % 4) as usize]
                } else {
                    "east"
                }
            );
        }
        assert_eq!(w.rng, reference);
        let none = parse_strict(br#"{"foodDx":1.5,"foodDy":0}"#).unwrap();
        let r = reference.next_uint();
        assert_eq!(w.prepare(&none), DIRECTIONS[((r >> 3) % 4) as usize]);
    }

    #[test]
    fn seed_zero_is_substituted_and_capture_round_trips() {
        let params = parse_strict(b"{}").unwrap();
        let mut w = Walker::initialize(0, &params).unwrap();
        assert_eq!(w.rng.state, ZERO_SEED_SUBSTITUTE);
        w.commit(&[0.5, -2.25]);
        let bytes = w.capture().unwrap();
        assert_eq!(Walker::restore(&bytes, &params).unwrap(), w);
    }
}
