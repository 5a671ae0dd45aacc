package engine

import (
	"fmt"
	"testing"
	"time"
)

func TestResponseOwnersSharedAndBounded(t *testing.T) {
	a := NewResponseOwners(ResponseOwnersCapacity())
	b := a // the table a reload shares (lifecycle.go of the Caddy layer)
	now := time.Unix(1_700_000_000, 0)
	a.remember(1, "resp_1", "openai-a", now)
	if p, ok := b.owner(1, "resp_1", now.Add(time.Hour)); !ok || p != "openai-a" {
		t.Fatalf("owner after reload = %q, %v; want openai-a", p, ok)
	}
	if _, ok := b.owner(2, "resp_1", now); ok {
		t.Fatal("another client sees the id")
	}
	if _, ok := a.owner(1, "resp_1", now.Add(responseOwnersTTL+time.Second)); ok {
		t.Fatal("an id older than the TTL is still known")
	}
	if a.total != 0 || len(a.clients) != 0 {
		t.Fatalf("expired ids still counted: %d in %d clients", a.total, len(a.clients))
	}
	if _, ok := a.owner(1, "resp_unknown", now); ok {
		t.Fatal("unknown id has an owner")
	}
	var nilOwners *ResponseOwners
	nilOwners.remember(1, "x", "y", now)
	if _, ok := nilOwners.owner(1, "x", now); ok {
		t.Fatal("nil table answered")
	}
}

// Item 10: a client's flood evicts its own ids, and a full table takes
// from the client holding the most; the whole table stays bounded.
func TestResponseOwnersFairEviction(t *testing.T) {
	ro := NewResponseOwners(100) // 10 per client
	now := time.Unix(1_700_000_000, 0)
	for c := range uint64(9) {
		for i := range 5 {
			ro.remember(c, fmt.Sprintf("r%d-%d", c, i), "p", now)
		}
	}
	for i := range 10_000 { // client 99 floods
		ro.remember(99, fmt.Sprintf("flood-%d", i), "p", now)
	}
	for c := range uint64(9) {
		for i := range 5 {
			if _, ok := ro.owner(c, fmt.Sprintf("r%d-%d", c, i), now); !ok {
				t.Fatalf("client %d lost r%d-%d to another client's flood", c, c, i)
			}
		}
	}
	if ro.total != 55 {
		t.Fatalf("total %d, want 45 + the flooder's 10", ro.total)
	}
	// 50 more clients fill the table past its 100: the 5 past it are taken
	// from the client holding the most, the flooder.
	for c := uint64(1000); c < 1050; c++ {
		ro.remember(c, "x", "p", now)
	}
	if ro.total != 100 {
		t.Fatalf("total %d, want the capacity", ro.total)
	}
	if n := ro.clients[99].Size(); n != 5 {
		t.Fatalf("the flooder holds %d, want 5", n)
	}
	for c := range uint64(9) {
		if n := ro.clients[c].Size(); n != 5 {
			t.Fatalf("client %d holds %d, want its 5", c, n)
		}
	}
}
