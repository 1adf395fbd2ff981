// Refusal checks shared by the request handlers, as workers/checks.ts: scope/session/epoch/step
// rules, the agentId of State.* params, State.StageRestore's params and payload bytes (attachment,
// or with store-files-v1 a range of a store file or the bytes a prefetch read ahead), restore tokens
// and compatibility digests. Each returns a Refusal with the protocol's code and the TypeScript worker's message word
// for word; none of them mutates anything (beyond using up a prefetch, as checks.ts).
// Not the hosts' state machines (agent_host.rs) nor Worker.* (runtime.rs).
use crate::payload_file;
use crate::refusal::{ErrorCode, Outcome, Refusal, obj, quoted, s, shown};
use crate::restore_prefetch::PrefetchedPayloads;
use detsim_formats::json::{canonical_digest, sha256_hex};
use detsim_formats::scalars::{read_digest, read_id, read_object, read_u64, refuse_unknown_fields};
use detsim_formats::{Scope, Value};
use std::borrow::Cow;

/// A member of a JSON object's member list (absent is None, as `undefined` in TypeScript).
pub fn member<'a>(members: &'a [(String, Value)], key: &str) -> Option<&'a Value> {
    members.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A file path member that must be a non-empty string (State.WritePayload's `file.path`,
/// State.PrefetchPayload's `payload.file.path`), refused in the TypeScript worker's words.
pub fn non_empty_path(members: &[(String, Value)], field: &str) -> Outcome<String> {
    match member(members, "path") {
        Some(Value::String(p)) if !p.is_empty() => Ok(p.clone()),
        _ => Err(Refusal::new(
            ErrorCode::InvalidArgument,
            format!("{field} must be a non-empty string"),
        )),
    }
}

pub fn require_scope(scope: &Option<Scope>, method: &str) -> Outcome<Scope> {
    scope
        .clone()
        .ok_or_else(|| Refusal::new(ErrorCode::InvalidArgument, format!("{method} needs a scope")))
}

/// The request's session must be the one this worker was bound to at Hello.
pub fn check_session(scope: &Scope, session_id: &str) -> Outcome<()> {
    if scope.session_id != session_id {
        return Err(Refusal::new(
            ErrorCode::IdentityMismatch,
            format!(
                "scope.sessionId {} is not this worker's session {}",
                quoted(&scope.session_id),
                quoted(session_id)
            ),
        ));
    }
    Ok(())
}

/// The first two checks of every scoped method: a scope is present and names this worker's session.
pub fn session_scope(scope: &Option<Scope>, method: &str, session_id: &str) -> Outcome<Scope> {
    let scope = require_scope(scope, method)?;
    check_session(&scope, session_id)?;
    Ok(scope)
}

/// Any epoch other than the participant's current one is stale.
pub fn check_epoch(scope: &Scope, current: &str, who: &str) -> Outcome<()> {
    if scope.epoch != current {
        return Err(Refusal::new(
            ErrorCode::StaleEpoch,
            format!(
                "{who}: scope.epoch {} is not the current epoch {}",
                quoted(&scope.epoch),
                quoted(current)
            ),
        ));
    }
    Ok(())
}

/// A step behind the boundary is STALE_STEP, ahead of it FUTURE_STEP.
pub fn check_step(scope: &Scope, boundary: u64, who: &str) -> Outcome<u64> {
    let step = scope.step;
    if step < boundary {
        return Err(Refusal::new(
            ErrorCode::StaleStep,
            format!("{who}: scope.step {step} is behind the boundary {boundary}"),
        ));
    }
    if step > boundary {
        return Err(Refusal::new(
            ErrorCode::FutureStep,
            format!("{who}: scope.step {step} is ahead of the boundary {boundary}"),
        ));
    }
    Ok(step)
}

/// `params.agentId` of a State.* request: this worker hosts agents, so null (the environment) is refused.
pub fn read_agent_id(params: &[(String, Value)]) -> Outcome<String> {
    let value = member(params, "agentId");
    if matches!(value, Some(Value::Null)) {
        return Err(Refusal::new(
            ErrorCode::InvalidArgument,
            "params.agentId is null but this worker hosts agents, not the environment",
        ));
    }
    Ok(read_id(value, "params.agentId")?.to_string())
}

/// The canonical digest of a value read from a request or payload (always canonicalizable).
pub fn digest_of(v: &Value) -> String {
    canonical_digest(v).expect("parsed values are canonicalizable")
}

/// `rt-` + 32 hex: bound to checkpoint, scope, payload bytes and this worker incarnation.
pub fn restore_token(checkpoint_id: &str, scope: &Scope, payload_digest: &str, incarnation_id: &str) -> String {
    let text = format!(
        "detsim/restore-token-v1\n{checkpoint_id}\n{}\n{}\n{}\n{payload_digest}\n{incarnation_id}\n",
        scope.session_id, scope.epoch, scope.step
    );
    format!("rt-{}", &sha256_hex(text.as_bytes())[..32])
}

/// What the agent compatibility digest covers (checks.ts AgentCompatibility).
pub struct AgentCompatibility<'a> {
    pub agent_id: &'a str,
    pub profile_digest: &'a str,
    pub dataset_digest: &'a str,
    pub model_version: &'a str,
    pub plasticity_version: &'a str,
    pub seed: i32,
}

/// canonicalDigest({agentId, profileDigest, datasetDigest, modelVersion, plasticityVersion, seed}).
pub fn agent_compatibility_digest(c: &AgentCompatibility) -> String {
    digest_of(&obj(vec![
        ("agentId", s(c.agent_id)),
        ("profileDigest", s(c.profile_digest)),
        ("datasetDigest", s(c.dataset_digest)),
        ("modelVersion", s(c.model_version)),
        ("plasticityVersion", s(c.plasticity_version)),
        ("seed", Value::Number(c.seed as f64)),
    ]))
}

/// canonicalDigest({model, modelVersion, params}) with params as the model resolved them.
pub fn profile_digest(model: &str, model_version: &str, params: &Value) -> String {
    digest_of(&obj(vec![
        ("model", s(model)),
        ("modelVersion", s(model_version)),
        ("params", params.clone()),
    ]))
}

/// Name the first recorded identity field that differs from the live one (`recorded` looks a
/// field up in the payload; absent compares as null, as in checks.ts firstMismatch).
pub fn first_mismatch(recorded: impl Fn(&str) -> Option<Value>, live: &[(&str, Value)]) -> Option<String> {
    live.iter().find_map(|(field, mine)| {
        let theirs = recorded(field);
        if digest_of(theirs.as_ref().unwrap_or(&Value::Null)) == digest_of(mine) {
            return None;
        }
        Some(format!(
            "{field}: payload has {}, this worker has {}",
            shown(theirs.as_ref()),
            shown(Some(mine))
        ))
    })
}

/// store-files-v1: `{path: absolute, offset: U64}`, a range of a checkpoint file on this machine.
pub struct PayloadFile {
    pub path: String,
    pub offset: u64,
}

/// State.StageRestore's params, read and checked against the request scope (checks.ts StageParams).
pub struct StageParams {
    pub checkpoint_id: String,
    pub agent_id: String,
    pub source_scope: Scope,
    pub compatibility_digest: String,
    pub payload_digest: String,
    pub payload_length: u64,
    /// Capability store-files-v1: read the payload from this range of a local file, not an attachment.
    pub file: Option<PayloadFile>,
    /// A fork's new params for this agent (workers/fork-rebind.ts), or None.
    pub rebind: Option<Rebind>,
}

/// State.StageRestore params.rebind: the agent's new params (as configured) and its expected new profile digest.
#[derive(Debug, Clone)]
pub struct Rebind {
    pub params: Vec<(String, Value)>,
    pub profile_digest: String,
}

/// params.rebind, or None when the request has none (every restore but a fork's that changes params).
fn read_rebind(value: Option<&Value>) -> Outcome<Option<Rebind>> {
    let Some(value) = value else { return Ok(None) };
    let r = read_object(Some(value), "params.rebind")?;
    refuse_unknown_fields(r, &["params", "profileDigest"], "params.rebind")?;
    Ok(Some(Rebind {
        params: read_object(member(r, "params"), "params.rebind.params")?.to_vec(),
        profile_digest: read_digest(member(r, "profileDigest"), "params.rebind.profileDigest")?.to_string(),
    }))
}

/// Read State.StageRestore params (INVALID_ARGUMENT on a malformed field) and check them against
/// the request scope, in the order of checks.ts readStageParams (the first failure is the reply).
pub fn read_stage_params(params: &[(String, Value)], scope: &Scope) -> Outcome<StageParams> {
    let allowed = [
        "checkpointId",
        "agentId",
        "sourceScope",
        "compatibilityDigest",
        "payload",
        "rebind",
    ];
    refuse_unknown_fields(params, &allowed, "params")?;
    let checkpoint_id = read_id(member(params, "checkpointId"), "params.checkpointId")?.to_string();
    let agent_id = read_agent_id(params)?;
    let source_scope = Scope::read(member(params, "sourceScope"), "params.sourceScope")?;
    let compatibility_digest =
        read_digest(member(params, "compatibilityDigest"), "params.compatibilityDigest")?.to_string();
    let p = read_object(member(params, "payload"), "params.payload")?;
    refuse_unknown_fields(p, &["digest", "byteLength", "file"], "params.payload")?;
    let payload_digest = read_digest(member(p, "digest"), "params.payload.digest")?.to_string();
    let payload_length = read_u64(member(p, "byteLength"), "params.payload.byteLength")?;
    let file = member(p, "file").map(read_payload_file).transpose()?;
    let rebind = read_rebind(member(params, "rebind"))?;
    if source_scope.session_id != scope.session_id {
        return Err(Refusal::new(
            ErrorCode::IdentityMismatch,
            format!(
                "params.sourceScope.sessionId {} is not this session {}",
                source_scope.session_id, scope.session_id
            ),
        ));
    }
    if source_scope.step != scope.step {
        return Err(Refusal::new(
            ErrorCode::InvalidArgument,
            format!(
                "scope.step {} must equal params.sourceScope.step {}",
                scope.step, source_scope.step
            ),
        ));
    }
    Ok(StageParams {
        checkpoint_id,
        agent_id,
        source_scope,
        compatibility_digest,
        payload_digest,
        payload_length,
        file,
        rebind,
    })
}

fn read_payload_file(value: &Value) -> Outcome<PayloadFile> {
    let f = read_object(Some(value), "params.payload.file")?;
    refuse_unknown_fields(f, &["path", "offset"], "params.payload.file")?;
    let path = match member(f, "path") {
        Some(Value::String(p)) if std::path::Path::new(p).is_absolute() => p.clone(),
        other => {
            return Err(Refusal::new(
                ErrorCode::InvalidArgument,
                format!(
                    "params.payload.file.path {} is not an absolute path",
                    other.map_or("null".to_string(), |v| shown(Some(v)))
                ),
            ));
        }
    };
    let offset = read_u64(member(f, "offset"), "params.payload.file.offset")?;
    Ok(PayloadFile { path, offset })
}

/// The bytes to stage, exactly the referenced ones (length, then digest): the request's attachment,
/// or with store-files-v1 a range of a checkpoint file in the run's store (`store_dir`; without it
/// every payload file is refused). The bytes read are hashed here, so a file changed since the
/// coordinator verified it is refused, never staged. The bytes a prefetch (store-files-v1) of
/// exactly this reference read and hashed (the file unchanged since) are staged without reading
/// again; this participant's prefetch is used up by every stage that gets here, used or not.
pub fn staged_payload<'a>(
    attachment: Option<&'a [u8]>,
    staged: &StageParams,
    store_dir: Option<&str>,
    prefetched: &mut PrefetchedPayloads,
) -> Outcome<Cow<'a, [u8]>> {
    let name = format!("agent-{}", staged.agent_id);
    // Taken before the attachment is looked at, as checks.ts: a stage with both is refused below
    // and still uses the prefetch up.
    if let Some(bytes) = prefetched.take(staged).filter(|_| attachment.is_none()) {
        return Ok(Cow::Owned(bytes));
    }
    let Some(file) = &staged.file else {
        return Ok(Cow::Borrowed(check_attachment(attachment, staged, &name)?));
    };
    if attachment.is_some() {
        return Err(Refusal::new(
            ErrorCode::InvalidArgument,
            "StageRestore carries both an attachment and params.payload.file: send one",
        ));
    }
    let bytes = payload_file::read_store_range(store_dir, &file.path, file.offset, staged.payload_length)?;
    check_digest(&bytes, &staged.payload_digest, &name)?;
    Ok(Cow::Owned(bytes))
}

/// The staged payload must be exactly the referenced bytes: length first, then digest.
fn check_attachment<'a>(attachment: Option<&'a [u8]>, staged: &StageParams, payload_name: &str) -> Outcome<&'a [u8]> {
    let Some(bytes) = attachment else {
        return Err(Refusal::new(
            ErrorCode::BufferInvalid,
            "StageRestore carries no payload attachment",
        ));
    };
    if bytes.len() as u64 != staged.payload_length {
        return Err(Refusal::new(
            ErrorCode::BufferInvalid,
            format!(
                "payload attachment is {} bytes; payload.byteLength says {}",
                bytes.len(),
                staged.payload_length
            ),
        ));
    }
    check_digest(bytes, &staged.payload_digest, payload_name)?;
    Ok(bytes)
}

/// Never echo the digest of what was read: with store-files-v1 that would be an oracle on a file's bytes.
fn check_digest(bytes: &[u8], digest: &str, payload_name: &str) -> Outcome<()> {
    if sha256_hex(bytes) != digest {
        return Err(Refusal::new(
            ErrorCode::BufferInvalid,
            format!("params.payload.digest: the payload digest check failed for payload {payload_name}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use detsim_formats::parse_strict;

    fn params(json: &str) -> Vec<(String, Value)> {
        parse_strict(json.as_bytes()).unwrap().as_object().unwrap().to_vec()
    }

    fn scope(step: u64) -> Scope {
        Scope {
            session_id: "s1".into(),
            epoch: "e1".into(),
            step,
        }
    }

    fn refused<T>(outcome: Outcome<T>) -> (&'static str, String) {
        let r = outcome.err().expect("a refusal");
        (r.code.as_str(), r.message)
    }

    #[test]
    fn scoped_requests_need_a_scope_of_this_session_and_the_boundary_step_of_the_current_epoch() {
        assert_eq!(
            refused(session_scope(&None, "Agent.Prepare", "s1")),
            ("INVALID_ARGUMENT", "Agent.Prepare needs a scope".into())
        );
        assert_eq!(
            refused(session_scope(&Some(scope(0)), "Agent.Prepare", "s2")).0,
            "IDENTITY_MISMATCH"
        );
        assert_eq!(refused(check_epoch(&scope(0), "e2", "agent a")).0, "STALE_EPOCH");
        assert_eq!(refused(check_step(&scope(2), 3, "agent a")).0, "STALE_STEP");
        assert_eq!(refused(check_step(&scope(4), 3, "agent a")).0, "FUTURE_STEP");
        assert_eq!(check_step(&scope(3), 3, "agent a").unwrap(), 3);
    }

    #[test]
    fn a_null_agent_id_is_refused_by_an_agent_worker_before_the_id_is_read() {
        let (code, message) = refused(read_agent_id(&params(r#"{"agentId":null}"#)));
        assert_eq!(code, "INVALID_ARGUMENT");
        assert_eq!(
            message,
            "params.agentId is null but this worker hosts agents, not the environment"
        );
        assert_eq!(read_agent_id(&params(r#"{"agentId":"a-1"}"#)).unwrap(), "a-1");
    }

    fn none() -> PrefetchedPayloads {
        PrefetchedPayloads::default()
    }

    const STAGE: &str = concat!(
        r#"{"agentId":"a","checkpointId":"c","compatibilityDigest":"D","payload":{"byteLength":"3","digest":"D"FILE},"#,
        r#""sourceScope":{"epoch":"e0","sessionId":"s1","step":"0"}}"#
    );

    fn stage_params(file: &str) -> Vec<(String, Value)> {
        let digest = sha256_hex(b"abc");
        params(&STAGE.replace("\"D\"", &format!("\"{digest}\"")).replace("FILE", file))
    }

    #[test]
    fn the_staged_payload_is_the_attachment_of_the_referenced_length_and_digest_or_one_file_never_both() {
        let staged = read_stage_params(&stage_params(""), &scope(0)).unwrap();
        assert_eq!(
            &*staged_payload(Some(b"abc"), &staged, None, &mut none()).unwrap(),
            b"abc"
        );
        assert_eq!(
            refused(staged_payload(Some(b"abcd"), &staged, None, &mut none())),
            (
                "BUFFER_INVALID",
                "payload attachment is 4 bytes; payload.byteLength says 3".into()
            )
        );
        assert_eq!(
            refused(staged_payload(Some(b"abd"), &staged, None, &mut none())).1,
            "params.payload.digest: the payload digest check failed for payload agent-a"
        );
        let from_file = stage_params(r#","file":{"offset":"0","path":"/nowhere/x"}"#);
        let staged = read_stage_params(&from_file, &scope(0)).unwrap();
        assert_eq!(
            refused(staged_payload(Some(b"abc"), &staged, None, &mut none())).1,
            "StageRestore carries both an attachment and params.payload.file: send one"
        );
        assert_eq!(
            refused(staged_payload(None, &staged, None, &mut none())).0,
            "UNSUPPORTED"
        );
        let relative = stage_params(r#","file":{"offset":"0","path":"x"}"#);
        assert_eq!(
            refused(read_stage_params(&relative, &scope(0))).1,
            r#"params.payload.file.path "x" is not an absolute path"#
        );
        assert_eq!(
            refused(read_stage_params(&stage_params(""), &scope(1))).0,
            "INVALID_ARGUMENT"
        );
    }

    #[test]
    fn prefetched_bytes_of_the_same_reference_are_staged_without_a_read_unless_an_attachment_came_too() {
        let store = crate::payload_file::tests::TempDir::new("checks-prefetch");
        let path = store.at("c1.flysess");
        std::fs::write(&path, b"abc").unwrap();
        let digest = sha256_hex(b"abc");
        let prefetch = format!(
            r#"{{"agentId":"a","payload":{{"byteLength":"3","digest":"{digest}","file":{{"offset":"0","path":"{path}"}}}}}}"#
        );
        let from_file = stage_params(&format!(r#","file":{{"offset":"0","path":"{path}"}}"#));
        let staged = read_stage_params(&from_file, &scope(0)).unwrap();
        let mut prefetched = none();
        prefetched.prefetch(&params(&prefetch), Some(store.text())).unwrap();
        // No store given to the stage: a read would be refused UNSUPPORTED, so these bytes were not read again.
        assert_eq!(&*staged_payload(None, &staged, None, &mut prefetched).unwrap(), b"abc");
        assert_eq!(
            refused(staged_payload(None, &staged, None, &mut prefetched)).0,
            "UNSUPPORTED"
        );
        // With an attachment as well: refused as before, and the prefetch is used up all the same.
        prefetched.prefetch(&params(&prefetch), Some(store.text())).unwrap();
        assert_eq!(
            refused(staged_payload(Some(b"abc"), &staged, None, &mut prefetched)).1,
            "StageRestore carries both an attachment and params.payload.file: send one"
        );
        assert_eq!(
            refused(staged_payload(None, &staged, None, &mut prefetched)).0,
            "UNSUPPORTED"
        );
    }

    #[test]
    fn the_first_mismatching_identity_field_is_named_with_both_values() {
        let live = [("modelVersion", s("walker-v1")), ("seed", Value::Number(7.0))];
        assert_eq!(
            first_mismatch(|f| (f == "modelVersion").then(|| s("walker-v1")), &live).unwrap(),
            "seed: payload has undefined, this worker has 7"
        );
        assert_eq!(
            first_mismatch(
                |f| Some(if f == "seed" {
                    Value::Number(7.0)
                } else {
                    s("walker-v1")
                }),
                &live
            ),
            None
        );
    }
}
