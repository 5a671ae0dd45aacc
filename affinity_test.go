package llmhedge

import (
	"fmt"
	"math"
	"net/http"
	"strings"
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
		before[i] = names[rendezvousPick(fmt.Sprintf("user-%d", i), names)]
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
		after := rest[rendezvousPick(fmt.Sprintf("user-%d", i), rest)]
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
		if got := names[rendezvousPick(key, names)]; got != want {
			t.Errorf("key %q: picked %s, golden %s", key, got, want)
		}
		// The order the candidates come in must not matter.
		if got := shuffled[rendezvousPick(key, shuffled)]; got != want {
			t.Errorf("key %q: picked %s from shuffled candidates, golden %s", key, got, want)
		}
	}
	if got := rendezvousScore(xxhash.Sum64String("user-1"), "bedrock"); got != 0xca772a6d90209102 {
		t.Errorf("score changed: %#x", got)
	}
	if got := rendezvousPick("k", nil); got != -1 {
		t.Errorf("rendezvousPick with no candidates = %d, want -1", got)
	}
}

func TestAffinityTableEvictsLeastRecentlyUsed(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tab := newAffinityTable(3, time.Hour)
	tab.put("a", "p1", now)
	tab.put("b", "p2", now)
	tab.put("c", "p3", now)
	if _, ok := tab.get("a", now); !ok { // a is now the most recent
		t.Fatal("a missing before eviction")
	}
	tab.put("d", "p4", now) // evicts b, the least recently used
	want := map[string]string{"a": "p1", "b": "", "c": "p3", "d": "p4"}
	for k, w := range want {
		got, ok := tab.get(k, now)
		if got != w || ok != (w != "") {
			t.Errorf("get(%q) = (%q, %v), want %q", k, got, ok, w)
		}
	}
	if n := tab.size(); n != 3 {
		t.Errorf("size = %d, want 3", n)
	}
	// Overwriting keeps one entry and the new provider.
	tab.put("a", "p9", now)
	if got, _ := tab.get("a", now); got != "p9" || tab.size() != 3 {
		t.Errorf("after overwrite get(a) = %q, size %d", got, tab.size())
	}
	tab.forget("a")
	tab.forget("never-there")
	if _, ok := tab.get("a", now); ok || tab.size() != 2 {
		t.Errorf("forget(a) left it in the table (size %d)", tab.size())
	}
	// Freed slots are reused and the list stays consistent through churn.
	for i := range 100 {
		tab.put(fmt.Sprintf("k%d", i), "p", now)
	}
	if n := tab.size(); n != 3 {
		t.Errorf("size after churn = %d, want 3", n)
	}
	if len(tab.entries) > 3 {
		t.Errorf("table grew to %d slots for capacity 3", len(tab.entries))
	}
	for i := 97; i < 100; i++ {
		if _, ok := tab.get(fmt.Sprintf("k%d", i), now); !ok {
			t.Errorf("recent key k%d evicted", i)
		}
	}
}

func TestAffinityTableExpires(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tab := newAffinityTable(10, time.Hour)
	tab.put("conv", "bedrock", t0)
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true},
		{59 * time.Minute, true}, // a get does not extend the TTL
		{time.Hour, false},
	}
	for _, s := range steps {
		if _, ok := tab.get("conv", t0.Add(s.at)); ok != s.want {
			t.Errorf("get at +%v: ok = %v, want %v", s.at, ok, s.want)
		}
	}
	if tab.size() != 0 {
		t.Errorf("expired entry still stored")
	}
	// A put refreshes the TTL.
	tab.put("conv", "vertex", t0)
	tab.put("conv", "vertex", t0.Add(50*time.Minute))
	if p, ok := tab.get("conv", t0.Add(100*time.Minute)); !ok || p != "vertex" {
		t.Errorf("refreshed entry: get = (%q, %v)", p, ok)
	}
}

func TestAffinityTableDefaults(t *testing.T) {
	tab := newAffinityTable(0, 0)
	if tab.capacity != 100_000 || tab.ttl != time.Hour {
		t.Errorf("defaults = %d entries, %v; want 100000, 1h", tab.capacity, tab.ttl)
	}
}

func TestSessionKey(t *testing.T) {
	big := `"messages":[{"role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}]`
	tests := []struct {
		name       string
		d          dialect
		body       string
		header     http.Header
		headerName string
		want       string
	}{
		{"anthropic metadata.user_id", dialectAnthropic,
			`{"model":"claude","metadata":{"user_id":"u-123"},"messages":[]}`, nil, "", "u-123"},
		{"anthropic escaped value", dialectAnthropic,
			`{"metadata":{"user_id":"a\"b\u00e9"}}`, nil, "", `a"bé`},
		{"anthropic without metadata", dialectAnthropic, `{"model":"claude"}`, nil, "", ""},
		{"anthropic user_id at top level is not metadata", dialectAnthropic,
			`{"user_id":"top","metadata":{}}`, nil, "", ""},
		{"anthropic non-string user_id", dialectAnthropic, `{"metadata":{"user_id":42}}`, nil, "", ""},
		{"anthropic decoy inside a message", dialectAnthropic,
			`{"messages":[{"role":"user","content":"{\"metadata\":{\"user_id\":\"decoy\"}}"},{"metadata":{"user_id":"nested"}}],"model":"m"}`,
			nil, "", ""},
		{"anthropic decoy before the real one", dialectAnthropic,
			`{"messages":[{"metadata":{"user_id":"nested"}}],"metadata":{"note":"{\"user_id\":\"x\"}","user_id":"real"}}`,
			nil, "", "real"},
		{"anthropic after a 1 MiB prompt", dialectAnthropic,
			`{` + big + `,"metadata":{"user_id":"late"}}`, nil, "", "late"},
		{"openai user", dialectOpenAI, `{"model":"gpt","user":"alice"}`, nil, "", "alice"},
		{"openai prompt_cache_key first", dialectOpenAI,
			`{"user":"alice","prompt_cache_key":"conv-9","safety_identifier":"s"}`, nil, "", "conv-9"},
		{"openai safety_identifier", dialectOpenAI, `{"safety_identifier":"hash-1"}`, nil, "", "hash-1"},
		{"openai user before safety_identifier", dialectOpenAI, `{"safety_identifier":"s","user":"u"}`, nil, "", "u"},
		{"openai empty prompt_cache_key falls through", dialectOpenAI, `{"prompt_cache_key":"","user":"u"}`, nil, "", "u"},
		{"openai decoys in messages", dialectOpenAI,
			`{"messages":[{"role":"user","content":"\"user\":\"decoy\""},{"role":"user","name":"x","user":"nested"}],"tools":[{"prompt_cache_key":"no"}]}`,
			nil, "", ""},
		{"openai key inside a string with escaped quotes", dialectOpenAI,
			`{"stop":"\\\",\"user\":\"decoy","user":"real"}`, nil, "", "real"},
		{"openai null user", dialectOpenAI, `{"user":null}`, nil, "", ""},
		{"openai metadata.user_id is not openai's", dialectOpenAI, `{"metadata":{"user_id":"x"}}`, nil, "", ""},
		{"header wins over the body", dialectOpenAI, `{"user":"alice"}`,
			http.Header{"X-Session": {" sess-7 "}}, "X-Session", "sess-7"},
		{"header configured but absent", dialectAnthropic, `{"metadata":{"user_id":"u"}}`,
			http.Header{}, "X-Session", ""},
		{"unknown dialect", dialectNone, `{"user":"alice"}`, nil, "", ""},
		{"empty body", dialectOpenAI, ``, nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sessionKey(tt.d, []byte(tt.body), tt.header, tt.headerName); got != tt.want {
				t.Errorf("sessionKey = %q, want %q", got, tt.want)
			}
		})
	}
}

func BenchmarkSessionKey1MiB(b *testing.B) {
	body := []byte(`{"model":"claude","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 1<<20/12) + `"}],"metadata":{"user_id":"u-1"}}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if sessionKey(dialectAnthropic, body, nil, "") != "u-1" {
			b.Fatal("wrong key")
		}
	}
}

func BenchmarkRendezvousPick(b *testing.B) {
	names := []string{"anthropic", "bedrock", "vertex", "openrouter"}
	b.ReportAllocs()
	for b.Loop() {
		rendezvousPick("user-1234567890", names)
	}
}

func BenchmarkAffinityTable(b *testing.B) {
	tab := newAffinityTable(1000, time.Hour)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		if _, ok := tab.get(k, now); !ok {
			tab.put(k, "bedrock", now)
		}
		i++
	}
}

func TestAffinityTableConcurrent(t *testing.T) {
	tab := newAffinityTable(64, time.Minute)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				k := fmt.Sprintf("k%d", (i*7+g)%200)
				switch i % 3 {
				case 0:
					tab.put(k, "p", now.Add(time.Duration(i)*time.Millisecond))
				case 1:
					tab.get(k, now.Add(time.Duration(i)*time.Millisecond))
				default:
					tab.forget(k)
				}
			}
		})
	}
	wg.Wait()
	if n := tab.size(); n > 64 {
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
	if seen != tab.size() || back != tab.size() {
		t.Errorf("list holds %d forward / %d backward entries, index %d", seen, back, tab.size())
	}
}
