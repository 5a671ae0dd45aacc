#!/usr/bin/env bash
# Smoke test of a built caddy binary: modules listed, the example adapts,
# and the embedded default serves a stream and a non-stream request.
set -euo pipefail
CADDY=${1:-./caddy}
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }

# The list is read whole first: `list-modules | grep -q` under pipefail fails
# when grep stops reading early and caddy gets SIGPIPE.
modules=$($CADDY list-modules) || fail "list-modules"
for m in http.handlers.llm_hedge http.handlers.llm_sim admin.api.llm_hedge; do
	grep -qx "$m" <<<"$modules" || fail "$m not listed"
done
$CADDY adapt --config Caddyfile.example --adapter caddyfile >/tmp/llm_hedge_adapted.json || fail "adapt"
grep -q '"handler":"llm_hedge"' /tmp/llm_hedge_adapted.json || fail "adapted JSON lacks llm_hedge"

# A typo must fail with the line named.
bad=$(mktemp)
printf ':8080 {\n\tllm_hedge {\n\t\tprovider a http://127.0.0.1:9001\n\t\tretyr 2\n\t}\n}\n' >"$bad"
if out=$($CADDY adapt --config "$bad" --adapter caddyfile 2>&1); then fail "typo accepted"; fi
echo "$out" | grep -Eq "retyr.*:4\b" || fail "typo error does not name line 4: $out"

$CADDY start --config Caddyfile.example --adapter caddyfile >/tmp/llm_hedge_smoke.log 2>&1 || { cat /tmp/llm_hedge_smoke.log; fail "start"; }
trap '$CADDY stop >/dev/null 2>&1 || true' EXIT
for i in $(seq 1 50); do curl -fsS -o /dev/null http://127.0.0.1:9001/v1/models 2>/dev/null && break; sleep 0.1; done

stream=$(curl -sS -N --max-time 30 http://127.0.0.1:8080/v1/messages \
	-H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' -H 'x-api-key: sk-client' \
	-d '{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}')
echo "$stream" | grep -q 'event: message_stop' || fail "stream lacks message_stop: $stream"
echo "$stream" | grep -q 'content_block_delta' || fail "stream lacks deltas"

body=$(curl -sS --max-time 30 http://127.0.0.1:8080/v1/chat/completions \
	-H 'content-type: application/json' -H 'authorization: Bearer sk-client' \
	-d '{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}')
echo "$body" | grep -q '"chat.completion"' || fail "non-stream completion: $body"

responses=$(curl -sS -N --max-time 30 http://127.0.0.1:8080/v1/responses \
	-H 'content-type: application/json' -H 'authorization: Bearer sk-client' \
	-d '{"model":"gpt-5-codex","stream":true,"input":"hello"}')
echo "$responses" | grep -q 'response.completed' || fail "responses stream lacks response.completed: $responses"
echo "$responses" | grep -q 'response.output_text.delta' || fail "responses stream lacks deltas"

status=$(curl -sS -o /dev/null -w '%{http_code}' http://127.0.0.1:2019/llm_hedge/providers)
[ "$status" = 200 ] || fail "admin providers: $status"
echo "smoke: 6 passed, 0 failed"
