// A protocol refusal: the in-band error body {code, message, mutation} of worker.proto, and the
// small JSON builders the hosts use to write replies. Not the envelope (runtime.rs) nor transport.
use detsim_formats::{DetsimError, Value};

#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
    pub mutation: &'static str,
}

impl Refusal {
    /// A refusal before mutation ("none"), as every code but RESULT_EXPIRED/BACKEND_FAILURE/INTERNAL.
    pub fn new(code: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
            mutation: "none",
        }
    }

    pub fn with_mutation(code: &'static str, message: impl Into<String>, mutation: &'static str) -> Refusal {
        Refusal {
            code,
            message: message.into(),
            mutation,
        }
    }

    pub fn to_json(&self) -> Value {
        obj(vec![
            ("code", s(self.code)),
            ("message", s(&self.message)),
            ("mutation", s(self.mutation)),
        ])
    }
}

/// A refused field (DetsimError) is INVALID_ARGUMENT with the reader's message, as runtime.ts asInvalid.
impl From<DetsimError> for Refusal {
    fn from(e: DetsimError) -> Refusal {
        Refusal::new("INVALID_ARGUMENT", e.message)
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
