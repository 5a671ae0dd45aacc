package llmhedge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Google's Gemini API (SPEC section 10, "gemini" column): paths that carry
// the model, the key in a header or the query, the stream chunks (each a
// whole GenerateContentResponse, with no event names), their fake 200s,
// usage, and Google's error shape. A stream has no terminal event: every
// candidate gets a finishReason and then the body ends.

// The methods of a model a Gemini client calls.
const (
	geminiGenerate      = "generateContent"
	geminiStreamMethod  = "streamGenerateContent"
	geminiCountTokens   = "countTokens"
	geminiRetryInfoType = "type.googleapis.com/google.rpc.RetryInfo"
)

// geminiDialect is Google's Gemini API, served as dialect `gemini`.
type geminiDialect struct{}

var dialectGemini dialect = geminiDialect{}

func init() { registerDialect(dialectGemini) }

func (geminiDialect) String() string { return "gemini" }

// isCompletionPath: generateContent and streamGenerateContent of a model
// (countTokens is an aux path).
func (geminiDialect) isCompletionPath(path string) bool {
	_, method, ok := geminiPath(path)
	return ok && method != geminiCountTokens
}

// completionPath is the shape of a Gemini completion path; the model of an
// attempt's path is its own (upstreamPath).
func (geminiDialect) completionPath(string) string {
	return "/v1beta/models/gemini-2.5-flash:generateContent"
}

// upstreamPath is the client's path with the upstream model in it (a
// rewrite or a fallback renames it); a path geminiPath refuses never gets
// here (isCompletionPath).
func (geminiDialect) upstreamPath(clientPath, model string) string {
	return geminiRewritePath(strings.TrimSuffix(clientPath, "/"), model)
}

var geminiAuxPaths = []auxPath{
	{http.MethodGet, "/v1beta/models"},
	{http.MethodGet, "/v1beta/models/{id}"},
	{http.MethodPost, "/v1beta/models/{id}:countTokens"},
	{http.MethodGet, "/v1/models"},
	{http.MethodGet, "/v1/models/{id}"},
	{http.MethodPost, "/v1/models/{id}:countTokens"},
}

func (geminiDialect) auxPaths() []auxPath { return geminiAuxPaths }

// sniffAux claims a /v1beta/ path, a countTokens call or a request with
// Google's key header, over the others. A client that only sends ?key=
// on a shared path (GET /v1/models) reads as OpenAI's.
func (geminiDialect) sniffAux(path string, h headerGetter) int {
	if strings.HasPrefix(path, "/v1beta/") || strings.HasSuffix(path, ":"+geminiCountTokens) || h.Get("x-goog-api-key") != "" {
		return 3
	}
	return 0
}

// parseRequest reads the model from the path and the stream mode from
// the method and ?alt=sse: a streamGenerateContent without it answers
// with one JSON array, handled as a non-stream body (no hedge, the
// response timeout). The body must be a JSON object; its fields are the
// provider's business.
func (geminiDialect) parseRequest(path, rawQuery string, body []byte) (*llmRequest, error) {
	model, method, ok := geminiPath(strings.TrimSuffix(path, "/"))
	if !ok || method == geminiCountTokens {
		return nil, fmt.Errorf("path %q: not a Gemini model method", path)
	}
	it, ok := jsonOpen(body, 0, 0)
	if !ok || !it.isObject() {
		if !jsonValid(body) {
			return nil, errInvalidJSON
		}
		return nil, errScan
	}
	for it.next() {
	}
	if !it.end() {
		return nil, errInvalidJSON
	}
	return &llmRequest{
		body:       body,
		model:      model,
		stream:     geminiIsStream(method) && geminiIsSSE(rawQuery),
		modelStart: -1,
	}, nil
}

// bodyFor: the model is in the path, so every attempt sends the body as is.
func (geminiDialect) bodyFor(req *llmRequest, _ string) []byte { return req.body }

// sessionKey is the request's cachedContent: with affinity on, requests
// that use one cache go to one provider (the cache lives there). Gemini
// has no conversation key (SPEC 10: none by default).
func (geminiDialect) sessionKey(body []byte, _ http.Header) string {
	return geminiCachedContent(body)
}

var geminiCredentialHeaders = []string{"X-Goog-Api-Key", "X-Goog-User-Project"}

func (geminiDialect) credentialHeaders() []string { return geminiCredentialHeaders }

func (geminiDialect) setAuth(h http.Header, key string) { h.Set("X-Goog-Api-Key", key) }

// inspect keeps the stream's end state in cs: the candidates, and a
// blocked prompt (no candidates) as a finished candidate 0, so
// cs.allFinished is geminiStream.done.
func (geminiDialect) inspect(ev sseEvent, withText bool, cs *choiceSet) eventInfo {
	if cs == nil {
		return inspectGeminiStream(ev, withText, nil)
	}
	st := geminiStream{candidates: *cs}
	info := inspectGeminiStream(ev, withText, &st)
	*cs = st.candidates
	if st.blocked {
		cs.note(0, true)
	}
	return info
}

// terminalName: Gemini sends no terminal event (the gate never sees one).
func (geminiDialect) terminalName(sseEvent) string { return "end of body" }

// finishGrace: every candidate's finishReason completes the answer, and
// the body then ends; the relay waits a grace for that end.
func (geminiDialect) finishGrace() bool { return true }

// streamEnd: a Gemini stream ends with the body, nothing is synthesized.
func (geminiDialect) streamEnd() []byte { return nil }

func (geminiDialect) checkBody(body []byte) (reason string, err error) { return checkGeminiBody(body) }

func (geminiDialect) checkBodyReject(body []byte, reject [][]byte) error {
	return checkGeminiBodyReject(body, reject)
}

func (geminiDialect) observeEvent(u *usage, ev sseEvent) { u.observeGeminiEvent(ev) }

func (geminiDialect) observeBody(u *usage, body []byte) { u.observeGeminiBody(body) }

func (geminiDialect) modelMissing(body []byte) bool { return geminiModelMissing(body) }

func (geminiDialect) classify(status int, body []byte, passThroughKey bool) failClass {
	return geminiClassify(status, body, passThroughKey)
}

// retryDelay is the RetryInfo of a 429 RESOURCE_EXHAUSTED body.
func (geminiDialect) retryDelay(body []byte) (time.Duration, bool) { return geminiRetryDelay(body) }

func (geminiDialect) errorType(status int) string { return geminiStatus(status) }

func (geminiDialect) errorJSON(status int, message string) []byte {
	return geminiErrorJSON(status, message)
}

func (geminiDialect) errorEvent(status int, message string) []byte {
	return geminiErrorEvent(status, message)
}

// geminiPath splits a Gemini model path,
// /v1beta/models/{model}:{method} or /v1/models/{model}:{method}, with
// method generateContent, streamGenerateContent or countTokens. ok is
// false for any other path and for a model that is not path-safe (see
// geminiValidModel): the model is spliced back into the upstream path, so
// a name that could change that path's structure is refused, not cleaned.
func geminiPath(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1beta/models/")
	if !found {
		rest, found = strings.CutPrefix(path, "/v1/models/")
	}
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return "", "", false
	}
	model, method = rest[:i], rest[i+1:]
	switch method {
	case geminiGenerate, geminiStreamMethod, geminiCountTokens:
	default:
		return "", "", false
	}
	if !geminiValidModel(model) {
		return "", "", false
	}
	return model, method, true
}

// geminiValidModel reports whether name can stand as one path segment
// without escaping: 1 to maxModelLen bytes of ASCII letters, digits and
// - . _ @, not starting with a dot (so never "." or ".."). That excludes
// /, ?, #, %, \, :, spaces and control characters, raw or encoded.
func geminiValidModel(name string) bool {
	if name == "" || len(name) > maxModelLen || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '@':
		default:
			return false
		}
	}
	return true
}

// geminiRewritePath returns path with its model replaced by newModel,
// keeping the API version and the method. A path that is not a Gemini
// model path, or a newModel that is not path-safe, leaves path unchanged
// (the configured model names are checked with geminiValidModel when the
// module is provisioned).
func geminiRewritePath(path, newModel string) string {
	model, method, ok := geminiPath(path)
	if !ok || !geminiValidModel(newModel) {
		return path
	}
	prefix := path[:len(path)-len(model)-1-len(method)]
	return prefix + newModel + ":" + method
}

// geminiIsStream reports whether method streams (possibly as a JSON array:
// see geminiIsSSE).
func geminiIsStream(method string) bool { return method == geminiStreamMethod }

// geminiIsSSE reports whether a raw query asks for server-sent events
// (alt=sse, the first alt parameter deciding, as url.Values.Get does).
// Without it streamGenerateContent answers with one JSON array of chunks,
// which the proxy handles as a non-stream body.
func geminiIsSSE(rawQuery string) bool {
	for param := range strings.SplitSeq(rawQuery, "&") {
		name, value, _ := strings.Cut(param, "=")
		if queryName(name) != "alt" {
			continue
		}
		v, err := url.QueryUnescape(value)
		return err == nil && strings.EqualFold(v, "sse")
	}
	return false
}

// geminiClientKey returns the key the client sent: the x-goog-api-key
// header, else the first key query parameter; "" when there is neither.
// It is what a provider without a key of its own passes through.
func geminiClientKey(h http.Header, rawQuery string) string {
	if k := strings.TrimSpace(h.Get("x-goog-api-key")); k != "" {
		return k
	}
	for param := range strings.SplitSeq(rawQuery, "&") {
		name, value, _ := strings.Cut(param, "=")
		if queryName(name) != "key" {
			continue
		}
		if v, err := url.QueryUnescape(value); err == nil && v != "" {
			return v
		}
	}
	return ""
}

// geminiStripKey removes every key parameter (by its decoded name, so
// k%65y too) from a raw query, keeping the other parameters byte for
// byte and in order: the client's key must not reach a provider that
// has a key of its own.
func geminiStripKey(rawQuery string) string {
	if !strings.Contains(rawQuery, "key") && !strings.Contains(rawQuery, "%") {
		return rawQuery
	}
	var b strings.Builder
	first := true
	for param := range strings.SplitSeq(rawQuery, "&") {
		name, _, _ := strings.Cut(param, "=")
		if queryName(name) == "key" {
			continue
		}
		if !first {
			b.WriteByte('&')
		}
		first = false
		b.WriteString(param)
	}
	return b.String()
}

// queryName decodes a raw query parameter name; one with a bad escape is
// kept as written (it names nothing the proxy looks for).
func queryName(raw string) string {
	if !strings.ContainsAny(raw, "%+") {
		return raw
	}
	if n, err := url.QueryUnescape(raw); err == nil {
		return n
	}
	return raw
}

// geminiStream is what the chunks of one Gemini stream have said so far
// about its end. Gemini sends no terminal event: the answer is complete
// when every candidate seen has a finishReason (or the prompt was
// blocked), and the body then ends. The end of the body before that is a
// cut.
type geminiStream struct {
	candidates choiceSet // by candidate index (an absent index is 0)
	blocked    bool      // promptFeedback.blockReason with no candidates
}

// done reports whether the end of the body after the chunks seen is the
// end of a complete answer.
func (s *geminiStream) done() bool { return s.blocked || s.candidates.allFinished() }

// inspectGemini classifies one chunk of a Gemini stream; withText also
// returns the raw JSON string of the first non-thought text part, which
// the gate checks for rejected phrases.
func inspectGemini(ev sseEvent, withText bool) eventInfo {
	return inspectGeminiStream(ev, withText, nil)
}

// inspectGeminiStream is inspectGemini that also notes, in st (when not
// nil), the candidates the chunk carries and which of them finished.
//
// Classes: a non-null top-level "error" is evError (errVal is that
// object: upstreamErrorMessage renders its message); data
// that is not a JSON object, or whose candidates is neither an array nor
// null, is evMalformed (the SDK cannot decode it either). A chunk in
// which every candidate has a finishReason is evFinish: the answer is
// done, and a finishReason is the model's own verdict (STOP, MAX_TOKENS,
// SAFETY...) even with no text, as OpenAI's finish_reason is. A chunk
// with a candidate part holding non-empty text, thought text, a
// functionCall, inlineData (an image model's output, each part a large
// base64 blob that would overflow the gate's buffer if held),
// executableCode or codeExecutionResult is evOutput. A promptFeedback
// with a blockReason and no candidates is evFinish by "prompt_feedback":
// it is the truth about the prompt (SPEC 10), which every provider would
// give, so the gate commits it and the relay passes it through as a
// complete answer; failing over would only repeat it elsewhere. Anything
// else (usage-only chunks, comments) is evPrelude.
func inspectGeminiStream(ev sseEvent, withText bool, st *geminiStream) eventInfo {
	var info eventInfo
	data := ev.Data
	start := jsonWS(data, 0)
	if start == len(data) {
		return info // no payload: a comment or keepalive
	}
	it, ok := jsonOpen(data, start, 0)
	if !ok || !it.isObject() {
		info.class = evMalformed
		return info
	}
	var sc geminiCandidates
	var feedback []byte
	for it.next() {
		switch {
		case it.keyIs("error"):
			info.errVal = it.value()
		case it.keyIs("candidates"):
			sc = geminiCandidates{} // the last of duplicate keys counts
			arr, ok := it.enter()
			if !ok {
				sc.bad = !jsonIsNull(it.value())
				continue
			}
			if arr.isObject() {
				sc.bad = true
			} else {
				sc.scan(&arr, withText)
			}
			it.leave(&arr)
		case it.keyIs("promptFeedback"):
			feedback = it.value()
		}
	}
	switch {
	case !it.end():
		info.class, info.errVal = evMalformed, nil
		return info
	case info.errVal != nil && !jsonIsNull(info.errVal):
		info.class = evError
		return info
	case sc.bad:
		info.class, info.errVal = evMalformed, nil
		return info
	}
	info.errVal = nil
	info.by = sc.by
	if st != nil {
		st.candidates.merge(&sc.notes)
	}
	switch {
	case sc.n > 0 && sc.finished == sc.n:
		info.class = evFinish
		if info.by == "" {
			info.by = "finishReason"
		}
	case info.by != "":
		info.class = evOutput
	case sc.n == 0 && geminiBlocked(feedback):
		info.class, info.by = evFinish, "prompt_feedback"
		if st != nil {
			st.blocked = true
		}
	}
	if info.class != evPrelude {
		info.text = sc.text
	}
	return info
}

// geminiCandidates is what the candidates array of one chunk holds.
type geminiCandidates struct {
	bad      bool // candidates is neither an array nor null
	n        int  // candidates (any JSON value)
	finished int  // candidates with a finishReason
	by       string
	text     []byte
	notes    choiceSet
}

// scan walks a candidates array once: each candidate's index and
// finishReason, the first part that carries output (and with withText
// the first non-thought text). Like encoding/json, the last of duplicate
// keys counts, so a repeated content or parts member replaces what an
// earlier one said.
func (sc *geminiCandidates) scan(arr *jsonIter, withText bool) {
	for arr.next() {
		sc.n++
		cand, ok := arr.enter()
		if !ok {
			continue // a scalar: the next call skips it
		}
		if !cand.isObject() {
			arr.leave(&cand)
			continue
		}
		var reason, index []byte
		var by string
		var text []byte
		for cand.next() {
			switch {
			case cand.keyIs("content"):
				by, text = "", nil
				if content, ok := cand.enter(); ok {
					by, text = geminiScanContent(&content, withText)
					cand.leave(&content)
				}
			case cand.keyIs("finishReason"):
				reason = cand.value()
			case cand.keyIs("index"):
				index = cand.value()
			}
		}
		arr.leave(&cand)
		finished := geminiFinishReason(reason)
		if finished {
			sc.finished++
		}
		idx := int64(0) // an absent index is candidate 0
		if index != nil && !jsonIsNull(index) {
			if n, ok := jsonInt(index); ok && bytes.IndexAny(index, ".eE") < 0 {
				idx = n
			} else {
				idx = -1
			}
		}
		sc.notes.note(idx, finished)
		if sc.by == "" {
			sc.by = by
		}
		if withText && sc.text == nil {
			sc.text = text
		}
	}
}

// geminiScanContent reads a candidate's content: what its parts carry.
func geminiScanContent(content *jsonIter, withText bool) (by string, text []byte) {
	for content.isObject() && content.next() {
		if !content.keyIs("parts") {
			continue
		}
		by, text = "", nil
		parts, ok := content.enter()
		if !ok {
			continue
		}
		for !parts.isObject() && parts.next() {
			part, ok := parts.enter()
			if !ok {
				continue
			}
			pby, ptext := geminiScanPart(&part)
			parts.leave(&part)
			if by == "" {
				by = pby
			}
			if withText && text == nil {
				text = ptext
			}
		}
		content.leave(&parts)
	}
	return by, text
}

// merge adds the choices other saw to cs.
func (cs *choiceSet) merge(other *choiceSet) {
	for i := range cs.seen {
		cs.seen[i] |= other.seen[i]
		cs.finished[i] |= other.finished[i]
	}
	cs.other = cs.other || other.other
}

// geminiFinishReason reports whether a raw finishReason ends its
// candidate: any non-empty string but FINISH_REASON_UNSPECIFIED, which
// the continuation protocol sends on intermediate checkpoint chunks.
func geminiFinishReason(v []byte) bool {
	return jsonIsString(v) && len(v) > 2 && !jsonStringIs(v, "FINISH_REASON_UNSPECIFIED")
}

// geminiBlocked reports whether a raw promptFeedback blocks the prompt:
// a blockReason that is a non-empty string but BLOCKED_REASON_UNSPECIFIED.
func geminiBlocked(feedback []byte) bool {
	v, _ := geminiLast(feedback, "blockReason")
	return jsonIsString(v) && len(v) > 2 && !jsonStringIs(v, "BLOCKED_REASON_UNSPECIFIED")
}

// geminiPartOutput names what output a raw part carries ("" for none)
// and, for a non-empty non-thought text part, returns its raw JSON string.
func geminiPartOutput(part []byte) (by string, text []byte) {
	it, ok := jsonOpen(part, 0, 0)
	if !ok {
		return "", nil
	}
	return geminiScanPart(&it)
}

// geminiScanPart is geminiPartOutput of the part it walks (nothing for an
// array). Output is non-empty text (thought text when "thought" is true),
// or a functionCall, inlineData, executableCode or codeExecutionResult
// object.
func geminiScanPart(it *jsonIter) (by string, text []byte) {
	var txt, thought, fc, inline, code, result []byte
	for it.isObject() && it.next() {
		switch {
		case it.keyIs("text"):
			txt = it.value()
		case it.keyIs("thought"):
			thought = it.value()
		case it.keyIs("functionCall"):
			fc = it.value()
		case it.keyIs("inlineData"):
			inline = it.value()
		case it.keyIs("executableCode"):
			code = it.value()
		case it.keyIs("codeExecutionResult"):
			result = it.value()
		}
	}
	isObj := func(v []byte) bool { return len(v) > 0 && v[0] == '{' }
	switch {
	case jsonIsString(txt) && len(txt) > 2:
		if string(thought) == "true" {
			return "thought", nil
		}
		return "text", txt
	case isObj(fc):
		return "functionCall", nil
	case isObj(inline):
		return "inlineData", nil
	case isObj(code):
		return "executableCode", nil
	case isObj(result):
		return "codeExecutionResult", nil
	}
	return "", nil
}

// geminiLast returns the raw value of the last member named key of the
// object obj (encoding/json's reading of duplicate keys).
func geminiLast(obj []byte, key string) ([]byte, bool) {
	var v []byte
	it, ok := jsonOpen(obj, 0, 0)
	for ok && it.isObject() && it.next() {
		if it.keyIs(key) {
			v = it.value()
		}
	}
	return v, v != nil
}

// checkGeminiBody detects a fake 200 in a complete non-stream Gemini body:
// a GenerateContentResponse object, or the JSON array of them that
// streamGenerateContent sends without alt=sse. "malformed_body" for
// anything that is not one of those; "error_body" for a non-null
// top-level "error" (in any element of an array); "empty_output" when no
// element has a candidate or a promptFeedback. A blocked prompt
// (promptFeedback with no candidates) is the truth about the prompt and
// passes.
func checkGeminiBody(body []byte) (reason string, err error) {
	start := jsonWS(body, 0)
	if start < len(body) && body[start] == '[' {
		arr, ok := jsonOpen(body, start, 0)
		answered := false
		for ok && arr.next() {
			elem := arr.value()
			r, a, err := checkGeminiObject(elem, body)
			if r != "" {
				return r, err
			}
			answered = answered || a
		}
		if !ok || !arr.end() {
			return "malformed_body", fmt.Errorf("upstream 200 body is not valid JSON: %q", clipData(body, 200))
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
	it, ok := jsonOpen(obj, 0, 0)
	if !ok || !it.isObject() {
		return "malformed_body", false, fmt.Errorf("upstream 200 body is not a JSON object or array of objects: %q", clipData(body, 200))
	}
	var errVal, cands, feedback []byte
	for it.next() {
		switch {
		case it.keyIs("error"):
			errVal = it.value()
		case it.keyIs("candidates"):
			cands = it.value()
		case it.keyIs("promptFeedback"):
			feedback = it.value()
		}
	}
	if !it.end() {
		return "malformed_body", false, fmt.Errorf("upstream 200 body is not valid JSON: %q", clipData(body, 200))
	}
	if errVal != nil && !jsonIsNull(errVal) {
		return "error_body", false, fmt.Errorf("upstream 200 body is an error: %s", upstreamErrorMessage(errVal, obj))
	}
	answered = len(cands) > 0 && cands[0] == '[' && jsonNonEmpty(cands) || len(feedback) > 0 && feedback[0] == '{'
	return "", answered, nil
}

// checkGeminiBodyReject fails a complete non-stream body (object or array)
// whose answer text (candidates' non-thought text parts) contains one of
// the reject phrases, case-insensitively: the text the stream gate checks.
// The elements of an array are chunks of one answer, so their text is
// joined as the stream's is.
func checkGeminiBodyReject(body []byte, reject [][]byte) error {
	if len(reject) == 0 {
		return nil
	}
	var text []byte
	start := jsonWS(body, 0)
	if start < len(body) && body[start] == '[' {
		arr, ok := jsonOpen(body, start, 0)
		for ok && arr.next() {
			text = geminiAppendText(text, arr.value())
		}
	} else {
		text = geminiAppendText(text, body)
	}
	var lp []byte
	for _, p := range reject {
		lp = appendLowerText(lp[:0], p)
		if len(lp) > 0 && bytes.Contains(text, lp) {
			return fmt.Errorf("upstream answer contains the rejected phrase %q", p)
		}
	}
	return nil
}

// geminiAppendText appends the lower-cased non-thought text of every
// candidate of one response object to text, a newline after each
// candidate when there are several.
func geminiAppendText(text, obj []byte) []byte {
	cands, _ := geminiLast(obj, "candidates")
	n := 0
	arr, ok := jsonOpen(cands, 0, 0)
	for ok && !arr.isObject() && arr.next() {
		n++
	}
	many := n > 1
	arr, ok = jsonOpen(cands, 0, 0)
	for ok && !arr.isObject() && arr.next() {
		content, _ := geminiLast(arr.value(), "content")
		parts, _ := geminiLast(content, "parts")
		pit, ok := jsonOpen(parts, 0, 0)
		for ok && !pit.isObject() && pit.next() {
			if by, t := geminiPartOutput(pit.value()); by == "text" {
				text = appendLowerText(text, jsonAppendString(nil, t))
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
func (u *usage) observeGeminiEvent(ev sseEvent) {
	if u == nil || len(ev.Data) == 0 {
		return
	}
	if !bytes.Contains(ev.Data, geminiUsageKey) && (u.Model != "" || !bytes.Contains(ev.Data, geminiModelKey)) {
		return
	}
	u.observeGeminiObject(ev.Data)
}

// observeGeminiBody records the usage of a complete non-stream body: one
// response object, or the JSON array of chunks (each chunk's counts are
// the running totals, so the last one counts).
func (u *usage) observeGeminiBody(body []byte) {
	if u == nil {
		return
	}
	start := jsonWS(body, 0)
	if start < len(body) && body[start] == '[' {
		arr, ok := jsonOpen(body, start, 0)
		for ok && arr.next() {
			u.observeGeminiObject(arr.value())
		}
		return
	}
	u.observeGeminiObject(body)
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
func (u *usage) observeGeminiObject(obj []byte) {
	it, ok := jsonOpen(obj, 0, 0)
	for ok && it.isObject() && it.next() {
		switch {
		case it.keyIs("modelVersion"):
			if v := it.value(); u.Model == "" && len(v) > 2 && v[0] == '"' {
				name := jsonStringValue(v)
				if len(name) > maxModelLen {
					name = name[:maxModelLen]
				}
				u.Model = name
			}
		case it.keyIs("usageMetadata"):
			um, ok := it.enter()
			if !ok {
				continue
			}
			var prompt, tool, cands, thoughts, cached int64
			var hasPrompt, hasOutput, hasCached bool
			for um.isObject() && um.next() {
				var n *int64
				switch {
				case um.keyIs("promptTokenCount"):
					n, hasPrompt = &prompt, true
				case um.keyIs("toolUsePromptTokenCount"):
					n = &tool
				case um.keyIs("candidatesTokenCount"):
					n, hasOutput = &cands, true
				case um.keyIs("thoughtsTokenCount"):
					n, hasOutput = &thoughts, true
				case um.keyIs("cachedContentTokenCount"):
					n, hasCached = &cached, true
				default:
					continue
				}
				if v, ok := jsonInt(um.value()); ok {
					*n = v
				}
			}
			it.leave(&um)
			if !um.isObject() {
				continue
			}
			if hasPrompt {
				u.Input = prompt + tool
			}
			if hasOutput {
				u.Output = cands + thoughts
			}
			if hasCached {
				u.CacheRead = cached
			}
		}
	}
}

// maxCachedContentLen bounds a cachedContent name the proxy pins by.
const maxCachedContentLen = 512

// geminiCachedContent returns the top-level cachedContent of a request
// body (a resource name like "cachedContents/abc123"): the cache lives
// with the provider that created it, so the request is pinned there. ""
// when absent, not a string, or not a plausible name (printable ASCII
// without spaces, quotes or backslashes, at most 512 bytes); like the
// providers, the last of duplicate keys counts.
func geminiCachedContent(body []byte) string {
	var name string
	err := scanTopLevel(body, func(key []byte, s, e int) bool {
		if jsonKeyIs(key, "cachedContent") {
			name = ""
			if v := body[s:e]; jsonIsString(v) && len(v) <= 2+6*maxCachedContentLen {
				name = jsonStringValue(v)
			}
		}
		return true
	})
	if err != nil || len(name) > maxCachedContentLen {
		return ""
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return ""
		}
	}
	return name
}

// geminiStatus is Google's canonical status name for an HTTP status
// (google.rpc.Code's HTTP mapping; 502 and 529, which have none, read as
// UNAVAILABLE: the client may retry).
func geminiStatus(status int) string {
	switch status {
	case 400, 413, 422:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 500:
		return "INTERNAL"
	case 501:
		return "UNIMPLEMENTED"
	case 502, 503, 529:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 400 && status < 500 {
		return "FAILED_PRECONDITION"
	}
	return "INTERNAL"
}

type geminiErrorBody struct {
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// geminiErrorJSON is the error body before commit, Google's shape: the
// genai SDKs read it as an APIError with that code, message and status.
func geminiErrorJSON(status int, message string) []byte {
	var b geminiErrorBody
	b.Error.Code = status
	b.Error.Message = message
	b.Error.Status = geminiStatus(status)
	out, _ := json.Marshal(b) // a plain struct of strings and an int: cannot fail
	return out
}

// geminiErrorEvent renders the chunk that ends a committed Gemini stream
// with a failure: a data line holding the error object, which the genai
// SDK yields as an APIError (a stream that just ends is a clean end to
// it). Lines end in CRLF as Google's do.
func geminiErrorEvent(status int, message string) []byte {
	body := geminiErrorJSON(status, message)
	out := make([]byte, 0, len(body)+10)
	out = append(out, "data: "...)
	out = append(out, body...)
	return append(out, "\r\n\r\n"...)
}

// geminiRetryDelay reads how long a Gemini error body asks the client to
// wait: the retryDelay ("2s", "0.5s", a protobuf Duration in JSON) of the
// google.rpc.RetryInfo entry in error.details. ok is false when there is
// none or it does not parse; the delay is clamped to [0, 24h].
func geminiRetryDelay(body []byte) (time.Duration, bool) {
	details, _ := jsonLookup(body, "error", "details")
	arr, ok := jsonOpen(details, 0, 0)
	for ok && !arr.isObject() && arr.next() {
		entry := arr.value()
		typ, _ := geminiLast(entry, "@type")
		if !jsonStringIs(typ, geminiRetryInfoType) {
			continue
		}
		v, _ := geminiLast(entry, "retryDelay")
		if !jsonIsString(v) {
			continue
		}
		s, found := strings.CutSuffix(jsonStringValue(v), "s")
		if !found {
			continue
		}
		if ms, ok := parseDecimalMilli(s); ok && strings.TrimSpace(s) == s {
			return scaleRetryAfter(ms, time.Millisecond), true
		}
	}
	return 0, false
}

// geminiClassify classifies a non-200 Gemini answer as classifyAnswer
// does, reading Google's error body: a 400 whose ErrorInfo reason is
// API_KEY_INVALID (Gemini's answer to a bad or expired key) is about the
// key, not the request; a 404 is a missing model when its message says
// so (geminiModelMissing). Every other 400 (INVALID_ARGUMENT,
// FAILED_PRECONDITION) is the request's own; 429, 500, 503 and 504 are
// the provider's.
func geminiClassify(status int, body []byte, passThroughKey bool) failClass {
	switch {
	case status == http.StatusBadRequest && geminiKeyInvalid(body):
		if passThroughKey {
			return classClientKey
		}
		return classAuth
	case status == http.StatusNotFound && !passThroughKey:
		if geminiModelMissing(body) {
			return classModelNotFound
		}
		return classRequest
	}
	return classifyAnswer(status, body, passThroughKey)
}

// geminiRequestLevel reports whether a non-200 Gemini answer is about the
// request itself (relayed to the client, no failover): see geminiClassify.
func geminiRequestLevel(status int, body []byte) bool {
	return geminiClassify(status, body, false) == classRequest
}

// geminiKeyInvalid reports whether an error body rejects the API key:
// an ErrorInfo detail with reason API_KEY_INVALID, or Google's "API key
// not valid" / "API key expired" message.
func geminiKeyInvalid(body []byte) bool {
	details, _ := jsonLookup(body, "error", "details")
	arr, ok := jsonOpen(details, 0, 0)
	for ok && !arr.isObject() && arr.next() {
		if r, _ := geminiLast(arr.value(), "reason"); jsonStringIs(r, "API_KEY_INVALID") {
			return true
		}
	}
	msg := geminiErrorMessage(body)
	return strings.HasPrefix(msg, "api key not valid") || strings.HasPrefix(msg, "api key expired")
}

// geminiModelMissing reports whether a 404 body says the model does not
// exist: the Gemini API's "models/x is not found for API version v1beta,
// or is not supported for generateContent", or Vertex AI's "Publisher
// Model `...` was not found".
func geminiModelMissing(body []byte) bool {
	msg := geminiErrorMessage(body)
	switch {
	case strings.Contains(msg, "models/") && strings.Contains(msg, " is not found"):
		return true
	case strings.HasPrefix(msg, "publisher model") && strings.Contains(msg, "not found"):
		return true
	}
	return false
}

// geminiPromptTooLong reports whether a 400 body says the prompt is over
// the model's context window ("The input token count (N) exceeds the
// maximum number of tokens allowed (M)."), for context_fallback.
func geminiPromptTooLong(body []byte) bool {
	msg := geminiErrorMessage(body)
	return strings.Contains(msg, "input token count") && strings.Contains(msg, "exceeds the maximum number of tokens")
}

// geminiErrorMessage returns error.message of an error body, lower-cased.
func geminiErrorMessage(body []byte) string {
	v, ok := jsonLookup(body, "error", "message")
	if !ok || !jsonIsString(v) {
		return ""
	}
	return strings.ToLower(unquote(v))
}
