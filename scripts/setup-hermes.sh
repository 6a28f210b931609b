#!/usr/bin/env bash
# Create the local Hermes venv at .venv/hermes from the ONE hash-pinned
# requirements file the container image also installs
# (container/requirements.txt), so local development runs the same Hermes as
# production.
#
# Idempotent: the sha256 of the requirements file is stored inside the venv
# after a successful install; when it matches (and the hermes entry point
# exists) nothing is done. Any change to the pin rebuilds the venv from
# scratch, so no stale package survives an upgrade.
#
# Usage: scripts/setup-hermes.sh [--force]
#   HERMES_VENV=/path  override the venv location (default <repo>/.venv/hermes)
#   PYTHON=python3.11  interpreter to use (default python3; must be CPython 3.11,
#                      the platform the requirements were compiled for)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$repo_root/container/requirements.txt"
venv="${HERMES_VENV:-$repo_root/.venv/hermes}"
python="${PYTHON:-python3}"
stamp="$venv/.requirements.sha256"

if [[ ! -f "$requirements" ]]; then
    echo "setup-hermes: missing $requirements" >&2
    exit 1
fi

want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ "${1:-}" != "--force" && -f "$stamp" && -x "$venv/bin/hermes" ]] \
    && [[ "$(cat "$stamp")" == "$want" ]]; then
    echo "setup-hermes: $venv already matches container/requirements.txt ($want)"
    exit 0
fi

pyver="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
if [[ "$pyver" != "3.11" ]]; then
    echo "setup-hermes: $python is Python $pyver; the hashes are for CPython 3.11" >&2
    exit 1
fi

echo "setup-hermes: building $venv from container/requirements.txt"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
# --require-hashes: every distribution must match a pinned sha256;
# --no-deps: the file lists the complete closure, nothing else may be pulled in;
# --only-binary: wheels only, no sdist build scripts run at install time.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --no-input --require-hashes --no-deps --only-binary=:all: \
    -r "$requirements"
"$venv/bin/hermes" --version >/dev/null
echo "$want" >"$stamp"
echo "setup-hermes: ok ($("$venv/bin/hermes" --version 2>/dev/null | head -n1))"
