#!/usr/bin/env bash
# Rotate SERVICE_AUTH_SECRET without an outage (SPEC §2 step 3: the gate
# accepts SERVICE_AUTH_SECRET and, while set, SERVICE_AUTH_SECRET_NEXT).
#
#   scripts/rotate-secret.sh <staging|production> begin   [options]
#       SERVICE_AUTH_SECRET_NEXT := a new value (generated, or --from-stdin),
#       saved in the secrets file. Both old and new values now authenticate.
#       Then switch public-api to the new value.
#   scripts/rotate-secret.sh <env> promote [options]
#       SERVICE_AUTH_SECRET := the NEXT value. The old value stops working.
#   scripts/rotate-secret.sh <env> finish  [options]
#       delete SERVICE_AUTH_SECRET_NEXT (only after promote).
#
# Options:
#   --secrets-file PATH  the secrets of record (default .secrets/<env>.env):
#                        gitignored or outside the repository, mode 0600.
#                        The new value is written here, never to stdout.
#   --from-stdin         begin: read the new value from stdin (one line)
#   --yes-production     required for production
#
# With HERMES_EDGE_URL (or a URL saved by scripts/deploy.sh) each step then
# polls the gate until the change is live: begin → the new value gets 400
# missing_agent_id; promote → the old value gets 401; finish → the new value
# still gets 400. No container is started by these polls.
set -euo pipefail
. "$(dirname "$0")/lib/tools.sh"
. "$(dirname "$0")/lib/ops.sh"
cd "$ROOT"

usage() {
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

ENV_NAME=${1:-}
ACTION=${2:-}
[ $# -ge 2 ] || usage
shift 2
FILE=""
FROM_STDIN=0
YES_PRODUCTION=0
while [ $# -gt 0 ]; do
  case "$1" in
    --secrets-file) FILE=${2:?--secrets-file needs a path}; shift 2 ;;
    --from-stdin) FROM_STDIN=1; shift ;;
    --yes-production) YES_PRODUCTION=1; shift ;;
    -h | --help) usage ;;
    *) die "unknown option $1 (see scripts/rotate-secret.sh --help)" ;;
  esac
done
case "$ENV_NAME" in
  staging | production) ;;
  *) die "environment must be staging or production, got '$ENV_NAME'" ;;
esac
case "$ACTION" in
  begin | promote | finish) ;;
  *) die "action must be begin, promote or finish, got '$ACTION'" ;;
esac
if [ "$ENV_NAME" = production ] && [ "$YES_PRODUCTION" != 1 ]; then
  die "refusing to rotate production secrets without --yes-production (rehearse on staging first)"
fi

need jq "apt-get install jq"
need curl "apt-get install curl"
make_scratch
FILE=${FILE:-$(secrets_dir)/$ENV_NAME.env}
fail() { # what-happened what-to-do-next
  printf '\nerror: %s\nnext:  %s\n' "$1" "$2" >&2
  exit 1
}

load_file() {
  if [ -f "$FILE" ]; then
    check_secret_file "$FILE"
    read_secrets <"$FILE"
  fi
}

# Set secrets on the Worker: JSON through stdin, never argv.
put_secrets() { # keys...
  secrets_json "$@" | CI=true "$WRANGLER" secret bulk --env "$ENV_NAME" >&2
}

base_url() {
  if [ -n "${HERMES_EDGE_URL:-}" ]; then
    printf '%s\n' "${HERMES_EDGE_URL%/}"
  elif [ -s "${HERMES_DEPLOY_STATE_DIR:-$ROOT/.wrangler/deploy}/$ENV_NAME.url" ]; then
    cat "${HERMES_DEPLOY_STATE_DIR:-$ROOT/.wrangler/deploy}/$ENV_NAME.url"
  fi
}

# Poll the gate with the value of SECRETS[key] until it answers `want`.
verify() { # key want what
  local url
  url=$(base_url)
  if [ -z "$url" ]; then
    echo "    (no HERMES_EDGE_URL: not verifying against the deployment)" >&2
    return 0
  fi
  write_auth_header "$SCRATCH/auth" "${SECRETS[$1]}"
  wait_for_gate "$url" "$SCRATCH/auth" "$2" "$3" \
    || fail "the deployment at $url did not show the change in time" \
      "check 'wrangler secret list --env $ENV_NAME'; rerun this step (it is idempotent)"
}

load_file
case "$ACTION" in
  begin)
    step "begin: set SERVICE_AUTH_SECRET_NEXT on $ENV_NAME"
    [ -n "${SECRETS[SERVICE_AUTH_SECRET]:-}" ] \
      || echo "    note: $FILE has no SERVICE_AUTH_SECRET; NEXT alone never authenticates" >&2
    resume=0
    if [ -n "${SECRETS[SERVICE_AUTH_SECRET_NEXT]:-}" ]; then
      if [ "${SECRETS[SERVICE_AUTH_SECRET_NEXT]}" = "${SECRETS[SERVICE_AUTH_SECRET]:-}" ]; then
        fail "a rotation is still open: SERVICE_AUTH_SECRET_NEXT was promoted but not removed" \
          "run scripts/rotate-secret.sh $ENV_NAME finish, then begin again"
      fi
      # An unpromoted NEXT may already be in use by callers: never replace
      # it; re-send the saved value instead (begin is idempotent).
      [ "$FROM_STDIN" = 1 ] && fail "a rotation is in progress: $FILE already has an unpromoted SERVICE_AUTH_SECRET_NEXT (callers may already use it)" \
        "finish this rotation (promote, finish) first; or, if no caller uses it, delete that line from $FILE"
      resume=1
      echo "    a rotation is in progress: re-sending the saved SERVICE_AUTH_SECRET_NEXT (no new value)" >&2
    elif [ "$FROM_STDIN" = 1 ]; then
      [ -t 0 ] && die "--from-stdin: pipe the new value in"
      IFS= read -r 'SECRETS[SERVICE_AUTH_SECRET_NEXT]' || true
      [ -n "${SECRETS[SERVICE_AUTH_SECRET_NEXT]}" ] || die "--from-stdin: empty value"
      [[ ${SECRETS[SERVICE_AUTH_SECRET_NEXT]} =~ ^[!-~]{16,}$ ]] \
        || die "--from-stdin: the value must be at least 16 printable characters without spaces"
    else
      SECRETS[SERVICE_AUTH_SECRET_NEXT]=$(random_secret)
    fi
    if [ -n "${SECRETS[SERVICE_AUTH_SECRET]:-}" ] \
      && [ "${SECRETS[SERVICE_AUTH_SECRET]}" = "${SECRETS[SERVICE_AUTH_SECRET_NEXT]}" ]; then
      die "the new value equals the current SERVICE_AUTH_SECRET"
    fi
    # Saved before it is set remotely, so the value is never lost.
    if [ "$resume" = 0 ]; then
      set_in_file "$FILE" SERVICE_AUTH_SECRET_NEXT
      echo "    new value saved as SERVICE_AUTH_SECRET_NEXT in $FILE (0600; not printed)" >&2
    fi
    put_secrets SERVICE_AUTH_SECRET_NEXT \
      || fail "wrangler secret bulk failed; the value is saved in $FILE but not set on the Worker" \
        "fix wrangler access and rerun: scripts/rotate-secret.sh $ENV_NAME begin (it re-sends the saved value)"
    verify SERVICE_AUTH_SECRET_NEXT "400 missing_agent_id" "the new value authenticates"
    step "begin done. Next: give public-api the value of SERVICE_AUTH_SECRET_NEXT from $FILE, then run: scripts/rotate-secret.sh $ENV_NAME promote"
    ;;
  promote)
    step "promote: SERVICE_AUTH_SECRET := SERVICE_AUTH_SECRET_NEXT on $ENV_NAME"
    [ -n "${SECRETS[SERVICE_AUTH_SECRET_NEXT]:-}" ] \
      || fail "$FILE has no SERVICE_AUTH_SECRET_NEXT" "run scripts/rotate-secret.sh $ENV_NAME begin first"
    old=${SECRETS[SERVICE_AUTH_SECRET]:-}
    SECRETS[SERVICE_AUTH_SECRET_OLD]=$old
    SECRETS[SERVICE_AUTH_SECRET]=${SECRETS[SERVICE_AUTH_SECRET_NEXT]}
    put_secrets SERVICE_AUTH_SECRET \
      || fail "wrangler secret bulk failed; nothing changed on the Worker" "fix wrangler access and rerun promote"
    set_in_file "$FILE" SERVICE_AUTH_SECRET
    echo "    SERVICE_AUTH_SECRET in $FILE is now the new value" >&2
    if [ -n "$old" ] && [ "$old" != "${SECRETS[SERVICE_AUTH_SECRET]}" ]; then
      verify SERVICE_AUTH_SECRET_OLD "401 unauthorized" "the old value no longer authenticates"
    fi
    verify SERVICE_AUTH_SECRET "400 missing_agent_id" "the new value authenticates"
    step "promote done. Next: scripts/rotate-secret.sh $ENV_NAME finish"
    ;;
  finish)
    step "finish: delete SERVICE_AUTH_SECRET_NEXT on $ENV_NAME"
    if [ -n "${SECRETS[SERVICE_AUTH_SECRET_NEXT]:-}" ] \
      && [ "${SECRETS[SERVICE_AUTH_SECRET]:-}" != "${SECRETS[SERVICE_AUTH_SECRET_NEXT]}" ]; then
      fail "SERVICE_AUTH_SECRET_NEXT has not been promoted; deleting it now would lock out callers already switched to it" \
        "run scripts/rotate-secret.sh $ENV_NAME promote first"
    fi
    wrangler_ni secret delete SERVICE_AUTH_SECRET_NEXT --env "$ENV_NAME" >&2 \
      || fail "wrangler secret delete failed" "fix wrangler access and rerun finish (idempotent)"
    unset_in_file "$FILE" SERVICE_AUTH_SECRET_NEXT
    [ -n "${SECRETS[SERVICE_AUTH_SECRET]:-}" ] \
      && verify SERVICE_AUTH_SECRET "400 missing_agent_id" "the primary value still authenticates"
    step "rotation of SERVICE_AUTH_SECRET on $ENV_NAME complete"
    ;;
esac
