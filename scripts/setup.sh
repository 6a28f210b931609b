#!/usr/bin/env bash
# Install everything a fresh machine lacks to build, run and test
# hermes-edge. Idempotent: each step checks before it installs. Reaches only
# the package registries (Debian, crates.io, npm, PyPI); nothing is
# downloaded from anywhere else (worker-build is handed local tools).
#
#   scripts/setup.sh            everything
#   SKIP_APT=1 scripts/setup.sh skip the Debian packages (non-root machines)
set -euo pipefail
. "$(dirname "$0")/lib/tools.sh"
cd "$ROOT"

# ---- Debian packages: namespaces and firewall tools for the containment
# tests, bubblewrap for devhost, CPython 3.11 readable by the Hermes uid.
APT_PACKAGES=(bubblewrap iproute2 iptables nftables git python3.11 python3.11-venv ca-certificates procps curl jq)
if [ "${SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
      die "missing Debian packages: ${missing[*]} (install them as root, or SKIP_APT=1)"
    fi
    step "apt-get install ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# ---- Rust: the toolchain, components and wasm target pinned in
# rust-toolchain.toml.
command -v rustup >/dev/null || die "rustup is required (https://rustup.rs is not reachable here; the machine image has it)"
step "rust toolchain (rust-toolchain.toml)"
rustup show active-toolchain >/dev/null 2>&1 || rustup toolchain install
toolchain=$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)
rustup target list --installed --toolchain "$toolchain" | grep -qx wasm32-unknown-unknown \
  || rustup target add --toolchain "$toolchain" wasm32-unknown-unknown
for c in rustfmt clippy; do
  rustup component list --installed --toolchain "$toolchain" | grep -q "^$c" \
    || rustup component add --toolchain "$toolchain" "$c"
done

# ---- wasm-bindgen-cli at exactly the Cargo.lock version, and worker-build
# matching the worker crate; both into .tools/ (gitignored).
cargo_tool() { # crate version binary [--locked]
  local crate=$1 version=$2 bin=$3 locked=${4:-}
  if [ -x "$TOOLS_DIR/bin/$bin" ] && "$TOOLS_DIR/bin/$bin" --version 2>/dev/null | grep -q "$version"; then
    return 0
  fi
  step "cargo install $crate@$version"
  # Built in their own target dir so the workspace's lockfile and
  # profile do not apply to them.
  CARGO_TARGET_DIR="$ROOT/target/tools" cargo install --quiet --root "$TOOLS_DIR" $locked --version "=$version" "$crate"
}
# wasm-bindgen-cli without --locked: one of its locked dependencies does
# not resolve from crates.io any more.
cargo_tool wasm-bindgen-cli "$(wasm_bindgen_version)" wasm-bindgen
cargo_tool worker-build "$(worker_build_version)" worker-build --locked

# ---- npm: wrangler (workerd) and binaryen (wasm-opt), pinned by the lock.
if [ ! -x node_modules/.bin/wrangler ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  step "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi

# ---- Hermes, from the one hash-pinned requirements file the image uses.
step "Hermes venv (container/requirements.txt)"
bash scripts/setup-hermes.sh

step "setup complete"
