// The published reference vectors, read from the same files as the TypeScript tests
// (fixtures/reference/seed-vectors.json and checkpoint-envelope.json): one vector change is seen
// by both languages. Not property tests (those are the cross-language tests in test/cross-lang/).
mod common;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use detsim_formats::envelope::{FOOTER_BYTES, HEADER_BYTES, TABLE_ENTRY_BYTES, check_of};
use detsim_formats::json::{Value, canonical_bytes, sha256_hex};
use detsim_formats::seed::{derive_seed, derive_seeds, seed_material};
use detsim_formats::{Xorshift32, decode_envelope, encode_envelope};

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{key} is not a string"))
}

fn n(v: &Value, key: &str) -> f64 {
    v.get(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{key} is not a number"))
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{key} is not an array"))
}

/// U64 layout fields are decimal strings in the fixture, small ones plain numbers.
fn num_or_str(v: &Value, key: &str) -> u64 {
    match v.get(key) {
        Some(Value::String(t)) => t.parse().unwrap(),
        Some(Value::Number(x)) => *x as u64,
        _ => panic!("{key} missing"),
    }
}

#[test]
fn all_20_seed_vectors_reproduce_material_digest_and_seed() {
    let f = common::read_fixture("seed-vectors.json");
    assert_eq!(s(&f, "prefix"), detsim_formats::seed::SEED_PREFIX);
    let vectors = arr(&f, "vectors");
    assert_eq!(vectors.len(), 20);
    for v in vectors {
        let (master, agent) = (s(v, "masterSeed"), s(v, "agentId"));
        let material = seed_material(master, agent);
        assert_eq!(material, s(v, "material").as_bytes(), "{master}/{agent}");
        assert_eq!(sha256_hex(&material), s(v, "materialDigest"), "{master}/{agent}");
        assert_eq!(
            derive_seed(master, agent).unwrap() as f64,
            n(v, "seed"),
            "{master}/{agent}"
        );
    }
}

#[test]
fn the_composition_reproduces_in_order_without_collisions() {
    let f = common::read_fixture("seed-vectors.json");
    let c = f.get("composition").unwrap();
    let ids: Vec<&str> = arr(c, "agentIds").iter().map(|v| v.as_str().unwrap()).collect();
    let want: Vec<f64> = arr(c, "seeds").iter().map(|v| v.as_f64().unwrap()).collect();
    let derived = derive_seeds(s(c, "masterSeed"), &ids).unwrap();
    assert_eq!(
        derived.seeds.iter().map(|(_, seed)| *seed as f64).collect::<Vec<_>>(),
        want
    );
    assert_eq!(derived.seeds.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(), ids);
    assert!(derived.collisions.is_empty());
}

#[test]
fn the_three_invalid_inputs_are_refused() {
    let f = common::read_fixture("seed-vectors.json");
    let invalid = arr(&f, "invalid");
    assert_eq!(invalid.len(), 3);
    for bad in invalid {
        let master = s(bad, "masterSeed");
        let err = match bad.get("agentIds") {
            Some(ids) => {
                let ids: Vec<&str> = ids.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
                derive_seeds(master, &ids).unwrap_err()
            }
            None => derive_seed(master, s(bad, "agentId")).unwrap_err(),
        };
        let expected = if bad.get("agentIds").is_some() {
            "struct_duplicate_agent_id"
        } else {
            "struct_invalid_id"
        };
        assert_eq!(err.reason, expected, "{}", s(bad, "reason"));
    }
}

#[test]
fn xorshift32_seed_22222_matches_the_spec() {
    let mut rng = Xorshift32::new(22222);
    assert_eq!(
        [rng.next_uint(), rng.next_uint(), rng.next_uint(), rng.next_uint()],
        [1374414818, 2413927497, 829730269, 1025812730]
    );
}

struct EnvelopeFixture {
    manifest: Value,
    payloads: Vec<(String, Vec<u8>)>,
    bytes: Vec<u8>,
    layout: Value,
    corruptions: Vec<Value>,
}

fn envelope_fixture() -> EnvelopeFixture {
    let f = common::read_fixture("checkpoint-envelope.json");
    let payloads = arr(&f, "payloads")
        .iter()
        .map(|p| (s(p, "name").to_string(), B64.decode(s(p, "base64")).unwrap()))
        .collect();
    let env = f.get("envelope").unwrap();
    EnvelopeFixture {
        manifest: f.get("manifest").unwrap().clone(),
        payloads,
        bytes: B64.decode(s(env, "base64")).unwrap(),
        layout: env.get("layout").unwrap().clone(),
        corruptions: arr(&f, "corruption").to_vec(),
    }
}

#[test]
fn the_envelope_encodes_byte_for_byte() {
    let f = envelope_fixture();
    let ours = encode_envelope(&f.manifest, &f.payloads).unwrap();
    assert_eq!(ours.len(), f.bytes.len());
    let first_diff = ours.iter().zip(&f.bytes).position(|(a, b)| a != b);
    assert_eq!(first_diff, None, "first differing byte");
    // The same bytes when the manifest omits `payloads` (the writer computes it).
    let Value::Object(mut members) = f.manifest.clone() else {
        panic!("manifest is an object")
    };
    members.retain(|(k, _)| k != "payloads");
    assert_eq!(encode_envelope(&Value::Object(members), &f.payloads).unwrap(), f.bytes);
}

#[test]
fn the_envelope_decodes_to_the_fixture_with_every_layout_offset() {
    let f = envelope_fixture();
    let d = decode_envelope(&f.bytes).unwrap();
    assert_eq!(
        canonical_bytes(&d.manifest).unwrap(),
        canonical_bytes(&f.manifest).unwrap()
    );
    assert_eq!(d.payloads, f.payloads);
    let l = &f.layout;
    assert_eq!(num_or_str(l, "headerBytes"), HEADER_BYTES as u64);
    assert_eq!(num_or_str(l, "manifestOffset"), HEADER_BYTES as u64);
    assert_eq!(num_or_str(l, "manifestBytes"), d.layout.manifest_bytes as u64);
    assert_eq!(num_or_str(l, "tableOffset"), d.layout.table_offset as u64);
    assert_eq!(num_or_str(l, "tableEntryBytes"), TABLE_ENTRY_BYTES as u64);
    assert_eq!(num_or_str(l, "footerOffset"), d.layout.footer_offset as u64);
    assert_eq!(num_or_str(l, "footerBytes"), FOOTER_BYTES as u64);
    assert_eq!(num_or_str(l, "totalBytes"), d.layout.total_bytes as u64);
    let entries = arr(l, "entries");
    assert_eq!(entries.len(), d.layout.entries.len());
    for (want, got) in entries.iter().zip(&d.layout.entries) {
        assert_eq!(s(want, "name"), got.name);
        assert_eq!(num_or_str(want, "offset"), got.offset);
        assert_eq!(num_or_str(want, "byteLength"), got.byte_length);
        assert_eq!(s(want, "digest"), got.digest);
    }
    assert_eq!(d.envelope_digest, sha256_hex(&f.bytes));
}

#[test]
fn all_six_corruptions_are_refused_by_the_right_check() {
    let f = envelope_fixture();
    assert_eq!(f.corruptions.len(), 6);
    let footer = num_or_str(&f.layout, "footerOffset") as usize;
    // Which check refuses each published corruption. The footer digest (check 2) covers the
    // manifest and the payloads, so it refuses their flips before checks 3 and 5 are reached
    // (the payload digest itself is exercised behind a resealed footer below).
    let expected = |name: &str, offset: usize| -> (u8, &'static str) {
        match name {
            "a flipped magic byte" if offset == 0 => (1, "struct_envelope_magic"),
            "an unsupported version" if offset == 8 => (1, "struct_envelope_magic"),
            "a flipped manifest byte" if offset == HEADER_BYTES => (2, "audit_envelope_digest"),
            "a flipped payload byte" if offset < footer => (2, "audit_envelope_digest"),
            "a flipped footer digest byte" if offset == footer + 8 => (2, "audit_envelope_digest"),
            "a flipped footer magic byte" if offset == footer + 40 => (2, "audit_envelope_length"),
            other => panic!("unexpected corruption {other:?} at {offset}: update this test with the fixture"),
        }
    };
    for c in &f.corruptions {
        let (name, offset) = (s(c, "name"), n(c, "offset") as usize);
        let mut bytes = f.bytes.clone();
        bytes[offset] ^= 0x01;
        let e = decode_envelope(&bytes).unwrap_err();
        let (check, reason) = expected(name, offset);
        assert_eq!(
            (check_of(&e), e.reason.as_str()),
            (Some(check), reason),
            "{name}: {}",
            e.message
        );
        assert!(e.message.starts_with(&format!("check {check} (")), "{}", e.message);
    }
}

#[test]
fn a_flipped_payload_byte_behind_a_resealed_footer_is_caught_by_the_payload_digest() {
    let f = envelope_fixture();
    let first_payload = num_or_str(&arr(&f.layout, "entries")[0], "offset") as usize;
    let mut bytes = f.bytes.clone();
    bytes[first_payload] ^= 0x01;
    let footer = bytes.len() - FOOTER_BYTES;
    let digest = detsim_formats::json::sha256(&bytes[..footer]);
    bytes[footer + 8..footer + 40].copy_from_slice(&digest);
    let e = decode_envelope(&bytes).unwrap_err();
    assert_eq!(
        (check_of(&e), e.reason.as_str(), e.field.as_deref()),
        (Some(5), "audit_payload_digest_mismatch", Some("table[0].digest"))
    );
}

#[test]
fn the_legacy_magic_is_named_as_the_legacy_format() {
    let f = envelope_fixture();
    let mut bytes = f.bytes.clone();
    bytes[0..8].copy_from_slice(b"FLYSIM01");
    let e = decode_envelope(&bytes).unwrap_err();
    assert_eq!(
        (check_of(&e), e.reason.as_str()),
        (Some(1), "struct_envelope_legacy_format")
    );
    assert!(e.message.contains("legacy FLYSIM01 format"), "{}", e.message);
}
