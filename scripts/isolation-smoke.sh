#!/usr/bin/env bash
# Isolation smoke test (SPEC §11): two random agents each write and read a
# marker in their own container and see only their own; a wrong bearer is
# 401; the agent id "../evil" is 400. Both agents are evicted at the end.
#
#   BASE_URL=http://127.0.0.1:8787 SERVICE_AUTH_SECRET_FILE=.wrangler/dev.env \
#     scripts/isolation-smoke.sh
#
# Prints one line per check and "N passed, M failed"; exits 1 on a failure.
set -euo pipefail
. "$(dirname "$0")/lib/tools.sh"
. "$(dirname "$0")/lib/smoke.sh"
smoke_init

a=$(random_agent)
b=$(random_agent)
echo "agents: $a $b" >&2

call POST /hosted/agent/probe "$a"
marker_a=$(field .wrote)
if [[ $STATUS == 200 && $(field .agentId) == "$a" && $(field .isolated) == true &&
  $marker_a == "marker-for-$a-"?* && $(field .read) == "$marker_a" ]]; then r=0; else r=1; fi
verdict "agent A writes marker-for-<A>-<nonce> and reads it back" $r

call GET /hosted/agent/probe "$b"
if [[ $STATUS == 200 && $(field .read) == "(none)" ]]; then r=0; else r=1; fi
verdict "agent B does not see A's marker (reads (none))" $r

call POST /hosted/agent/probe "$b"
marker_b=$(field .wrote)
if [[ $STATUS == 200 && $(field .isolated) == true && $marker_b == "marker-for-$b-"?* &&
  $marker_b != "$marker_a" ]]; then r=0; else r=1; fi
verdict "agent B writes its own marker" $r

call GET /hosted/agent/probe "$a"
if [[ $STATUS == 200 && $(field .read) == "$marker_a" ]]; then r=0; else r=1; fi
verdict "agent A still reads only its own marker" $r
call GET /hosted/agent/probe "$b"
if [[ $STATUS == 200 && $(field .read) == "$marker_b" ]]; then r=0; else r=1; fi
verdict "agent B reads only its own marker" $r

call GET /hosted/agent/probe "$a" "" "$SMOKE_DIR/wrong-auth"
if [[ $STATUS == 401 && $(field .error) == unauthorized ]]; then r=0; else r=1; fi
verdict "a wrong bearer is refused: 401 unauthorized" $r

call GET /hosted/agent/probe "../evil"
if [[ $STATUS == 400 && $(field .error) == invalid_agent_id ]]; then r=0; else r=1; fi
verdict "agent id ../evil is refused: 400 invalid_agent_id" $r

for agent in "$a" "$b"; do
  call POST /hosted/agent/evict "$agent"
  if [[ $STATUS == 200 && $(field .status) == evicted ]]; then r=0; else r=1; fi
  verdict "evict $agent" $r
done

smoke_finish
