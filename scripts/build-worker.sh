#!/usr/bin/env bash
# Build the Worker bundle (build/worker/shim.mjs + wasm) with local tools
# only. Skips the build when no input changed since the last one, so
# `wrangler dev` starts fast and tests do not rebuild wasm needlessly.
set -euo pipefail
. "$(dirname "$0")/lib/tools.sh"
cd "$ROOT"

for tool in "$WASM_BINDGEN_BIN" "$ESBUILD_BIN" "$WASM_OPT_BIN" "$TOOLS_DIR/bin/worker-build"; do
  [ -x "$tool" ] || die "missing $tool: run scripts/setup.sh"
done

inputs_hash() {
  {
    find src container/protocol/src migrations -type f -print0 | sort -z | xargs -0 sha256sum
    sha256sum Cargo.toml Cargo.lock container/protocol/Cargo.toml rust-toolchain.toml
    echo "profile=${WORKER_BUILD_PROFILE:-release}"
  } | sha256sum | cut -d' ' -f1
}

# One build at a time per checkout: two overlapping builds (a test run and a
# developer, say) would interleave writes into build/ and leave a corrupt
# wasm behind.
mkdir -p build
exec 9>build/.lock
flock 9

hash=$(inputs_hash)
if [ -f build/.inputs ] && [ "$(cat build/.inputs)" = "$hash" ] && [ -f build/worker/shim.mjs ]; then
  echo "worker bundle up to date (build/worker)" >&2
  exit 0
fi

step "building the Worker (wasm32, ${WORKER_BUILD_PROFILE:-release})"
if [ "${WORKER_BUILD_PROFILE:-release}" = dev ]; then
  worker-build --dev
else
  worker-build --release
fi
echo "$hash" > build/.inputs
ls -l build/index_bg.wasm >&2
