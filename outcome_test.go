package llmhedge

import (
	"context"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The placeholders answer from the request's fields, read when used; a
// second pass through the handler (an internal rewrite) replaces the
// first's values instead of adding a provider that the first would shadow.
// Both ways: a request with its vars (Caddy's), and a bare context.
func TestPlaceholdersLastPassWins(t *testing.T) {
	for _, ctx := range []context.Context{
		context.WithValue(context.Background(), caddyhttp.VarsCtxKey, map[string]any{}),
		context.Background(),
	} {
		repl := caddy.NewReplacer()
		publishPlaceholders(ctx, repl, &accessFields{provider: "first", dialect: "anthropic", attempts: 1, outcome: "exhausted"})
		publishPlaceholders(ctx, repl, &accessFields{provider: "second", model: "m", dialect: "openai", attempts: 2, hedged: true,
			outcome: "success", firstByteMs: 7, in: 11, out: 13})
		got := repl.ReplaceAll("{http.llm_hedge.provider} {http.llm_hedge.model} {http.llm_hedge.dialect} {http.llm_hedge.attempts} "+
			"{http.llm_hedge.hedged} {http.llm_hedge.outcome} {http.llm_hedge.first_byte_ms} {http.llm_hedge.input_tokens} "+
			"{http.llm_hedge.output_tokens} [{http.llm_hedge.unknown}] [{http.other}]", "")
		if want := "second m openai 2 true success 7 11 13 [] []"; got != want {
			t.Fatalf("placeholders = %q, want %q", got, want)
		}
	}
}
