#!/usr/bin/env bash
# Deploy hermes-edge to Cloudflare, smoke-test the deployment, tear it down.
#
#   scripts/deploy.sh staging    deploy|smoke|teardown|all  [options]
#   scripts/deploy.sh production deploy|smoke  --yes-production [options]
#
#   deploy    build the wasm, check the configuration (wrangler.toml
#             invariants test + `wrangler deploy --dry-run`), deploy, set the
#             secrets from stdin or a gitignored file, wait until they are live
#   smoke     isolation + functional smoke scripts against the deployed URL
#   teardown  delete the Worker AND its containers application (staging only)
#   all       deploy, smoke, then teardown — teardown also when a step failed
#
# Options:
#   --secrets-file PATH  KEY=VALUE lines or a JSON object; gitignored (or
#                        outside the repository) and mode 0600.
#                        Default: .secrets/<env>.env when it exists.
#   --secrets-stdin      read the secrets from stdin instead
#   --yes-production     required to deploy production
#
# Staging without SERVICE_AUTH_SECRET gets a generated one, saved in
# .secrets/staging.env (0600). Production never generates one.
# The deployed URL is what `wrangler deploy` prints (workers.dev), or
# HERMES_EDGE_URL when set (production has no workers.dev URL: set it).
#
# Environment knobs (tests and CI): WRANGLER_BIN, HERMES_SECRETS_DIR,
# HERMES_DEPLOY_DOCKER=auto|yes|no, HERMES_DEPLOY_LIVE_TIMEOUT (s, 180),
# HERMES_DEPLOY_POLL_INTERVAL (s, 2), HERMES_DEPLOY_BUILD_CMD,
# HERMES_DEPLOY_CONFIG_TEST_CMD, HERMES_DEPLOY_STATE_DIR (where the URL is
# saved; .wrangler/deploy), HERMES_CONTAINERS_APP (name of the
# containers application; default <name>-hermesagent-<env>, wrangler's rule).
set -euo pipefail
. "$(dirname "$0")/lib/tools.sh"
. "$(dirname "$0")/lib/ops.sh"
cd "$ROOT"

usage() {
  sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

ENV_NAME=${1:-}
ACTION=${2:-}
[ $# -ge 2 ] || usage
shift 2
SECRETS_FILE=""
SECRETS_STDIN=0
YES_PRODUCTION=0
while [ $# -gt 0 ]; do
  case "$1" in
    --secrets-file) SECRETS_FILE=${2:?--secrets-file needs a path}; shift 2 ;;
    --secrets-stdin) SECRETS_STDIN=1; shift ;;
    --yes-production) YES_PRODUCTION=1; shift ;;
    -h | --help) usage ;;
    *) die "unknown option $1 (see scripts/deploy.sh --help)" ;;
  esac
done

case "$ENV_NAME" in
  staging | production) ;;
  *) die "environment must be staging or production, got '$ENV_NAME'" ;;
esac
case "$ACTION" in
  deploy | smoke | teardown | all) ;;
  *) die "action must be deploy, smoke, teardown or all, got '$ACTION'" ;;
esac

# ---- production guard rails: checked before anything runs.
if [ "$ENV_NAME" = production ]; then
  case "$ACTION" in
    teardown | all)
      die "refusing to '$ACTION' production: production is never torn down by this script. Delete it by hand in the Cloudflare dashboard if you really mean it."
      ;;
    deploy)
      [ "$YES_PRODUCTION" = 1 ] \
        || die "refusing to deploy production without --yes-production. Deploy and smoke staging first (scripts/deploy.sh staging all), then rerun with --yes-production."
      ;;
  esac
fi

need jq "apt-get install jq"
need curl "apt-get install curl"
make_scratch
URL_STATE=${HERMES_DEPLOY_STATE_DIR:-$ROOT/.wrangler/deploy}/$ENV_NAME.url
TOTAL_STEPS=7
step_n() { step "[$1/$TOTAL_STEPS] $2"; }
fail() { # what-happened what-to-do-next
  printf '\nerror: %s\nnext:  %s\n' "$1" "$2" >&2
  exit 1
}

# ---------------------------------------------------------------- secrets
load_secrets() {
  local dir default
  dir=$(secrets_dir)
  default="$dir/$ENV_NAME.env"
  if [ "$SECRETS_STDIN" = 1 ]; then
    [ -t 0 ] && die "--secrets-stdin: pipe the secrets in (KEY=VALUE lines or JSON), e.g. < .secrets/$ENV_NAME.env"
    read_secrets
    SECRETS_SOURCE="stdin"
  elif [ -n "$SECRETS_FILE" ]; then
    check_secret_file "$SECRETS_FILE"
    read_secrets <"$SECRETS_FILE"
    SECRETS_SOURCE=$SECRETS_FILE
  elif [ -f "$default" ]; then
    check_secret_file "$default"
    read_secrets <"$default"
    SECRETS_SOURCE=$default
  else
    SECRETS_SOURCE="(none)"
  fi
  if [ -z "${SECRETS[SERVICE_AUTH_SECRET]:-}" ]; then
    if [ "$ENV_NAME" = production ]; then
      fail "production needs SERVICE_AUTH_SECRET and none was given (source: $SECRETS_SOURCE)" \
        "put SERVICE_AUTH_SECRET=<the value public-api uses> in $default (chmod 600), or pipe it with --secrets-stdin"
    fi
    SECRETS[SERVICE_AUTH_SECRET]=$(random_secret)
    set_in_file "$default" SERVICE_AUTH_SECRET
    echo "    generated SERVICE_AUTH_SECRET for staging; saved in $default (0600) — give it to public-api staging from there" >&2
  fi
  local keys
  keys=$(printf '%s\n' "${!SECRETS[@]}" | sort | tr '\n' ' ')
  echo "    secrets from $SECRETS_SOURCE: ${keys% } (values not shown)" >&2
}

# The secret smoke and the gate poll use: the one just loaded, else
# SERVICE_AUTH_SECRET from the environment or the default secrets file.
smoke_secret() {
  if [ -n "${SECRETS[SERVICE_AUTH_SECRET]:-}" ]; then return 0; fi
  if [ -n "${SERVICE_AUTH_SECRET:-}" ]; then
    SECRETS[SERVICE_AUTH_SECRET]=$SERVICE_AUTH_SECRET
    return 0
  fi
  SECRETS_STDIN=0
  load_secrets_quiet
}

load_secrets_quiet() {
  local f=${SECRETS_FILE:-$(secrets_dir)/$ENV_NAME.env}
  [ -f "$f" ] || fail "no SERVICE_AUTH_SECRET for the smoke test" \
    "export SERVICE_AUTH_SECRET, or keep it in $f (0600), or pass --secrets-file"
  check_secret_file "$f"
  read_secrets <"$f"
  [ -n "${SECRETS[SERVICE_AUTH_SECRET]:-}" ] || fail "$f has no SERVICE_AUTH_SECRET" \
    "add SERVICE_AUTH_SECRET=<value> to $f"
}

# ------------------------------------------------------------------- URL
deployed_url() {
  if [ -n "${HERMES_EDGE_URL:-}" ]; then
    printf '%s\n' "${HERMES_EDGE_URL%/}"
  elif [ -s "$URL_STATE" ]; then
    cat "$URL_STATE"
  else
    return 1
  fi
}

# ------------------------------------------------------------- the checks
docker_engine() {
  case "${HERMES_DEPLOY_DOCKER:-auto}" in
    yes) return 0 ;;
    no) return 1 ;;
    *) docker info >/dev/null 2>&1 ;;
  esac
}

# wrangler.toml without its [[containers]] tables and [build] (already
# built), with an absolute `main` (the copy lives in the scratch dir), for
# a bundle-only dry run.
config_without_containers() { # out
  awk -v main="$ROOT/build/worker/shim.mjs" '
    /^\[\[([a-z]+\.)*containers\]\]/ { skip = 1; next }
    /^\[build\]/ { skip = 1; next }
    /^\[/ { skip = 0 }
    skip { next }
    /^main *=/ { print "main = \"" main "\""; next }
    { print }
  ' wrangler.toml >"$1"
  ! grep -q '^\[\[.*containers\]\]' "$1" || die "internal: could not strip [[containers]] from the dry-run config"
}

check_config() {
  step_n 3 "check wrangler.toml invariants (cargo test --test wrangler_config)"
  bash -c "${HERMES_DEPLOY_CONFIG_TEST_CMD:-cargo test --quiet -p hermes-edge --test wrangler_config}" \
    || fail "wrangler.toml breaks an invariant (see the test output above)" \
      "fix wrangler.toml so every environment has the HERMES_AGENT binding, the container and the migration; rerun"

  if docker_engine; then
    step_n 4 "wrangler deploy --dry-run --env $ENV_NAME (Worker bundle AND container image)"
    wrangler_ni deploy --dry-run --env "$ENV_NAME" --outdir "$SCRATCH/dry-run" \
      || fail "the dry run failed (see wrangler's output above)" \
        "fix the Worker bundle, the container image or wrangler.toml; rerun"
  else
    step_n 4 "wrangler deploy --dry-run --env $ENV_NAME — Worker bundle only"
    echo "    NOTE: no Docker engine here, so the container image (container/Dockerfile) is NOT checked:" >&2
    echo "    dry-running a copy of wrangler.toml without [[containers]]. CI's image job builds the image." >&2
    local cfg="$SCRATCH/wrangler.toml"
    config_without_containers "$cfg"
    wrangler_ni deploy --dry-run --config "$cfg" --env "$ENV_NAME" --outdir "$SCRATCH/dry-run" \
      || fail "the bundle-only dry run failed (see wrangler's output above)" \
        "fix the Worker bundle or wrangler.toml; rerun"
  fi
}

# ---------------------------------------------------------------- actions
do_deploy() {
  step_n 1 "secrets for $ENV_NAME (checked before anything is built)"
  load_secrets

  step_n 2 "build the Worker (scripts/build-worker.sh)"
  bash -c "${HERMES_DEPLOY_BUILD_CMD:-bash scripts/build-worker.sh}" \
    || fail "building the Worker failed (see above)" "run scripts/setup.sh, fix the build, rerun"

  check_config

  step_n 5 "wrangler deploy --env $ENV_NAME"
  local out="$SCRATCH/deploy.out"
  if ! wrangler_ni deploy --env "$ENV_NAME" 2>&1 | tee "$out" >&2; then
    fail "wrangler deploy failed (see above)" \
      "check 'wrangler whoami' (CLOUDFLARE_API_TOKEN / CLOUDFLARE_ACCOUNT_ID), containers access on the account, then rerun"
  fi
  local url
  url=$(grep -Eo 'https://[A-Za-z0-9.-]+\.workers\.dev' "$out" | head -n1 || true)
  if [ -n "$url" ]; then
    mkdir -p "$(dirname "$URL_STATE")"
    printf '%s\n' "$url" >"$URL_STATE"
    echo "    deployed at $url (saved in ${URL_STATE#"$ROOT"/})" >&2
  fi

  step_n 6 "set secrets (wrangler secret bulk --env $ENV_NAME, JSON on stdin)"
  # shellcheck disable=SC2046
  if ! secrets_json $(printf '%s\n' "${!SECRETS[@]}" | sort) \
    | CI=true "$WRANGLER" secret bulk --env "$ENV_NAME" >&2; then
    fail "setting the secrets failed; the Worker is deployed and refuses /hosted/* (503) until they are set" \
      "rerun scripts/deploy.sh $ENV_NAME deploy, or set them by hand: wrangler secret bulk --env $ENV_NAME < <json file>"
  fi

  step_n 7 "wait until the new secrets are live (gate poll, no agent id: no container starts)"
  local base
  if ! base=$(deployed_url); then
    fail "no URL for the $ENV_NAME deployment (wrangler printed no workers.dev URL)" \
      "set HERMES_EDGE_URL=https://<the route or custom domain> and run: scripts/deploy.sh $ENV_NAME smoke"
  fi
  [ -n "${HERMES_EDGE_URL:-}" ] && echo "    using HERMES_EDGE_URL=$base" >&2
  write_auth_header "$SCRATCH/auth" "${SECRETS[SERVICE_AUTH_SECRET]}"
  wait_for_gate "$base" "$SCRATCH/auth" "400 missing_agent_id" "the secret is live" \
    || fail "the deployment at $base did not accept the new SERVICE_AUTH_SECRET in time" \
      "check 'wrangler secret list --env $ENV_NAME' and 'wrangler tail --env $ENV_NAME', then rerun with a larger HERMES_DEPLOY_LIVE_TIMEOUT"
  step "deployed $ENV_NAME at $base"
}

do_smoke() {
  local base rc=0
  base=$(deployed_url) \
    || fail "no URL for the $ENV_NAME deployment" \
      "deploy first (scripts/deploy.sh $ENV_NAME deploy) or set HERMES_EDGE_URL"
  smoke_secret
  step "smoke: scripts/isolation-smoke.sh against $base"
  BASE_URL=$base SERVICE_AUTH_SECRET=${SECRETS[SERVICE_AUTH_SECRET]} \
    bash scripts/isolation-smoke.sh || rc=1
  step "smoke: scripts/functional-smoke.sh against $base"
  BASE_URL=$base SERVICE_AUTH_SECRET=${SECRETS[SERVICE_AUTH_SECRET]} \
    bash scripts/functional-smoke.sh || rc=1
  [ "$rc" = 0 ] || fail "a smoke test failed against $base (see the FAIL lines above)" \
    "read the logs: wrangler tail --env $ENV_NAME (docs/operations.md, 'Reading logs'); fix; redeploy"
  step "smoke passed against $base"
}

containers_app_name() {
  if [ -n "${HERMES_CONTAINERS_APP:-}" ]; then
    printf '%s\n' "$HERMES_CONTAINERS_APP"
    return
  fi
  # wrangler's rule: <top-level name>-<class_name>-<env>, lowercased.
  local top
  top=$(sed -n 's/^name *= *"\(.*\)"/\1/p' wrangler.toml | head -n1)
  printf '%s-hermesagent-%s\n' "$top" "$ENV_NAME" | tr '[:upper:]' '[:lower:]'
}

do_teardown() {
  local rc=0 app list ids id
  step "teardown 1/2: wrangler delete --env $ENV_NAME (the Worker)"
  if ! wrangler_ni delete --env "$ENV_NAME" >&2; then
    echo "    the Worker could not be deleted (it may not exist)" >&2
    rc=1
  fi
  app=$(containers_app_name)
  step "teardown 2/2: the containers application $app (wrangler delete leaves it behind, and it is billed)"
  if ! list=$(wrangler_ni containers list --json 2>"$SCRATCH/containers.err"); then
    cat "$SCRATCH/containers.err" >&2
    echo "    could not list containers applications" >&2
    rc=1
  else
    ids=$(printf '%s' "$list" | jq -r --arg n "$app" '.[] | select(.name == $n) | .id' 2>/dev/null) || {
      echo "    'wrangler containers list --json' did not print JSON" >&2
      rc=1
    }
    if [ -z "$ids" ] && [ "$rc" = 0 ]; then
      echo "    no containers application named $app (already deleted)" >&2
    fi
    for id in $ids; do
      if wrangler_ni containers delete "$id" >&2; then
        echo "    deleted containers application $app ($id)" >&2
      else
        echo "    could not delete containers application $app ($id)" >&2
        rc=1
      fi
    done
  fi
  rm -f "$URL_STATE"
  if [ "$rc" != 0 ]; then
    printf '\nerror: teardown of %s was incomplete (see above)\nnext:  check with: wrangler deployments list --env %s; wrangler containers list — delete what is left, then rerun scripts/deploy.sh %s teardown\n' \
      "$ENV_NAME" "$ENV_NAME" "$ENV_NAME" >&2
    return 1
  fi
  step "teardown of $ENV_NAME complete"
}

case "$ACTION" in
  deploy) do_deploy ;;
  smoke) do_smoke ;;
  teardown) do_teardown ;;
  all)
    # Tear down whatever happens: a failed deploy can leave a Worker or a
    # containers application behind, and both are billed.
    finish_all() {
      local rc=$?
      trap - EXIT
      set +e
      if [ "$rc" != 0 ]; then
        printf '\n==> a step failed (exit %s): tearing down anyway\n' "$rc" >&2
      fi
      do_teardown || rc=1
      rm -rf "$SCRATCH"
      if [ "$rc" = 0 ]; then step "all: deployed, smoke-tested and torn down $ENV_NAME"; fi
      exit "$rc"
    }
    trap finish_all EXIT
    trap 'exit 130' INT TERM
    (
      do_deploy
      do_smoke
    )
    ;;
esac
