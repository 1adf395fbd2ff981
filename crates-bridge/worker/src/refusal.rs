// A protocol refusal: the in-band error body {code, message, mutation} of worker.proto, and the
// small JSON builders the hosts use to write replies. Not the envelope (runtime.rs) nor transport.
use detsim_formats::{DetsimError, Value};

/// The protocol's error codes (core/protocol/envelope.ts ERROR_CODES, same order); `as_str` is the
/// wire text. The unit test below reads envelope.ts so the two lists cannot drift apart.
// IN_PROGRESS, RESULT_EXPIRED and INTERNAL are part of the protocol but this worker never sends
// them; the enum still lists every code so it stays the complete vocabulary, hence the allow.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidArgument,
    Unsupported,
    IdentityMismatch,
    StaleEpoch,
    StaleStep,
    FutureStep,
    InvalidPhase,
    Conflict,
    InProgress,
    Busy,
    BufferInvalid,
    ResultExpired,
    IncompatibleState,
    BackendFailure,
    Internal,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidArgument => "INVALID_ARGUMENT",
            ErrorCode::Unsupported => "UNSUPPORTED",
            ErrorCode::IdentityMismatch => "IDENTITY_MISMATCH",
            ErrorCode::StaleEpoch => "STALE_EPOCH",
            ErrorCode::StaleStep => "STALE_STEP",
            ErrorCode::FutureStep => "FUTURE_STEP",
            ErrorCode::InvalidPhase => "INVALID_PHASE",
            ErrorCode::Conflict => "CONFLICT",
            ErrorCode::InProgress => "IN_PROGRESS",
            ErrorCode::Busy => "BUSY",
            ErrorCode::BufferInvalid => "BUFFER_INVALID",
            ErrorCode::ResultExpired => "RESULT_EXPIRED",
            ErrorCode::IncompatibleState => "INCOMPATIBLE_STATE",
            ErrorCode::BackendFailure => "BACKEND_FAILURE",
            ErrorCode::Internal => "INTERNAL",
        }
    }

    /// Codes that may report a mutation (envelope.ts MAY_MUTATE_CODES); every other code is a
    /// refusal before mutation and carries mutation "none".
    pub fn may_mutate(self) -> bool {
        matches!(
            self,
            ErrorCode::ResultExpired | ErrorCode::BackendFailure | ErrorCode::Internal
        )
    }
}

/// What a failed request did to the worker's state (envelope.ts MUTATIONS); `as_str` is the wire text.
// Applied is part of the protocol but this worker never reports it; listed for completeness, hence the allow.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    None,
    Applied,
    Unknown,
}

impl Mutation {
    pub fn as_str(self) -> &'static str {
        match self {
            Mutation::None => "none",
            Mutation::Applied => "applied",
            Mutation::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
    pub mutation: Mutation,
}

impl Refusal {
    /// A refusal before mutation ("none"), as every code but RESULT_EXPIRED/BACKEND_FAILURE/INTERNAL.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
            mutation: Mutation::None,
        }
    }

    /// A failure that may have mutated state: only the codes envelope.ts allows to say so.
    pub fn with_mutation(code: ErrorCode, message: impl Into<String>, mutation: Mutation) -> Refusal {
        debug_assert!(
            code.may_mutate() || mutation == Mutation::None,
            "{code:?} is a refusal before mutation"
        );
        Refusal {
            code,
            message: message.into(),
            mutation,
        }
    }

    pub fn to_json(&self) -> Value {
        obj(vec![
            ("code", s(self.code.as_str())),
            ("message", s(&self.message)),
            ("mutation", s(self.mutation.as_str())),
        ])
    }
}

/// A refused field (DetsimError) is INVALID_ARGUMENT with the reader's message, as runtime.ts asInvalid.
impl From<DetsimError> for Refusal {
    fn from(e: DetsimError) -> Refusal {
        Refusal::new(ErrorCode::InvalidArgument, e.message)
    }
}

pub type Outcome<T> = Result<T, Refusal>;

pub fn s(text: &str) -> Value {
    Value::String(text.to_string())
}

pub fn obj(members: Vec<(&str, Value)>) -> Value {
    Value::Object(members.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// JSON.stringify of a value that may be absent (undefined), for messages mirroring TypeScript.
pub fn shown(value: Option<&Value>) -> String {
    match value {
        None => "undefined".into(),
        Some(v) => detsim_formats::json::js_stringify(v),
    }
}

/// JSON.stringify of a string.
pub fn quoted(text: &str) -> String {
    detsim_formats::json::js_stringify(&Value::String(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ErrorCode; 15] = [
        ErrorCode::InvalidArgument,
        ErrorCode::Unsupported,
        ErrorCode::IdentityMismatch,
        ErrorCode::StaleEpoch,
        ErrorCode::StaleStep,
        ErrorCode::FutureStep,
        ErrorCode::InvalidPhase,
        ErrorCode::Conflict,
        ErrorCode::InProgress,
        ErrorCode::Busy,
        ErrorCode::BufferInvalid,
        ErrorCode::ResultExpired,
        ErrorCode::IncompatibleState,
        ErrorCode::BackendFailure,
        ErrorCode::Internal,
    ];

    /// The quoted names inside `export const <name> = [ ... ]` of core/protocol/envelope.ts.
    fn typescript_list(name: &str) -> Vec<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../core/protocol/envelope.ts");
        let source = std::fs::read_to_string(path).expect("core/protocol/envelope.ts is readable");
        let start = source
            .find(&format!("export const {name} = ["))
            .expect("the list is declared");
        let body = &source[start..];
        let body = &body[body.find('[').unwrap() + 1..body.find(']').unwrap()];
        body.split('\'').skip(1).step_by(2).map(str::to_string).collect()
    }

    #[test]
    fn the_error_codes_are_the_typescript_error_codes_in_the_same_order() {
        let mine: Vec<&str> = ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(mine, typescript_list("ERROR_CODES"));
    }

    #[test]
    fn only_result_expired_backend_failure_and_internal_may_report_a_mutation() {
        let may: Vec<&str> = ALL.iter().filter(|c| c.may_mutate()).map(|c| c.as_str()).collect();
        assert_eq!(may, ["RESULT_EXPIRED", "BACKEND_FAILURE", "INTERNAL"]);
        let mutations: Vec<&str> = [Mutation::None, Mutation::Applied, Mutation::Unknown]
            .iter()
            .map(|m| m.as_str())
            .collect();
        assert_eq!(mutations, typescript_list("MUTATIONS"));
    }

    #[test]
    fn a_refusal_writes_the_wire_text_of_its_code_and_mutation() {
        let r = Refusal::with_mutation(ErrorCode::BackendFailure, "boom", Mutation::Unknown);
        let json = detsim_formats::json::js_stringify(&r.to_json());
        assert_eq!(
            json,
            r#"{"code":"BACKEND_FAILURE","message":"boom","mutation":"unknown"}"#
        );
        let json = detsim_formats::json::js_stringify(&Refusal::new(ErrorCode::StaleStep, "late").to_json());
        assert_eq!(json, r#"{"code":"STALE_STEP","message":"late","mutation":"none"}"#);
    }
}
