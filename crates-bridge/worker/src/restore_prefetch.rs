// The restore prefetch of store-files-v1 on the Rust worker's side, as workers/restore-prefetch.ts:
// State.PrefetchPayload reads a participant's payload range of a committed checkpoint file (in the run's store only) and
// hashes it, while the coordinator verifies that file; bytes that hash to the referenced digest are
// kept, one set per participant, for the StageRestore naming the very same range, which then neither
// reads nor hashes again. Nothing is staged here and nothing changes state: a prefetch that is never
// used is dropped by the next one, by a StageRestore, or by a prefetch with `payload: null`. Replies
// and refusals word for word the TypeScript worker's, checked in the same order.
// NOT staging (agent_host.rs, checks.rs staged_payload), NOT the file confinement (payload_file.rs),
// and NOT the TypeScript worker's warm restore (running the model restore ahead: an optimisation of
// that worker only).
use crate::agent_host::HostReply;
use crate::checks::{StageParams, member, non_empty_path};
use crate::payload_file::read_store_range;
use crate::refusal::{Outcome, obj};
use detsim_formats::Value;
use detsim_formats::json::sha256_hex;
use detsim_formats::scalars::{read_digest, read_id, read_object, read_u64, refuse_unknown_fields};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

/// A file's identity and last change (fileVersion in restore-prefetch.ts: dev, ino, size, mtime and
/// ctime to the nanosecond), taken before reading: a StageRestore uses prefetched bytes only if the
/// file is still that version, so a file changed after the prefetch is read (and refused) by the
/// stage exactly as without a prefetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileVersion {
    dev: u64,
    ino: u64,
    size: u64,
    /// (seconds, nanoseconds): equal exactly when Node's `mtimeNs` / `ctimeNs` are.
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The version of the file `path` names (symlinks followed, as Node's `stat`), or None when it cannot be stat'ed.
fn file_version(path: &str) -> Option<FileVersion> {
    let m = std::fs::metadata(path).ok()?;
    Some(FileVersion {
        dev: m.dev(),
        ino: m.ino(),
        size: m.size(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ctime: (m.ctime(), m.ctime_nsec()),
    })
}

/// The exact reference a prefetch was checked against (referenceKey): the path as sent, not resolved,
/// so a stage must name the very same text.
#[derive(Debug, PartialEq, Eq)]
struct Reference {
    path: String,
    offset: u64,
    byte_length: u64,
    digest: String,
}

/// What a prefetch read: the reference it matched, the file's version, and the bytes.
struct Prefetched {
    reference: Reference,
    version: FileVersion,
    bytes: Vec<u8>,
}

/// The payloads this worker prefetched, at most one per participant: keyed by agent id, None for
/// the environment (participantKey's ''; a prefetch for it is served on an agent worker too, as in
/// TypeScript, and is never used since this worker's StageRestore refuses `agentId: null`).
#[derive(Default)]
pub struct PrefetchedPayloads {
    held: HashMap<Option<String>, Prefetched>,
}

fn matched(yes: bool) -> HostReply {
    HostReply {
        result: obj(vec![("matched", Value::Bool(yes))]),
        attachment: None,
    }
}

impl PrefetchedPayloads {
    /// State.PrefetchPayload: read and hash the range; keep the bytes when they match. The previous
    /// prefetch of the participant is dropped first, even when the read is refused.
    pub fn prefetch(&mut self, params: &[(String, Value)], store_dir: Option<&str>) -> Outcome<HostReply> {
        let (agent_id, reference) = read_prefetch_params(params)?;
        self.held.remove(&agent_id);
        let Some(reference) = reference else {
            return Ok(matched(false));
        };
        let version = file_version(&reference.path);
        let bytes = read_store_range(store_dir, &reference.path, reference.offset, reference.byte_length)?;
        // `matched` says only whether the bytes hash to the digest sent, never what they hash to.
        let Some(version) = version.filter(|_| sha256_hex(&bytes) == reference.digest) else {
            return Ok(matched(false));
        };
        self.held.insert(
            agent_id,
            Prefetched {
                reference,
                version,
                bytes,
            },
        );
        Ok(matched(true))
    }

    /// The prefetched bytes of exactly the range and digest this StageRestore names, while the file
    /// is still the version that was read, or None (the stage reads the file itself). Either way this
    /// participant's prefetch is used up.
    pub fn take(&mut self, staged: &StageParams) -> Option<Vec<u8>> {
        let held = self.held.remove(&Some(staged.agent_id.clone()))?;
        let file = staged.file.as_ref()?;
        let named = Reference {
            path: file.path.clone(),
            offset: file.offset,
            byte_length: staged.payload_length,
            digest: staged.payload_digest.clone(),
        };
        if held.reference != named {
            return None;
        }
        (file_version(&file.path) == Some(held.version)).then_some(held.bytes)
    }
}

/// State.PrefetchPayload's params, strict, in the order of readPrefetchParams: unknown params, the
/// agent id (null: the environment), `payload: null` (drop only), the payload's unknown fields, its
/// file and that file's unknown fields, the path, the digest, the byte length, the offset.
fn read_prefetch_params(params: &[(String, Value)]) -> Outcome<(Option<String>, Option<Reference>)> {
    refuse_unknown_fields(params, &["agentId", "payload"], "params")?;
    let agent_id = match member(params, "agentId") {
        Some(Value::Null) => None,
        other => Some(read_id(other, "params.agentId")?.to_string()),
    };
    let payload = member(params, "payload");
    if payload == Some(&Value::Null) {
        return Ok((agent_id, None));
    }
    let p = read_object(payload, "params.payload")?;
    refuse_unknown_fields(p, &["digest", "byteLength", "file"], "params.payload")?;
    let f = read_object(member(p, "file"), "params.payload.file")?;
    refuse_unknown_fields(f, &["path", "offset"], "params.payload.file")?;
    let path = non_empty_path(f, "params.payload.file.path")?;
    let digest = read_digest(member(p, "digest"), "params.payload.digest")?.to_string();
    let byte_length = read_u64(member(p, "byteLength"), "params.payload.byteLength")?;
    let offset = read_u64(member(f, "offset"), "params.payload.file.offset")?;
    let reference = Reference {
        path,
        offset,
        byte_length,
        digest,
    };
    Ok((agent_id, Some(reference)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::PayloadFile;
    use crate::payload_file::tests::TempDir;
    use detsim_formats::json::js_stringify;
    use detsim_formats::{Scope, parse_strict};

    fn params(json: &str) -> Vec<(String, Value)> {
        parse_strict(json.as_bytes()).unwrap().as_object().unwrap().to_vec()
    }

    /// Prefetch params for `agent` (JSON text, e.g. `"a"` or `null`) and a range of `path`.
    fn prefetch_params(agent: &str, path: &str, offset: u64, bytes: &[u8]) -> Vec<(String, Value)> {
        let file = obj(vec![
            ("offset", Value::String(offset.to_string())),
            ("path", Value::String(path.into())),
        ]);
        let payload = obj(vec![
            ("byteLength", Value::String(bytes.len().to_string())),
            ("digest", Value::String(sha256_hex(bytes))),
            ("file", file),
        ]);
        params(&format!(
            r#"{{"agentId":{agent},"payload":{}}}"#,
            js_stringify(&payload)
        ))
    }

    /// The StageRestore params of agent `a` naming `bytes` at `offset` of `path`.
    fn stage(path: &str, offset: u64, bytes: &[u8]) -> StageParams {
        StageParams {
            checkpoint_id: "c1".into(),
            agent_id: "a".into(),
            source_scope: Scope {
                session_id: "s1".into(),
                epoch: "e0".into(),
                step: 0,
            },
            compatibility_digest: sha256_hex(b"compat"),
            payload_digest: sha256_hex(bytes),
            payload_length: bytes.len() as u64,
            file: Some(PayloadFile {
                path: path.into(),
                offset,
            }),
            rebind: None,
        }
    }

    fn result(reply: Outcome<HostReply>) -> String {
        let reply = reply.unwrap_or_else(|r| panic!("refused: {}", r.message));
        assert!(reply.attachment.is_none());
        js_stringify(&reply.result)
    }

    fn refused<T>(outcome: Outcome<T>) -> (&'static str, String) {
        let r = outcome.err().expect("a refusal");
        (r.code.as_str(), r.message)
    }

    const NO_STORE: &str = "params.payload.file: this worker was started without --store-dir and reads no payload files (send the payload as an attachment)";
    const MATCHED: &str = r#"{"matched":true}"#;
    const NOT_MATCHED: &str = r#"{"matched":false}"#;

    /// Each case's refusal, word for word what workers/restore-prefetch.ts replies (`DIGEST` stands
    /// for a well-formed digest): each fails one check, and every check after it would fail too.
    const PARAM_REFUSALS: [(&str, &str); 15] = [
        (
            r#"{"agentId":"a","payload":null,"x":1}"#,
            r#"params: unknown field "x""#,
        ),
        (
            r#"{"payload":null}"#,
            "params.agentId: nothing is not an Id (1-64 of a-z 0-9 . _ -, starting with a letter or digit)",
        ),
        (
            r#"{"agentId":"A","payload":null}"#,
            r#"params.agentId: "A" is not an Id (1-64 of a-z 0-9 . _ -, starting with a letter or digit)"#,
        ),
        (
            r#"{"agentId":7,"payload":null}"#,
            "params.agentId: 7 is not an Id (1-64 of a-z 0-9 . _ -, starting with a letter or digit)",
        ),
        (r#"{"agentId":"a"}"#, "params.payload: nothing is not an object"),
        (r#"{"agentId":"a","payload":[]}"#, "params.payload: [] is not an object"),
        (
            r#"{"agentId":"a","payload":{"x":1}}"#,
            r#"params.payload: unknown field "x""#,
        ),
        (
            r#"{"agentId":"a","payload":{"byteLength":"x"}}"#,
            "params.payload.file: nothing is not an object",
        ),
        (
            r#"{"agentId":"a","payload":{"byteLength":"x","file":null}}"#,
            "params.payload.file: null is not an object",
        ),
        (
            r#"{"agentId":"a","payload":{"file":{"offset":"0","path":"/p","x":1}}}"#,
            r#"params.payload.file: unknown field "x""#,
        ),
        (
            r#"{"agentId":"a","payload":{"digest":"x","file":{"offset":"x","path":""}}}"#,
            "params.payload.file.path must be a non-empty string",
        ),
        (
            r#"{"agentId":"a","payload":{"digest":"x","file":{"offset":"x","path":7}}}"#,
            "params.payload.file.path must be a non-empty string",
        ),
        (
            r#"{"agentId":"a","payload":{"byteLength":"x","digest":"x","file":{"offset":"x","path":"/p"}}}"#,
            r#"params.payload.digest: "x" is not a SHA-256 digest (64 lowercase hex)"#,
        ),
        (
            r#"{"agentId":"a","payload":{"byteLength":"x","digest":"DIGEST","file":{"offset":"x","path":"/p"}}}"#,
            r#"params.payload.byteLength: "x" is not a U64 (a decimal string, "0" or no leading zero, at most 18446744073709551615)"#,
        ),
        (
            r#"{"agentId":"a","payload":{"byteLength":"1","digest":"DIGEST","file":{"offset":"-1","path":"/p"}}}"#,
            r#"params.payload.file.offset: "-1" is not a U64 (a decimal string, "0" or no leading zero, at most 18446744073709551615)"#,
        ),
    ];

    #[test]
    fn params_are_strict_and_refused_in_the_typescript_order_with_its_words() {
        let digest = sha256_hex(b"x");
        for (json, message) in PARAM_REFUSALS {
            let json = json.replace("DIGEST", &digest);
            let refusal = refused(PrefetchedPayloads::default().prefetch(&params(&json), None));
            assert_eq!(refusal, ("INVALID_ARGUMENT", message.to_string()), "{json}");
        }
        // Well-formed params (a relative path, the environment's null id too) reach the read: without
        // a store it is the payload range's refusal.
        for agent in [r#""a""#, "null"] {
            let ok = prefetch_params(agent, "relative/path", 0, b"x");
            let refusal = refused(PrefetchedPayloads::default().prefetch(&ok, None));
            assert_eq!(refusal, ("UNSUPPORTED", NO_STORE.to_string()));
        }
    }

    #[test]
    fn the_read_is_refused_as_a_staged_payload_range_read_is() {
        let store = TempDir::new("pf-refuse");
        let path = store.at("c1.flysess");
        std::fs::write(&path, b"header|payload").unwrap();
        let mut p = PrefetchedPayloads::default();
        let mut prefetch = |path: &str, offset: u64, bytes: &[u8], store: Option<&str>| {
            refused(p.prefetch(&prefetch_params(r#""a""#, path, offset, bytes), store))
        };
        assert_eq!(prefetch(&path, 7, b"payload", None), ("UNSUPPORTED", NO_STORE.into()));
        assert_eq!(
            prefetch("/etc/hostname", 0, b"x", Some(store.text())),
            (
                "INVALID_ARGUMENT",
                "params.payload.file.path is not a regular file inside this worker's store directory".into()
            )
        );
        assert_eq!(
            prefetch(&path, 8, b"payload", Some(store.text())),
            (
                "BUFFER_INVALID",
                "params.payload.file: offset + byteLength run past the end of the payload file".into()
            )
        );
    }

    #[test]
    fn matched_only_when_the_bytes_read_hash_to_the_digest_and_null_drops_the_prefetch() {
        let store = TempDir::new("pf-match");
        let path = store.at("c1.flysess");
        std::fs::write(&path, b"header|payload").unwrap();
        let mut p = PrefetchedPayloads::default();
        let dir = Some(store.text());
        assert_eq!(
            result(p.prefetch(&prefetch_params(r#""a""#, &path, 7, b"payload"), dir)),
            MATCHED
        );
        assert_eq!(p.take(&stage(&path, 7, b"payload")).as_deref(), Some(&b"payload"[..]));
        // Used up by that stage.
        assert_eq!(p.take(&stage(&path, 7, b"payload")), None);
        // Another digest than the bytes': not matched, nothing kept.
        let mut wrong = prefetch_params(r#""a""#, &path, 7, b"payload");
        let payload = wrong.iter_mut().find(|(k, _)| k == "payload").unwrap();
        if let Value::Object(members) = &mut payload.1 {
            members.iter_mut().find(|(k, _)| k == "digest").unwrap().1 = Value::String(sha256_hex(b"other"));
        }
        assert_eq!(result(p.prefetch(&wrong, dir)), NOT_MATCHED);
        assert!(p.held.is_empty());
        // `payload: null` drops what was prefetched for this participant only.
        p.prefetch(&prefetch_params(r#""a""#, &path, 7, b"payload"), dir)
            .unwrap();
        p.prefetch(&prefetch_params(r#""b""#, &path, 7, b"payload"), dir)
            .unwrap();
        assert_eq!(
            result(p.prefetch(&params(r#"{"agentId":"a","payload":null}"#), None)),
            NOT_MATCHED
        );
        assert_eq!(p.take(&stage(&path, 7, b"payload")), None);
        assert_eq!(p.held.len(), 1);
        // The environment's (agentId null) is served on this agent worker too, kept apart.
        assert_eq!(
            result(p.prefetch(&prefetch_params("null", &path, 7, b"payload"), dir)),
            MATCHED
        );
        assert!(p.held.contains_key(&None));
    }

    #[test]
    fn a_new_prefetch_drops_the_previous_one_first_even_when_its_read_is_refused() {
        let store = TempDir::new("pf-drop");
        let path = store.at("c1.flysess");
        std::fs::write(&path, b"header|payload").unwrap();
        let mut p = PrefetchedPayloads::default();
        let dir = Some(store.text());
        p.prefetch(&prefetch_params(r#""a""#, &path, 7, b"payload"), dir)
            .unwrap();
        let past_end = prefetch_params(r#""a""#, &path, 9, b"payload");
        assert_eq!(refused(p.prefetch(&past_end, dir)).0, "BUFFER_INVALID");
        assert_eq!(p.take(&stage(&path, 7, b"payload")), None);
        // A malformed prefetch is refused before anything is dropped.
        p.prefetch(&prefetch_params(r#""a""#, &path, 7, b"payload"), dir)
            .unwrap();
        assert!(p.prefetch(&params(r#"{"agentId":"a","payload":{}}"#), dir).is_err());
        assert!(p.take(&stage(&path, 7, b"payload")).is_some());
    }

    #[test]
    fn only_a_stage_of_the_very_same_range_and_digest_of_an_unchanged_file_gets_the_bytes() {
        let store = TempDir::new("pf-take");
        let path = store.at("c1.flysess");
        std::fs::write(&path, b"header|payload").unwrap();
        let mut p = PrefetchedPayloads::default();
        let dir = Some(store.text());
        let prefetched = |p: &mut PrefetchedPayloads| {
            assert_eq!(
                result(p.prefetch(&prefetch_params(r#""a""#, &path, 7, b"payload"), dir)),
                MATCHED
            );
        };
        // Each differs from the prefetched reference in one respect only.
        let mut others: Vec<StageParams> = (0..5).map(|_| stage(&path, 7, b"payload")).collect();
        others[0].file.as_mut().unwrap().offset = 6;
        others[1].payload_length = 6;
        others[2].payload_digest = sha256_hex(b"paylod");
        // The same file under another name: the reference is the path as sent.
        others[3].file.as_mut().unwrap().path = store.at("./c1.flysess");
        others[4].file = None;
        for other in &others {
            prefetched(&mut p);
            assert_eq!(p.take(other), None);
            // ...and the prefetch is used up all the same.
            assert_eq!(p.take(&stage(&path, 7, b"payload")), None);
        }
        // Another participant's stage neither gets nor uses up agent a's prefetch.
        prefetched(&mut p);
        let mut b = stage(&path, 7, b"payload");
        b.agent_id = "b".into();
        assert_eq!(p.take(&b), None);
        assert!(p.take(&stage(&path, 7, b"payload")).is_some());
        // The file rewritten after the prefetch (same bytes, a new version): the stage reads it again.
        prefetched(&mut p);
        let replacement = store.at("c1.flysess.new");
        std::fs::write(&replacement, b"header|payload").unwrap();
        std::fs::rename(&replacement, &path).unwrap();
        assert_eq!(p.take(&stage(&path, 7, b"payload")), None);
        // Gone since: not the version read either.
        prefetched(&mut p);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(p.take(&stage(&path, 7, b"payload")), None);
    }
}
