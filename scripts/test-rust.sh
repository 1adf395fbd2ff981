#!/usr/bin/env bash
# The Rust half of the test suite: builds the crates-bridge workspace (the detsim-formats and
# detsim-models CLIs the cross-language tests drive) and runs `cargo test`, teeing the log to reports/cargo-test.txt,
# which scripts/test-summary.mjs adds to the "N passed, N failed" line. Not a cache or installer.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p reports
rm -f reports/cargo-test.txt
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "test-rust: cargo not found: the Rust tests did not run (install Rust with rustup)" >&2
  # In CI a missing toolchain is a failure, never a silent skip.
  if [ -n "${CI:-}" ]; then exit 1; fi
  exit 0
fi
manifest=crates-bridge/Cargo.toml
target=crates-bridge/target
start=$(date +%s)
# --locked: build exactly the committed Cargo.lock (fails if it would need to change).
cargo build --locked --release --manifest-path "$manifest" --target-dir "$target" -p detsim-formats -p detsim-models || exit 1
cargo test --locked --release --manifest-path "$manifest" --target-dir "$target" --workspace 2>&1 | tee reports/cargo-test.txt
status=${PIPESTATUS[0]}
echo "test-rust: cargo build + test took $(( $(date +%s) - start ))s (exit $status)"
exit "$status"
