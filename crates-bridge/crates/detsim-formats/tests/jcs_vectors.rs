// The official RFC 8785 vectors (cyberphone/json-canonicalization), copied into the repository at
// fixtures/jcs/rfc8785 (provenance and checksums in its README and SHA256SUMS): six input/output
// pairs (and their hex forms) and the first 10,000 ES6 number lines. Never ignored: a missing
// vector file fails. Not detsim's own cases (tests/strict_cases.rs).
mod common;

use detsim_formats::json::{Value, canonicalize, parse_strict, serialize_number};

const CASES: [&str; 6] = ["arrays", "french", "structures", "unicode", "values", "weird"];

fn jcs_dir() -> std::path::PathBuf {
    common::jcs_dir()
}

#[test]
fn the_six_official_input_output_pairs_canonicalize_exactly() {
    let dir = jcs_dir();
    for name in CASES {
        let input = std::fs::read(dir.join(format!("input/{name}.json"))).unwrap();
        let output = std::fs::read(dir.join(format!("output/{name}.json"))).unwrap();
        let hex = std::fs::read_to_string(dir.join(format!("outhex/{name}.txt"))).unwrap();
        let from_hex: Vec<u8> = hex
            .split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect();
        assert_eq!(from_hex, output, "{name}: outhex and output agree");
        let ours = canonicalize(&parse_strict(&input).unwrap()).unwrap().into_bytes();
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&output),
            "{name}"
        );
        assert_eq!(ours, output, "{name}");
        // Canonical output is a fixed point.
        assert_eq!(
            canonicalize(&parse_strict(&output).unwrap()).unwrap().into_bytes(),
            output,
            "{name}"
        );
    }
}

#[test]
fn the_first_10000_es6_number_lines_print_exactly() {
    let dir = jcs_dir();
    let text = std::fs::read_to_string(dir.join("es6testfile100m-first10000.txt")).unwrap();
    let mut count = 0;
    for line in text.lines() {
        let (hex, want) = line.split_once(',').unwrap();
        let bits = u64::from_str_radix(hex, 16).unwrap();
        let x = f64::from_bits(bits);
        assert_eq!(serialize_number(x).unwrap(), want, "line {} ({hex})", count + 1);
        // And the printed text parses back to the same double (integers beyond 2^53 are not JSON for detsim).
        match parse_strict(want.as_bytes()) {
            Ok(Value::Number(back)) => assert_eq!(back, if x == 0.0 { 0.0 } else { x }, "{want}"),
            Ok(other) => panic!("{want} parsed as {other:?}"),
            Err(e) => assert_eq!(e.reason, "struct_unsafe_integer", "{want}: {e}"),
        }
        count += 1;
    }
    assert_eq!(count, 10_000);
}

#[test]
fn appendix_b_samples_including_the_refused_non_finite_values() {
    let samples = [
        ("0000000000000000", "0"),
        ("8000000000000000", "0"),
        ("0000000000000001", "5e-324"),
        ("8000000000000001", "-5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("44b52d02c7e14af6", "1e+23"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("444b1ae4d6e2ef4f", "999999999999999900000"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("41b3de4355555553", "333333333.3333332"),
        ("becbf647612f3696", "-0.0000033333333333333333"),
        ("4340000000000000", "9007199254740992"),
    ];
    for (hex, want) in samples {
        assert_eq!(
            serialize_number(f64::from_bits(u64::from_str_radix(hex, 16).unwrap())).unwrap(),
            want,
            "{hex}"
        );
    }
    for hex in ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"] {
        let e = serialize_number(f64::from_bits(u64::from_str_radix(hex, 16).unwrap())).unwrap_err();
        assert_eq!(e.reason, "struct_non_finite_number");
    }
}
