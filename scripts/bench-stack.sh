#!/usr/bin/env bash
# The agent path, measured against direct calls to the supervisor in the
# same run (issue 4): added latency of edge + object at concurrency 1 and
# 50, SSE time to first chunk and throughput through the edge vs direct,
# and cold boot to first token with its phases. Prints JSON lines.
set -euo pipefail
. "$(dirname "$0")/lib/tools.sh"
. "$(dirname "$0")/lib/stack.sh"
cd "$ROOT"

bash scripts/build-worker.sh >&2
cargo build --quiet -p hermes-supervisor -p hermes-devhost
cargo build --release --quiet --example loadgen -p hermes-edge
loadgen="$CARGO_TARGET_DIR/release/examples/loadgen"
probe="python3 $ROOT/scripts/lib/stack_probe.py"

stack_start
trap stack_stop EXIT
agent="bench-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"

# Cold boot to first token (streamed chat on a fresh agent), then phases.
cold=$(BENCH_BEARER="$STACK_SECRET" $probe sse "$STACK_BASE/hosted/agent/v1/chat/completions" 1 "x-divinci-agent-id=$agent")
phases=$($probe phases "$STACK_DIR/state")
echo "{\"bench\":\"cold_boot_first_token\",\"first_token\":$cold,\"phases\":$phases}"

token=$($probe token "$STACK_DIR/state")
direct="$STACK_DEVHOST/containers/agent:$agent/ports/8080/_control/hermes-api"
edge="$STACK_BASE/hosted/agent/proxy"

for c in 1 50; do
  n=$([ "$c" = 1 ] && echo 500 || echo 2000)
  d=$(LOADGEN_URL="$direct/health" LOADGEN_BEARER="$token" LOADGEN_REQUESTS=$n LOADGEN_CONCURRENCY=$c \
      LOADGEN_LABEL="direct_c$c" "$loadgen")
  e=$(LOADGEN_URL="$edge/health" LOADGEN_BEARER="$STACK_SECRET" LOADGEN_AGENT="$agent" LOADGEN_REQUESTS=$n \
      LOADGEN_CONCURRENCY=$c LOADGEN_LABEL="edge_c$c" "$loadgen")
  echo "$d"; echo "$e"
  python3 - "$d" "$e" <<'PY'
import json, sys
d, e = (json.loads(a) for a in sys.argv[1:])
print(json.dumps({"bench": f"edge_added_latency_c{d['concurrency']}",
  "added_p50_ms": round(e["p50_ms"] - d["p50_ms"], 3), "added_p99_ms": round(e["p99_ms"] - d["p99_ms"], 3),
  "rps_ratio_edge_over_direct": round(e["rps"] / d["rps"], 3)}))
PY
done

sd=$(BENCH_BEARER="$token" $probe sse "$direct/v1/chat/completions" 10)
se=$(BENCH_BEARER="$STACK_SECRET" $probe sse "$STACK_BASE/hosted/agent/v1/chat/completions" 10 "x-divinci-agent-id=$agent")
python3 - "$sd" "$se" <<'PY'
import json, sys
d, e = (json.loads(a) for a in sys.argv[1:])
print(json.dumps({"bench": "sse_edge_vs_direct", "direct": d, "edge": e,
  "ttfb_added_ms": round(e["ttfb_ms_p50"] - d["ttfb_ms_p50"], 2),
  "throughput_ratio": round(e["bytes_per_s_p50"] / d["bytes_per_s_p50"], 3)}))
PY
