package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/gemini"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

func TestClassifyStatus(t *testing.T) {
	cases := []struct {
		status    int
		class     wire.FailClass
		provider  bool // counts toward cooldown and fails over
		transient bool // worth a same-provider retry
	}{
		{400, wire.ClassRequest, false, false},
		{401, wire.ClassAuth, true, false},
		{403, wire.ClassAuth, true, false},
		{404, wire.ClassModelNotFound, true, false},
		{408, wire.ClassStatus5xx, true, true},
		{413, wire.ClassRequest, false, false},
		{422, wire.ClassRequest, false, false},
		{429, wire.ClassRateLimited, true, true},
		{500, wire.ClassStatus5xx, true, true},
		{502, wire.ClassStatus5xx, true, true},
		{503, wire.ClassOverloaded, true, true},
		{504, wire.ClassStatus5xx, true, true},
		{529, wire.ClassOverloaded, true, true},
		{302, wire.ClassMalformed, true, false},
	}
	for _, c := range cases {
		got := wire.ClassifyStatus(c.status)
		if got != c.class || got.ProviderLevel() != c.provider || got.Transient() != c.transient {
			t.Errorf("%d: %s provider=%v transient=%v; want %s %v %v",
				c.status, got, got.ProviderLevel(), got.Transient(), c.class, c.provider, c.transient)
		}
	}
	for _, c := range []wire.FailClass{wire.ClassClientAbort, wire.ClassTotalTimeout, wire.ClassLoser, wire.ClassRequest} {
		if c.ProviderLevel() {
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
		want       wire.FailClass
	}{
		{"client gone wins", errors.New("x"), cancelled(wire.ErrHedgeLost), gone, wire.ClassClientAbort},
		{"hedge loser", context.Canceled, cancelled(wire.ErrHedgeLost), bg, wire.ClassLoser},
		{"first byte timeout", context.Canceled, cancelled(wire.ErrFirstByteTimeout), bg, wire.ClassFirstByteTimeout},
		{"response timeout", context.Canceled, cancelled(wire.ErrResponseTimeout), bg, wire.ClassResponseTimeout},
		{"total timeout", context.Canceled, cancelled(wire.ErrTotalTimeout), bg, wire.ClassTotalTimeout},
		{"dns", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, bg, bg, wire.ClassConnect},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), bg, bg, wire.ClassConnect},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), bg, bg, wire.ClassReset},
		{"eof before headers", io.EOF, bg, bg, wire.ClassReset},
		{"dial op", &net.OpError{Op: "dial", Err: errors.New("timeout")}, bg, bg, wire.ClassConnect},
		// net/http's HTTP/2 errors, as they print (h2_bundle.go).
		{"h2 rst_stream", errors.New("stream error: stream ID 3; INTERNAL_ERROR; received from peer"), bg, bg, wire.ClassReset},
		{"h2 goaway", errors.New(`http2: server sent GOAWAY and closed the connection; LastStreamID=1, ErrCode=NO_ERROR, debug=""`), bg, bg, wire.ClassReset},
		{"h2 connection lost", errors.New("http2: client connection lost"), bg, bg, wire.ClassReset},
		{"h2 refused", errors.New(h2Refused), bg, bg, wire.ClassReset},
		{"h2 goaway on stream 1", errors.New("http2: Transport received GOAWAY from server ErrCode:ENHANCE_YOUR_CALM"), bg, bg, wire.ClassReset},
		{"h2 connection error", errors.New("connection error: PROTOCOL_ERROR"), bg, bg, wire.ClassReset},
	}
	for _, c := range cases {
		if got := wire.ClassifyTransportError(c.err, c.attemptCtx, c.clientCtx); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// net/http's words for a refused stream it may not resend itself.
const h2Refused = "http2: Transport: cannot retry err [stream error: stream ID 1; REFUSED_STREAM; received from peer] after Request.Body was written; define Request.GetBody to avoid this error"

// Only what provably never reached the provider is resent.
func TestUnprocessed(t *testing.T) {
	for msg, want := range map[string]bool{
		h2Refused: true,
		"http2: Transport: cannot retry err [http2: Transport received Server's graceful shutdown GOAWAY] after Request.Body was written; define Request.GetBody to avoid this error":   true,
		"http2: Transport: cannot retry err [stream error: stream ID 3; PROTOCOL_ERROR; received from peer] after Request.Body was written; define Request.GetBody to avoid this error": false,
		"stream error: stream ID 3; REFUSED_STREAM; received from peer": false, // resent by net/http already (no body)
		"http2: client connection lost":                                 false,
		"net/http: cannot rewind body after connection loss":            true,
	} {
		if got := wire.Unprocessed(errors.New(msg)); got != want {
			t.Errorf("%s: %v, want %v", msg, got, want)
		}
	}
}

// The messages HTTP2Reset and Unprocessed read are still net/http's:
// a Go release that rewords or moves one fails here, not in production
// as a "connect" failure.
func TestHTTP2ErrorMessagesAreNetHTTPs(t *testing.T) {
	root := filepath.Join(runtime.GOROOT(), "src", "net", "http")
	if _, err := os.Stat(root); err != nil {
		t.Skipf("no Go source to check against: %v", err)
	}
	var src strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			src.Write(b)
			return err
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{`"stream error: stream ID %d; %v`, `"http2: server sent GOAWAY and closed the connection;`,
		`"http2: Transport received Server's graceful shutdown GOAWAY"`, `"http2: client connection lost"`,
		`"http2: Transport received GOAWAY from server ErrCode:%v"`, `"connection error: %s"`, `"REFUSED_STREAM"`,
		`"http2: Transport: cannot retry err [%v] after Request.Body was written;`, `"net/http: cannot rewind body after connection loss"`} {
		if !strings.Contains(src.String(), m) {
			t.Errorf("net/http no longer says %s", m)
		}
	}
}

// Issue 21 item 4: a cloud's 403 is read from its body. Bedrock's error
// type and message tell a model the account lacks from the proxy's own
// credential refused; a Gemini PERMISSION_DENIED fails a key only when it
// says the key is invalid or disabled.
func TestCloudForbiddenReadFromBody(t *testing.T) {
	b := &cloud.BedrockProtocol{Chain: "the AWS default chain"}
	for _, c := range []struct {
		kind, msg  string
		class      wire.FailClass
		credential bool
	}{
		{"AccessDeniedException", "You don't have access to the model with the specified model ID.", wire.ClassModelNotFound, false},
		{"UnrecognizedClientException", "The security token included in the request is invalid.", wire.ClassAuth, true},
		{"InvalidSignatureException", "The request signature we calculated does not match the signature you provided.", wire.ClassAuth, true},
		{"ExpiredTokenException", "The security token included in the request is expired", wire.ClassAuth, true},
		{"AccessDeniedException", "User: arn:aws:iam::1:user/x is not authorized to perform: bedrock:InvokeModel", wire.ClassNone, false},
		{"ThrottlingException", "Too many requests", wire.ClassNone, false},
	} {
		v := b.Verdict(c.kind, c.msg)
		if v.Class != c.class || (v.Credential != "") != c.credential {
			t.Errorf("bedrock %s %q: %+v, want class %q credential %v", c.kind, c.msg, v, c.class, c.credential)
		}
	}
	reason := func(r string) string {
		return `{"error":{"code":403,"message":"denied","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"` + r + `","domain":"googleapis.com"}]}}`
	}
	for _, c := range []struct {
		name, body string
		class      wire.FailClass
	}{
		{"file", `{"error":{"code":403,"message":"You do not have permission to access the File abc123 or it may not exist.","status":"PERMISSION_DENIED"}}`, wire.ClassRequest},
		{"cached content", `{"error":{"code":403,"message":"CachedContent not found (or permission denied)","status":"PERMISSION_DENIED"}}`, wire.ClassRequest},
		{"key invalid", reason("API_KEY_INVALID"), wire.ClassAuth},
		{"key not valid", `{"error":{"code":403,"message":"API key not valid. Please pass a valid API key.","status":"PERMISSION_DENIED"}}`, wire.ClassAuth},
		{"service disabled", reason("SERVICE_DISABLED"), wire.ClassAuth},
		{"key blocked", reason("API_KEY_SERVICE_BLOCKED"), wire.ClassAuth},
		{"vertex iam", reason("IAM_PERMISSION_DENIED"), wire.ClassAuth},
	} {
		if got := gemini.Classify(403, []byte(c.body), false); got != c.class {
			t.Errorf("gemini 403 %s: %s, want %s", c.name, got, c.class)
		}
		if got := gemini.Classify(403, []byte(c.body), true); got != wire.ClassClientKey {
			t.Errorf("gemini 403 %s with the client's key: %s, want %s", c.name, got, wire.ClassClientKey)
		}
	}
}

// Issue 21 item 5: a model that is a dot-segment is refused where the
// request is read, and never becomes a cloud's path segment.
func TestModelDotSegments(t *testing.T) {
	for _, m := range []string{".", "..", "../x", "x/..", `..\x`, "a/./b"} {
		if _, err := wire.ParseRequestBody([]byte(`{"model":` + cloud.JsonQuote(m) + `}`)); err == nil {
			t.Errorf("model %q accepted", m)
		}
		if _, err := cloud.ModelSegment(m); err == nil {
			t.Errorf("model %q made a path segment", m)
		}
	}
	for _, m := range []string{"claude-3.5", "...", ".hidden", "a..b", "arn:aws:bedrock:us-east-1:1:inference-profile/us.anthropic.claude-v1:0"} {
		if _, err := wire.ParseRequestBody([]byte(`{"model":` + cloud.JsonQuote(m) + `}`)); err != nil {
			t.Errorf("model %q refused: %v", m, err)
		}
	}
}

// TestIsEventStreamMatchesParser: the exact spellings taken without the
// MIME parser answer as the parser does, and the parser still decides
// every other spelling.
func TestIsEventStreamMatchesParser(t *testing.T) {
	for _, ct := range []string{
		"text/event-stream", "text/event-stream; charset=utf-8", "text/event-stream;charset=UTF-8",
		"Text/Event-Stream", " text/event-stream ; charset=utf-8", "text/event-stream; a=1; a=2",
		"text/event-streams", "application/json", "", "text/event-stream;", "text/plain; x=text/event-stream",
	} {
		h := http.Header{"Content-Type": {ct}}
		mt, _, _ := mime.ParseMediaType(ct)
		if got, want := isEventStream(h), mt == "text/event-stream"; got != want {
			t.Errorf("isEventStream(%q) = %v, the MIME parser says %v", ct, got, want)
		}
	}
}
