// Paths shared by the integration tests: the repository root and the fixtures under it.
// Not test logic.
#![allow(dead_code)]
use std::path::PathBuf;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../..")
        .canonicalize()
        .expect("repository root")
}

pub fn read_fixture(name: &str) -> detsim_formats::Value {
    let path = repo_root().join("fixtures/reference").join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    detsim_formats::parse_strict(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The official RFC 8785 vectors, copied into the repository (fixtures/jcs/rfc8785, see its README).
pub fn jcs_dir() -> PathBuf {
    repo_root().join("fixtures/jcs/rfc8785")
}
