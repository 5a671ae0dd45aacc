package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"google.golang.org/genai"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// clientCloudHeaders are headers a client could send that steer a cloud's
// auth, billing or deadline: none may reach a cloud.
var clientCloudHeaders = map[string]string{
	"X-Amz-Security-Token":   "client-session-token",
	"X-Amz-Date":             "20200101T000000Z",
	"X-Goog-User-Project":    "client-project",
	"X-Ms-Client-Request-Id": "client-request",
	"Proxy-Authorization":    "Basic Y2xpZW50",
}

// refusedCloudHeader names the first header of h a cloud must not get from
// a client: the x-amz-*, x-goog-*, x-ms-* families, Vertex's deadline, a
// client credential. except are the ones the proxy itself set.
func refusedCloudHeader(h http.Header, except ...string) string {
	for k := range h {
		lk := strings.ToLower(k)
		if slices.Contains(except, lk) {
			continue
		}
		for _, bad := range []string{"x-amz-", "x-goog-", "x-ms-", "x-server-timeout", "x-api-key", "proxy-authorization", "x-stainless-"} {
			if strings.HasPrefix(lk, bad) {
				return k
			}
		}
	}
	return ""
}

// Item 3: a cloud gets an allow-list of client headers. A client's
// X-Amz-Security-Token signed into the proxy's SigV4 request makes Bedrock
// answer 403 UnrecognizedClientException (the simulator reads it as AWS
// does): every such request failed and opened the breaker for everyone.
// Nothing of the x-amz-*, x-goog-*, x-ms-* families, no client credential
// and no X-Server-Timeout reaches Bedrock, Vertex (Claude and Gemini) or
// Azure, and SigV4 signs only what the proxy set, header_up included.
func TestCloudClientHeadersAllowList(t *testing.T) {
	awsTestEnv(t)
	t.Run("bedrock", func(t *testing.T) {
		br := newBedrock(t)
		p := startProxy(t, bedrockProvider("bedrock", br, "header_up X-Operator-Tag op-tag")+"hedge off")
		opts := []aoption.RequestOption{aoption.WithHeader("Authorization", "Bearer client")}
		for k, v := range clientCloudHeaders {
			opts = append(opts, aoption.WithHeader(k, v))
		}
		for i := range 5 { // more than the breaker's 3 failures
			ctx := ctxTimeout(t, 10*time.Second)
			m, err := anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams("claude-test"), opts...)
			if err != nil || messageText(*m) != wantText {
				t.Fatalf("request %d with the client's AWS headers: %v", i, err)
			}
		}
		for _, r := range br.Requests() {
			if k := refusedCloudHeader(r.CloudHeader, "x-amz-date"); k != "" || r.CloudHeader.Get("X-Amz-Date") == clientCloudHeaders["X-Amz-Date"] {
				t.Errorf("bedrock received the client's %s (X-Amz-Date %q)", k, r.CloudHeader.Get("X-Amz-Date"))
			}
			if r.CloudHeader.Get("X-Operator-Tag") != "op-tag" {
				t.Errorf("header_up X-Operator-Tag did not reach bedrock: %v", r.CloudHeader)
			}
			_, signed, _ := strings.Cut(r.Authorization, "SignedHeaders=")
			signed, _, _ = strings.Cut(signed, ",")
			for h := range strings.SplitSeq(signed, ";") {
				if !slices.Contains([]string{"accept", "content-length", "content-type", "host", "x-amz-date", "x-operator-tag"}, h) {
					t.Errorf("SigV4 signed %q, which the proxy did not set (signed: %s)", h, signed)
				}
			}
		}
	})
	t.Run("vertex", func(t *testing.T) {
		vx := newVertex(t)
		p := startProxy(t, vertexProvider("vertex", vx)+"hedge off")
		ctx := ctxTimeout(t, 10*time.Second)
		opts := []aoption.RequestOption{}
		for k, v := range clientCloudHeaders {
			opts = append(opts, aoption.WithHeader(k, v))
		}
		if _, err := anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams("claude-test"), opts...); err != nil {
			t.Fatalf("claude on vertex: %v", err)
		}
		hdr := http.Header{}
		for k, v := range clientCloudHeaders {
			hdr.Set(k, v)
		}
		timeout := 30 * time.Second // the genai SDK sends it as X-Server-Timeout: 30
		gc, err := genai.NewClient(context.Background(), &genai.ClientConfig{Backend: genai.BackendGeminiAPI, APIKey: "client-gemini-key",
			HTTPOptions: genai.HTTPOptions{BaseURL: p.URL, Headers: hdr, Timeout: &timeout}})
		if err != nil {
			t.Fatal(err)
		}
		if text, _, err := geminiGenerate(ctx, gc, "gemini-test", true); err != nil || text != wantText {
			t.Fatalf("gemini on vertex: %v %q", err, text)
		}
		n := 0
		for _, r := range vx.Requests() {
			if r.URI == sim.VertexTokenPath {
				continue
			}
			n++
			if k := refusedCloudHeader(r.CloudHeader); k != "" {
				t.Errorf("%s: vertex received the client's %s", r.URI, k)
			}
		}
		if n != 2 {
			t.Fatalf("vertex saw %d requests, want 2", n)
		}
	})
	t.Run("azure", func(t *testing.T) {
		az := newUpstream(t, sim.Config{Wire: sim.WireAzure, Key: "az-key"})
		p := startProxy(t, provider("azure", az, "api azure", "key az-key")+"hedge off")
		opts := []ooption.RequestOption{}
		for k, v := range clientCloudHeaders {
			opts = append(opts, ooption.WithHeader(k, v))
		}
		c, err := openaiClient(p, "sk-client").Chat.Completions.New(ctxTimeout(t, 10*time.Second), openaiParams("gpt-test"), opts...)
		if err != nil || c.Choices[0].Message.Content != wantText {
			t.Fatalf("azure: %v", err)
		}
		r := az.Requests()[0]
		if k := refusedCloudHeader(r.CloudHeader); k != "" || r.CloudHeader.Get("Authorization") != "" {
			t.Errorf("azure received the client's %s (Authorization %q)", k, r.CloudHeader.Get("Authorization"))
		}
	})
}

// Item 4, Bedrock: a 403 is read from its body. AccessDeniedException
// "You don't have access to the model ..." cools that model on that
// provider (the account lacks it) and never the provider: three requests
// for it no longer open the breaker for every other model. A refused
// credential (InvalidSignatureException) is the provider's failure, logged
// at error naming the chain the credentials came from.
func TestBedrockForbiddenReadFromBody(t *testing.T) {
	awsTestEnv(t)
	t.Run("model access", func(t *testing.T) {
		br := newBedrock(t, sim.Fault{Kind: sim.FaultStatus, Status: 403, Model: "anthropic.claude-locked*",
			Message: "You don't have access to the model with the specified model ID."})
		anth := newUpstream(t, sim.Config{})
		p := startProxy(t, bedrockProvider("bedrock", br, "model claude-locked anthropic.claude-locked-v1:0", "priority 0")+
			provider("anthropic", anth, "api anthropic", "key sk-op", "priority 1")+"hedge off\nretry {\n same_provider 0\n }")
		for i, model := range []string{"claude-locked", "claude-locked", "claude-locked", "claude-test"} {
			m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "sk-client"), anthropicParams(model))
			if err != nil || messageText(m) != wantText {
				t.Fatalf("request %d (%s): %v", i, model, err)
			}
		}
		lines := observeRequestLines(t, p.LogFile, 4)
		if chain := observeChain(t, lines[0]); len(chain) != 2 || chain[0]["error_class"] != "model_not_found" {
			t.Errorf("first request's chain %v: want the bedrock attempt classed model_not_found, then anthropic", chain)
		}
		if got := lines[3]["provider"]; got != "bedrock" {
			t.Errorf("claude-test answered by %v, want bedrock: a model the account lacks must not open its breaker", got)
		}
		locked := 0
		for _, r := range br.Requests() {
			if strings.Contains(r.URI, "claude-locked") {
				locked++
			}
		}
		if locked != 1 {
			t.Errorf("bedrock was asked for claude-locked %d times, want once (then the model is cooled there)", locked)
		}
	})
	t.Run("credentials refused", func(t *testing.T) {
		t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
		br := newBedrock(t)
		p := startProxy(t, bedrockProvider("bedrock", br)+"hedge off\nretry {\n same_provider 0\n }")
		_, err := anthropicClient(p, "sk-client").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || strings.Contains(apiErr.RawJSON(), "signature") {
			t.Fatalf("client got %v: want the proxy's generic failure, not the cloud's words about the proxy's credential", err)
		}
		if chain := observeChain(t, observeRequestLines(t, p.LogFile, 1)[0]); chain[0]["error_class"] != "auth" {
			t.Errorf("chain %v: want the attempt classed auth", chain)
		}
		var logged map[string]any
		for _, l := range observeJSONLines(t, p.LogFile) {
			if _, ok := l["credentials"].(string); ok && l["level"] == "error" && l["provider"] == "bedrock" {
				logged = l
			}
		}
		if logged == nil || !strings.Contains(logged["credentials"].(string), "the AWS default chain") ||
			!strings.Contains(fmt.Sprint(logged["error"]), "InvalidSignatureException") {
			t.Fatalf("error log line %v: want one naming the AWS default chain and InvalidSignatureException", logged)
		}
	})
}

// Item 4, Gemini and Vertex: a 403 PERMISSION_DENIED about a File the
// client named is the client's own error: passed through to the genai
// SDK as is, no key of the pool disabled, no breaker opened.
func TestGeminiForbiddenFileIsTheClients(t *testing.T) {
	const fileDenied = "You do not have permission to access the File abc123 or it may not exist."
	wantFileDenied := func(t *testing.T, err error) {
		t.Helper()
		var ae genai.APIError
		if !errors.As(err, &ae) || ae.Code != 403 || ae.Status != "PERMISSION_DENIED" || ae.Message != fileDenied {
			t.Fatalf("client got %v: want the provider's 403 PERMISSION_DENIED about the File, as is", err)
		}
	}
	t.Run("gemini key pool", func(t *testing.T) {
		up := newUpstream(t, sim.Config{Key: "g-one", Keys: []string{"g-two"},
			Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 403, Message: fileDenied, Count: 1}}})
		p := startProxy(t, provider("gemini", up, "api gemini", "key g-one g-two")+"hedge off\ncooldown {\n failures 1\n }")
		ctx := ctxTimeout(t, 10*time.Second)
		_, _, err := geminiGenerate(ctx, geminiClient(t, p, "client-key"), "gemini-test", false)
		wantFileDenied(t, err)
		v := quotaView(t, p, "gemini", up)
		if v.State != "closed" || v.key(t, "g-one").State != "ok" || v.key(t, "g-two").State != "ok" {
			t.Fatalf("after the client's 403: provider %s, keys %+v; want closed and both keys ok", v.State, v.Keys)
		}
		if text, _, err := geminiGenerate(ctx, geminiClient(t, p, "client-key"), "gemini-test", false); err != nil || text != wantText {
			t.Fatalf("next request: %v", err)
		}
		if n := len(up.Requests()); n != 2 {
			t.Errorf("gemini saw %d requests, want 2: the 403 was not failed over", n)
		}
	})
	t.Run("vertex", func(t *testing.T) {
		vx := newVertex(t, sim.Fault{Kind: sim.FaultStatus, Status: 403, Message: fileDenied, Count: 3})
		p := startProxy(t, provider("vertex", vx, "api vertex", "region us-central1", "project sim-project")+"hedge off")
		ctx := ctxTimeout(t, 10*time.Second)
		for range 3 { // the breaker's failures
			_, _, err := geminiGenerate(ctx, geminiClient(t, p, "client-key"), "gemini-test", true)
			wantFileDenied(t, err)
		}
		if text, _, err := geminiGenerate(ctx, geminiClient(t, p, "client-key"), "gemini-test", true); err != nil || text != wantText {
			t.Fatalf("request after three of the client's 403s: %v, want an answer (no breaker opened)", err)
		}
	})
}

// Item 5: a model that is a dot-segment never reaches a cloud's URL path
// (`/model/../invoke`, `/openai/deployments/../chat/completions`): 400
// before any upstream call, on every cloud and dialect, and on the Gemini
// API whose model is in the path.
func TestCloudModelDotSegments(t *testing.T) {
	awsTestEnv(t)
	br := newBedrock(t)
	vx := newVertex(t)
	az := newUpstream(t, sim.Config{Wire: sim.WireAzure, Key: "az-key"})
	azDeploy := *az
	azDeploy.URL += "?api-version=2024-10-21"
	gm := newUpstream(t, sim.Config{})
	for _, model := range []string{".", "..", "../x", "x/.."} {
		t.Run(model, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			for _, anthropicCloud := range []string{
				bedrockProvider("bedrock", br),
				vertexProvider("vertex", vx),
			} {
				p := startProxy(t, anthropicCloud+"hedge off")
				_, err := anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams(model))
				var ae *anthropic.Error
				if !errors.As(err, &ae) || ae.StatusCode != 400 {
					t.Errorf("%s: %v, want a 400", strings.Fields(anthropicCloud)[1], err)
				}
			}
			p := startProxy(t, provider("azure", &azDeploy, "api azure", "key az-key")+"hedge off")
			_, err := openaiClient(p, "sk-client").Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
			var oe *openai.Error
			if !errors.As(err, &oe) || oe.StatusCode != 400 {
				t.Errorf("azure: %v, want a 400", err)
			}
			if strings.Contains(model, "/") {
				return // a / is another resource path for a Gemini client
			}
			// The genai SDK refuses ".." itself; other Gemini clients do not.
			for _, gemini := range []string{
				provider("vertex", vx, "api vertex", "region us-central1", "project sim-project"),
				provider("gemini", gm, "api gemini", "key g-op"),
			} {
				p := startProxy(t, gemini+"hedge off")
				status, body, err := geminiPost(ctx, p, "/v1beta/models/"+model+":generateContent")
				if err != nil || status != 400 {
					t.Errorf("%s (gemini client): %d %s %v, want a 400", strings.Fields(gemini)[1], status, body, err)
				}
			}
		})
	}
	for _, u := range []*upstream{br, vx, az, gm} {
		for _, r := range u.Requests() {
			if r.URI != sim.VertexTokenPath {
				t.Errorf("an upstream was called: %s", r.URI)
			}
		}
	}
}

// geminiPost sends a Gemini generateContent request as a raw HTTP client.
func geminiPost(ctx context.Context, p *proxy, path string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+path,
		strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Goog-Api-Key", "client-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
