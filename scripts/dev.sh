#!/usr/bin/env bash
# Run the whole system locally: the Worker and the HermesAgent Durable
# Object in the real workerd runtime (`wrangler dev`), hermes-devhost as the
# container runtime, a supervisor and real Hermes per agent, and the mock
# model when no provider key is configured.
#
#   scripts/dev.sh                  ports 8787 (Worker) and 8788 (devhost)
#   PORT=9000 DEVHOST_PORT=9001 scripts/dev.sh
#
# Local secrets live in .wrangler/dev.env (0600, gitignored): a generated
# SERVICE_AUTH_SECRET plus any provider keys you add (OPENAI_API_KEY=...).
set -euo pipefail
. "$(dirname "$0")/lib/tools.sh"
cd "$ROOT"
PORT=${PORT:-8787}
DEVHOST_PORT=${DEVHOST_PORT:-8788}

bash scripts/setup.sh
step "building what is stale"
bash scripts/build-worker.sh
cargo build --quiet -p hermes-supervisor -p hermes-devhost

mkdir -p .wrangler && chmod 700 .wrangler
env_file=.wrangler/dev.env
header_file=.wrangler/dev-auth-header
# Secret files are private; the umask is restored before anything else is
# started (devhost's directories must stay traversable by containers).
old_umask=$(umask)
umask 077
if [ ! -s "$env_file" ]; then
  printf 'SERVICE_AUTH_SECRET=%s\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" > "$env_file"
fi
# Runtime selection for local development (not secrets, but kept with them
# so wrangler reads one file).
grep -v -e '^HERMES_CONTAINER_RUNTIME=' -e '^DEVHOST_URL=' "$env_file" > "$env_file.tmp" || true
printf 'HERMES_CONTAINER_RUNTIME=devhost\nDEVHOST_URL=http://127.0.0.1:%s\n' "$DEVHOST_PORT" >> "$env_file.tmp"
mv "$env_file.tmp" "$env_file"
printf 'Authorization: Bearer %s\n' "$(sed -n 's/^SERVICE_AUTH_SECRET=//p' "$env_file")" > "$header_file"
umask "$old_umask"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

step "starting hermes-devhost on 127.0.0.1:$DEVHOST_PORT"
[ "$(id -u)" -eq 0 ] || echo "note: not root: devhost runs containers with reduced isolation (no namespaces, no uid switch)" >&2
setsid "$CARGO_TARGET_DIR/debug/hermes-devhost" --listen "127.0.0.1:$DEVHOST_PORT" &
pids+=($!)

step "starting wrangler dev on 127.0.0.1:$PORT"
setsid wrangler dev --ip 127.0.0.1 --port "$PORT" --env-file "$env_file" --show-interactive-dev-session=false &
pids+=($!)

for _ in $(seq 1 240); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/" || true)
  [ "$code" = 404 ] && break
  sleep 0.5
done
cat <<MSG

hermes-edge is running at http://127.0.0.1:$PORT  (Ctrl-C stops everything)

  curl -s -H @$header_file -H 'x-divinci-agent-id: my-first-agent' \\
       -H 'content-type: application/json' \\
       -d '{"model":"hermes-agent","messages":[{"role":"user","content":"hello"}]}' \\
       http://127.0.0.1:$PORT/hosted/agent/v1/chat/completions

The first request boots the agent's container (a few seconds). With no
provider key in $env_file the built-in mock model answers.
MSG
wait
