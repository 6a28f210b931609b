# Sourced by scripts/deploy.sh and scripts/rotate-secret.sh (after
# tools.sh): secrets that never reach argv, a log or stdout, and the gate
# poll that tells whether a deployment's secrets are live.
#
# Secret values live only in the SECRETS associative array of the running
# shell (never exported) and travel to other programs through pipes or 0600
# files. printf is a bash builtin, so `printf .. "$value" | prog` shows the
# value to no process list.
# shellcheck shell=bash

declare -gA SECRETS=()

# The wrangler to run: the project's pinned one unless WRANGLER_BIN says
# otherwise (the tests point it at tests/fixtures/fake-wrangler).
WRANGLER=${WRANGLER_BIN:-wrangler}

# Where secrets of record live: gitignored, 0700, files 0600.
secrets_dir() { printf '%s\n' "${HERMES_SECRETS_DIR:-$ROOT/.secrets}"; }

need() { # command hint
  command -v "$1" >/dev/null 2>&1 || die "$1 is required: $2"
}

# Run wrangler non-interactively (its confirmations take their default,
# which is "yes" for deletes) with no stdin.
wrangler_ni() { CI=true "$WRANGLER" "$@" </dev/null; }

abs_path() { # path -> absolute path (the file must exist)
  printf '%s/%s\n' "$(cd "$(dirname "$1")" && pwd)" "$(basename "$1")"
}

# Refuse a secrets file git could commit or other users could read.
check_secret_file() { # path
  local f=$1 abs mode
  [ -f "$f" ] || die "secrets file $f does not exist"
  abs=$(abs_path "$f")
  case "$abs" in
    "$ROOT"/*)
      git -C "$ROOT" check-ignore -q -- "$abs" \
        || die "$f is inside the repository and not gitignored; move it to .secrets/ (ignored) or outside the repository"
      ;;
  esac
  mode=$(stat -c %a "$abs")
  if (( (8#$mode & 8#077) != 0 )); then
    die "$f can be read by other users (mode $mode); run: chmod 600 $f"
  fi
}

# Read secrets from stdin into SECRETS: a JSON object of strings, or
# KEY=VALUE lines (# comments, blank lines, `export `, matching quotes).
# Error messages name lines and keys, never values.
read_secrets() {
  local text first line n=0 k v
  text=$(cat)
  first=${text#"${text%%[![:space:]]*}"}
  if [ "${first:0:1}" = "{" ]; then
    printf '%s' "$text" | jq -e 'type == "object" and all(.[]; type == "string")' >/dev/null 2>&1 \
      || die "secrets JSON must be one object whose values are all strings"
    while IFS= read -r k; do
      SECRETS[$k]=$(printf '%s' "$text" | jq -j --arg k "$k" '.[$k]')
    done < <(printf '%s' "$text" | jq -r 'keys[]')
  else
    while IFS= read -r line || [ -n "$line" ]; do
      n=$((n + 1))
      line=${line%$'\r'}
      [[ $line =~ ^[[:space:]]*(#|$) ]] && continue
      if [[ $line =~ ^[[:space:]]*(export[[:space:]]+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]]; then
        k=${BASH_REMATCH[2]}
        v=${BASH_REMATCH[3]}
        if [[ $v =~ ^\"(.*)\"$ ]] || [[ $v =~ ^\'(.*)\'$ ]]; then v=${BASH_REMATCH[1]}; fi
        SECRETS[$k]=$v
      else
        die "secrets line $n is not KEY=VALUE (the line is not shown)"
      fi
    done < <(printf '%s\n' "$text")
  fi
  for k in "${!SECRETS[@]}"; do
    [[ $k =~ ^[A-Z][A-Z0-9_]*$ ]] || die "secret name '$k' is not UPPER_SNAKE_CASE"
    [ -n "${SECRETS[$k]}" ] || die "secret $k is empty"
  done
}

# The JSON object {"KEY": value, ...} for the given keys, on stdout (meant
# for a pipe into `wrangler secret bulk`). Values go to jq through stdin.
secrets_json() { # keys...
  local k
  for k in "$@"; do
    printf '%s' "${SECRETS[$k]}" | jq -Rs --arg k "$k" '{($k): .}'
  done | jq -s 'add // {}'
}

random_secret() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# Set KEY=<SECRETS[KEY]> in a 0600 env file (created with its 0700 dir),
# replacing an earlier line for KEY.
set_in_file() { # file key
  local f=$1 k=$2 tmp
  (umask 077 && mkdir -p "$(dirname "$f")")
  tmp=$(umask 077 && mktemp "$f.XXXXXX")
  if [ -f "$f" ]; then grep -v -e "^$k=" "$f" >"$tmp" || true; fi
  printf '%s=%s\n' "$k" "${SECRETS[$k]}" >>"$tmp"
  chmod 600 "$tmp"
  mv "$tmp" "$f"
}

unset_in_file() { # file key
  local f=$1 k=$2 tmp
  [ -f "$f" ] || return 0
  tmp=$(umask 077 && mktemp "$f.XXXXXX")
  grep -v -e "^$k=" "$f" >"$tmp" || true
  chmod 600 "$tmp"
  mv "$tmp" "$f"
}

# A private scratch directory, removed on exit.
make_scratch() {
  SCRATCH=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/hermes-ops.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$SCRATCH'" EXIT
}

# Write `Authorization: Bearer <token>` to a 0600 header file for
# `curl -H @file`.
write_auth_header() { # file token
  (umask 077 && printf 'Authorization: Bearer %s\n' "$2" >"$1")
}

# One gate poll: GET /hosted/agent/probe with the bearer and NO agent id,
# so the Worker answers from its gate and never reaches an object or a
# container. Prints "<status> <error code>".
gate_state() { # base-url header-file
  local body code err
  body="$SCRATCH/gate-body"
  code=$(curl -sS -o "$body" -w '%{http_code}' --max-time 10 -H @"$2" "$1/hosted/agent/probe" 2>/dev/null) || code=000
  err=$(jq -r '.error // empty' "$body" 2>/dev/null || true)
  printf '%s %s\n' "$code" "${err:--}"
}

# Poll the gate until it answers `want` ("400 missing_agent_id" = the
# secret in the header file is live). Fails after HERMES_DEPLOY_LIVE_TIMEOUT
# seconds (default 180).
wait_for_gate() { # base-url header-file want what
  local url=$1 hdr=$2 want=$3 what=$4 state last="" deadline
  deadline=$((SECONDS + ${HERMES_DEPLOY_LIVE_TIMEOUT:-180}))
  while :; do
    state=$(gate_state "$url" "$hdr")
    if [ "$state" != "$last" ]; then
      case "$state" in
        "$want") echo "    gate: $state — $what" >&2 ;;
        "503 hosted_mode_not_configured") echo "    gate: $state — secrets not live yet, waiting" >&2 ;;
        "401 unauthorized") echo "    gate: $state — this secret is not accepted (yet), waiting" >&2 ;;
        "000 -") echo "    gate: no answer from $url yet, waiting" >&2 ;;
        *) echo "    gate: $state, waiting" >&2 ;;
      esac
      last=$state
    fi
    [ "$state" = "$want" ] && return 0
    if ((SECONDS >= deadline)); then
      echo "    gate: still '$state' after ${HERMES_DEPLOY_LIVE_TIMEOUT:-180}s (wanted '$want')" >&2
      return 1
    fi
    sleep "${HERMES_DEPLOY_POLL_INTERVAL:-2}"
  done
}
