package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/anthropic"
	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/gemini"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// vertexProtocol is Anthropic's Messages API on Google Vertex AI (SPEC 11):
// `POST {base}/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:streamRawPredict`
// (`:rawPredict` without a stream), the body without `model` and with
// Vertex's anthropic_version, a Bearer token from Google Application
// Default Credentials. The answer is Anthropic's own SSE.
//
// Gemini clients go to publisher google, `…/publishers/google/models/{model}:generateContent`
// or `:streamGenerateContent` (with the client's `?alt=sse`), the body as is.
type vertexProtocol struct {
	t      Target
	prefix string // escaped /v1/projects/{project}/locations/{region}/publishers/
	creds  *auth.Credentials
}

const vertexAnthropicVersion = `"vertex-2023-10-16"`

func NewVertex(t Target) (Protocol, error) {
	v := &vertexProtocol{t: t, prefix: "/v1/projects/" + url.PathEscape(t.Opts.Project) +
		"/locations/" + url.PathEscape(t.Opts.Region) + "/publishers/"}
	if t.Key != "" {
		return v, nil // a static access token, sent as Bearer
	}
	// The library caches the token and refreshes it before it expires; the
	// token is never logged.
	creds, err := credentials.DetectDefault(&credentials.DetectOptions{
		Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"},
	})
	if err != nil {
		return nil, fmt.Errorf("api vertex: no Google credentials found in the Application Default Credentials chain "+
			"(GOOGLE_APPLICATION_CREDENTIALS, gcloud's application_default_credentials.json, the metadata server): %w", err)
	}
	v.creds = creds
	return v, nil
}

func (*vertexProtocol) String() string { return "vertex" }

func (*vertexProtocol) Serves(d wire.Dialect) bool {
	return isDialect[anthropic.Dialect](d) || isDialect[gemini.Dialect](d)
}

func (*vertexProtocol) SetKey(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }

// DropsModel: Vertex names the model in the URL; Claude's body loses its
// model, Gemini's has none (ModelDropper).
func (*vertexProtocol) DropsModel(wire.Dialect) bool { return true }

func (v *vertexProtocol) Prepare(ctx context.Context, up *http.Request, req *wire.Request, model string, body []byte, bodies Bodies) error {
	seg, err := ModelSegment(model)
	if err != nil {
		return err
	}
	if isDialect[gemini.Dialect](req.Dialect) {
		// The method is the client's (upstreamPath kept it after the model).
		method := up.URL.Path[strings.LastIndexByte(up.URL.Path, ':')+1:]
		if err := v.t.setURL(up, v.prefix+"google/models/"+seg+":"+method); err != nil {
			return err
		}
		if req.Stream {
			up.URL.RawQuery = strings.TrimPrefix(up.URL.RawQuery+"&alt=sse", "&")
		}
	} else {
		pieces, n, err := cloudPieces(body, &req.Top, []string{"model"}, map[string]json.RawMessage{"anthropic_version": json.RawMessage(vertexAnthropicVersion)})
		if err != nil {
			return err
		}
		verb := ":rawPredict"
		if req.Stream {
			verb = ":streamRawPredict"
		}
		if err := v.t.setURL(up, v.prefix+"anthropic/models/"+seg+verb); err != nil {
			return err
		}
		up.Header.Del("Anthropic-Version")
		setBody(up, pieces, n, bodies)
	}
	if v.creds == nil {
		return nil
	}
	tok, err := v.creds.Token(ctx)
	if err != nil {
		return fmt.Errorf("Google credentials: %w", err)
	}
	up.Header.Set("Authorization", "Bearer "+tok.Value)
	return nil
}

// response gives Claude's errors Anthropic's shape (Gemini's are Google's
// already, and the Gemini dialect reads their 403s: geminiForbidden). A 401
// is the proxy's token refused.
func (v *vertexProtocol) Response(resp *http.Response) Verdict {
	if resp.StatusCode == http.StatusOK {
		return Verdict{}
	}
	var msg string
	if strings.Contains(resp.Request.URL.Path, "/publishers/google/") {
		msg = wire.ErrorField(peekErrorBody(resp), "message")
	} else {
		msg = strings.ToLower(cloudErrorBody(resp, anthropic.Dialect{}, "vertex"))
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return Verdict{Class: wire.ClassAuth, Credential: v.credential()}
	case resp.StatusCode == http.StatusBadRequest && strings.Contains(msg, "is not allowed to use publisher model"):
		// 400 FAILED_PRECONDITION: a model not enabled for the project
		// (Model Garden). The model is cooled on this provider, as a
		// Bedrock model the account lacks; another provider may serve it.
		return Verdict{Class: wire.ClassModelNotFound}
	}
	return Verdict{}
}

// credential names where the provider's token comes from, for the log.
func (v *vertexProtocol) credential() string {
	if v.creds == nil {
		return "the provider's key (a static access token)"
	}
	return "Google Application Default Credentials"
}
