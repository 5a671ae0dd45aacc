#!/usr/bin/env bash
# Smoke test of a built caddy binary: modules listed, the example adapts,
# and the embedded default serves a stream and a non-stream request.
#
# Caddyfile.example runs on copies of its ports: SMOKE_PROXY_PORT (8080 in
# the example), SMOKE_ADMIN_PORT (2019), SMOKE_DASHBOARD_PORT (2020) and SMOKE_SIM_PORTS (three, for
# 9001-9003), each a free port unless set, so the test runs beside a
# running Caddy or another smoke test.
set -euo pipefail
CADDY=${1:-./caddy}
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }

taken=" "
# free_port prints a loopback port nothing listens on and no earlier call chose,
# below the kernel's ephemeral range (32768+), where an outgoing connection's
# local port would make the bind fail although nothing listens.
free_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 12000))
		[[ $taken == *" $p "* ]] && continue
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			taken+="$p "
			echo "$p"
			return
		fi
	done
	fail "no free port"
}
proxy_port=${SMOKE_PROXY_PORT:-$(free_port)}; taken+="$proxy_port "
admin_port=${SMOKE_ADMIN_PORT:-$(free_port)}; taken+="$admin_port "
dash_port=${SMOKE_DASHBOARD_PORT:-$(free_port)}; taken+="$dash_port "
read -r -a sim_ports <<<"${SMOKE_SIM_PORTS:-}"
while [ ${#sim_ports[@]} -lt 3 ]; do
	p=$(free_port); taken+="$p "; sim_ports+=("$p")
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
config=$work/Caddyfile
# Each pattern ends at a word boundary: a port already put in by an earlier
# expression (20201, say) must not match a later one (2020) as a prefix.
sed -e "s/localhost:2019\b/localhost:$admin_port/g" -e "s/127\.0\.0\.1:8080\b/127.0.0.1:$proxy_port/g" \
	-e "s/127\.0\.0\.1:2020\b/127.0.0.1:$dash_port/g" \
	-e "s/127\.0\.0\.1:9001\b/127.0.0.1:${sim_ports[0]}/g" -e "s/127\.0\.0\.1:9002\b/127.0.0.1:${sim_ports[1]}/g" \
	-e "s/127\.0\.0\.1:9003\b/127.0.0.1:${sim_ports[2]}/g" Caddyfile.example >"$config"
proxy=http://127.0.0.1:$proxy_port

# The list is read whole first: `list-modules | grep -q` under pipefail fails
# when grep stops reading early and caddy gets SIGPIPE.
modules=$($CADDY list-modules) || fail "list-modules"
for m in http.handlers.llm_hedge http.handlers.llm_sim admin.api.llm_hedge; do
	grep -qx "$m" <<<"$modules" || fail "$m not listed"
done
$CADDY adapt --config Caddyfile.example --adapter caddyfile >"$work/adapted.json" || fail "adapt"
grep -q '"handler":"llm_hedge"' "$work/adapted.json" || fail "adapted JSON lacks llm_hedge"

# A typo must fail with the line named.
bad=$work/typo.Caddyfile
printf ':0 {\n\tllm_hedge {\n\t\tprovider a http://127.0.0.1:9001\n\t\tretyr 2\n\t}\n}\n' >"$bad"
if out=$($CADDY adapt --config "$bad" --adapter caddyfile 2>&1); then fail "typo accepted"; fi
grep -Eq "retyr.*:4\b" <<<"$out" || fail "typo error does not name line 4: $out"

$CADDY start --config "$config" --adapter caddyfile >"$work/start.log" 2>&1 || { cat "$work/start.log"; fail "start"; }
trap '$CADDY stop --config "$config" --adapter caddyfile >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
for i in $(seq 1 50); do curl -fsS -o /dev/null "http://127.0.0.1:${sim_ports[0]}/v1/models" 2>/dev/null && break; sleep 0.1; done

# Each check reads its answer from a here-string, not a pipe: under
# pipefail, `echo | grep -q` fails when grep has its match and exits
# before echo has written all of a long answer (a stream's first delta).
stream=$(curl -sS -N --max-time 30 "$proxy/v1/messages" \
	-H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' -H 'x-api-key: sk-client' \
	-d '{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}')
grep -q 'event: message_stop' <<<"$stream" || fail "stream lacks message_stop: $stream"
grep -q 'content_block_delta' <<<"$stream" || fail "stream lacks deltas"

body=$(curl -sS --max-time 30 "$proxy/v1/chat/completions" \
	-H 'content-type: application/json' -H 'authorization: Bearer sk-client' \
	-d '{"model":"gpt-4o","messages":[{"role":"user","content":"hello"}]}')
grep -q '"chat.completion"' <<<"$body" || fail "non-stream completion: $body"

responses=$(curl -sS -N --max-time 30 "$proxy/v1/responses" \
	-H 'content-type: application/json' -H 'authorization: Bearer sk-client' \
	-d '{"model":"gpt-5-codex","stream":true,"input":"hello"}')
grep -q 'response.completed' <<<"$responses" || fail "responses stream lacks response.completed: $responses"
grep -q 'response.output_text.delta' <<<"$responses" || fail "responses stream lacks deltas"

status=$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin_port/llm_hedge/providers")
[ "$status" = 200 ] || fail "admin providers: $status"
echo "smoke: 6 passed, 0 failed"
