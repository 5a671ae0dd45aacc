package wire

import (
	"encoding/json"
	"testing"
)

// AppendJSONString writes what json.Marshal writes, byte for byte.
func TestAppendJSONStringMatchesMarshal(t *testing.T) {
	for _, s := range []string{"", "claude-sonnet-4-5", "anthropic_version", "gpt-4o:2024", "a\"b", `a\b`, "a<b>&c", "\x00\x1f\x7f", "é", "\xff", "model\u2028x"} {
		want, _ := json.Marshal(s)
		if got := AppendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("%q: got %s, encoding/json gives %s", s, got[1:], want)
		}
	}
}
