package affinity

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

func TestRendezvousPickMovesOnlyTheRemovedProvidersKeys(t *testing.T) {
	names := []string{"anthropic", "bedrock", "vertex", "openrouter", "azure"}
	const keys = 10000
	before := make([]string, keys)
	count := map[string]int{}
	for i := range keys {
		before[i] = names[Pick(fmt.Sprintf("user-%d", i), names)]
		count[before[i]]++
	}
	for _, n := range names {
		if share := float64(count[n]) / keys; math.Abs(share-0.2) > 0.02 {
			t.Errorf("provider %s holds %.1f%% of keys, want about 20%%", n, share*100)
		}
	}
	removed := "vertex"
	rest := []string{"anthropic", "bedrock", "openrouter", "azure"}
	moved := 0
	for i := range keys {
		after := rest[Pick(fmt.Sprintf("user-%d", i), rest)]
		if before[i] != removed && after != before[i] {
			t.Fatalf("key %d moved from %s to %s although %s was removed", i, before[i], after, removed)
		}
		if before[i] == removed {
			moved++
		}
	}
	if moved != count[removed] {
		t.Errorf("moved %d keys, want the %d that were on %s", moved, count[removed], removed)
	}
}

func TestRendezvousPickIsStableAcrossProcesses(t *testing.T) {
	// Golden picks, computed once: every instance, today and after a restart
	// or an upgrade, must agree. A change here means a deploy would reshuffle
	// every conversation away from its prompt cache.
	names := []string{"a", "b", "c", "d"}
	golden := map[string]string{"": "a", "user-1": "b", "user-2": "a", "conversation-42": "c", "😀": "d"}
	shuffled := []string{"d", "b", "a", "c"}
	for key, want := range golden {
		if got := names[Pick(key, names)]; got != want {
			t.Errorf("key %q: picked %s, golden %s", key, got, want)
		}
		// The order the candidates come in must not matter.
		if got := shuffled[Pick(key, shuffled)]; got != want {
			t.Errorf("key %q: picked %s from shuffled candidates, golden %s", key, got, want)
		}
	}
	if got := rendezvousScore(xxhash.Sum64String("user-1"), "bedrock"); got != 0xca772a6d90209102 {
		t.Errorf("score changed: %#x", got)
	}
	if got := Pick("k", nil); got != -1 {
		t.Errorf("rendezvousPick with no candidates = %d, want -1", got)
	}
}

func TestAffinityTableEvictsLeastRecentlyUsed(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tab := NewTable(3, time.Hour)
	tab.Put("a", "p1", now)
	tab.Put("b", "p2", now)
	tab.Put("c", "p3", now)
	if _, ok := tab.Get("a", now); !ok { // a is now the most recent
		t.Fatal("a missing before eviction")
	}
	tab.Put("d", "p4", now) // evicts b, the least recently used
	want := map[string]string{"a": "p1", "b": "", "c": "p3", "d": "p4"}
	for k, w := range want {
		got, ok := tab.Get(k, now)
		if got != w || ok != (w != "") {
			t.Errorf("get(%q) = (%q, %v), want %q", k, got, ok, w)
		}
	}
	if n := tab.Size(); n != 3 {
		t.Errorf("size = %d, want 3", n)
	}
	// Overwriting keeps one entry and the new provider.
	tab.Put("a", "p9", now)
	if got, _ := tab.Get("a", now); got != "p9" || tab.Size() != 3 {
		t.Errorf("after overwrite get(a) = %q, size %d", got, tab.Size())
	}
	tab.forget("a")
	tab.forget("never-there")
	if _, ok := tab.Get("a", now); ok || tab.Size() != 2 {
		t.Errorf("forget(a) left it in the table (size %d)", tab.Size())
	}
	// Freed slots are reused and the list stays consistent through churn.
	for i := range 100 {
		tab.Put(fmt.Sprintf("k%d", i), "p", now)
	}
	if n := tab.Size(); n != 3 {
		t.Errorf("size after churn = %d, want 3", n)
	}
	if len(tab.entries) > 3 {
		t.Errorf("table grew to %d slots for capacity 3", len(tab.entries))
	}
	for i := 97; i < 100; i++ {
		if _, ok := tab.Get(fmt.Sprintf("k%d", i), now); !ok {
			t.Errorf("recent key k%d evicted", i)
		}
	}
}

func TestAffinityTableExpires(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tab := NewTable(10, time.Hour)
	tab.Put("conv", "bedrock", t0)
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true},
		{59 * time.Minute, true}, // a get does not extend the TTL
		{time.Hour, false},
	}
	for _, s := range steps {
		if _, ok := tab.Get("conv", t0.Add(s.at)); ok != s.want {
			t.Errorf("get at +%v: ok = %v, want %v", s.at, ok, s.want)
		}
	}
	if tab.Size() != 0 {
		t.Errorf("expired entry still stored")
	}
	// A put refreshes the TTL.
	tab.Put("conv", "vertex", t0)
	tab.Put("conv", "vertex", t0.Add(50*time.Minute))
	if p, ok := tab.Get("conv", t0.Add(100*time.Minute)); !ok || p != "vertex" {
		t.Errorf("refreshed entry: get = (%q, %v)", p, ok)
	}
}

func TestAffinityTableDefaults(t *testing.T) {
	tab := NewTable(0, 0)
	if tab.capacity != 100_000 || tab.ttl != time.Hour {
		t.Errorf("defaults = %d entries, %v; want 100000, 1h", tab.capacity, tab.ttl)
	}
}

func BenchmarkRendezvousPick(b *testing.B) {
	names := []string{"anthropic", "bedrock", "vertex", "openrouter"}
	b.ReportAllocs()
	for b.Loop() {
		Pick("user-1234567890", names)
	}
}

func BenchmarkAffinityTable(b *testing.B) {
	tab := NewTable(1000, time.Hour)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		if _, ok := tab.Get(k, now); !ok {
			tab.Put(k, "bedrock", now)
		}
		i++
	}
}

func TestAffinityTableConcurrent(t *testing.T) {
	tab := NewTable(64, time.Minute)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprintf("k%d", (i*7+g)%200)
				switch i % 3 {
				case 0:
					tab.Put(k, "p", now.Add(time.Duration(i)*time.Millisecond))
				case 1:
					tab.Get(k, now.Add(time.Duration(i)*time.Millisecond))
				default:
					tab.forget(k)
				}
			}
		})
	}
	wg.Wait()
	if n := tab.Size(); n > 64 {
		t.Errorf("size %d above capacity 64", n)
	}
	// Walk the list both ways: it must hold exactly the indexed entries.
	seen := 0
	for i := tab.head; i >= 0; i = tab.entries[i].next {
		seen++
	}
	back := 0
	for i := tab.tail; i >= 0; i = tab.entries[i].prev {
		back++
	}
	if seen != tab.Size() || back != tab.Size() {
		t.Errorf("list holds %d forward / %d backward entries, index %d", seen, back, tab.Size())
	}
}
