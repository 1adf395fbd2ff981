// The Rust walker and lif against the reference model vectors (test/workers/vectors/models-v1.json,
// recorded from independent re-implementations of the models' RULES), read here by Rust itself:
// the port is checked against the vectors directly, not only against the TypeScript models it
// was ported from (test/cross-lang/models.test.ts). A few end states are also pinned as literals,
// so a rewritten vector file (UPDATE_MODEL_VECTORS=1) cannot carry a changed model past this test.
// Not forage (the environment model has no Rust port).
use std::path::PathBuf;

use detsim_formats::{Value, parse_strict, sha256_hex};
use detsim_models::{Lif, Walker};

// End states pinned outside the vector file (the values models-v1.json recorded when the vectors
// were frozen): walker after 2000 draws from seed -123456789, lif after its 30 steps.
const WALKER_RNG_AFTER_2000: i32 = -6806080;
const LIF_RNG_AFTER: i32 = 713847881;
const LIF_MEMBRANE_F64LE_SHA256: &str = "250f52cb2d6f1966a29f6ac771fa1cd185b8f8531396c8a4026c0fe635617e0c";
const LIF_FIRST_SPIKES: [u64; 4] = [158, 143, 143, 142];

fn vectors() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../test/workers/vectors/models-v1.json");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    parse_strict(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn field<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key).unwrap_or_else(|| panic!("vector field {key} is missing"))
}

fn int(v: &Value, key: &str) -> i64 {
    let x = field(v, key)
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number"));
    assert!(x.fract() == 0.0, "{key} is not an integer");
    x as i64
}

fn steps(v: &Value) -> &[Value] {
    field(v, "steps").as_array().expect("steps is an array")
}

fn mv(step: &Value) -> &str {
    field(field(step, "decision"), "move")
        .as_str()
        .expect("decision.move is a string")
}

#[test]
fn walker_reproduces_the_vector_decisions_and_rng_state() {
    let f = vectors();
    let v = field(&f, "walker");
    let mut w = Walker::initialize(int(v, "seed") as i32, field(v, "params")).unwrap();
    let recorded = steps(v);
    assert_eq!(recorded.len(), 300);
    for (k, s) in recorded.iter().enumerate() {
        assert_eq!(w.prepare(field(s, "observation")), mv(s), "walker step {k}");
    }
    // The vector's RNG state is after 2000 steps (one draw per step; the first 300 recorded).
    let no_food = parse_strict(b"{}").unwrap();
    for _ in recorded.len()..2000 {
        w.prepare(&no_food);
    }
    assert_eq!(w.rng.state as i64, int(v, "rngStateAfter"));
    assert_eq!(w.rng.state, WALKER_RNG_AFTER_2000);
}

#[test]
fn lif_reproduces_the_vector_spikes_moves_rng_state_and_membrane() {
    let f = vectors();
    let v = field(&f, "lif");
    let mut lif = Lif::initialize(int(v, "seed") as i32, field(v, "params")).unwrap();
    let recorded = steps(v);
    assert_eq!(recorded.len(), 30);
    for (k, s) in recorded.iter().enumerate() {
        let (got_move, got_spikes) = lif.prepare(field(s, "observation"), int(s, "ticks") as u64);
        let want: Vec<u64> = field(field(s, "decision"), "spikes")
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as u64)
            .collect();
        assert_eq!((got_move, got_spikes.to_vec()), (mv(s), want), "lif step {k}");
        if k == 0 {
            assert_eq!(got_spikes, LIF_FIRST_SPIKES);
        }
    }
    let after = field(v, "after");
    let membrane: Vec<u8> = lif.membrane.iter().flat_map(|m| m.to_le_bytes()).collect();
    assert_eq!(lif.rng.state as i64, int(after, "rngState"));
    assert_eq!(
        sha256_hex(&membrane),
        field(after, "membraneF64LeSha256").as_str().unwrap()
    );
    assert_eq!(lif.rng.state, LIF_RNG_AFTER);
    assert_eq!(sha256_hex(&membrane), LIF_MEMBRANE_F64LE_SHA256);
}
