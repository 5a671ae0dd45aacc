package llmhedge

import (
	"testing"
	"time"
)

func TestResponseOwnersSharedAndBounded(t *testing.T) {
	a, err := loadResponseOwners()
	if err != nil {
		t.Fatal(err)
	}
	defer releaseResponseOwners()
	b, err := loadResponseOwners() // a reload: the second handler shares the table
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	a.remember("resp_1", "openai-a", now)
	if p, ok := b.owner("resp_1", now.Add(time.Hour)); !ok || p != "openai-a" {
		t.Fatalf("owner after reload = %q, %v; want openai-a", p, ok)
	}
	releaseResponseOwners()
	if _, ok := a.owner("resp_1", now.Add(responseOwnersTTL+time.Second)); ok {
		t.Fatal("an id older than the TTL is still known")
	}
	if _, ok := a.owner("resp_unknown", now); ok {
		t.Fatal("unknown id has an owner")
	}
	var nilOwners *responseOwners
	nilOwners.remember("x", "y", now)
	if _, ok := nilOwners.owner("x", now); ok {
		t.Fatal("nil table answered")
	}
}
