#!/usr/bin/env bash
# Egress guard benchmark: CONNECT tunnel throughput vs a direct connection
# in the same run, and the connect latency the guard adds (p50/p99).
# Needs root (it runs in a private network namespace it creates; nothing on
# the host network is touched). Extra arguments go to the bench binary:
#   --mib N      MiB per throughput run (default 1024)
#   --rounds N   connect-latency samples (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p hermes-egress --bin hermes-egress-guard --example egress-bench >&2
exec target/release/examples/egress-bench --guard target/release/hermes-egress-guard "$@"
