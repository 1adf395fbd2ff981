// The Rust worker runtime, as workers/runtime.ts: turns one request message into exactly one
// reply. Owns Worker.Hello / Status / Acknowledge / Shutdown, session binding, the Hello-first
// gate (a stream is served nothing until it said a successful Hello), the lifecycle reply cache
// (with the payloads of held captures, store-files-v1, and which of them came out held,
// capture-hold-from-v1), the payloads prefetched for restores (store-files-v1) and the envelopes;
// dispatches Agent.* and State.* to the agent host, State.WritePayload to capture_file.rs and
// State.PrefetchPayload to restore_prefetch.rs.
// Not the transport.
use crate::agent_host::{AgentHost, Ctx, HostReply};
use crate::capture_file::{Held, capture_hold_of, without_hold, write_held_payload};
use crate::checks::member;
use crate::refusal::{ErrorCode, Outcome, Refusal, obj, s, shown};
use crate::restore_prefetch::PrefetchedPayloads;
use detsim_formats::json::{canonical_bytes, canonical_digest, js_stringify, parse_strict};
use detsim_formats::scalars::{is_u64, read_digest, read_id, read_object, read_request_id, refuse_unknown_fields};
use detsim_formats::{DetsimError, Reason, Scope, Value};
use std::collections::HashMap;

/// The contract this worker was built against: SHA-256 of worker.proto's bytes.
pub const PROTO_BYTES: &[u8] = include_bytes!("../../../proto/detsim/v1/worker.proto");
pub const PROTOCOL_MAJOR: f64 = 1.0;
pub const MAX_AGENTS_PER_WORKER: f64 = 64.0;
/// "detsim-rs/<crate version> rustc/<version of the rustc that built it>" (build.rs; the receipt's
/// platform fingerprint reads the rustc version from here).
pub const RUNTIME_NAME: &str = concat!(
    "detsim-rs/",
    env!("CARGO_PKG_VERSION"),
    " rustc/",
    env!("DETSIM_RUSTC_VERSION")
);
const LIFECYCLE_LIMIT: usize = 16;
const LIFECYCLE: [&str; 5] = [
    "Agent.Initialize",
    "Environment.Initialize",
    "State.Capture",
    "State.StageRestore",
    "State.ActivateRestore",
];
/// Calls that may change a participant's live state (STATE_CHANGING in runtime.ts, the environment's
/// included even though this worker refuses them): a held capture refuses its write once any of
/// these was served after it.
const STATE_CHANGING: [&str; 6] = [
    "Agent.Initialize",
    "Environment.Initialize",
    "Agent.Prepare",
    "Agent.Commit",
    "Environment.Advance",
    "State.ActivateRestore",
];

pub fn contract_digest() -> String {
    detsim_formats::sha256_hex(PROTO_BYTES)
}

/// Identifies this implementation of the contract (as BUILD_DIGEST in runtime.ts).
pub fn build_digest() -> String {
    canonical_digest(&obj(vec![
        ("implementation", s("detsim-rs-worker")),
        ("version", s(env!("CARGO_PKG_VERSION"))),
        ("contractDigest", s(&contract_digest())),
    ]))
    .expect("strings")
}

pub struct Request {
    pub method: String,
    pub request_id: String,
    pub scope: Option<Scope>,
    pub scope_json: Value,
    pub params: Vec<(String, Value)>,
}

pub struct Outgoing {
    pub body: Vec<u8>,
    pub attachment: Option<Vec<u8>>,
    /// The process should stop after this reply is sent.
    pub stop: bool,
}

struct Lifecycle {
    digest: String,
    result: Value,
    attachment: Option<Vec<u8>>,
    /// store-files-v1: the payload held for State.WritePayload, never sent in a reply.
    held: Option<Held>,
}

pub struct WorkerRuntime {
    pub worker_id: String,
    pub incarnation_id: String,
    bound_session: Option<String>,
    progress_counter: u64,
    last_completed: Option<String>,
    stopping: bool,
    /// State-changing calls served so far (STATE_CHANGING): a held capture notes the count it saw.
    state_changes: u64,
    lifecycle: HashMap<String, Lifecycle>,
    /// store-files-v1: payloads read and hashed ahead (State.PrefetchPayload) while the coordinator verifies their file.
    prefetched: PrefetchedPayloads,
    max_message_bytes: u64,
    agents: AgentHost,
    /// The run's checkpoint store (`--store-dir`): the only directory store-files-v1 may read (payload
    /// ranges, prefetches) and write (its checkpoint temporaries only).
    pub store_dir: Option<String>,
}

fn require<'a>(obj: &'a [(String, Value)], key: &str, field: &str) -> Result<&'a Value, DetsimError> {
    member(obj, key).ok_or_else(|| {
        DetsimError::at(
            Reason::StructMissingField,
            format!("{field}.{key} is missing"),
            format!("{field}.{key}"),
        )
    })
}

/// Read a body as runtime.ts decodeBody + readRequest do: canonical JSON, then the envelope fields.
fn read_request(body: &[u8]) -> Result<Request, DetsimError> {
    let value = parse_strict(body)?;
    if canonical_bytes(&value)? != body {
        return Err(DetsimError::new(
            Reason::StructNotCanonical,
            "body is not RFC 8785 canonical JSON",
        ));
    }
    let field = "request";
    let o = read_object(Some(&value), field)?;
    refuse_unknown_fields(o, &["method", "requestId", "scope", "params"], field)?;
    let method = match require(o, "method", field)? {
        Value::String(m) if !m.is_empty() && m.encode_utf16().count() <= 64 => m.clone(),
        _ => {
            return Err(DetsimError::at(
                Reason::StructInvalidField,
                "request.method must be a method name",
                "request.method",
            ));
        }
    };
    let request_id = read_request_id(Some(require(o, "requestId", field)?), "request.requestId")?.to_string();
    let scope_json = require(o, "scope", field)?.clone();
    let scope = if scope_json == Value::Null {
        None
    } else {
        Some(Scope::read(Some(&scope_json), "request.scope")?)
    };
    let params = read_object(Some(require(o, "params", field)?), "request.params")?.to_vec();
    Ok(Request {
        method,
        request_id,
        scope,
        scope_json,
        params,
    })
}

/// Best effort: the request id of an unreadable request, so the reply still correlates.
fn salvage_request_id(body: &[u8]) -> String {
    let head = &body[..body.len().min(4096)];
    let text = String::from_utf8_lossy(head);
    const NEEDLE: &str = "\"requestId\":\"req-";
    if let Some(at) = text.find(NEEDLE) {
        let digits: String = text[at + NEEDLE.len()..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        let rest = &text[at + NEEDLE.len() + digits.len()..];
        if rest.starts_with('"') && is_u64(&digits) {
            return format!("req-{digits}");
        }
    }
    "req-0".into()
}

impl WorkerRuntime {
    pub fn new(
        worker_id: String,
        session: Option<String>,
        incarnation_id: String,
        max_message_bytes: u64,
    ) -> WorkerRuntime {
        WorkerRuntime {
            worker_id,
            incarnation_id,
            bound_session: session,
            progress_counter: 0,
            last_completed: None,
            stopping: false,
            state_changes: 0,
            lifecycle: HashMap::new(),
            prefetched: PrefetchedPayloads::default(),
            max_message_bytes,
            agents: AgentHost::default(),
            store_dir: None,
        }
    }

    /// Handle one request message arriving on a stream; always produces exactly one reply.
    /// `introduced` is that stream's own Hello state (server.rs keeps one per Session stream).
    pub fn handle(&mut self, body: &[u8], attachment: Option<&[u8]>, introduced: &mut bool) -> Outgoing {
        let req = match read_request(body) {
            Ok(r) => r,
            Err(e) => {
                let err = Refusal::new(ErrorCode::InvalidArgument, format!("malformed request: {}", e.message));
                return Outgoing {
                    body: self.envelope(
                        "error",
                        &salvage_request_id(body),
                        &Value::Null,
                        ("error", err.to_json()),
                    ),
                    attachment: None,
                    stop: false,
                };
            }
        };
        match self.dispatch(&req, attachment, introduced) {
            Ok(reply) => Outgoing {
                body: self.envelope("result", &req.request_id, &req.scope_json, ("result", reply.result)),
                attachment: reply.attachment,
                stop: req.method == "Worker.Shutdown",
            },
            Err(err) => Outgoing {
                body: self.envelope("error", &req.request_id, &req.scope_json, ("error", err.to_json())),
                attachment: None,
                stop: false,
            },
        }
    }

    fn envelope(&self, kind: &str, request_id: &str, scope: &Value, payload: (&str, Value)) -> Vec<u8> {
        let v = obj(vec![
            ("type", s(kind)),
            ("requestId", s(request_id)),
            ("workerId", s(&self.worker_id)),
            ("incarnationId", s(&self.incarnation_id)),
            ("scope", scope.clone()),
            payload,
        ]);
        canonical_bytes(&v).expect("replies hold finite numbers only")
    }

    fn dispatch(&mut self, req: &Request, attachment: Option<&[u8]>, introduced: &mut bool) -> Outcome<HostReply> {
        if req.method == "Worker.Hello" {
            let reply = self.hello(req)?;
            *introduced = true;
            return Ok(reply);
        }
        // Nothing, not even Status or Shutdown, is served to a stream that has not introduced itself.
        if !*introduced {
            return Err(Refusal::new(
                ErrorCode::InvalidPhase,
                format!("{} before Worker.Hello", req.method),
            ));
        }
        if STATE_CHANGING.contains(&req.method.as_str()) {
            self.state_changes += 1;
        }
        match req.method.as_str() {
            "Worker.Status" => return self.status(req),
            "Worker.Shutdown" => return self.shutdown(req),
            "Worker.Acknowledge" => return self.acknowledge(req),
            _ => {}
        }
        if self.stopping {
            return Err(Refusal::new(ErrorCode::InvalidPhase, "the worker is stopping"));
        }
        if !LIFECYCLE.contains(&req.method.as_str()) {
            return self.route(req, attachment);
        }
        self.lifecycle_call(req, attachment)
    }

    /// A lifecycle call: its reply is kept until acknowledged, and the same id and body replays it.
    fn lifecycle_call(&mut self, req: &Request, attachment: Option<&[u8]>) -> Outcome<HostReply> {
        let digest = canonical_digest(&obj(vec![
            ("method", s(&req.method)),
            ("scope", req.scope_json.clone()),
            ("params", Value::Object(req.params.clone())),
        ]))
        .expect("parsed values");
        // Before the cache lookup, as runtime.ts: a malformed hold or holdFrom is refused even on a
        // replay. Some(size from which the capture is held): `hold: true` alone is Some(0).
        let hold_from = if req.method == "State.Capture" {
            capture_hold_of(&req.params, self.store_dir.is_some())?
        } else {
            None
        };
        if let Some(cached) = self.lifecycle.get(&req.request_id) {
            if cached.digest != digest {
                return Err(Refusal::new(
                    ErrorCode::Conflict,
                    format!(
                        "{} was already used for a different {} request",
                        req.request_id, req.method
                    ),
                ));
            }
            // A held capture has no attachment to replay: its payload goes to a file, not the reply.
            // One that asked holdFrom but came out shorter replays its attachment like any other.
            return Ok(HostReply {
                result: cached.result.clone(),
                attachment: cached.attachment.clone(),
            });
        }
        if self.lifecycle.len() >= LIFECYCLE_LIMIT {
            return Err(Refusal::new(
                ErrorCode::Busy,
                format!("{LIFECYCLE_LIMIT} lifecycle replies await Worker.Acknowledge; acknowledge them first"),
            ));
        }
        let (reply, held) = match hold_from {
            Some(from) => self.capture_held(req, from)?,
            None => (self.route(req, attachment)?, false),
        };
        Ok(self.remember(&req.request_id, digest, reply, held))
    }

    /// A Capture that asked to be held (store-files-v1), from `hold_from` bytes on
    /// (capture-hold-from-v1; 0 for `hold: true` alone): the host sees the request without `hold`
    /// and `holdFrom`, and tells whether the payload came out held.
    fn capture_held(&mut self, req: &Request, hold_from: u64) -> Outcome<(HostReply, bool)> {
        let params = without_hold(&req.params);
        self.host(&req.request_id, |agents, ctx| {
            agents.capture(&req.method, &req.scope, &params, Some(hold_from), ctx)
        })
    }

    /// Cache a lifecycle reply until Worker.Acknowledge; the payload of a capture that came out held
    /// stays here (State.WritePayload writes it to a file) and the reply sent goes without it.
    fn remember(&mut self, request_id: &str, digest: String, mut reply: HostReply, held: bool) -> HostReply {
        let held = held.then(|| Held {
            bytes: reply.attachment.take().unwrap_or_default(),
            state_changes: self.state_changes,
        });
        self.lifecycle.insert(
            request_id.to_string(),
            Lifecycle {
                digest,
                result: reply.result.clone(),
                attachment: reply.attachment.clone(),
                held,
            },
        );
        reply
    }

    fn route(&mut self, req: &Request, attachment: Option<&[u8]>) -> Outcome<HostReply> {
        let (m, sc, p) = (req.method.as_str(), &req.scope, req.params.as_slice());
        if m == "State.WritePayload" {
            let lifecycle = &self.lifecycle;
            let held_of = |id: &str| lifecycle.get(id).and_then(|entry| entry.held.as_ref());
            return write_held_payload(p, held_of, self.store_dir.as_deref(), self.state_changes);
        }
        // As runtime.ts's handler table: neither the scope nor the session is looked at (the gates in
        // dispatch apply: Hello first, not while stopping; not a lifecycle call, not state-changing),
        // and no progress is counted, since nothing on the agents' timelines moved.
        if m == "State.PrefetchPayload" {
            return self.prefetched.prefetch(p, self.store_dir.as_deref());
        }
        self.host(&req.request_id, |agents, ctx| match m {
            "Agent.Initialize" => agents.initialize(m, sc, p, ctx),
            "Agent.Prepare" => agents.prepare(m, &req.request_id, sc, p, ctx),
            "Agent.Commit" => agents.commit(m, sc, p, ctx),
            "Environment.Initialize" | "Environment.Advance" => Err(Refusal::new(
                ErrorCode::Unsupported,
                format!("{m}: this worker hosts agents"),
            )),
            "State.Capture" => agents.capture(m, sc, p, None, ctx).map(|(reply, _)| reply),
            "State.StageRestore" => agents.stage_restore(m, sc, p, attachment, ctx),
            "State.ActivateRestore" => agents.activate_restore(m, sc, p, ctx),
            _ => Err(Refusal::new(
                ErrorCode::Unsupported,
                format!("unknown method {}", js_stringify(&Value::String(m.into()))),
            )),
        })
    }

    /// Run `call` on the agent host with the context it needs (a completed call counts as progress).
    fn host<T>(&mut self, request_id: &str, call: impl FnOnce(&mut AgentHost, &mut Ctx) -> T) -> T {
        let session = self.bound_session.clone().unwrap_or_default();
        let (counter, last) = (&mut self.progress_counter, &mut self.last_completed);
        let mut progress = || {
            *counter += 1;
            *last = Some(request_id.to_string());
        };
        let mut ctx = Ctx {
            session_id: &session,
            incarnation_id: &self.incarnation_id,
            store_dir: self.store_dir.as_deref(),
            prefetched: &mut self.prefetched,
            progress: &mut progress,
        };
        call(&mut self.agents, &mut ctx)
    }

    // ---- Worker.* -------------------------------------------------------------------------------

    fn hello(&mut self, req: &Request) -> Outcome<HostReply> {
        if req.scope.is_some() {
            return Err(Refusal::new(
                ErrorCode::InvalidArgument,
                "Worker.Hello takes scope null",
            ));
        }
        let p = &req.params;
        refuse_unknown_fields(
            p,
            &[
                "sessionId",
                "expectedWorkerId",
                "role",
                "supportedMajors",
                "contractDigest",
            ],
            "params",
        )?;
        let session_id = read_id(member(p, "sessionId"), "params.sessionId")?.to_string();
        let expected = read_id(member(p, "expectedWorkerId"), "params.expectedWorkerId")?.to_string();
        let contract = read_digest(member(p, "contractDigest"), "params.contractDigest")?.to_string();
        let majors = match member(p, "supportedMajors") {
            Some(Value::Array(items)) if items.iter().all(|m| matches!(m, Value::Number(n) if n.fract() == 0.0)) => {
                items
            }
            _ => {
                return Err(Refusal::new(
                    ErrorCode::InvalidArgument,
                    "params.supportedMajors must be a list of integers",
                ));
            }
        };
        let mine = contract_digest();
        if contract != mine {
            return Err(Refusal::new(
                ErrorCode::IdentityMismatch,
                format!("contractDigest: the caller has {contract}, this worker speaks {mine}"),
            ));
        }
        // Identity refusals say which check failed, never this worker's own id or bound session.
        if expected != self.worker_id {
            return Err(Refusal::new(
                ErrorCode::IdentityMismatch,
                "workerId: params.expectedWorkerId does not name this worker",
            ));
        }
        let role = member(p, "role");
        match role {
            Some(Value::String(r)) if r == "agent" => {}
            Some(Value::String(r)) if r == "environment" => {
                return Err(Refusal::new(
                    ErrorCode::Unsupported,
                    "role: the caller asks for environment, this worker runs as agent",
                ));
            }
            _ => {
                return Err(Refusal::new(
                    ErrorCode::Unsupported,
                    format!("role: {} is not a worker role", shown(role)),
                ));
            }
        }
        if !majors
            .iter()
            .any(|m| matches!(m, Value::Number(n) if *n == PROTOCOL_MAJOR))
        {
            return Err(Refusal::new(
                ErrorCode::Unsupported,
                format!(
                    "supportedMajors: {} does not include 1",
                    js_stringify(&Value::Array(majors.to_vec()))
                ),
            ));
        }
        if let Some(bound) = &self.bound_session
            && *bound != session_id
        {
            return Err(Refusal::new(
                ErrorCode::IdentityMismatch,
                "sessionId: params.sessionId is not the session this worker is bound to",
            ));
        }
        self.bound_session = Some(session_id);
        Ok(HostReply {
            result: obj(vec![
                ("selectedMajor", Value::Number(1.0)),
                ("selectedMinor", Value::Number(0.0)),
                ("workerId", s(&self.worker_id)),
                ("incarnationId", s(&self.incarnation_id)),
                ("role", s("agent")),
                ("runtime", s(RUNTIME_NAME)),
                ("buildDigest", s(&build_digest())),
                ("contractDigest", s(&mine)),
                ("capabilities", Value::Array(self.capabilities())),
                (
                    "limits",
                    obj(vec![
                        ("maxAgents", Value::Number(MAX_AGENTS_PER_WORKER)),
                        ("maxMessageBytes", Value::Number(self.max_message_bytes as f64)),
                        ("workerThreads", Value::Number(1.0)),
                    ]),
                ),
            ]),
            attachment: None,
        })
    }

    /// Sorted as runtime.ts sorts them; store-files-v1 needs a store to read from and write into
    /// (`--store-dir`): a worker without one streams its capture and restore payloads as attachments.
    /// capture-hold-from-v1 (`holdFrom` beside a Capture's `hold`) comes exactly with it.
    fn capabilities(&self) -> Vec<Value> {
        let mut names = vec!["agent-step-v1", "checkpoint-v1"];
        if self.store_dir.is_some() {
            names.push("store-files-v1");
            names.push("capture-hold-from-v1");
        }
        names.sort_unstable();
        names.into_iter().map(s).collect()
    }

    fn status(&self, req: &Request) -> Outcome<HostReply> {
        refuse_unknown_fields(&req.params, &[], "params")?;
        let current_scope = match (&self.bound_session, &self.agents.current_epoch, self.agents.boundary()) {
            (Some(session), Some(epoch), Some(boundary)) => obj(vec![
                ("sessionId", s(session)),
                ("epoch", s(epoch)),
                ("step", s(&boundary.to_string())),
            ]),
            _ => Value::Null,
        };
        Ok(HostReply {
            result: obj(vec![
                ("state", s(if self.stopping { "stopping" } else { self.agents.state() })),
                ("currentScope", current_scope),
                (
                    "lastCompletedRequestId",
                    self.last_completed.as_deref().map(s).unwrap_or(Value::Null),
                ),
                ("progressCounter", s(&self.progress_counter.to_string())),
            ]),
            attachment: None,
        })
    }

    fn acknowledge(&mut self, req: &Request) -> Outcome<HostReply> {
        refuse_unknown_fields(&req.params, &["requestIds"], "params")?;
        let ids = match member(&req.params, "requestIds") {
            Some(Value::Array(items)) if (1..=16).contains(&items.len()) => items,
            _ => {
                return Err(Refusal::new(
                    ErrorCode::InvalidArgument,
                    "params.requestIds must hold 1..16 request ids",
                ));
            }
        };
        let mut ok = Vec::with_capacity(ids.len());
        for (i, id) in ids.iter().enumerate() {
            ok.push(read_request_id(Some(id), &format!("params.requestIds[{i}]"))?.to_string());
        }
        let n = ok
            .iter()
            .filter(|id| self.lifecycle.remove(id.as_str()).is_some())
            .count();
        Ok(HostReply {
            result: obj(vec![("acknowledged", Value::Number(n as f64))]),
            attachment: None,
        })
    }

    fn shutdown(&mut self, req: &Request) -> Outcome<HostReply> {
        refuse_unknown_fields(&req.params, &["reason"], "params")?;
        read_id(member(&req.params, "reason"), "params.reason")?;
        self.stopping = true;
        Ok(HostReply {
            result: obj(vec![("stopping", Value::Bool(true))]),
            attachment: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use detsim_formats::parse_strict;

    fn rt() -> WorkerRuntime {
        WorkerRuntime::new("w-1".into(), Some("s1".into()), "inc-0123456789abcdef".into(), 8 << 20)
    }

    fn reply(out: &Outgoing) -> Value {
        parse_strict(&out.body).unwrap()
    }

    #[test]
    fn the_contract_digest_is_the_sha256_of_the_proto_file() {
        let file = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../proto/detsim/v1/worker.proto"
        ))
        .unwrap();
        assert_eq!(contract_digest(), detsim_formats::sha256_hex(&file));
    }

    #[test]
    fn malformed_and_non_canonical_requests_get_an_error_reply_with_the_salvaged_id() {
        let mut r = rt();
        let mut introduced = false;
        let out = r.handle(
            br#"{"method":"Worker.Status", "requestId":"req-42","scope":null,"params":{}}"#,
            None,
            &mut introduced,
        );
        let v = reply(&out);
        assert_eq!(v.get("requestId").and_then(Value::as_str), Some("req-42"));
        assert_eq!(
            v.get("error").and_then(|e| e.get("code")).and_then(Value::as_str),
            Some("INVALID_ARGUMENT")
        );
        assert_eq!(
            v.get("error").and_then(|e| e.get("message")).and_then(Value::as_str),
            Some("malformed request: body is not RFC 8785 canonical JSON")
        );
        let out = r.handle(b"not json", None, &mut introduced);
        assert_eq!(reply(&out).get("requestId").and_then(Value::as_str), Some("req-0"));
        assert_eq!(
            salvage_request_id(br#"{"requestId":"req-99999999999999999999"}"#),
            "req-0"
        );
    }

    const HELLO: &[u8] = br#"{"method":"Worker.Hello","params":{"contractDigest":"CD","expectedWorkerId":"w-1","role":"agent","sessionId":"s1","supportedMajors":[1]},"requestId":"req-3","scope":null}"#;

    fn hello_body() -> Vec<u8> {
        String::from_utf8(HELLO.to_vec())
            .unwrap()
            .replace("CD", &contract_digest())
            .into_bytes()
    }

    fn code(out: &Outgoing) -> Option<String> {
        reply(out)
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    #[test]
    fn nothing_but_hello_is_served_before_hello_on_the_same_stream_and_shutdown_stops_after_it() {
        let mut r = rt();
        let mut stream = false;
        let out = r.handle(br#"{"method":"Agent.Prepare","params":{"agents":[{"agentId":"a"}]},"requestId":"req-1","scope":{"epoch":"e1","sessionId":"s1","step":"0"}}"#, None, &mut stream);
        assert_eq!(code(&out).as_deref(), Some("INVALID_PHASE"));
        let shutdown = br#"{"method":"Worker.Shutdown","params":{"reason":"done"},"requestId":"req-2","scope":null}"#;
        let out = r.handle(shutdown, None, &mut stream);
        assert!(!out.stop);
        assert_eq!(
            reply(&out)
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str),
            Some("Worker.Shutdown before Worker.Hello")
        );
        assert!(!r.handle(&hello_body(), None, &mut stream).stop);
        assert!(stream);
        // Another stream of the same worker is still un-introduced.
        let mut stranger = false;
        assert_eq!(
            code(&r.handle(
                br#"{"method":"Worker.Status","params":{},"requestId":"req-4","scope":null}"#,
                None,
                &mut stranger
            ))
            .as_deref(),
            Some("INVALID_PHASE")
        );
        let out = r.handle(shutdown, None, &mut stream);
        assert!(out.stop);
        assert_eq!(
            reply(&out).get("result").and_then(|x| x.get("stopping")),
            Some(&Value::Bool(true))
        );
    }

    #[test]
    fn identity_refusals_name_the_check_not_the_worker_id_or_bound_session() {
        let mut r = WorkerRuntime::new(
            "w-secret".into(),
            Some("s-secret".into()),
            "inc-0123456789abcdef".into(),
            8 << 20,
        );
        let mut stream = false;
        let wrong_id = String::from_utf8(hello_body())
            .unwrap()
            .replace("\"w-1\"", "\"w-guess\"");
        let wrong_session = String::from_utf8(hello_body())
            .unwrap()
            .replace("\"w-1\"", "\"w-secret\"");
        let message = |out: &Outgoing| {
            reply(out)
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap()
                .to_string()
        };
        assert_eq!(
            message(&r.handle(wrong_id.as_bytes(), None, &mut stream)),
            "workerId: params.expectedWorkerId does not name this worker"
        );
        assert_eq!(
            message(&r.handle(wrong_session.as_bytes(), None, &mut stream)),
            "sessionId: params.sessionId is not the session this worker is bound to"
        );
        assert!(!stream);
    }

    // ---- store-files-v1: held captures ----------------------------------------------------------

    use crate::payload_file::tests::TempDir;

    const INIT: &str = r#"{"agents":[{"agentId":"a-walk","model":"walker","observation":{"foodDx":-3,"foodDy":1,"score":0,"x":1,"y":2},"params":{"explore":3},"seed":4242,"stepDuration":{"denominator":"3","numerator":"50000000"}}]}"#;

    /// A worker on an introduced stream; with a store, its one agent initialized at step 0.
    struct Worker {
        rt: WorkerRuntime,
        next: u64,
        /// The epoch of the scopes sent (a restore names a new one).
        epoch: &'static str,
    }

    impl Worker {
        fn new(store: Option<&str>) -> Worker {
            let mut rt = rt();
            rt.store_dir = store.map(str::to_string);
            let mut w = Worker {
                rt,
                next: 100,
                epoch: "e1",
            };
            w.ok("Agent.Initialize", Some(0), INIT);
            w
        }

        /// Send one request (params as JSON text); the reply and its attachment.
        fn call(&mut self, method: &str, step: Option<u64>, params: &str) -> (String, Value, Option<Vec<u8>>) {
            self.next += 1;
            let id = format!("req-{}", self.next);
            self.call_as(&id, method, step, params)
        }

        fn call_as(
            &mut self,
            id: &str,
            method: &str,
            step: Option<u64>,
            params: &str,
        ) -> (String, Value, Option<Vec<u8>>) {
            let scope = step.map_or(Value::Null, |k| {
                obj(vec![
                    ("epoch", s(self.epoch)),
                    ("sessionId", s("s1")),
                    ("step", s(&k.to_string())),
                ])
            });
            let body = canonical_bytes(&obj(vec![
                ("method", s(method)),
                ("params", parse_strict(params.as_bytes()).unwrap()),
                ("requestId", s(id)),
                ("scope", scope),
            ]))
            .unwrap();
            let out = self.rt.handle(&body, None, &mut true);
            (id.to_string(), reply(&out), out.attachment)
        }

        fn ok(&mut self, method: &str, step: Option<u64>, params: &str) -> (String, Value, Option<Vec<u8>>) {
            let (id, v, attachment) = self.call(method, step, params);
            assert!(v.get("result").is_some(), "{method}: {}", js_stringify(&v));
            (id, v, attachment)
        }

        fn refused(&mut self, method: &str, step: Option<u64>, params: &str) -> (String, String) {
            let (_, v, attachment) = self.call(method, step, params);
            assert!(attachment.is_none());
            let e = v
                .get("error")
                .unwrap_or_else(|| panic!("{method}: {}", js_stringify(&v)));
            let text = |k: &str| e.get(k).and_then(Value::as_str).unwrap().to_string();
            (text("code"), text("message"))
        }
    }

    const CAPTURE: &str = r#"{"agentId":"a-walk","checkpointId":"c1"HOLD}"#;
    const HOLD: &str = r#","hold":true"#;

    fn capture(hold: &str) -> String {
        CAPTURE.replace("HOLD", hold)
    }

    fn write_payload(capture_id: &str, path: &str, offset: u64) -> String {
        let file = obj(vec![("offset", s(&offset.to_string())), ("path", s(path))]);
        js_stringify(&obj(vec![("captureRequestId", s(capture_id)), ("file", file)]))
    }

    fn payload_of(v: &Value) -> String {
        js_stringify(v.get("result").and_then(|r| r.get("payload")).unwrap())
    }

    fn result_of(v: &Value) -> String {
        js_stringify(v.get("result").unwrap())
    }

    const NO_HELD: &str = "params.captureRequestId names no held capture awaiting acknowledgment on this worker";
    const MOVED: &str =
        "params.captureRequestId: this worker has served a state-changing call since that capture; capture again";

    #[test]
    fn hello_runtime_names_the_crate_version_and_the_rustc_that_built_it() {
        let v = reply(&rt().handle(&hello_body(), None, &mut false));
        let runtime = v.get("result").and_then(|x| x.get("runtime")).map(js_stringify);
        let expected = format!(
            "\"detsim-rs/{} rustc/{}\"",
            env!("CARGO_PKG_VERSION"),
            env!("DETSIM_RUSTC_VERSION")
        );
        assert_eq!(runtime, Some(expected));
        let rustc = env!("DETSIM_RUSTC_VERSION");
        assert!(rustc.starts_with("1."), "rustc version {rustc:?} was not read");
    }

    #[test]
    fn hello_offers_store_files_and_capture_hold_from_only_with_a_store_dir_sorted_as_typescript() {
        let capabilities = |store: Option<&str>| {
            let mut r = rt();
            r.store_dir = store.map(str::to_string);
            let v = reply(&r.handle(&hello_body(), None, &mut false));
            js_stringify(v.get("result").and_then(|x| x.get("capabilities")).unwrap())
        };
        assert_eq!(capabilities(None), r#"["agent-step-v1","checkpoint-v1"]"#);
        assert_eq!(
            capabilities(Some("/store")),
            r#"["agent-step-v1","capture-hold-from-v1","checkpoint-v1","store-files-v1"]"#
        );
    }

    #[test]
    fn a_held_capture_replies_without_attachment_and_with_the_size_alone() {
        let store = TempDir::new("rt-hold");
        let mut w = Worker::new(Some(store.text()));
        let (_, streamed, bytes) = w.ok("State.Capture", Some(0), &capture(""));
        let bytes = bytes.expect("a streamed capture carries its payload");
        assert_eq!(
            payload_of(&streamed),
            format!(
                r#"{{"byteLength":"{}","digest":"{}"}}"#,
                bytes.len(),
                detsim_formats::sha256_hex(&bytes)
            )
        );
        let (held_id, held, attachment) = w.ok("State.Capture", Some(0), &capture(HOLD));
        assert!(attachment.is_none());
        assert_eq!(payload_of(&held), format!(r#"{{"byteLength":"{}"}}"#, bytes.len()));
        // A replay of the held capture is the cached reply, again without the payload.
        let (_, replay, attachment) = w.call_as(&held_id, "State.Capture", Some(0), &capture(HOLD));
        assert!(attachment.is_none());
        assert_eq!(result_of(&replay), result_of(&held));
    }

    #[test]
    fn hold_refusals_come_before_the_lifecycle_cache_and_without_a_store_a_hold_is_unsupported() {
        let mut w = Worker::new(None);
        let (code, message) = w.refused("State.Capture", Some(0), &capture(HOLD));
        assert_eq!(code, "UNSUPPORTED");
        assert_eq!(
            message,
            "params.file: this worker was started without --store-dir and writes no checkpoint files"
        );
        let (id, _, _) = w.ok("State.Capture", Some(0), &capture(""));
        let (_, replay, _) = w.call_as(&id, "State.Capture", Some(0), &capture(r#","hold":false"#));
        assert_eq!(
            js_stringify(replay.get("error").unwrap()),
            r#"{"code":"INVALID_ARGUMENT","message":"params.hold must be true when present","mutation":"none"}"#
        );
        // No other Capture param is known (the host refuses it).
        assert_eq!(
            w.refused("State.Capture", Some(0), &capture(r#","hashAtWrite":true"#)),
            (
                "INVALID_ARGUMENT".into(),
                r#"params: unknown field "hashAtWrite""#.into()
            )
        );
    }

    fn hold_from(size: u64) -> String {
        capture(&format!(r#"{HOLD},"holdFrom":"{size}""#))
    }

    /// A worker with a store (an empty checkpoint temporary in it) and a plain capture's reply and bytes.
    fn store_with_capture(name: &str) -> (TempDir, String, Worker, Value, Vec<u8>) {
        let store = TempDir::new(name);
        let temp = store.at("tmp-c1.flysess");
        std::fs::write(&temp, b"").unwrap();
        let mut w = Worker::new(Some(store.text()));
        let (_, streamed, bytes) = w.ok("State.Capture", Some(0), &capture(""));
        (store, temp, w, streamed, bytes.unwrap())
    }

    #[test]
    fn a_capture_shorter_than_hold_from_is_an_ordinary_unheld_capture_cached_with_its_attachment() {
        let (_store, temp, mut w, streamed, bytes) = store_with_capture("rt-hold-from-small");
        let size = bytes.len() as u64;
        let (small, reply, attachment) = w.ok("State.Capture", Some(0), &hold_from(size + 1));
        assert_eq!(attachment.as_deref(), Some(&bytes[..]));
        assert_eq!(result_of(&reply), result_of(&streamed));
        assert_eq!(
            payload_of(&reply),
            format!(
                r#"{{"byteLength":"{size}","digest":"{}"}}"#,
                detsim_formats::sha256_hex(&bytes)
            )
        );
        // Replayed as any unheld capture: the same reply and its attachment.
        let (_, replay, attachment) = w.call_as(&small, "State.Capture", Some(0), &hold_from(size + 1));
        assert_eq!(attachment.as_deref(), Some(&bytes[..]));
        assert_eq!(result_of(&replay), result_of(&reply));
        // The same id with another holdFrom is another request.
        let (_, other, _) = w.call_as(&small, "State.Capture", Some(0), &hold_from(size));
        assert_eq!(
            other.get("error").and_then(|e| e.get("code")).and_then(Value::as_str),
            Some("CONFLICT")
        );
        // Nothing is held for it to write.
        let refusal = w.refused("State.WritePayload", None, &write_payload(&small, &temp, 0));
        assert_eq!(refusal, ("INVALID_ARGUMENT".into(), NO_HELD.into()));
        assert_eq!(std::fs::read(&temp).unwrap(), b"");
        let (_, huge, attachment) = w.ok("State.Capture", Some(0), &hold_from(u64::MAX));
        assert_eq!(attachment.as_deref(), Some(&bytes[..]));
        assert_eq!(result_of(&huge), result_of(&streamed));
    }

    #[test]
    fn a_capture_at_least_hold_from_long_is_held_as_with_hold_alone() {
        let (_store, temp, mut w, _, bytes) = store_with_capture("rt-hold-from-large");
        let size = bytes.len() as u64;
        let (_, plain, _) = w.ok("State.Capture", Some(0), &capture(HOLD));
        for from in [0, size] {
            let (id, held, attachment) = w.ok("State.Capture", Some(0), &hold_from(from));
            assert!(attachment.is_none(), "holdFrom {from}");
            assert_eq!(result_of(&held), result_of(&plain));
            assert_eq!(payload_of(&held), format!(r#"{{"byteLength":"{size}"}}"#));
            let (_, replay, attachment) = w.call_as(&id, "State.Capture", Some(0), &hold_from(from));
            assert!(attachment.is_none());
            assert_eq!(result_of(&replay), result_of(&held));
            let (_, wrote, _) = w.ok("State.WritePayload", None, &write_payload(&id, &temp, 0));
            assert_eq!(
                result_of(&wrote),
                format!(
                    r#"{{"byteLength":"{size}","digest":"{}"}}"#,
                    detsim_formats::sha256_hex(&bytes)
                )
            );
            assert_eq!(std::fs::read(&temp).unwrap(), bytes);
        }
    }

    #[test]
    fn hold_from_refusals_come_before_the_lifecycle_cache_in_order() {
        let mut w = Worker::new(None);
        let only_with_hold = (
            "INVALID_ARGUMENT".to_string(),
            "params.holdFrom is allowed only with params.hold".to_string(),
        );
        assert_eq!(
            w.refused("State.Capture", Some(0), &capture(r#","holdFrom":"1""#)),
            only_with_hold
        );
        let (id, _, _) = w.ok("State.Capture", Some(0), &capture(""));
        let (_, replay, attachment) = w.call_as(&id, "State.Capture", Some(0), &capture(r#","holdFrom":"1""#));
        assert!(attachment.is_none());
        assert_eq!(
            js_stringify(replay.get("error").unwrap()),
            r#"{"code":"INVALID_ARGUMENT","message":"params.holdFrom is allowed only with params.hold","mutation":"none"}"#
        );
        // Without a store, the hold is unsupported whatever holdFrom is.
        assert_eq!(w.refused("State.Capture", Some(0), &hold_from(1)).0, "UNSUPPORTED");
        let store = TempDir::new("rt-hold-from-refused");
        let mut w = Worker::new(Some(store.text()));
        assert_eq!(
            w.refused("State.Capture", Some(0), &capture(r#","hold":false,"holdFrom":"1""#)),
            (
                "INVALID_ARGUMENT".into(),
                "params.hold must be true when present".into()
            )
        );
        assert_eq!(
            w.refused("State.Capture", Some(0), &capture(r#","hold":true,"holdFrom":65536"#)),
            (
                "INVALID_ARGUMENT".into(),
                r#"params.holdFrom: 65536 is not a U64 (a decimal string, "0" or no leading zero, at most 18446744073709551615)"#
                    .into()
            )
        );
    }

    #[test]
    fn write_payload_writes_the_held_bytes_at_the_offset_and_replies_with_their_digest() {
        let store = TempDir::new("rt-write");
        let temp = store.at("tmp-c1.flysess");
        std::fs::write(&temp, b"").unwrap();
        let mut w = Worker::new(Some(store.text()));
        let (_, streamed, bytes) = w.ok("State.Capture", Some(0), &capture(""));
        let bytes = bytes.unwrap();
        let (held, _, _) = w.ok("State.Capture", Some(0), &capture(HOLD));
        let (_, wrote, attachment) = w.ok("State.WritePayload", None, &write_payload(&held, &temp, 5));
        assert!(attachment.is_none());
        let digest = streamed
            .get("result")
            .and_then(|r| r.get("payload"))
            .and_then(|p| p.get("digest"));
        assert_eq!(
            result_of(&wrote),
            format!(
                r#"{{"byteLength":"{}","digest":{}}}"#,
                bytes.len(),
                js_stringify(digest.unwrap())
            )
        );
        let file = std::fs::read(&temp).unwrap();
        assert_eq!(&file[..5], &[0; 5]);
        assert_eq!(file[5..], bytes[..]);
        // Writing the same bytes twice is harmless: not a lifecycle call.
        let (_, again, _) = w.ok("State.WritePayload", None, &write_payload(&held, &temp, 5));
        assert_eq!(result_of(&again), result_of(&wrote));
        assert_eq!(std::fs::read(&temp).unwrap(), file);
        let (code, _) = w.refused(
            "State.WritePayload",
            None,
            &write_payload(&held, &store.at("c1.flysess"), 0),
        );
        assert_eq!(code, "INVALID_ARGUMENT");
    }

    #[test]
    fn only_a_held_unacknowledged_capture_is_writable_and_only_before_any_state_changing_call() {
        let store = TempDir::new("rt-which");
        let temp = store.at("tmp-c1.flysess");
        std::fs::write(&temp, b"").unwrap();
        let mut w = Worker::new(Some(store.text()));
        let (streamed, _, _) = w.ok("State.Capture", Some(0), &capture(""));
        let (held, _, _) = w.ok("State.Capture", Some(0), &capture(HOLD));
        for id in [streamed.as_str(), "req-99999"] {
            let refusal = w.refused("State.WritePayload", None, &write_payload(id, &temp, 0));
            assert_eq!(refusal, ("INVALID_ARGUMENT".into(), NO_HELD.into()));
        }
        w.ok("Agent.Prepare", Some(0), r#"{"agents":[{"agentId":"a-walk"}]}"#);
        let refusal = w.refused("State.WritePayload", None, &write_payload(&held, &temp, 0));
        assert_eq!(refusal, ("INVALID_PHASE".into(), MOVED.into()));
        assert_eq!(std::fs::read(&temp).unwrap(), b"");
        w.ok("Worker.Acknowledge", None, &format!(r#"{{"requestIds":["{held}"]}}"#));
        let refusal = w.refused("State.WritePayload", None, &write_payload(&held, &temp, 0));
        assert_eq!(refusal, ("INVALID_ARGUMENT".into(), NO_HELD.into()));
    }

    #[test]
    fn a_state_changing_call_counts_even_when_refused_and_write_payload_is_refused_while_stopping() {
        let store = TempDir::new("rt-stop");
        let temp = store.at("tmp-c1.flysess");
        std::fs::write(&temp, b"").unwrap();
        let mut w = Worker::new(Some(store.text()));
        let (held, _, _) = w.ok("State.Capture", Some(0), &capture(HOLD));
        // This worker hosts no environment, but the call still counts, as in runtime.ts.
        w.refused("Environment.Advance", Some(0), "{}");
        assert_eq!(
            w.refused("State.WritePayload", None, &write_payload(&held, &temp, 0)).0,
            "INVALID_PHASE"
        );
        let (held, _, _) = w.ok("State.Capture", Some(0), &capture(HOLD));
        w.ok("Worker.Shutdown", None, r#"{"reason":"done"}"#);
        assert_eq!(
            w.refused("State.WritePayload", None, &write_payload(&held, &temp, 0)),
            ("INVALID_PHASE".into(), "the worker is stopping".into())
        );
        let body = br#"{"method":"State.WritePayload","params":{},"requestId":"req-1","scope":null}"#;
        assert_eq!(
            code(&w.rt.handle(body, None, &mut false)).as_deref(),
            Some("INVALID_PHASE")
        );
    }

    // ---- store-files-v1: restore prefetch -------------------------------------------------------

    /// A worker (its scopes now in the new epoch e2) whose agent's captured payload lies in the
    /// store's `c1.flysess` at offset 16, followed by as many other bytes.
    struct Restore {
        w: Worker,
        path: String,
        payload: Vec<u8>,
        compat: String,
        store: TempDir,
    }

    const AT: u64 = 16;

    impl Restore {
        fn new(tag: &str) -> Restore {
            let store = TempDir::new(tag);
            let mut w = Worker::new(Some(store.text()));
            let (_, v, bytes) = w.ok("State.Capture", Some(0), &capture(""));
            let payload = bytes.unwrap();
            let result = v.get("result").unwrap();
            let compat = result.get("compatibilityDigest").and_then(Value::as_str).unwrap();
            let path = store.at("c1.flysess");
            std::fs::write(&path, Restore::file_with(&payload)).unwrap();
            w.epoch = "e2";
            Restore {
                w,
                path,
                compat: compat.to_string(),
                payload,
                store,
            }
        }

        /// A checkpoint file's stand-in: a header, the payload, then other bytes of the same length.
        fn file_with(payload: &[u8]) -> Vec<u8> {
            let mut file = vec![b'h'; AT as usize];
            file.extend_from_slice(payload);
            file.extend(std::iter::repeat_n(b'x', payload.len()));
            file
        }

        /// `{byteLength, digest, file}` of the payload, read at `offset`.
        fn reference(&self, offset: u64) -> Value {
            let file = obj(vec![("offset", s(&offset.to_string())), ("path", s(&self.path))]);
            obj(vec![
                ("byteLength", s(&self.payload.len().to_string())),
                ("digest", s(&detsim_formats::sha256_hex(&self.payload))),
                ("file", file),
            ])
        }

        fn prefetch(&mut self, payload: Value) -> String {
            let params = obj(vec![("agentId", s("a-walk")), ("payload", payload)]);
            let (_, v, attachment) = self.w.ok("State.PrefetchPayload", Some(0), &js_stringify(&params));
            assert!(attachment.is_none());
            result_of(&v)
        }

        fn stage_params(&self, offset: u64) -> String {
            let source = obj(vec![("epoch", s("e1")), ("sessionId", s("s1")), ("step", s("0"))]);
            js_stringify(&obj(vec![
                ("agentId", s("a-walk")),
                ("checkpointId", s("c1")),
                ("compatibilityDigest", s(&self.compat)),
                ("payload", self.reference(offset)),
                ("sourceScope", source),
            ]))
        }

        /// State.StageRestore naming the payload at `offset`: the restore token, or the refusal.
        fn stage(&mut self, offset: u64) -> Result<String, (String, String)> {
            let params = self.stage_params(offset);
            let (_, v, _) = self.w.call("State.StageRestore", Some(0), &params);
            let text = |x: &Value, k: &str| x.get(k).and_then(Value::as_str).unwrap().to_string();
            match v.get("result") {
                Some(r) => Ok(text(r, "restoreToken")),
                None => Err((
                    text(v.get("error").unwrap(), "code"),
                    text(v.get("error").unwrap(), "message"),
                )),
            }
        }
    }

    const MATCHED: &str = r#"{"matched":true}"#;
    const NOT_MATCHED: &str = r#"{"matched":false}"#;
    const NO_STORE_READ: &str = "params.payload.file: this worker was started without --store-dir and reads no payload files (send the payload as an attachment)";
    const DIGEST_FAILED: &str = "params.payload.digest: the payload digest check failed for payload agent-a-walk";

    #[test]
    fn a_stage_of_the_prefetched_range_uses_the_prefetched_bytes_without_reading_the_file() {
        let mut r = Restore::new("rt-pf-use");
        assert_eq!(r.prefetch(r.reference(AT)), MATCHED);
        // Without a store the stage could read no file: these are the prefetched bytes.
        r.w.rt.store_dir = None;
        assert!(r.stage(AT).unwrap().starts_with("rt-"));
        // The same stage without a prefetch is refused for want of a store, as a payload range is.
        let mut r = Restore::new("rt-pf-none");
        r.w.rt.store_dir = None;
        assert_eq!(r.stage(AT), Err(("UNSUPPORTED".into(), NO_STORE_READ.into())));
    }

    #[test]
    fn nothing_is_kept_for_a_wrong_digest_and_payload_null_drops_the_prefetch() {
        let mut r = Restore::new("rt-pf-drop");
        let mut wrong = r.reference(AT);
        if let Value::Object(members) = &mut wrong {
            members.iter_mut().find(|(k, _)| k == "digest").unwrap().1 = s(&"0".repeat(64));
        }
        assert_eq!(r.prefetch(wrong), NOT_MATCHED);
        r.w.rt.store_dir = None;
        assert_eq!(r.stage(AT).unwrap_err().0, "UNSUPPORTED");
        let mut r = Restore::new("rt-pf-null");
        assert_eq!(r.prefetch(r.reference(AT)), MATCHED);
        assert_eq!(r.prefetch(Value::Null), NOT_MATCHED);
        r.w.rt.store_dir = None;
        assert_eq!(r.stage(AT).unwrap_err().0, "UNSUPPORTED");
    }

    #[test]
    fn a_file_rewritten_after_the_prefetch_is_read_again_by_the_stage_and_refused_by_its_digest() {
        let mut r = Restore::new("rt-pf-rewritten");
        assert_eq!(r.prefetch(r.reference(AT)), MATCHED);
        // Another file (new inode, mtime, ctime) under the same name, with other bytes in the range.
        let mut other = r.payload.clone();
        other[0] ^= 0xff;
        let replacement = format!("{}.new", r.path);
        std::fs::write(&replacement, Restore::file_with(&other)).unwrap();
        std::fs::rename(&replacement, &r.path).unwrap();
        assert_eq!(r.stage(AT), Err(("BUFFER_INVALID".into(), DIGEST_FAILED.into())));
    }

    #[test]
    fn a_prefetch_of_another_range_is_not_used_and_is_used_up_by_the_stage_all_the_same() {
        let mut r = Restore::new("rt-pf-other");
        assert_eq!(r.prefetch(r.reference(AT)), MATCHED);
        // The stage names the same digest at the next range, which holds other bytes: read and refused.
        let next = AT + r.payload.len() as u64;
        assert_eq!(r.stage(next), Err(("BUFFER_INVALID".into(), DIGEST_FAILED.into())));
        r.w.rt.store_dir = None;
        assert_eq!(r.stage(AT).unwrap_err().0, "UNSUPPORTED");
    }

    #[test]
    fn prefetch_is_served_after_hello_whatever_the_scope_but_not_while_stopping_nor_kept_nor_counted() {
        let mut r = Restore::new("rt-pf-route");
        // No restore here: the agent's own epoch, for the capture below.
        r.w.epoch = "e1";
        let params = js_stringify(&obj(vec![("agentId", s("a-walk")), ("payload", r.reference(AT))]));
        let body = |id: &str, session: &str| {
            let scope = obj(vec![("epoch", s("e9")), ("sessionId", s(session)), ("step", s("7"))]);
            let v = obj(vec![
                ("method", s("State.PrefetchPayload")),
                ("params", parse_strict(params.as_bytes()).unwrap()),
                ("requestId", s(id)),
                ("scope", scope),
            ]);
            canonical_bytes(&v).unwrap()
        };
        let status = |w: &mut Worker| result_of(&w.ok("Worker.Status", None, "{}").1);
        let before = status(&mut r.w);
        let out = r.w.rt.handle(&body("req-1", "s1"), None, &mut false);
        assert_eq!(
            js_stringify(reply(&out).get("error").unwrap()),
            r#"{"code":"INVALID_PHASE","message":"State.PrefetchPayload before Worker.Hello","mutation":"none"}"#
        );
        // Another session's scope, no scope at all: served (runtime.ts checks neither for this method).
        let out = r.w.rt.handle(&body("req-2", "s-other"), None, &mut true);
        assert_eq!(result_of(&reply(&out)), MATCHED);
        let (held, _, _) = r.w.ok("State.Capture", Some(0), &capture(HOLD));
        // Not a lifecycle call: an id used again is no CONFLICT, and more than 16 never make the worker BUSY.
        for _ in 0..LIFECYCLE_LIMIT + 1 {
            let (_, v, _) = r.w.call_as("req-7", "State.PrefetchPayload", None, &params);
            assert_eq!(result_of(&v), MATCHED);
        }
        let (_, v, _) = r.w.call_as(
            "req-7",
            "State.PrefetchPayload",
            None,
            r#"{"agentId":"a-walk","payload":null}"#,
        );
        assert_eq!(result_of(&v), NOT_MATCHED);
        // Not state-changing (the held capture's write still goes) and no progress counted.
        let temp = r.store.at("tmp-c2.flysess");
        std::fs::write(&temp, b"").unwrap();
        r.w.ok("State.WritePayload", None, &write_payload(&held, &temp, 0));
        assert_eq!(status(&mut r.w), before);
        r.w.ok("Worker.Shutdown", None, r#"{"reason":"done"}"#);
        assert_eq!(
            r.w.refused("State.PrefetchPayload", None, &params),
            ("INVALID_PHASE".into(), "the worker is stopping".into())
        );
    }
}
