#!/usr/bin/env bash
# Functional smoke test (SPEC §11): two random agents; each boot-check
# reports Hermes running as a non-root user; a chat completion for each
# returns 200 with a choice. Both agents are evicted at the end.
#
#   BASE_URL=http://127.0.0.1:8787 SERVICE_AUTH_SECRET_FILE=.wrangler/dev.env \
#     scripts/functional-smoke.sh
#
# Prints one line per check and "N passed, M failed"; exits 1 on a failure.
# SMOKE_MODEL (default hermes-agent) is the model name sent.
set -euo pipefail
. "$(dirname "$0")/lib/tools.sh"
. "$(dirname "$0")/lib/smoke.sh"
smoke_init

a=$(random_agent)
b=$(random_agent)
echo "agents: $a $b" >&2
chat_body=$(jq -cn --arg m "${SMOKE_MODEL:-hermes-agent}" \
  '{model: $m, messages: [{role: "user", content: "Reply with one short word: ping"}]}')

for agent in "$a" "$b"; do
  call GET /hosted/agent/boot-check "$agent"
  if [[ $STATUS == 200 && $(field .agentId) == "$agent" && $(field .nonRoot) == true ]]; then r=0; else r=1; fi
  verdict "boot-check $agent: Hermes runs as non-root" $r

  call POST /hosted/agent/v1/chat/completions "$agent" "$chat_body"
  choices=$(field '(.choices // []) | length')
  if [[ $STATUS == 200 && ${choices:-0} -ge 1 && $(field '.choices[0].message | type') == object ]]; then r=0; else r=1; fi
  verdict "chat completion $agent: 200 with a choice" $r
done

for agent in "$a" "$b"; do
  call POST /hosted/agent/evict "$agent"
  if [[ $STATUS == 200 && $(field .status) == evicted ]]; then r=0; else r=1; fi
  verdict "evict $agent" $r
done

smoke_finish
