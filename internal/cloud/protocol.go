package cloud

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// protocol is how a provider reached through a cloud (SPEC 11) differs from
// the dialect its clients speak: where the request goes, how its body and
// auth change, and how the answer's framing becomes that dialect's SSE.
// Each protocol is one file (protocol_azure.go, protocol_bedrock.go,
// protocol_vertex.go) registering a constructor; a provider with a native
// `api` (a dialect) has no protocol.
type Protocol interface {
	// String is the `api` option value.
	String() string
	// serves reports whether the protocol takes requests of client dialect d.
	Serves(d wire.Dialect) bool
	// setKey puts a static key (the provider's `key`) where the cloud reads it.
	SetKey(h http.Header, key string)
	// prepare turns the dialect's request into the cloud's: the URL, the
	// body and the auth that needs them (SigV4 signs both). The header is
	// already the upstream one (client credentials gone, header_up applied).
	// A body it rewrites is built in bodies' buffer and read through
	// bodies' readers (nil: a fresh buffer, a plain reader).
	Prepare(ctx context.Context, up *http.Request, req *wire.Request, model string, body []byte, bodies Bodies) error
	// response adapts an answer before the attempt reads it: a 200's
	// framing to the dialect's SSE (Bedrock's event stream), an error body
	// to the dialect's error shape; a native answer is left as is. It
	// returns what the cloud's error says beyond its status.
	Response(resp *http.Response) Verdict
}

// AuthSizer is a protocol whose auth adds to the header of every request
// more than a key does (a SigV4 signature): the provider's connections
// buffer that much more to write a request's header in one piece.
type AuthSizer interface {
	AuthHeaderBytes() int
}

// ModelDropper is a protocol whose Prepare drops the body's model (the
// cloud names the model in the URL): the engine hands it the client's
// body as parsed, not a copy with the model spliced in, and Prepare reads
// the parse's index of it (cloudPieces) instead of walking it again.
type ModelDropper interface {
	DropsModel(d wire.Dialect) bool
}

// cloudVerdict is what a cloud's error answer says that its status does
// not (SPEC 15): a Bedrock 403 is a model the account lacks, or the
// proxy's own credential refused, or neither. The zero value leaves the
// answer to the dialect's classification.
type Verdict struct {
	Class wire.FailClass
	// credential names the proxy's own credential the cloud refused: where
	// it came from (the AWS chain searched, ADC), never its value. The
	// attempt logs it at error: an operator must fix it.
	Credential string
	// NotKey says a refusal (ClassAuth) is the provider's, not its key's
	// (an Azure network rule): no key of a pool is disabled for it; the
	// provider's breaker counts it and its probes find it fixed (SPEC 15).
	NotKey bool
}

// modelSegment is a model as one escaped segment of a cloud's URL path.
// parseRequestBody and the config checks refuse a dot-segment model before
// this; refused here too, a rewrite can never make the URL leave its path.
func ModelSegment(model string) (string, error) {
	if model == "" || wire.HasDotSegment(model) {
		return "", fmt.Errorf("model %q cannot be a URL path segment", model)
	}
	return url.PathEscape(model), nil
}

// protocolCtor provisions the protocol of one provider.
type Ctor func(t Target) (Protocol, error)

// cloudOptions are a cloud's own options of a provider (inline in its
// JSON config, one Caddyfile subdirective each).
type Options struct {
	// Cloud region: the SigV4 scope of `api bedrock` (us-east-1) and the
	// location of `api vertex` (us-east5, global). Required by both.
	Region string `json:"region,omitempty"`
	// Google Cloud project of `api vertex`. Required by it.
	Project string `json:"project,omitempty"`
	// AWS shared-config profile whose credentials `api bedrock` signs with.
	// Default: the AWS default chain (env, shared config's default
	// profile, web identity, container and instance roles).
	AWSProfile string `json:"aws_profile,omitempty"`
}

// cloudTarget is what a cloud protocol knows of its provider: where it is,
// its own key ("" when the cloud's credential chain signs), its options.
type Target struct {
	BaseURL  *url.URL
	BasePath string // baseURL's path, no trailing slash
	Key      string
	Opts     Options
}

// setURL points an upstream request at the base URL joined with an
// escaped path, the base URL's query kept.
func (t Target) setURL(up *http.Request, escapedPath string) error {
	s := t.BaseURL.Scheme + "://" + t.BaseURL.Host + t.BasePath + escapedPath
	if t.BaseURL.RawQuery != "" {
		s += "?" + t.BaseURL.RawQuery
	}
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	up.URL, up.Host = u, ""
	return nil
}

// streamFault is a failure a cloud reports inside a 200 stream (a Bedrock
// exception frame): the read error of the adapted stream, with the class
// the same failure has as an HTTP status.
type StreamFault struct {
	Class wire.FailClass
	Msg   string
}

func (e *StreamFault) Error() string { return e.Msg }

// check reports a cloud's missing option and an option given to
// a provider that does not read it, at parse time (with the line) and at
// provision time (JSON configs).
func (o Options) Check(api string, hasKey bool) error {
	api = strings.ToLower(api)
	switch {
	case (api == "bedrock" || api == "vertex") && o.Region == "":
		return fmt.Errorf("api %s needs region", api)
	case api == "vertex" && o.Project == "":
		return fmt.Errorf("api vertex needs project")
	case api == "azure" && !hasKey:
		return fmt.Errorf("api azure needs key (the resource's API key, sent as api-key)")
	case o.Region != "" && api != "bedrock" && api != "vertex":
		return fmt.Errorf("region is read by api bedrock and vertex only")
	case o.Project != "" && api != "vertex":
		return fmt.Errorf("project is read by api vertex only")
	case o.AWSProfile != "" && api != "bedrock":
		return fmt.Errorf("aws_profile is read by api bedrock only")
	}
	return nil
}

// cloudErrorBody rewrites a cloud's error answer (Bedrock's {"message"},
// Google's {"error":{"status","message"}}) in the client dialect's shape
// with the cloud's words, so that a request error passed through parses in
// the client's SDK. kind names the cloud's error type when the body does
// not. It returns the cloud's message.
func cloudErrorBody(resp *http.Response, d wire.Dialect, kind string) string {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, wire.MaxErrorBody))
	resp.Body.Close()
	msg := wire.UpstreamMessage(body)
	if m, ok := jsonscan.Lookup(body, "message"); ok && jsonscan.IsString(m) {
		msg = string(jsonscan.AppendString(nil, m))
	}
	msg = withoutSignedRequest(msg)
	shown := msg
	if kind != "" {
		shown = kind + ": " + msg
	}
	out := d.ErrorJSON(resp.StatusCode, shown)
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(out)), int64(len(out))
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	return msg
}

// withoutSignedRequest cuts what AWS appends to a signature error
// (InvalidSignatureException, IncompleteSignatureException): "The
// Canonical String for this request should have been" and "The
// String-to-Sign ...", the request as AWS signed it, with the value of
// every signed header, the proxy's X-Amz-Security-Token (a session token)
// among them. The message goes to the log, the admin view and a client.
func withoutSignedRequest(msg string) string {
	for _, marker := range []string{"The Canonical String for this request", "The String-to-Sign should have been"} {
		if i := strings.Index(msg, marker); i >= 0 {
			msg = strings.TrimRight(msg[:i], " \n")
		}
	}
	return msg
}

// peekErrorBody reads a bounded copy of an error answer's body and puts it
// back for the engine (readUpstreamError) to read as sent.
func peekErrorBody(resp *http.Response) []byte {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, wire.MaxErrorBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return body
}

// isDialect reports whether d is the dialect D.
func isDialect[D wire.Dialect](d wire.Dialect) bool {
	_, ok := d.(D)
	return ok
}
