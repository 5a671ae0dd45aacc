# Build, run and test Caddy with the llm_hedge module.
#   make -f xcaddy.mk run     build ./caddy and serve Caddyfile.example (simulated providers)
#   make -f xcaddy.mk demo    build ./caddy, serve Caddyfile.demo and send it live load (bench/cmd/demo) until Ctrl-C
#   make -f xcaddy.mk test    vet, race tests, fuzz seed corpora, and the smoke test of the built binary
#   make -f xcaddy.mk bench   side-by-side load comparison against reverse_proxy
#   make -f xcaddy.mk soak    30 minutes of faulty load, reloads and client aborts: proves nothing is lost (not in CI)

CADDY_VERSION  ?= v2.11.9
XCADDY_VERSION ?= v0.4.5
MODULE         := github.com/llmhedge/caddy-llm-hedge
# The module is not published: pin a zero pseudo-version and replace it with this checkout.
MODULE_PIN     := $(MODULE)@v0.0.0-00010101000000-000000000000=.
GOBIN          ?= $(shell go env GOPATH)/bin
XCADDY         := $(GOBIN)/xcaddy

.PHONY: build run demo test unit smoke bench soak fuzz clean

$(XCADDY):
	go install github.com/caddyserver/xcaddy/cmd/xcaddy@$(XCADDY_VERSION)

caddy: $(XCADDY) $(wildcard *.go) $(wildcard dashboard_ui/*) $(wildcard sim/*.go) $(shell find internal -name "*.go") go.mod go.sum
	XCADDY_SKIP_CLEANUP=0 $(XCADDY) build $(CADDY_VERSION) --output ./caddy --with $(MODULE_PIN)

build: caddy

run: caddy
	./caddy run --config Caddyfile.example --adapter caddyfile

# The demo: ./caddy serves Caddyfile.demo (simulated providers made to
# misbehave) and bench/cmd/demo sends it load until Ctrl-C, which stops
# both. The dashboard: http://127.0.0.1:2020/llm_hedge/ui/
demo: caddy
	@go build -o ./.demo-load ./bench/cmd/demo
	@./caddy run --config Caddyfile.demo --adapter caddyfile & caddy_pid=$$!; \
	trap 'kill $$caddy_pid 2>/dev/null; wait $$caddy_pid 2>/dev/null; rm -f ./.demo-load' EXIT; \
	trap 'exit 130' INT TERM; \
	./.demo-load -url http://127.0.0.1:8080 -dashboard http://127.0.0.1:2020/llm_hedge/ui/

unit:
	go vet ./...
	go test -race -count=1 ./...

smoke: caddy
	bash scripts/smoke.sh ./caddy

test: unit smoke

bench: caddy
	go run ./bench -caddy ./caddy

SOAK ?= 30m
soak: caddy
	go run ./bench -caddy ./caddy -soak $(SOAK)

fuzz:
	for t in ./internal/sse:FuzzSSEReader ./internal/jsonscan:FuzzJSONScanner ./internal/engine:FuzzGate ./internal/engine:FuzzBedrockEventStream ./internal/limit:FuzzParseRetryAfter .:FuzzCaddyfile ./internal/engine:FuzzParseCompletion ./internal/engine:FuzzResumeSplice ./internal/engine:FuzzInspectSequence; do \
		go test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime 5m "$${t%%:*}" || exit 1; done

clean:
	rm -f caddy .demo-load
