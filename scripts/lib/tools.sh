# Sourced by the scripts: where the project's local tools live, and the
# environment worker-build needs so it never downloads anything.
# shellcheck shell=bash
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export ROOT
export TOOLS_DIR="$ROOT/.tools"
export PATH="$TOOLS_DIR/bin:$ROOT/node_modules/.bin:$HOME/.cargo/bin:$PATH"
export WASM_BINDGEN_BIN="$TOOLS_DIR/bin/wasm-bindgen"
export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
export WRANGLER_SEND_METRICS=false
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"

# The wasm-bindgen version pinned in Cargo.lock: the CLI must match exactly.
wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock"
}

# The worker-build version matching the `worker` crate in Cargo.lock.
worker_build_version() {
  awk '/^name = "worker"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock"
}

step() { printf '\n==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
