package wire

import (
	"fmt"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// checkBody detects a fake 200 in a complete non-stream JSON body. It
// returns the reason ("malformed_body", "error_body", or the dialect's
// empty-answer reason: "empty_content" for Anthropic, "empty_choices" for
// OpenAI) and an error naming it, or "", nil when the body looks like a
// real answer. Rejected phrases are checked separately by checkBodyReject.
func CheckBody(d Dialect, body []byte) (reason string, err error) {
	return d.CheckBody(body)
}

// checkBodyReject fails a complete non-stream body whose answer text
// (Anthropic content[].text, OpenAI choices[].message.content) contains one
// of the reject phrases, case-insensitively.
func CheckBodyReject(d Dialect, body []byte, reject [][]byte) error {
	if len(reject) == 0 {
		return nil
	}
	return d.CheckBodyReject(body, reject)
}

// bodyMembers reads the raw values of the top-level members names of a
// body into vals (nil when absent; the last one when repeated), and fails
// a body that is not a valid JSON object.
func BodyMembers(body []byte, vals [][]byte, names ...string) (reason string, err error) {
	it, ok := jsonscan.Open(body, 0, 0)
	if !ok || !it.IsObject() {
		return "malformed_body", fmt.Errorf("upstream 200 body is not a JSON object: %q", ClipData(body, 200))
	}
	for it.Next() {
		for i, name := range names {
			if it.KeyIs(name) {
				vals[i] = it.Value()
				break
			}
		}
	}
	if !it.End() {
		return "malformed_body", fmt.Errorf("upstream 200 body is not valid JSON: %q", ClipData(body, 200))
	}
	return "", nil
}

// errorBody is the failure of a 200 body that holds an error.
func ErrorBody(errVal, body []byte) (reason string, err error) {
	return "error_body", fmt.Errorf("upstream 200 body is an error: %s", UpstreamErrorMessage(errVal, body))
}

// isNonEmptyArray reports whether a raw value is an array with an element.
func IsNonEmptyArray(v []byte) bool {
	return len(v) > 0 && v[0] == '[' && jsonscan.NonEmpty(v)
}
