#!/usr/bin/env bash
# The Rust lint, run by .ci/run: `cargo fmt --check` and `cargo clippy --all-targets --locked -- -D warnings`
# on both cargo workspaces (crates-bridge/ and crates-bridge/worker/; rustfmt.toml in crates-bridge/).
# Adds the rustfmt and clippy components with rustup when they are missing (a fresh CI machine) and
# fails loudly when they cannot be had. Runs every check even after a failure, then exits 1 if any
# failed. Not a formatter: it never rewrites files (run `cargo fmt` in each workspace for that).
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "lint-rust: cargo not found: the Rust lint did not run (install Rust with rustup)" >&2
  # In CI a missing toolchain is a failure, never a silent skip (as scripts/test-rust.sh).
  if [ -n "${CI:-}" ]; then exit 1; fi
  exit 0
fi

# Both tools must answer --version; otherwise add them once with rustup, then ask again.
have_tools() { cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1; }
if ! have_tools; then
  echo "lint-rust: rustfmt or clippy missing: rustup component add rustfmt clippy" >&2
  if ! command -v rustup >/dev/null 2>&1 || ! rustup component add rustfmt clippy; then
    echo "lint-rust: could not add the rustfmt and clippy components: the Rust lint cannot run" >&2
    exit 1
  fi
  if ! have_tools; then
    echo "lint-rust: rustfmt or clippy still missing after rustup component add: the Rust lint cannot run" >&2
    exit 1
  fi
fi

failed=0
check() {
  local what=$1
  shift
  if "$@"; then
    echo "lint-rust: ok: $what"
  else
    echo "lint-rust: FAILED: $what" >&2
    failed=1
  fi
}
start=$(date +%s)
for manifest in crates-bridge/Cargo.toml crates-bridge/worker/Cargo.toml; do
  check "cargo fmt --check ($manifest)" cargo fmt --check --all --manifest-path "$manifest"
  check "cargo clippy -D warnings ($manifest)" \
    cargo clippy --all-targets --locked --manifest-path "$manifest" -- -D warnings
done
echo "lint-rust: rustfmt + clippy on both workspaces took $(( $(date +%s) - start ))s (exit $failed)"
exit "$failed"
