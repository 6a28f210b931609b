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
#   PYTHON=python3.11  interpreter to use (must be CPython 3.11, the platform the
#                      requirements were compiled for). Default: /usr/bin/python3.11
#                      when present, else python3. The venv links to its
#                      interpreter, and Hermes runs as uid 10001: an interpreter
#                      under a private directory (pyenv in /root, mode 0700) cannot
#                      be executed by that uid, so it is refused.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
requirements="$repo_root/container/requirements.txt"
venv="${HERMES_VENV:-$repo_root/.venv/hermes}"
if [[ -z "${PYTHON:-}" && -x /usr/bin/python3.11 ]]; then
    python=/usr/bin/python3.11
else
    python="${PYTHON:-python3}"
fi
stamp="$venv/.requirements.sha256"

if [[ ! -f "$requirements" ]]; then
    echo "setup-hermes: missing $requirements" >&2
    exit 1
fi

python_real="$(readlink -f "$(command -v "$python")")"
# Every directory above the interpreter must be searchable by other users.
dir="$(dirname "$python_real")"
while [[ "$dir" != "/" ]]; do
    if [[ "$(( 0$(stat -c '%a' "$dir") & 01 ))" -eq 0 ]]; then
        echo "setup-hermes: $python_real is inside $dir, which other users cannot enter;" >&2
        echo "  the hermes uid could not run it. Set PYTHON to a system CPython 3.11." >&2
        exit 1
    fi
    dir="$(dirname "$dir")"
done
want="$(cat "$requirements" | sha256sum | cut -d' ' -f1) $python_real"
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
