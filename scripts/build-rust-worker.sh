#!/usr/bin/env bash
# Builds the Rust agent worker (crates-bridge/worker, its own cargo workspace: tonic + protox) into
# crates-bridge/worker/target/release/detsim-worker-rs, from the committed Cargo.lock. Build only:
# `detsim run` never builds, it refuses a rust runtime whose binary is missing. Its unit tests: --test.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "build-rust-worker: cargo not found: install Rust with rustup (the Rust worker was not built)" >&2
  exit 1
fi
manifest=crates-bridge/worker/Cargo.toml
start=$(date +%s)
cargo build --locked --release --manifest-path "$manifest" || exit 1
status=0
if [ "${1:-}" = "--test" ]; then
  cargo test --locked --release --manifest-path "$manifest"
  status=$?
fi
echo "build-rust-worker: crates-bridge/worker/target/release/detsim-worker-rs ($(( $(date +%s) - start ))s, exit $status)"
exit "$status"
