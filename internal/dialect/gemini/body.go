package gemini

// The Gemini dialect (dialect.go): complete bodies, usage and cachedContent.

import (
	"bytes"
	"fmt"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// checkGeminiBody detects a fake 200 in a complete non-stream Gemini body:
// a GenerateContentResponse object, or the JSON array of them that
// streamGenerateContent sends without alt=sse. "malformed_body" for
// anything that is not one of those; "error_body" for a non-null
// top-level "error" (in any element of an array); "empty_output" when no
// element has a candidate or a promptFeedback. A blocked prompt
// (promptFeedback with no candidates) is the truth about the prompt and
// passes.
func CheckGeminiBody(body []byte) (reason string, err error) {
	start := jsonscan.SkipSpace(body, 0)
	if start < len(body) && body[start] == '[' {
		arr, ok := jsonscan.Open(body, start, 0)
		answered := false
		for ok && arr.Next() {
			elem := arr.Value()
			r, a, err := checkGeminiObject(elem, body)
			if r != "" {
				return r, err
			}
			answered = answered || a
		}
		if !ok || !arr.End() {
			return "malformed_body", fmt.Errorf("upstream 200 body is not valid JSON: %q", wire.ClipData(body, 200))
		}
		if !answered {
			return "empty_output", fmt.Errorf("upstream 200 body has no candidates and no prompt feedback")
		}
		return "", nil
	}
	r, answered, err := checkGeminiObject(body, body)
	if r != "" {
		return r, err
	}
	if !answered {
		return "empty_output", fmt.Errorf("upstream 200 body has no candidates and no prompt feedback")
	}
	return "", nil
}

// checkGeminiObject checks one GenerateContentResponse of body: a failure
// reason, or whether it answers (a non-empty candidates array, or a
// promptFeedback).
func checkGeminiObject(obj, body []byte) (reason string, answered bool, err error) {
	it, ok := jsonscan.Open(obj, 0, 0)
	if !ok || !it.IsObject() {
		return "malformed_body", false, fmt.Errorf("upstream 200 body is not a JSON object or array of objects: %q", wire.ClipData(body, 200))
	}
	var errVal, cands, feedback []byte
	for it.Next() {
		switch {
		case it.KeyIs("error"):
			errVal = it.Value()
		case it.KeyIs("candidates"):
			cands = it.Value()
		case it.KeyIs("promptFeedback"):
			feedback = it.Value()
		}
	}
	if !it.End() {
		return "malformed_body", false, fmt.Errorf("upstream 200 body is not valid JSON: %q", wire.ClipData(body, 200))
	}
	if errVal != nil && !jsonscan.IsNull(errVal) {
		return "error_body", false, fmt.Errorf("upstream 200 body is an error: %s", wire.UpstreamErrorMessage(errVal, obj))
	}
	answered = len(cands) > 0 && cands[0] == '[' && jsonscan.NonEmpty(cands) || len(feedback) > 0 && feedback[0] == '{'
	return "", answered, nil
}

// checkGeminiBodyReject fails a complete non-stream body (object or array)
// whose answer text (candidates' non-thought text parts) contains one of
// the reject phrases, case-insensitively: the text the stream gate checks.
// The elements of an array are chunks of one answer, so their text is
// joined as the stream's is.
func CheckGeminiBodyReject(body []byte, reject [][]byte) error {
	if len(reject) == 0 {
		return nil
	}
	var text []byte
	start := jsonscan.SkipSpace(body, 0)
	if start < len(body) && body[start] == '[' {
		arr, ok := jsonscan.Open(body, start, 0)
		for ok && arr.Next() {
			text = geminiAppendText(text, arr.Value())
		}
	} else {
		text = geminiAppendText(text, body)
	}
	return wire.RejectedIn(text, reject)
}

// geminiAppendText appends the lower-cased non-thought text of every
// candidate of one response object to text, a newline after each
// candidate when there are several.
func geminiAppendText(text, obj []byte) []byte {
	cands, _ := geminiLast(obj, "candidates")
	n := 0
	arr, ok := jsonscan.Open(cands, 0, 0)
	for ok && !arr.IsObject() && arr.Next() {
		n++
	}
	many := n > 1
	arr, ok = jsonscan.Open(cands, 0, 0)
	for ok && !arr.IsObject() && arr.Next() {
		content, _ := geminiLast(arr.Value(), "content")
		parts, _ := geminiLast(content, "parts")
		pit, ok := jsonscan.Open(parts, 0, 0)
		for ok && !pit.IsObject() && pit.Next() {
			if by, t := geminiPartOutput(pit.Value()); by == "text" {
				text = wire.AppendLowerText(text, jsonscan.AppendString(nil, t))
			}
		}
		if many {
			text = append(text, '\n')
		}
	}
	return text
}

var (
	geminiUsageKey = []byte(`"usageMetadata"`)
	geminiModelKey = []byte(`"modelVersion"`)
)

// observeGeminiEvent records what a stream chunk says about usage. A chunk
// without a "usageMetadata" key (or, until the model is known, a
// "modelVersion" key) is skipped by a substring check; one with it is
// read without allocating once the model is known.
func ObserveGeminiEvent(u *wire.Usage, ev sse.Event) {
	if u == nil || len(ev.Data) == 0 {
		return
	}
	if !bytes.Contains(ev.Data, geminiUsageKey) && (u.Model != "" || !bytes.Contains(ev.Data, geminiModelKey)) {
		return
	}
	observeGeminiObject(u, ev.Data)
}

// observeGeminiBody records the usage of a complete non-stream body: one
// response object, or the JSON array of chunks (each chunk's counts are
// the running totals, so the last one counts).
func ObserveGeminiBody(u *wire.Usage, body []byte) {
	if u == nil {
		return
	}
	start := jsonscan.SkipSpace(body, 0)
	if start < len(body) && body[start] == '[' {
		arr, ok := jsonscan.Open(body, start, 0)
		for ok && arr.Next() {
			observeGeminiObject(u, arr.Value())
		}
		return
	}
	observeGeminiObject(u, body)
}

// observeGeminiObject reads one GenerateContentResponse: modelVersion, if
// no model was seen yet, and usageMetadata. Gemini's counts are running
// totals, so each one read replaces the last. Input is promptTokenCount
// (which includes the cached tokens, as OpenAI's prompt_tokens does) plus
// toolUsePromptTokenCount (tool results fed back to the model, billed as
// input); Output is candidatesTokenCount plus thoughtsTokenCount (the
// thinking tokens, billed as output and left out of candidatesTokenCount,
// as OpenAI counts reasoning in completion_tokens); CacheRead is
// cachedContentTokenCount.
func observeGeminiObject(u *wire.Usage, obj []byte) {
	it, ok := jsonscan.Open(obj, 0, 0)
	for ok && it.IsObject() && it.Next() {
		switch {
		case it.KeyIs("modelVersion"):
			observeGeminiModel(u, it.Value())
		case it.KeyIs("usageMetadata"):
			um, ok := it.Enter()
			if !ok {
				continue
			}
			observeGeminiUsage(u, &um)
			it.Leave(&um)
		}
	}
}

// ObserveInfo is ObserveEvent from what inspect read: the usageMetadata
// and modelVersion of a chunk, without walking it again.
func (Dialect) ObserveInfo(u *wire.Usage, ev sse.Event, info wire.EventInfo) {
	if u == nil || len(ev.Data) == 0 {
		return
	}
	if !info.UsageRead {
		ObserveGeminiEvent(u, ev)
		return
	}
	observeGeminiModel(u, info.Model)
	u.ApplyCounts(info.Counts) // read in inspect's walk
}

func observeGeminiModel(u *wire.Usage, v []byte) {
	if u.Model == "" && len(v) > 2 && v[0] == '"' {
		name := wire.JSONStringValue(v)
		if len(name) > wire.MaxModelLen {
			name = name[:wire.MaxModelLen]
		}
		u.Model = name
	}
}

// observeGeminiUsage reads a usageMetadata object (um walks it).
func observeGeminiUsage(u *wire.Usage, um *jsonscan.Iter) {
	u.ApplyCounts(readGeminiCounts(um))
}

// readGeminiCounts walks a usageMetadata object (um, to its end) for the
// counts Gemini bills: nothing read when it is not an object.
func readGeminiCounts(um *jsonscan.Iter) wire.UsageCounts {
	var c wire.UsageCounts
	var prompt, tool, cands, thoughts, cached int64
	for um.IsObject() && um.Next() {
		var n *int64
		switch {
		case um.KeyIs("promptTokenCount"):
			n, c.HasInput = &prompt, true
		case um.KeyIs("toolUsePromptTokenCount"):
			n = &tool
		case um.KeyIs("candidatesTokenCount"):
			n, c.HasOutput = &cands, true
		case um.KeyIs("thoughtsTokenCount"):
			n, c.HasOutput = &thoughts, true
		case um.KeyIs("cachedContentTokenCount"):
			n, c.HasCacheRead = &cached, true
		default:
			continue
		}
		if v, ok := jsonscan.Int(um.Value()); ok {
			*n = v
		}
	}
	if !um.IsObject() {
		return wire.UsageCounts{}
	}
	c.Input, c.Output, c.CacheRead, c.Read = prompt+tool, cands+thoughts, cached, true
	return c
}

// maxCachedContentLen bounds a cachedContent name the proxy pins by.
const MaxCachedContentLen = 512

// geminiCachedContent returns the top-level cachedContent of a request
// body (a resource name like "cachedContents/abc123"): the cache lives
// with the provider that created it, so the request is pinned there. ""
// when absent, not a string, or not a plausible name (printable ASCII
// without spaces, quotes or backslashes, at most 512 bytes); like the
// providers, the last of duplicate keys counts.
func CachedContent(body []byte, top *jsonscan.Top) string {
	var name string
	err := top.Scan(body, func(key []byte, s, e int) bool {
		if jsonscan.KeyIs(key, "cachedContent") {
			name = ""
			if v := body[s:e]; jsonscan.IsString(v) && len(v) <= 2+6*MaxCachedContentLen {
				name = wire.JSONStringValue(v)
			}
		}
		return true
	})
	if err != nil || len(name) > MaxCachedContentLen {
		return ""
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return ""
		}
	}
	return name
}
