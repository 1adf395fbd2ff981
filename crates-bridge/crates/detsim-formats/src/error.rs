// The one error for refused input, mirroring core/formats/errors.ts: a stable reason code
// (the same strings as core/formats/reasons.ts), a one-line message, and the field if any.
// Not for programming errors: those panic.
use std::fmt;

/// The reason codes this crate and its users refuse with: each a code of the TypeScript registry
/// core/formats/reasons.ts, whose text `as_str` (and Display) writes unchanged. The unit test below
/// reads that registry, so a code missing from it fails the test.
macro_rules! reasons {
    ($($variant:ident => $text:literal,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Reason {
            $($variant,)*
        }

        impl Reason {
            /// Every code, for the registry check.
            pub const ALL: &[Reason] = &[$(Reason::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$variant => $text,)*
                }
            }
        }
    };
}

reasons! {
    AuditEnvelopeDigest => "audit_envelope_digest",
    AuditEnvelopeLength => "audit_envelope_length",
    AuditManifestPayloadsMismatch => "audit_manifest_payloads_mismatch",
    AuditPayloadDigestMismatch => "audit_payload_digest_mismatch",
    IdentForeignCertificate => "ident_foreign_certificate",
    IdentNoClientCertificate => "ident_no_client_certificate",
    IdentTokenMissing => "ident_token_missing",
    IdentTokenWrong => "ident_token_wrong",
    PermListenNotLocal => "perm_listen_not_local",
    PermPlaintextTcpUnbound => "perm_plaintext_tcp_unbound",
    PermTlsUnreadable => "perm_tls_unreadable",
    PermWriteFailed => "perm_write_failed",
    SizeAgentsOver60 => "size_agents_over_60",
    SizeEnvelopeTooShort => "size_envelope_too_short",
    SizeMessageTooLarge => "size_message_too_large",
    SizePayloadCountOver64 => "size_payload_count_over_64",
    StructDuplicateAgentId => "struct_duplicate_agent_id",
    StructDuplicateKey => "struct_duplicate_key",
    StructEnvelopeEntry => "struct_envelope_entry",
    StructEnvelopeLegacyFormat => "struct_envelope_legacy_format",
    StructEnvelopeMagic => "struct_envelope_magic",
    StructEnvelopeManifest => "struct_envelope_manifest",
    StructEnvelopeManifestFields => "struct_envelope_manifest_fields",
    StructEnvelopePadding => "struct_envelope_padding",
    StructEnvelopeTable => "struct_envelope_table",
    StructInvalidDigest => "struct_invalid_digest",
    StructInvalidField => "struct_invalid_field",
    StructInvalidId => "struct_invalid_id",
    StructInvalidJson => "struct_invalid_json",
    StructInvalidRational => "struct_invalid_rational",
    StructInvalidU64 => "struct_invalid_u64",
    StructInvalidUtf8 => "struct_invalid_utf8",
    StructMissingField => "struct_missing_field",
    StructNonFiniteNumber => "struct_non_finite_number",
    StructNotCanonical => "struct_not_canonical",
    StructRationalOverflow => "struct_rational_overflow",
    StructSeedAllZero => "struct_seed_all_zero",
    StructUnknownField => "struct_unknown_field",
    StructUnsafeInteger => "struct_unsafe_integer",
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tests and callers compare a reason with the wire text of a fixture.
impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetsimError {
    /// A reason code from the TypeScript registry `REASONS` (e.g. `struct_invalid_json`).
    pub reason: Reason,
    pub message: String,
    pub field: Option<String>,
}

impl DetsimError {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        DetsimError {
            reason,
            message: message.into(),
            field: None,
        }
    }

    pub fn at(reason: Reason, message: impl Into<String>, field: impl Into<String>) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_is_a_code_of_the_typescript_registry() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../core/formats/reasons.ts");
        let registry = std::fs::read_to_string(path).expect("core/formats/reasons.ts is readable");
        for reason in Reason::ALL {
            assert!(
                registry.contains(&format!("\n  {reason}: {{")),
                "{reason} is not in core/formats/reasons.ts"
            );
        }
    }
}
