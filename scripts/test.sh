#!/usr/bin/env bash
# Run every test: formatting, lints (host and wasm), unit and property
# tests, supervisor/devhost/egress tests against real processes (root-only
# suites skip loudly elsewhere), and the end-to-end suites against the real
# workerd runtime via `wrangler dev`.
#
#   scripts/test.sh              everything (installs what is missing first)
#   scripts/test.sh -- <args>    extra arguments for `cargo test`
set -euo pipefail
. "$(dirname "$0")/lib/tools.sh"
cd "$ROOT"

bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy (host, all targets)"
cargo clippy --workspace --all-targets --quiet -- -D warnings
step "cargo clippy (wasm32 edge)"
cargo clippy -p hermes-edge --target wasm32-unknown-unknown --quiet -- -D warnings

step "build the Worker bundle and the container binaries"
bash scripts/build-worker.sh
cargo build --workspace --bins --quiet

# End-to-end prerequisites are required here: a missing one fails the run
# instead of skipping.
export HERMES_EDGE_REQUIRE_E2E=1
step "wasm tests in node (wasm-bindgen-test-runner)"
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER="$TOOLS_DIR/bin/wasm-bindgen-test-runner" \
  cargo test --target wasm32-unknown-unknown -p hermes-edge --test wasm_start_options

step "cargo test --workspace"
[ "${1:-}" = "--" ] && shift
cargo test --workspace --no-fail-fast "$@"
