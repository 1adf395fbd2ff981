// detsim's byte-exact formats in Rust, held to the same vectors as core/formats/ (TypeScript):
// RFC 8785 canonical JSON, the protocol scalars, seed-derivation-v1, Xorshift32 and FLYSESS1.
// Not a transport, a store or a worker: those build on this crate.
pub mod envelope;
pub mod error;
pub mod json;
pub mod scalars;
pub mod seed;
pub mod xorshift;

pub use envelope::{DecodedEnvelope, check_of, decode_envelope, encode_envelope};
pub use error::{DetsimError, Reason, Result};
pub use json::{Value, canonical_bytes, canonical_digest, canonicalize, parse_canonical, parse_strict, sha256_hex};
pub use scalars::{RationalNs, Scope};
pub use seed::{derive_seed, derive_seeds};
pub use xorshift::Xorshift32;
