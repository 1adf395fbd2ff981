// The one error for refused input, mirroring core/formats/errors.ts: a stable reason code
// (the same strings as core/formats/reasons.ts), a one-line message, and the field if any.
// Not for programming errors: those panic.
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetsimError {
    /// A reason code from the TypeScript registry `REASONS` (e.g. `struct_invalid_json`).
    pub reason: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl DetsimError {
    pub fn new(reason: &'static str, message: impl Into<String>) -> Self {
        DetsimError {
            reason,
            message: message.into(),
            field: None,
        }
    }

    pub fn at(reason: &'static str, message: impl Into<String>, field: impl Into<String>) -> Self {
        DetsimError {
            reason,
            message: message.into(),
            field: Some(field.into()),
        }
    }
}

impl fmt::Display for DetsimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.reason, self.message)
    }
}

impl std::error::Error for DetsimError {}

pub type Result<T> = std::result::Result<T, DetsimError>;
