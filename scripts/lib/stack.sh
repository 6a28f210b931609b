# Sourced by bench scripts: start the local stack (devhost + wrangler dev)
# on free loopback ports, with a random secret in a 0600 env file. Sets
# STACK_BASE, STACK_DEVHOST, STACK_SECRET, STACK_DIR; stack_stop tears down.
# shellcheck shell=bash

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# stack_start [extra KEY=VALUE lines for the Worker]
stack_start() {
  STACK_DIR=$(mktemp -d)
  # Containers (their own user namespaces) must traverse the state dir.
  chmod 755 "$STACK_DIR"
  STACK_SECRET=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  local dport wport iport
  dport=$(free_port); wport=$(free_port); iport=$(free_port)
  STACK_DEVHOST="http://127.0.0.1:$dport"
  STACK_BASE="http://127.0.0.1:$wport"
  setsid "$CARGO_TARGET_DIR/debug/hermes-devhost" --listen "127.0.0.1:$dport" --state-dir "$STACK_DIR/devhost" \
    >"$STACK_DIR/devhost.log" 2>&1 &
  STACK_DEVHOST_PID=$!
  (umask 077; printf 'SERVICE_AUTH_SECRET=%s\nHERMES_CONTAINER_RUNTIME=devhost\nDEVHOST_URL=%s\n%s\n' \
    "$STACK_SECRET" "$STACK_DEVHOST" "${1:-}" > "$STACK_DIR/env")
  # Same bundle and bindings, absolute paths, no [build] step: its file
  # watcher reloads the Worker at random moments (see tests/common).
  cp -r "$ROOT/build" "$STACK_DIR/bundle"
  # Alone in its own directory: wrangler watches the config's directory and
  # would reload the Worker on every SQLite write under it.
  mkdir -p "$STACK_DIR/config"
  awk -v root="$ROOT" -v bundle="$STACK_DIR/bundle" '
    /^\[/ { skip = ($0 == "[build]") }
    skip { next }
    { sub(/main = "build\//, "main = \"" bundle "/"); sub(/image = "\.\/container\//, "image = \"" root "/container/"); print }
  ' "$ROOT/wrangler.toml" > "$STACK_DIR/config/wrangler.toml"
  setsid wrangler dev --config "$STACK_DIR/config/wrangler.toml" --ip 127.0.0.1 --port "$wport" --inspector-port "$iport" --env-file "$STACK_DIR/env" \
    --persist-to "$STACK_DIR/state" --show-interactive-dev-session=false --log-level info >"$STACK_DIR/wrangler.log" 2>&1 &
  STACK_WRANGLER_PID=$!
  local code=""
  for _ in $(seq 1 480); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$STACK_BASE/" || true)
    [ "$code" = 404 ] && break
    sleep 0.25
  done
  [ "$code" = 404 ] || { tail -30 "$STACK_DIR/wrangler.log"; die "wrangler dev did not start"; }
}

stack_stop() {
  kill -TERM -- "-${STACK_WRANGLER_PID:-0}" 2>/dev/null || true
  kill -TERM -- "-${STACK_DEVHOST_PID:-0}" 2>/dev/null || true
  wait "${STACK_WRANGLER_PID:-}" "${STACK_DEVHOST_PID:-}" 2>/dev/null || true
  rm -rf "${STACK_DIR:-/nonexistent}"
}
