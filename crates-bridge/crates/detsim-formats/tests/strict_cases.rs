// detsim's own strict-parser and writer cases, read from the same file as the TypeScript tests
// (fixtures/jcs/strict-cases.json). In-memory writer cases that Rust cannot represent (undefined,
// bigint, functions, Maps, lone surrogates in a Rust String, cycles) are listed and skipped by name.
mod common;

use detsim_formats::json::{Value, canonicalize, parse_strict};

fn cases(kind: &str) -> Vec<Value> {
    let path = common::repo_root().join("fixtures/jcs/strict-cases.json");
    let f = parse_strict(&std::fs::read(&path).unwrap()).unwrap();
    f.get(kind)
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{kind} missing"))
        .to_vec()
}

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The input bytes of a case: `input` text, `inputHex` bytes, or `nest` built by repetition.
fn input(case: &Value) -> Vec<u8> {
    if let Some(text) = s(case, "input") {
        return text.as_bytes().to_vec();
    }
    if let Some(hex) = s(case, "inputHex") {
        return (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
    }
    let nest = case.get("nest").expect("input, inputHex or nest");
    let depth = nest.get("depth").and_then(Value::as_f64).unwrap() as usize;
    let (open, close, inner) = (
        s(nest, "open").unwrap(),
        s(nest, "close").unwrap(),
        s(nest, "inner").unwrap(),
    );
    format!("{}{inner}{}", open.repeat(depth), close.repeat(depth)).into_bytes()
}

#[test]
fn every_refuse_case_is_refused_with_its_reason() {
    let all = cases("refuse");
    assert!(all.len() >= 50);
    for case in &all {
        let name = s(case, "name").unwrap();
        let got = parse_strict(&input(case));
        let e = got.err().unwrap_or_else(|| panic!("{name}: accepted"));
        assert_eq!(e.reason, s(case, "reason").unwrap(), "{name}: {e}");
    }
}

#[test]
fn every_canonical_case_prints_its_output() {
    for case in &cases("canonical") {
        let name = s(case, "name").unwrap();
        let bytes = input(case);
        let value = parse_strict(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = s(case, "output")
            .map(|o| o.as_bytes().to_vec())
            .unwrap_or_else(|| bytes.clone());
        let got = canonicalize(&value).unwrap().into_bytes();
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want), "{name}");
        let reparse = case.get("reparse") != Some(&Value::Bool(false));
        assert_eq!(parse_strict(&got).is_ok(), reparse, "{name}: reparse");
    }
}

fn nested(depth: usize) -> Value {
    (0..depth).fold(Value::Number(0.0), |v, _| Value::Array(vec![v]))
}

#[test]
fn writer_cases_that_rust_can_represent() {
    let not_representable = [
        "undefined",
        "bigint",
        "function",
        "Map",
        "loneSurrogateString",
        "loneSurrogateKey",
        "cycle",
    ];
    for case in &cases("writeRefuse") {
        let (name, tag) = (s(case, "name").unwrap(), s(case, "value").unwrap());
        let value = match tag {
            "NaN" => Value::Array(vec![Value::Number(f64::NAN)]),
            "Infinity" => Value::Number(f64::INFINITY),
            "-Infinity" => Value::Object(vec![("a".into(), Value::Number(f64::NEG_INFINITY))]),
            "deep" => nested(513),
            t if not_representable.contains(&t) => {
                println!("not representable in Rust, skipped: {name}");
                continue;
            }
            other => panic!("{name}: unknown writer case {other:?}: update this test"),
        };
        let e = canonicalize(&value).unwrap_err();
        assert_eq!(e.reason, s(case, "reason").unwrap(), "{name}");
    }
    assert!(canonicalize(&nested(512)).is_ok());
    for case in &cases("writeAccept") {
        let (name, tag) = (s(case, "name").unwrap(), s(case, "value").unwrap());
        let n = match tag {
            "2^60" => 2f64.powi(60),
            "-0" => -0.0,
            "1e21" => 1e21,
            other => panic!("{name}: unknown writer case {other:?}: update this test"),
        };
        assert_eq!(
            canonicalize(&Value::Number(n)).unwrap(),
            s(case, "output").unwrap(),
            "{name}"
        );
    }
}
