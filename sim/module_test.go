package sim

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestModule provisions the Caddy module from a Caddyfile and serves through
// its MiddlewareHandler; unloading the module ends a stalled request.
func TestModule(t *testing.T) {
	var h Handler
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llm_sim {
		tokens 3
		model sim-1
		fault stall count 1
	}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, unload := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer unload()
	if err := h.Provision(ctx); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	if err := h.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if h.Text != DefaultText || *h.Pings != DefaultPings {
		t.Errorf("defaults not applied: %+v", h.Config)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.ServeHTTP(w, r, nil); err != nil {
			t.Errorf("ServeHTTP: %v", err)
		}
	}))
	defer srv.Close()

	// The first request stalls until the module is unloaded.
	stalled := make(chan error, 1)
	go func() {
		resp, err := post(t, context.Background(), srv, "/v1/messages", anthropicBody)
		if err == nil {
			resp.Body.Close()
		}
		stalled <- err
	}()
	waitFor(t, h.Simulator(), "the stall", func(recs []RequestRecord) bool { return len(recs) == 1 && recs[0].Fault != nil })

	resp := mustPost(t, srv, "/v1/messages", anthropicBody)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("second request: %d %s", resp.StatusCode, body)
	}

	unload()
	// Unloading ends the handler; the client then sees the connection end.
	if err := <-stalled; err == nil {
		t.Error("the stalled request got a response")
	}
	if st := h.Simulator().Stats(); st.InFlight != 0 || st.Requests != 2 || st.Faulted != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestModuleProvisionRejectsInvalid(t *testing.T) {
	h := Handler{Config: Config{Faults: []Fault{{Kind: "boom"}}}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := h.Provision(ctx); err == nil {
		t.Error("Provision accepted an unknown fault kind")
	}
	if err := h.Validate(); err == nil {
		t.Error("Validate accepted an unknown fault kind")
	}
}

func TestNewPanicsOnInvalid(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New did not panic")
		}
	}()
	New(Config{Tokens: -1})
}
