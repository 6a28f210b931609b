#!/usr/bin/env bash
# Benchmarks. Every number is reported next to a baseline measured in the
# same run, so ratios survive a slower or busier machine.
#
#   scripts/bench.sh            all sections
#   scripts/bench.sh edge       just the Worker (wasm size, gate, object)
#
# Results are printed and appended as JSON lines to target/bench/results.jsonl.
set -euo pipefail
. "$(dirname "$0")/lib/tools.sh"
. "$(dirname "$0")/lib/stack.sh"
cd "$ROOT"
sections=${1:-all}
out="$ROOT/target/bench"; mkdir -p "$out"
results="$out/results.jsonl"

record() { echo "$1" | tee -a "$results"; }

bench_edge() {
  step "edge: wasm size"
  bash scripts/build-worker.sh
  raw=$(stat -c %s build/index_bg.wasm)
  gz=$(gzip -9c build/index_bg.wasm | wc -c)
  record "{\"bench\":\"wasm_size\",\"raw_bytes\":$raw,\"gzip_bytes\":$gz,\"raw_target\":1048576,\"gzip_target\":358400}"

  step "edge: latency through wrangler dev (2000 requests, concurrency 20)"
  cargo build --release --quiet --example loadgen -p hermes-edge
  cargo build --quiet -p hermes-supervisor -p hermes-devhost
  loadgen="$CARGO_TARGET_DIR/release/examples/loadgen"
  # The probe lives in the agent's container: the full local stack.
  stack_start
  trap stack_stop RETURN
  secret=$STACK_SECRET
  base=$STACK_BASE
  agent="bench-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  # Warm-up: instantiate the wasm and the object.
  LOADGEN_URL="$base/hosted/agent/probe" LOADGEN_METHOD=POST LOADGEN_BEARER="$secret" LOADGEN_AGENT="$agent" \
    LOADGEN_REQUESTS=200 LOADGEN_CONCURRENCY=4 LOADGEN_LABEL=warmup "$loadgen" >/dev/null
  r401=$(LOADGEN_URL="$base/hosted/agent/probe" LOADGEN_BEARER="wrong-$secret" LOADGEN_AGENT="$agent" \
    LOADGEN_EXPECT=401 LOADGEN_LABEL=gate_401 "$loadgen")
  rget=$(LOADGEN_URL="$base/hosted/agent/probe" LOADGEN_BEARER="$secret" LOADGEN_AGENT="$agent" \
    LOADGEN_LABEL=probe_get_via_object "$loadgen")
  rpost=$(LOADGEN_URL="$base/hosted/agent/probe" LOADGEN_METHOD=POST LOADGEN_BEARER="$secret" LOADGEN_AGENT="$agent" \
    LOADGEN_LABEL=probe_post_via_object "$loadgen")
  record "$r401"; record "$rget"; record "$rpost"
  python3 - "$r401" "$rget" "$rpost" <<'PY' | tee -a "$results"
import json, sys
gate, get, post = (json.loads(a) for a in sys.argv[1:])
print(json.dumps({"bench": "edge_object_overhead",
  "probe_get_over_gate_p50": round(get["p50_ms"] / gate["p50_ms"], 2),
  "probe_post_over_gate_p50": round(post["p50_ms"] / gate["p50_ms"], 2),
  "object_added_p50_ms": round(get["p50_ms"] - gate["p50_ms"], 3)}))
PY
}

case "$sections" in
  all)
    bench_edge
    for extra in scripts/bench-supervisor.sh scripts/bench-egress.sh scripts/bench-stack.sh; do
      [ -x "$extra" ] && { step "$extra"; bash "$extra" | tee -a "$results"; }
    done ;;
  edge) bench_edge ;;
  *) die "unknown section $sections (all|edge)" ;;
esac
