// Held captures on the Rust worker's side (store-files-v1), as workers/capture-file.ts
// (docs/spec/capture-file.md): a Capture with `hold: true` keeps its payload in the lifecycle cache
// and replies with its size only; with `holdFrom` beside it (capture-hold-from-v1) only a payload
// at least that many bytes long is held, a shorter one is replied and cached as an unheld capture.
// State.WritePayload then writes the held bytes into the coordinator's checkpoint temporary at the
// offset it assigns, hashing them as it goes, and replies with their digest. It refuses once the
// worker has served a state-changing call since the capture.
// Refusals are the TypeScript worker's, word for word and in the same order.
// NOT the capture itself (agent_host.rs encodes the state), NOT the lifecycle cache (runtime.rs)
// and NOT the file confinement (payload_file.rs).
use crate::agent_host::HostReply;
use crate::checks::{member, non_empty_path};
use crate::payload_file::{CAPTURE_NO_STORE, write_store_temp};
use crate::refusal::{ErrorCode, Outcome, Refusal, obj, s};
use detsim_formats::Value;
use detsim_formats::scalars::{read_object, read_request_id, read_u64, refuse_unknown_fields};

/// A held capture payload, kept with its cached Capture reply until Worker.Acknowledge.
pub struct Held {
    pub bytes: Vec<u8>,
    /// The count of state-changing calls served when it was captured; its write is refused once
    /// that count has moved (the digest it gives would be of a state past the boundary).
    pub state_changes: u64,
}

/// Whether this Capture asks to hold its payload, and from which size: None is not held; Some(n)
/// holds a payload of at least n bytes (`hold: true` alone is Some(0), always held). `hold` must be
/// exactly `true` when present, `holdFrom` (a U64, capture-hold-from-v1) is allowed only beside it,
/// and only a worker with a store directory (the one that offers store-files-v1) accepts a hold.
/// The checks run in this order, as the TypeScript and Python workers'.
pub fn capture_hold_of(params: &[(String, Value)], has_store: bool) -> Outcome<Option<u64>> {
    let hold_from = member(params, "holdFrom");
    let Some(hold) = member(params, "hold") else {
        if hold_from.is_some() {
            return Err(Refusal::new(
                ErrorCode::InvalidArgument,
                "params.holdFrom is allowed only with params.hold",
            ));
        }
        return Ok(None);
    };
    if *hold != Value::Bool(true) {
        return Err(Refusal::new(
            ErrorCode::InvalidArgument,
            "params.hold must be true when present",
        ));
    }
    if !has_store {
        return Err(Refusal::new(ErrorCode::Unsupported, CAPTURE_NO_STORE));
    }
    match hold_from {
        Some(from) => Ok(Some(read_u64(Some(from), "params.holdFrom")?)),
        None => Ok(Some(0)),
    }
}

/// The params the host sees: the same Capture without `hold` and `holdFrom` (its own field checks
/// stay as they are).
pub fn without_hold(params: &[(String, Value)]) -> Vec<(String, Value)> {
    params
        .iter()
        .filter(|(k, _)| k != "hold" && k != "holdFrom")
        .cloned()
        .collect()
}

/// The Capture reply's `payload`: digest and size, or the size alone for a held capture, whose
/// digest the write gives (capture-encode.ts capturedPayload).
pub fn captured_payload(digest: Option<String>, byte_length: usize) -> Value {
    let byte_length = s(&byte_length.to_string());
    match digest {
        Some(d) => obj(vec![("digest", s(&d)), ("byteLength", byte_length)]),
        None => obj(vec![("byteLength", byte_length)]),
    }
}

/// State.WritePayload's params: the held capture and where its bytes go.
struct WriteParams {
    capture_request_id: String,
    path: String,
    offset: u64,
}

fn read_write_params(params: &[(String, Value)]) -> Outcome<WriteParams> {
    refuse_unknown_fields(params, &["captureRequestId", "file"], "params")?;
    let capture_request_id = read_request_id(member(params, "captureRequestId"), "params.captureRequestId")?;
    let file = read_object(member(params, "file"), "params.file")?;
    refuse_unknown_fields(file, &["path", "offset"], "params.file")?;
    let path = non_empty_path(file, "params.file.path")?;
    let offset = read_u64(member(file, "offset"), "params.file.offset")?;
    Ok(WriteParams {
        capture_request_id: capture_request_id.to_string(),
        path,
        offset,
    })
}

/// State.WritePayload: write the payload a held Capture keeps (until acknowledged) into the temp
/// file. `held_of` finds the payload a Capture request id holds; `state_changes` is the count of
/// state-changing calls served so far.
pub fn write_held_payload<'a>(
    params: &[(String, Value)],
    held_of: impl FnOnce(&str) -> Option<&'a Held>,
    store_dir: Option<&str>,
    state_changes: u64,
) -> Outcome<HostReply> {
    let p = read_write_params(params)?;
    let Some(held) = held_of(&p.capture_request_id) else {
        return Err(Refusal::new(
            ErrorCode::InvalidArgument,
            "params.captureRequestId names no held capture awaiting acknowledgment on this worker",
        ));
    };
    // The write hashes what it writes, so it must refuse a state that may have moved since the
    // capture (the coordinator never steps the group in between).
    if held.state_changes != state_changes {
        return Err(Refusal::new(
            ErrorCode::InvalidPhase,
            "params.captureRequestId: this worker has served a state-changing call since that capture; capture again",
        ));
    }
    let digest = write_store_temp(store_dir, &p.path, p.offset, &held.bytes)?;
    Ok(HostReply {
        result: obj(vec![
            ("byteLength", s(&held.bytes.len().to_string())),
            ("digest", s(&digest)),
        ]),
        attachment: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload_file::tests::TempDir;
    use detsim_formats::{parse_strict, sha256_hex};

    fn params(json: &str) -> Vec<(String, Value)> {
        parse_strict(json.as_bytes()).unwrap().as_object().unwrap().to_vec()
    }

    fn refused<T>(outcome: Outcome<T>) -> (&'static str, String) {
        let r = outcome.err().expect("a refusal");
        (r.code.as_str(), r.message)
    }

    fn invalid(message: &str) -> (&'static str, String) {
        ("INVALID_ARGUMENT", message.to_string())
    }

    #[test]
    fn hold_is_only_true_and_needs_a_store() {
        let hold = |json: &str, store: bool| capture_hold_of(&params(json), store);
        assert_eq!(hold(r#"{"agentId":"a"}"#, false).unwrap(), None);
        assert_eq!(hold(r#"{"hold":true}"#, true).unwrap(), Some(0));
        for bad in [r#"{"hold":false}"#, r#"{"hold":null}"#, r#"{"hold":"true"}"#] {
            assert_eq!(
                refused(hold(bad, true)),
                invalid("params.hold must be true when present")
            );
        }
        assert_eq!(
            refused(hold(r#"{"hold":true}"#, false)),
            ("UNSUPPORTED", CAPTURE_NO_STORE.to_string())
        );
        // The host sees every other param, and refuses any it does not know (hashAtWrite included).
        let host_sees = without_hold(&params(r#"{"agentId":"a","hashAtWrite":true,"hold":true}"#));
        assert_eq!(host_sees, params(r#"{"agentId":"a","hashAtWrite":true}"#));
    }

    const U64_TEXT: &str = r#"(a decimal string, "0" or no leading zero, at most 18446744073709551615)"#;

    #[test]
    fn hold_from_is_a_u64_only_beside_hold_checked_after_hold_and_the_store() {
        let hold = |json: &str, store: bool| capture_hold_of(&params(json), store);
        // Without `hold`, even on a worker without a store, and whatever its value.
        for json in [r#"{"holdFrom":"65536"}"#, r#"{"holdFrom":"x"}"#] {
            for store in [true, false] {
                assert_eq!(
                    refused(hold(json, store)),
                    invalid("params.holdFrom is allowed only with params.hold"),
                    "{json}"
                );
            }
        }
        // `hold` is checked before `holdFrom`.
        assert_eq!(
            refused(hold(r#"{"hold":false,"holdFrom":"x"}"#, true)),
            invalid("params.hold must be true when present")
        );
        // The store before the value of `holdFrom`.
        assert_eq!(
            refused(hold(r#"{"hold":true,"holdFrom":"x"}"#, false)),
            ("UNSUPPORTED", CAPTURE_NO_STORE.to_string())
        );
        assert_eq!(
            refused(hold(r#"{"hold":true,"holdFrom":"65536"}"#, false)),
            ("UNSUPPORTED", CAPTURE_NO_STORE.to_string())
        );
        for (value, shown) in [
            (r#""x""#, r#""x""#),
            (r#""01""#, r#""01""#),
            ("65536", "65536"),
            (r#""-1""#, r#""-1""#),
            (r#""18446744073709551616""#, r#""18446744073709551616""#),
            ("null", "null"),
        ] {
            let json = format!(r#"{{"hold":true,"holdFrom":{value}}}"#);
            assert_eq!(
                refused(hold(&json, true)),
                invalid(&format!("params.holdFrom: {shown} is not a U64 {U64_TEXT}")),
                "{json}"
            );
        }
        assert_eq!(hold(r#"{"hold":true,"holdFrom":"65536"}"#, true).unwrap(), Some(65536));
        assert_eq!(hold(r#"{"hold":true,"holdFrom":"0"}"#, true).unwrap(), Some(0));
        assert_eq!(
            hold(r#"{"hold":true,"holdFrom":"18446744073709551615"}"#, true).unwrap(),
            Some(u64::MAX)
        );
        // The host sees neither.
        let host_sees = without_hold(&params(r#"{"agentId":"a","hold":true,"holdFrom":"65536"}"#));
        assert_eq!(host_sees, params(r#"{"agentId":"a"}"#));
    }

    #[test]
    fn the_captured_payload_is_digest_and_size_or_the_size_alone() {
        let js = |v: &Value| detsim_formats::json::js_stringify(v);
        assert_eq!(
            js(&captured_payload(Some("d".into()), 12)),
            r#"{"digest":"d","byteLength":"12"}"#
        );
        assert_eq!(js(&captured_payload(None, 12)), r#"{"byteLength":"12"}"#);
    }

    const WRITE: &str = r#"{"captureRequestId":"req-7","file":{"offset":"OFF","path":"PATH"}}"#;

    fn write_params(path: &str, offset: &str) -> Vec<(String, Value)> {
        params(&WRITE.replace("PATH", path).replace("OFF", offset))
    }

    fn write(params: &[(String, Value)], held: Option<&Held>, store: Option<&str>, changes: u64) -> Outcome<HostReply> {
        write_held_payload(params, |id| (id == "req-7").then_some(held).flatten(), store, changes)
    }

    #[test]
    fn write_payload_params_are_strict_and_checked_before_the_capture_is_looked_up() {
        let cases = [
            (
                r#"{"captureRequestId":"req-7","extra":1,"file":{}}"#,
                r#"params: unknown field "extra""#,
            ),
            (
                r#"{"captureRequestId":"7","file":{}}"#,
                r#"params.captureRequestId: "7" is not a request id req-<U64>"#,
            ),
            (
                r#"{"captureRequestId":"req-7","file":[]}"#,
                "params.file: [] is not an object",
            ),
            (
                r#"{"captureRequestId":"req-7","file":{"mode":1,"offset":"0","path":"/p"}}"#,
                r#"params.file: unknown field "mode""#,
            ),
            (
                r#"{"captureRequestId":"req-7","file":{"offset":"0","path":""}}"#,
                "params.file.path must be a non-empty string",
            ),
            (
                r#"{"captureRequestId":"req-7","file":{"offset":"0"}}"#,
                "params.file.path must be a non-empty string",
            ),
            (
                r#"{"captureRequestId":"req-7","file":{"offset":"01","path":"/p"}}"#,
                r#"params.file.offset: "01" is not a U64 (a decimal string, "0" or no leading zero, at most 18446744073709551615)"#,
            ),
        ];
        for (json, message) in cases {
            let got = refused(write(&params(json), None, None, 0));
            assert_eq!(got, invalid(message), "{json}");
        }
    }

    #[test]
    fn an_unknown_capture_is_refused_and_a_held_capture_is_written_only_while_no_state_changed() {
        let store = TempDir::new("held");
        let temp = store.at("tmp-c1.flysess");
        std::fs::write(&temp, b"").unwrap();
        let p = write_params(&temp, "2");
        assert_eq!(
            refused(write(&p, None, Some(store.text()), 0)),
            invalid("params.captureRequestId names no held capture awaiting acknowledgment on this worker")
        );
        let held = Held {
            bytes: b"abc".to_vec(),
            state_changes: 4,
        };
        let phase = refused(write(&p, Some(&held), Some(store.text()), 5));
        assert_eq!(phase.0, "INVALID_PHASE");
        assert_eq!(
            phase.1,
            "params.captureRequestId: this worker has served a state-changing call since that capture; capture again"
        );
        assert_eq!(std::fs::read(&temp).unwrap(), b"");
        let reply = write(&p, Some(&held), Some(store.text()), 4).unwrap();
        assert_eq!(
            detsim_formats::json::js_stringify(&reply.result),
            format!(r#"{{"byteLength":"3","digest":"{}"}}"#, sha256_hex(b"abc"))
        );
        assert!(reply.attachment.is_none());
        assert_eq!(std::fs::read(&temp).unwrap(), b"\0\0abc");
        // The hold is checked before the store: without one, the write itself is refused UNSUPPORTED.
        assert_eq!(refused(write(&p, Some(&held), None, 4)).0, "UNSUPPORTED");
    }
}
