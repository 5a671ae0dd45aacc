package limit

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		wantOK bool
	}{
		{"absent", nil, 0, false},
		{"empty", map[string]string{"Retry-After": ""}, 0, false},
		{"seconds", map[string]string{"Retry-After": "30"}, 30 * time.Second, true},
		{"zero", map[string]string{"Retry-After": "0"}, 0, true},
		{"spaces around", map[string]string{"Retry-After": "  7 "}, 7 * time.Second, true},
		{"decimal", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond, true},
		{"decimal rounds up to the ms", map[string]string{"Retry-After": "0.0001"}, time.Millisecond, true},
		{"decimal exact ms", map[string]string{"Retry-After": "2.250000"}, 2250 * time.Millisecond, true},
		{"negative", map[string]string{"Retry-After": "-1"}, 0, false},
		{"plus sign", map[string]string{"Retry-After": "+5"}, 0, false},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"exponent", map[string]string{"Retry-After": "1e3"}, 0, false},
		{"dot alone", map[string]string{"Retry-After": "."}, 0, false},
		{"trailing dot", map[string]string{"Retry-After": "5."}, 0, false},
		{"leading dot", map[string]string{"Retry-After": ".5"}, 0, false},
		{"two dots", map[string]string{"Retry-After": "1.2.3"}, 0, false},
		{"huge clamps to 24h", map[string]string{"Retry-After": "99999999999999999999999999"}, 24 * time.Hour, true},
		{"just above 24h", map[string]string{"Retry-After": "86401"}, 24 * time.Hour, true},
		{"HTTP date", map[string]string{"Retry-After": "Sun, 01 Mar 2026 12:00:42 GMT"}, 42 * time.Second, true},
		{"RFC 850 date", map[string]string{"Retry-After": "Sunday, 01-Mar-26 12:01:00 GMT"}, time.Minute, true},
		{"date in the past", map[string]string{"Retry-After": "Sun, 01 Mar 2026 11:00:00 GMT"}, 0, true},
		{"date far ahead clamps", map[string]string{"Retry-After": "Fri, 01 Mar 2030 12:00:00 GMT"}, 24 * time.Hour, true},
		{"retry-after-ms", map[string]string{"retry-after-ms": "250"}, 250 * time.Millisecond, true},
		{"retry-after-ms decimal", map[string]string{"retry-after-ms": "1.5"}, 1500 * time.Microsecond, true},
		{"retry-after-ms wins", map[string]string{"retry-after-ms": "250", "Retry-After": "1"}, 250 * time.Millisecond, true},
		{"invalid retry-after-ms falls back", map[string]string{"retry-after-ms": "-3", "Retry-After": "2"}, 2 * time.Second, true},
		{"huge retry-after-ms clamps", map[string]string{"retry-after-ms": "999999999999999999999"}, 24 * time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := ParseRetryAfter(h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("parseRetryAfter(%v) = (%v, %v), want (%v, %v)", tt.header, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestShouldRetry(t *testing.T) {
	tests := []struct {
		value string
		set   bool
		want  bool
	}{
		{set: false, want: true},
		{value: "false", set: true, want: false},
		{value: "FALSE", set: true, want: false},
		{value: " False ", set: true, want: false},
		{value: "true", set: true, want: true},
		{value: "no", set: true, want: true},
		{value: "", set: true, want: true},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.set {
			h.Set("X-Should-Retry", tt.value)
		}
		if got := ShouldRetry(h); got != tt.want {
			t.Errorf("shouldRetry(x-should-retry=%q, set=%v) = %v, want %v", tt.value, tt.set, got, tt.want)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	f.Add("30", "")
	f.Add("1.5", "")
	f.Add("Sun, 01 Mar 2026 12:00:42 GMT", "")
	f.Add("-1", "100")
	f.Add("99999999999999999999999999", "1.0000001")
	f.Add("", "999999999999999999999999.999999")
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, retryAfter, retryAfterMs string) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		h.Set("Retry-After-Ms", retryAfterMs)
		d, ok := ParseRetryAfter(h, now)
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("(%q, %q) gave %v outside [0, 24h]", retryAfter, retryAfterMs, d)
		}
		if !ok && d != 0 {
			t.Fatalf("(%q, %q) gave %v with ok=false", retryAfter, retryAfterMs, d)
		}
	})
}
