# Sourced by the smoke scripts (SPEC §11). They run unchanged against the
# local stack and a deployment:
#
#   BASE_URL=https://hermes-edge-staging.<you>.workers.dev \
#   SERVICE_AUTH_SECRET_FILE=.secrets/staging.env scripts/isolation-smoke.sh
#
# The secret comes from SERVICE_AUTH_SECRET or SERVICE_AUTH_SECRET_FILE (a
# file holding the bare value, or KEY=VALUE lines with SERVICE_AUTH_SECRET),
# never from argv. curl reads it from a 0600 header file (`-H @file`).
# SMOKE_TIMEOUT bounds each request (default 330 s: a cold boot may take
# up to the object's 300 s boot budget).
# shellcheck shell=bash

PASSED=0
FAILED=0

smoke_init() {
  command -v curl >/dev/null || die "curl is required (apt-get install curl)"
  command -v jq >/dev/null || die "jq is required (apt-get install jq)"
  [ -n "${BASE_URL:-}" ] || die "set BASE_URL (e.g. http://127.0.0.1:8787 for scripts/dev.sh, or the deployed URL)"
  BASE_URL=${BASE_URL%/}
  local secret=${SERVICE_AUTH_SECRET:-}
  if [ -z "$secret" ] && [ -n "${SERVICE_AUTH_SECRET_FILE:-}" ]; then
    [ -r "$SERVICE_AUTH_SECRET_FILE" ] || die "cannot read SERVICE_AUTH_SECRET_FILE=$SERVICE_AUTH_SECRET_FILE"
    secret=$(sed -n 's/^SERVICE_AUTH_SECRET=//p' "$SERVICE_AUTH_SECRET_FILE" | tail -n1)
    if [ -z "$secret" ] && ! grep -q '=' "$SERVICE_AUTH_SECRET_FILE"; then
      secret=$(head -n1 "$SERVICE_AUTH_SECRET_FILE")
    fi
  fi
  [ -n "$secret" ] || die "set SERVICE_AUTH_SECRET or SERVICE_AUTH_SECRET_FILE (never pass the secret as an argument)"
  SMOKE_DIR=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/hermes-smoke.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$SMOKE_DIR'" EXIT
  (umask 077 && printf 'Authorization: Bearer %s\n' "$secret" >"$SMOKE_DIR/auth")
  (umask 077 && printf 'Authorization: Bearer wrong-%s\n' "$(random_id)" >"$SMOKE_DIR/wrong-auth")
  echo "smoke target: $BASE_URL" >&2
}

random_id() { head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# A fresh valid agent id (SPEC §2: ^[a-z0-9](?:[a-z0-9-]{6,62}[a-z0-9])$).
random_agent() { printf 'smoke-%s\n' "$(random_id)"; }

# call METHOD PATH AGENT [JSON-BODY] [HEADER-FILE]: sets STATUS and BODY.
# AGENT "" sends no agent header.
call() {
  local method=$1 path=$2 agent=$3 body=${4:-} auth=${5:-$SMOKE_DIR/auth}
  local args=(-sS -X "$method" -o "$SMOKE_DIR/body" -w '%{http_code}' --max-time "${SMOKE_TIMEOUT:-330}" -H @"$auth")
  [ -n "$agent" ] && args+=(-H "x-divinci-agent-id: $agent")
  if [ -n "$body" ]; then
    args+=(-H 'content-type: application/json' --data-binary @-)
  elif [ "$method" = POST ]; then
    args+=(--data-binary '')
  fi
  STATUS=$(printf '%s' "$body" | curl "${args[@]}" "$BASE_URL$path" 2>"$SMOKE_DIR/curl-err") || STATUS=000
  BODY=$(cat "$SMOKE_DIR/body" 2>/dev/null || true)
  if [ "$STATUS" = 000 ]; then BODY="curl: $(cat "$SMOKE_DIR/curl-err")"; fi
}

# jq query on the last BODY ("" when it is not JSON).
field() { printf '%s' "$BODY" | jq -r "$1" 2>/dev/null || true; }

# verdict NAME RESULT: count and print one check (RESULT 0 = passed).
#   if [[ ... ]]; then verdict "name" 0; else verdict "name" 1; fi
verdict() {
  if [ "$2" -eq 0 ]; then
    PASSED=$((PASSED + 1))
    echo "ok   - $1"
  else
    FAILED=$((FAILED + 1))
    echo "FAIL - $1 (status $STATUS, body: ${BODY:0:300})"
  fi
}

smoke_finish() {
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}
