// Marks the official JCS vector tests as ignored (with the reason) when ../shared/jcs-vectors,
// beside the repository root, is absent: third-party data that is never copied into the repo.
// Not code generation.
use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(jcs_absent)");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../shared/jcs-vectors");
    println!("cargo::rerun-if-changed={}", dir.display());
    if !dir.is_dir() {
        println!("cargo::warning=../shared/jcs-vectors is absent: the official JCS vector tests are ignored");
        println!("cargo::rustc-cfg=jcs_absent");
    }
}
