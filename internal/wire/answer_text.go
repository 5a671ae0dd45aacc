package wire

import (
	"bytes"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// Reject phrases: configured text that, found case-insensitively in an
// answer before commit, fails the attempt (a refusal dressed as a 200).

// appendLowerText appends s lower-cased (Unicode simple folding to lower case)
// to dst; the reject check compares both sides through it.
func AppendLowerText(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		dst = utf8.AppendRune(dst, unicode.ToLower(r))
		i += n
	}
	return dst
}

// appendAnswerText appends the raw JSON string raw, decoded and
// lower-cased, and a line break to the answer text of a body.
func AppendAnswerText(text, raw []byte) []byte {
	if !jsonscan.IsString(raw) {
		return text
	}
	text = AppendLowerText(text, jsonscan.AppendString(nil, raw))
	return append(text, '\n')
}

// rejectedIn fails a lower-cased answer text that holds one of the reject
// phrases.
func RejectedIn(text []byte, reject [][]byte) error {
	var lp []byte
	for _, p := range reject {
		lp = AppendLowerText(lp[:0], p)
		if len(lp) > 0 && bytes.Contains(text, lp) {
			return fmt.Errorf("upstream answer contains the rejected phrase %q", p)
		}
	}
	return nil
}
