// Compiles ../../proto/detsim/v1/worker.proto with protox (no system protoc) into the tonic server,
// and records the version of the rustc that compiles this worker (DETSIM_RUSTC_VERSION: its Hello
// runtime names it, the run receipt's platform fingerprint shows it). Not a place for logic: the
// contract digest is computed from the same file at compile time in main.
use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "../../proto/detsim/v1/worker.proto";
    println!("cargo:rerun-if-changed={proto}");
    println!("cargo:rerun-if-env-changed=RUSTC");
    println!("cargo:rustc-env=DETSIM_RUSTC_VERSION={}", rustc_version());
    let fds = protox::compile([proto], ["../../proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}

/// "1.95.0" from `$RUSTC --version` ("rustc 1.95.0 (59807616e 2026-04-14)"); "unknown" when it does not say.
fn rustc_version() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|text| text.split_whitespace().nth(1).map(str::to_string))
        .filter(|v| v.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'))
        .unwrap_or_else(|| "unknown".to_string())
}
