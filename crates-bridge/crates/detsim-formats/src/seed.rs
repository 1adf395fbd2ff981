// seed-derivation-v1 (docs/spec/seed-derivation.md), deciding as core/formats/seed.ts does:
// one independent i32 seed per agent from a recorded master seed and a stable agent id.
// Not an RNG: the kernel RNG is xorshift.rs.
use crate::error::{DetsimError, Reason, Result};
use crate::json::Value;
use crate::scalars::is_u64;

pub const SEED_ALGORITHM: &str = "seed-derivation-v1";
pub const SEED_PREFIX: &str = "flybrain/seed-derivation-v1";
const MAX_ROUNDS: usize = 4;

/// The digest a derivation uses: SHA-256 in production; injectable so the all-zero-lanes path is testable.
pub type DigestFn<'a> = &'a mut dyn FnMut(&[u8]) -> [u8; 32];

pub fn seed_material(master_seed: &str, agent_id: &str) -> Vec<u8> {
    format!("{SEED_PREFIX}\n{master_seed}\n{agent_id}\n").into_bytes()
}

/// The first nonzero big-endian u32 lane of a digest as a two's-complement i32, or None.
pub fn first_nonzero_lane(digest: &[u8; 32]) -> Option<i32> {
    digest
        .chunks_exact(4)
        .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .find(|&lane| lane != 0)
}

fn check_master(master_seed: &str) -> Result<()> {
    if is_u64(master_seed) {
        return Ok(());
    }
    Err(crate::scalars::u64_error(
        Some(&Value::String(master_seed.to_string())),
        "masterSeed",
    ))
}

/// Derive one agent's seed with SHA-256.
pub fn derive_seed(master_seed: &str, agent_id: &str) -> Result<i32> {
    derive_seed_with(master_seed, agent_id, &mut |m| crate::json::sha256(m))
}

/// Derive one agent's seed with the given digest (tests only need anything but SHA-256).
pub fn derive_seed_with(master_seed: &str, agent_id: &str, digest: DigestFn) -> Result<i32> {
    check_master(master_seed)?;
    crate::scalars::check_id(agent_id, "agentId")?;
    let material = seed_material(master_seed, agent_id);
    for round in 0..MAX_ROUNDS {
        let input = if round == 0 {
            material.clone()
        } else {
            [material.as_slice(), format!("{round}\n").as_bytes()].concat()
        };
        if let Some(lane) = first_nonzero_lane(&digest(&input)) {
            return Ok(lane);
        }
    }
    Err(DetsimError::at(
        Reason::StructSeedAllZero,
        format!("seed derivation for {agent_id} found only zero lanes after {MAX_ROUNDS} rounds"),
        "agentId",
    ))
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedCollision {
    pub seed: i32,
    pub agent_ids: [String; 2],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedSeeds {
    pub master_seed: String,
    /// (agentId, seed) in the order given.
    pub seeds: Vec<(String, i32)>,
    /// Pairs of different ids that derived the same seed: a warning, never silent.
    pub collisions: Vec<SeedCollision>,
}

impl DerivedSeeds {
    /// The same JSON as the TypeScript `DerivedSeeds` object.
    pub fn to_json(&self) -> Value {
        let seeds = self
            .seeds
            .iter()
            .map(|(id, seed)| {
                Value::Object(vec![
                    ("agentId".into(), id.as_str().into()),
                    ("seed".into(), Value::Number(*seed as f64)),
                ])
            })
            .collect();
        let collisions = self
            .collisions
            .iter()
            .map(|c| {
                let ids = Value::Array(c.agent_ids.iter().map(|id| id.as_str().into()).collect());
                Value::Object(vec![
                    ("seed".into(), Value::Number(c.seed as f64)),
                    ("agentIds".into(), ids),
                ])
            })
            .collect();
        Value::Object(vec![
            ("algorithm".into(), SEED_ALGORITHM.into()),
            ("masterSeed".into(), self.master_seed.as_str().into()),
            ("seeds".into(), Value::Array(seeds)),
            ("collisions".into(), Value::Array(collisions)),
        ])
    }
}

pub fn derive_seeds(master_seed: &str, agent_ids: &[&str]) -> Result<DerivedSeeds> {
    derive_seeds_with(master_seed, agent_ids, &mut |m| crate::json::sha256(m))
}

/// Derive seeds for a composition in the order given; a repeated id is refused.
pub fn derive_seeds_with(master_seed: &str, agent_ids: &[&str], digest: DigestFn) -> Result<DerivedSeeds> {
    check_master(master_seed)?;
    let mut seen = std::collections::HashSet::new();
    for (i, id) in agent_ids.iter().enumerate() {
        let field = format!("agentIds[{i}]");
        crate::scalars::check_id(id, &field)?;
        if !seen.insert(*id) {
            return Err(DetsimError::at(
                Reason::StructDuplicateAgentId,
                format!("{field}: \"{id}\" is repeated; equal ids would share a seed"),
                field,
            ));
        }
    }
    let mut seeds = Vec::with_capacity(agent_ids.len());
    for id in agent_ids {
        seeds.push((id.to_string(), derive_seed_with(master_seed, id, &mut *digest)?));
    }
    let mut first_by_seed: std::collections::HashMap<i32, &str> = std::collections::HashMap::new();
    let mut collisions = Vec::new();
    for (id, seed) in &seeds {
        match first_by_seed.get(seed) {
            Some(other) => collisions.push(SeedCollision {
                seed: *seed,
                agent_ids: [other.to_string(), id.clone()],
            }),
            None => {
                first_by_seed.insert(*seed, id);
            }
        }
    }
    Ok(DerivedSeeds {
        master_seed: master_seed.to_string(),
        seeds,
        collisions,
    })
}

pub fn collision_warning(c: &SeedCollision) -> String {
    format!(
        "warning [ident_seed_collision]: agents {} and {} derived the same seed {}",
        c.agent_ids[0], c.agent_ids[1], c.seed
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_non_canonical_master_seeds_rather_than_normalising_them() {
        for m in ["01", "", "-1", "+1", "1.0", "1e3", " 1", "18446744073709551616", "0x10"] {
            let e = derive_seed(m, "fly-a").unwrap_err();
            assert_eq!(
                (e.reason, e.field.as_deref()),
                (Reason::StructInvalidU64, Some("masterSeed")),
                "{m}"
            );
        }
        // Same value as the TypeScript edge-case test.
        assert_eq!(derive_seed("18446744073709551615", "fly-a").unwrap(), -125244523);
    }

    #[test]
    fn rehashes_with_round_suffix_when_all_lanes_are_zero() {
        let mut calls: Vec<String> = vec![];
        let mut digest = |m: &[u8]| {
            calls.push(String::from_utf8(m.to_vec()).unwrap());
            let mut d = [0u8; 32];
            if calls.len() > 1 {
                d[12] = 0x80; // lanes 0-2 zero, lane 3 = 0x80000000
            }
            d
        };
        assert_eq!(derive_seed_with("7", "fly-a", &mut digest).unwrap(), i32::MIN);
        assert_eq!(
            calls,
            [
                "flybrain/seed-derivation-v1\n7\nfly-a\n",
                "flybrain/seed-derivation-v1\n7\nfly-a\n1\n"
            ]
        );
    }

    #[test]
    fn fails_after_four_all_zero_rounds_never_a_fallback_seed() {
        let mut suffixes: Vec<String> = vec![];
        let mut zero = |m: &[u8]| {
            let text = String::from_utf8(m.to_vec()).unwrap();
            suffixes.push(text.split('\n').skip(3).collect::<Vec<_>>().join("|"));
            [0u8; 32]
        };
        let e = derive_seed_with("7", "fly-a", &mut zero).unwrap_err();
        assert_eq!(e.reason, Reason::StructSeedAllZero);
        assert!(e.message.contains("zero lanes"));
        assert_eq!(suffixes, ["", "1|", "2|", "3|"]);
    }

    #[test]
    fn warns_naming_both_ids_when_two_ids_collide() {
        let mut constant = |_: &[u8]| {
            let mut d = [0u8; 32];
            d[3] = 5;
            d
        };
        let derived = derive_seeds_with("1", &["ant", "bee", "cat"], &mut constant).unwrap();
        let pairs: Vec<_> = derived
            .collisions
            .iter()
            .map(|c| (c.seed, c.agent_ids.clone()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                (5, ["ant".to_string(), "bee".to_string()]),
                (5, ["ant".to_string(), "cat".to_string()])
            ]
        );
        assert_eq!(
            collision_warning(&derived.collisions[0]),
            "warning [ident_seed_collision]: agents ant and bee derived the same seed 5"
        );
    }

    #[test]
    fn refuses_a_repeated_id_naming_its_position() {
        let e = derive_seeds("0", &["fly-a", "fly-b", "fly-a"]).unwrap_err();
        assert_eq!(
            (e.reason, e.field.as_deref()),
            (Reason::StructDuplicateAgentId, Some("agentIds[2]"))
        );
        let e = derive_seeds("0", &["fly-a", "Fly-B"]).unwrap_err();
        assert_eq!(
            (e.reason, e.field.as_deref()),
            (Reason::StructInvalidId, Some("agentIds[1]"))
        );
    }
}
