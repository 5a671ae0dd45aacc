package llmhedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
)

func TestClassifyStatus(t *testing.T) {
	cases := []struct {
		status    int
		class     failClass
		provider  bool // counts toward cooldown and fails over
		transient bool // worth a same-provider retry
	}{
		{400, classRequest, false, false},
		{401, classAuth, true, false},
		{403, classAuth, true, false},
		{404, classModelNotFound, true, false},
		{408, classStatus5xx, true, true},
		{413, classRequest, false, false},
		{422, classRequest, false, false},
		{429, classRateLimited, true, true},
		{500, classStatus5xx, true, true},
		{502, classStatus5xx, true, true},
		{503, classOverloaded, true, true},
		{504, classStatus5xx, true, true},
		{529, classOverloaded, true, true},
		{302, classMalformed, true, false},
	}
	for _, c := range cases {
		got := classifyStatus(c.status)
		if got != c.class || got.providerLevel() != c.provider || got.transient() != c.transient {
			t.Errorf("%d: %s provider=%v transient=%v; want %s %v %v",
				c.status, got, got.providerLevel(), got.transient(), c.class, c.provider, c.transient)
		}
	}
	for _, c := range []failClass{classClientAbort, classTotalTimeout, classLoser, classRequest} {
		if c.providerLevel() {
			t.Errorf("%s must never count against a provider", c)
		}
	}
}

func TestClassifyTransportError(t *testing.T) {
	bg := context.Background()
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(bg)
		cancel(cause)
		return ctx
	}
	gone, cancel := context.WithCancel(bg)
	cancel()
	cases := []struct {
		name       string
		err        error
		attemptCtx context.Context
		clientCtx  context.Context
		want       failClass
	}{
		{"client gone wins", errors.New("x"), cancelled(errHedgeLost), gone, classClientAbort},
		{"hedge loser", context.Canceled, cancelled(errHedgeLost), bg, classLoser},
		{"first byte timeout", context.Canceled, cancelled(errFirstByteTimeout), bg, classFirstByteTimeout},
		{"response timeout", context.Canceled, cancelled(errResponseTimeout), bg, classResponseTimeout},
		{"total timeout", context.Canceled, cancelled(errTotalTimeout), bg, classTotalTimeout},
		{"dns", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, bg, bg, classConnect},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), bg, bg, classConnect},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), bg, bg, classReset},
		{"eof before headers", io.EOF, bg, bg, classReset},
		{"dial op", &net.OpError{Op: "dial", Err: errors.New("timeout")}, bg, bg, classConnect},
	}
	for _, c := range cases {
		if got := classifyTransportError(c.err, c.attemptCtx, c.clientCtx); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// Issue 21 item 4: a cloud's 403 is read from its body. Bedrock's error
// type and message tell a model the account lacks from the proxy's own
// credential refused; a Gemini PERMISSION_DENIED fails a key only when it
// says the key is invalid or disabled.
func TestCloudForbiddenReadFromBody(t *testing.T) {
	b := &bedrockProtocol{chain: "the AWS default chain"}
	for _, c := range []struct {
		kind, msg  string
		class      failClass
		credential bool
	}{
		{"AccessDeniedException", "You don't have access to the model with the specified model ID.", classModelNotFound, false},
		{"UnrecognizedClientException", "The security token included in the request is invalid.", classAuth, true},
		{"InvalidSignatureException", "The request signature we calculated does not match the signature you provided.", classAuth, true},
		{"ExpiredTokenException", "The security token included in the request is expired", classAuth, true},
		{"AccessDeniedException", "User: arn:aws:iam::1:user/x is not authorized to perform: bedrock:InvokeModel", classNone, false},
		{"ThrottlingException", "Too many requests", classNone, false},
	} {
		v := b.verdict(c.kind, c.msg)
		if v.class != c.class || (v.credential != "") != c.credential {
			t.Errorf("bedrock %s %q: %+v, want class %q credential %v", c.kind, c.msg, v, c.class, c.credential)
		}
	}
	reason := func(r string) string {
		return `{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"` + r + `","domain":"googleapis.com"}]}}`
	}
	for _, c := range []struct {
		name, body string
		class      failClass
	}{
		{"file", `{"error":{"code":403,"message":"You do not have permission to access the File abc123 or it may not exist.","status":"PERMISSION_DENIED"}}`, classRequest},
		{"cached content", `{"error":{"code":403,"message":"CachedContent not found (or permission denied)","status":"PERMISSION_DENIED"}}`, classRequest},
		{"key invalid", reason("API_KEY_INVALID"), classAuth},
		{"key not valid", `{"error":{"code":403,"message":"API key not valid. Please pass a valid API key.","status":"PERMISSION_DENIED"}}`, classAuth},
		{"service disabled", reason("SERVICE_DISABLED"), classAuth},
		{"key blocked", reason("API_KEY_SERVICE_BLOCKED"), classAuth},
		{"vertex iam", reason("IAM_PERMISSION_DENIED"), classAuth},
	} {
		if got := geminiClassify(403, []byte(c.body), false); got != c.class {
			t.Errorf("gemini 403 %s: %s, want %s", c.name, got, c.class)
		}
		if got := geminiClassify(403, []byte(c.body), true); got != classClientKey {
			t.Errorf("gemini 403 %s with the client's key: %s, want %s", c.name, got, classClientKey)
		}
	}
}

// Issue 21 item 5: a model that is a dot-segment is refused where the
// request is read, and never becomes a cloud's path segment.
func TestModelDotSegments(t *testing.T) {
	for _, m := range []string{".", "..", "../x", "x/..", `..\x`, "a/./b"} {
		if _, err := parseRequestBody([]byte(`{"model":` + jsonQuote(m) + `}`)); err == nil {
			t.Errorf("model %q accepted", m)
		}
		if _, err := modelSegment(m); err == nil {
			t.Errorf("model %q made a path segment", m)
		}
	}
	for _, m := range []string{"claude-3.5", "...", ".hidden", "a..b", "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-v1:0"} {
		if _, err := parseRequestBody([]byte(`{"model":` + jsonQuote(m) + `}`)); err != nil {
			t.Errorf("model %q refused: %v", m, err)
		}
	}
}
