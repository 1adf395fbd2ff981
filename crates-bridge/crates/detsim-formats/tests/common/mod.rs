// Paths shared by the integration tests: the repository root and the shared folder beside it.
// Not test logic.
#![allow(dead_code)]
use std::path::PathBuf;

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..").canonicalize().expect("repository root")
}

pub fn read_fixture(name: &str) -> detsim_formats::Value {
    let path = repo_root().join("fixtures/reference").join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    detsim_formats::parse_strict(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `../shared/jcs-vectors` relative to the repository root, or None (third-party data, never copied in).
pub fn jcs_dir() -> Option<PathBuf> {
    let dir = repo_root().join("../shared/jcs-vectors");
    dir.is_dir().then_some(dir)
}
