package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

const (
	testAWSKeyID  = "AKIDCLOUDTEST"
	testAWSSecret = "cloud-test-secret"
	bedrockModel  = "anthropic.claude-test-v1:0"
)

// awsTestEnv gives the AWS default chain static credentials from the
// environment and nothing else: no shared files, no instance metadata.
func awsTestEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", testAWSKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testAWSSecret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func newBedrock(t *testing.T, faults ...sim.Fault) *upstream {
	return newUpstream(t, sim.Config{Wire: sim.WireBedrock, Region: "us-west-2",
		AWSAccessKey: testAWSKeyID, AWSSecretKey: testAWSSecret, Faults: faults})
}

func bedrockProvider(name string, u *upstream, opts ...string) string {
	return provider(name, u, append([]string{"api bedrock", "region us-west-2", "model claude-test " + bedrockModel}, opts...)...)
}

// Azure OpenAI in both URL forms, through openai-go: the api-key header
// carries the provider's key, the client's key never leaves, the base URL's
// api-version is kept, and both chat and Responses clients are served.
func TestAzureURLForms(t *testing.T) {
	for _, tc := range []struct {
		name, query, chatURI, respURI string
	}{
		{"v1", "", "/openai/v1/chat/completions", "/openai/v1/responses"},
		{"deployments", "?api-version=2024-10-21", "/openai/deployments/gpt-test/chat/completions?api-version=2024-10-21", "/openai/responses?api-version=2024-10-21"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			az := newUpstream(t, sim.Config{Wire: sim.WireAzure, Key: "az-key"})
			base := *az
			base.URL += tc.query
			p := startProxy(t, provider("azure", &base, "api azure", "key az-key")+"hedge off")
			ctx := ctxTimeout(t, 10*time.Second)
			c, err := openaiClient(p, "sk-client").Chat.Completions.New(ctx, openaiParams("gpt-test"))
			if err != nil || len(c.Choices) == 0 || c.Choices[0].Message.Content != wantText {
				t.Fatalf("chat: %v %+v", err, c)
			}
			acc, err := streamOpenAI(ctx, openaiClient(p, "sk-client"), openaiParams("gpt-test"))
			if err != nil || len(acc.Choices) == 0 || acc.Choices[0].Message.Content != wantText {
				t.Fatalf("chat stream: %v", err)
			}
			if tc.name == "v1" {
				r, err := openaiClient(p, "sk-client").Responses.New(ctx, responses.ResponseNewParams{
					Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
				if err != nil || r.OutputText() != wantText {
					t.Fatalf("responses: %v", err)
				}
			}
			recs := az.Requests()
			if len(recs) < 2 {
				t.Fatalf("azure saw %d requests", len(recs))
			}
			for _, r := range recs {
				if r.AzureKey != "az-key" || r.Authorization != "" || r.Status != 200 {
					t.Errorf("%s: api-key %q, Authorization %q, status %d; want the provider's key only", r.URI, r.AzureKey, r.Authorization, r.Status)
				}
			}
			if recs[0].URI != tc.chatURI {
				t.Errorf("chat URI %q, want %q", recs[0].URI, tc.chatURI)
			}
			if tc.name == "v1" && recs[2].URI != tc.respURI {
				t.Errorf("responses URI %q, want %q", recs[2].URI, tc.respURI)
			}
		})
	}
}

// Bedrock answers Anthropic clients, streaming and not: SigV4 from the AWS
// default chain (the simulator verifies the signature), the Bedrock body
// rules, anthropic-beta moved into the body, the event stream read back as
// Anthropic SSE with its usage.
func TestBedrockAnswers(t *testing.T) {
	awsTestEnv(t)
	br := newBedrock(t)
	p := startProxy(t, bedrockProvider("bedrock", br)+"hedge off")
	ctx := ctxTimeout(t, 10*time.Second)
	beta := aoption.WithHeader("anthropic-beta", "beta-one, beta-two")
	m, err := streamAnthropic(ctx, anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != wantText {
		t.Fatalf("stream: %v, text %q", err, messageText(m))
	}
	if m.Usage.OutputTokens != 9 || m.StopReason != "end_turn" {
		t.Errorf("stream usage %+v stop %q", m.Usage, m.StopReason)
	}
	nm, err := anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams("claude-test"), beta)
	if err != nil || messageText(*nm) != wantText {
		t.Fatalf("non-stream: %v", err)
	}
	recs := br.Requests()
	if len(recs) != 2 {
		t.Fatalf("bedrock saw %d requests, want 2", len(recs))
	}
	for i, want := range []string{"/model/anthropic.claude-test-v1%3A0/invoke-with-response-stream", "/model/anthropic.claude-test-v1%3A0/invoke"} {
		if recs[i].URI != want || recs[i].Status != 200 || recs[i].APIKey != "" {
			t.Errorf("request %d: %s status %d x-api-key %q; want %s 200 and no client key", i, recs[i].URI, recs[i].Status, recs[i].APIKey, want)
		}
		if !strings.HasPrefix(recs[i].Authorization, "AWS4-HMAC-SHA256 Credential="+testAWSKeyID+"/") {
			t.Errorf("request %d: Authorization %q, want SigV4", i, recs[i].Authorization)
		}
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(recs[1].CloudBody, &body); err != nil {
		t.Fatal(err)
	}
	if string(body["anthropic_beta"]) != `["beta-one","beta-two"]` || string(body["anthropic_version"]) != `"bedrock-2023-05-31"` {
		t.Errorf("body %s: want anthropic_beta from the header and Bedrock's anthropic_version", recs[1].CloudBody)
	}
	lines := observeRequestLines(t, p.LogFile, 2)
	for _, l := range lines {
		if l["provider"] != "bedrock" || l["output_tokens"] != 9.0 || l["outcome"] != "success" {
			t.Errorf("request log %v: want bedrock, 9 output tokens, success", l)
		}
	}
}

// A Bedrock failure before commit fails over to another provider: a 429
// ThrottlingException, and an exception frame in a 200 stream before the
// first output (classed like its status).
func TestBedrockFailover(t *testing.T) {
	awsTestEnv(t)
	for _, tc := range []struct {
		name  string
		fault sim.Fault
		class string
	}{
		{"429 ThrottlingException", sim.Fault{Kind: sim.FaultStatus, Status: 429}, "rate_limited"},
		{"exception frame", sim.Fault{Kind: sim.FaultFake200}, "overloaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := newBedrock(t, tc.fault)
			anth := newUpstream(t, sim.Config{})
			p := startProxy(t, bedrockProvider("bedrock", br, "priority 0")+provider("anthropic", anth, "api anthropic", "key sk-op", "priority 1")+
				"hedge off\nretry {\n same_provider 0\n }\ncooldown {\n failures 100\n }")
			m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
			if err != nil || messageText(m) != wantText {
				t.Fatalf("stream: %v", err)
			}
			if completions(anth) != 1 || len(br.Requests()) != 1 {
				t.Fatalf("anthropic served %d, bedrock saw %d; want the failover", completions(anth), len(br.Requests()))
			}
			l := observeRequestLines(t, p.LogFile, 1)[0]
			if chain := observeChain(t, l); len(chain) != 2 || chain[0]["error_class"] != tc.class {
				t.Errorf("chain %v: want the bedrock attempt classed %s", chain, tc.class)
			}
		})
	}
}

// A Bedrock stream cut after commit ends with the client's Anthropic error
// event: the SDK reports an error, not a clean finish.
func TestBedrockCutAfterCommit(t *testing.T) {
	awsTestEnv(t)
	br := newBedrock(t, sim.Fault{Kind: sim.FaultCut, After: 3})
	p := startProxy(t, bedrockProvider("bedrock", br)+"hedge off")
	m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
	if err == nil {
		t.Fatalf("cut stream finished cleanly with %q", messageText(m))
	}
	if !strings.HasPrefix(wantText, messageText(m)) || messageText(m) == "" {
		t.Errorf("text before the cut %q", messageText(m))
	}
}

const vertexToken = "ya29.sim-vertex-token"

// newVertex starts a Vertex simulator and points Application Default
// Credentials at a service-account file whose token_uri is its token
// endpoint, so the real ADC flow (a signed JWT exchanged for a token) runs.
func newVertex(t *testing.T, faults ...sim.Fault) *upstream {
	vx := newUpstream(t, sim.Config{Wire: sim.WireVertex, Key: vertexToken, Faults: faults})
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "sim-project", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "hedge@sim-project.iam.gserviceaccount.com", "client_id": "1",
		"token_uri": vx.URL + sim.VertexTokenPath,
	})
	file := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(file, sa, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
	return vx
}

func vertexProvider(name string, u *upstream, opts ...string) string {
	return provider(name, u, append([]string{"api vertex", "region us-east5", "project sim-project", "model claude-test claude-test@20250101"}, opts...)...)
}

// Vertex answers Anthropic clients, streaming and not, with a token from
// Application Default Credentials, the Vertex URL and body rules.
func TestVertexAnswers(t *testing.T) {
	vx := newVertex(t)
	p := startProxy(t, vertexProvider("vertex", vx)+"hedge off")
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(p.logs(t))
		}
	})
	ctx := ctxTimeout(t, 10*time.Second)
	m, err := streamAnthropic(ctx, anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
	if err != nil || messageText(m) != wantText || m.Usage.OutputTokens != 9 {
		t.Fatalf("stream: %v, text %q, usage %+v", err, messageText(m), m.Usage)
	}
	nm, err := anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams("claude-test"))
	if err != nil || messageText(*nm) != wantText {
		t.Fatalf("non-stream: %v", err)
	}
	var got []string
	for _, r := range vx.Requests() {
		if r.URI == sim.VertexTokenPath {
			continue
		}
		got = append(got, r.URI)
		if r.Status != 200 || r.Authorization != "Bearer "+vertexToken || r.APIKey != "" {
			t.Errorf("%s: status %d, Authorization %q, x-api-key %q", r.URI, r.Status, r.Authorization, r.APIKey)
		}
	}
	const prefix = "/v1/projects/sim-project/locations/us-east5/publishers/anthropic/models/claude-test@20250101"
	if strings.Join(got, " ") != prefix+":streamRawPredict "+prefix+":rawPredict" {
		t.Errorf("Vertex URIs %v", got)
	}
	for _, l := range observeRequestLines(t, p.LogFile, 2) {
		if l["provider"] != "vertex" || l["output_tokens"] != 9.0 {
			t.Errorf("request log %v: want vertex and 9 output tokens", l)
		}
	}
}

// Three clouds for one Claude model: Bedrock throttles, Vertex answers;
// with Bedrock healthy it answers, and Anthropic stays the last resort.
func TestCloudThreeWayFailover(t *testing.T) {
	awsTestEnv(t)
	br := newBedrock(t, sim.Fault{Kind: sim.FaultStatus, Status: 429, Count: 1})
	vx := newVertex(t)
	anth := newUpstream(t, sim.Config{})
	p := startProxy(t, bedrockProvider("bedrock", br, "priority 0")+vertexProvider("vertex", vx, "priority 1")+
		provider("anthropic", anth, "api anthropic", "key sk-op", "priority 2")+
		"hedge off\nretry {\n same_provider 0\n }\ncooldown {\n failures 100\n }")
	for i, want := range []string{"vertex", "bedrock"} {
		m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
		if err != nil || messageText(m) != wantText {
			t.Fatalf("request %d: %v", i, err)
		}
		lines := observeRequestLines(t, p.LogFile, i+1)
		if got := lines[i]["provider"]; got != want {
			t.Errorf("request %d answered by %v, want %s", i, got, want)
		}
	}
	if completions(anth) != 0 {
		t.Errorf("anthropic served %d", completions(anth))
	}
}

// Bedrock's auth shapes: a Bedrock API key goes as Bearer (nothing
// signed); a signature the cloud refuses (a wrong secret) is a 403 on the
// provider, which fails over.
func TestBedrockAuth(t *testing.T) {
	awsTestEnv(t)
	keyed := newUpstream(t, sim.Config{Wire: sim.WireBedrock, Key: "br-api-key"})
	p := startProxy(t, bedrockProvider("bedrock", keyed, "key br-api-key")+"hedge off")
	if _, err := anthropicClient(p, "sk-client").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test")); err != nil {
		t.Fatalf("API key: %v", err)
	}
	if r := keyed.Requests()[0]; r.Authorization != "Bearer br-api-key" || r.Status != 200 {
		t.Errorf("API key: Authorization %q status %d", r.Authorization, r.Status)
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
	br := newBedrock(t)
	anth := newUpstream(t, sim.Config{})
	p = startProxy(t, bedrockProvider("bedrock", br, "priority 0")+provider("anthropic", anth, "api anthropic", "key sk-op", "priority 1")+
		"hedge off\nretry {\n same_provider 0\n }\ncooldown {\n failures 100\n }")
	if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "sk-client"), anthropicParams("claude-test")); err != nil {
		t.Fatalf("wrong secret: %v", err)
	}
	if r := br.Requests()[0]; r.Status != 403 || completions(anth) != 1 {
		t.Fatalf("wrong secret: bedrock status %d, anthropic served %d; want 403 and the failover", r.Status, completions(anth))
	}
	if chain := observeChain(t, observeRequestLines(t, p.LogFile, 1)[0]); chain[0]["error_class"] != "auth" {
		t.Errorf("chain %v: want the bedrock attempt classed auth", chain)
	}
}

// A hedge goes to another cloud: Bedrock is slow to its first token, the
// hedge to Vertex (another vendor) wins.
func TestCloudHedge(t *testing.T) {
	awsTestEnv(t)
	br := newUpstream(t, sim.Config{Wire: sim.WireBedrock, Region: "us-west-2", AWSAccessKey: testAWSKeyID, AWSSecretKey: testAWSSecret,
		FirstToken: caddyDur(5 * time.Second)})
	vx := newVertex(t)
	p := startProxy(t, bedrockProvider("bedrock", br, "priority 0", "vendor aws")+vertexProvider("vertex", vx, "priority 1", "vendor gcp")+
		"hedge {\n after 50ms\n }\ncooldown {\n failures 100\n }")
	for range 3 {
		m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
		if err != nil || messageText(m) != wantText {
			t.Fatalf("stream: %v", err)
		}
	}
	for _, l := range observeRequestLines(t, p.LogFile, 3) {
		if l["provider"] != "vertex" || l["hedged"] != true {
			t.Errorf("answered by %v hedged %v, want vertex by a hedge", l["provider"], l["hedged"])
		}
	}
}

// A request error from a cloud reaches the client in Anthropic's error
// shape with the cloud's words (Bedrock's {"message"} and error type).
func TestBedrockRequestError(t *testing.T) {
	awsTestEnv(t)
	br := newBedrock(t, sim.Fault{Kind: sim.FaultStatus, Status: 400})
	p := startProxy(t, bedrockProvider("bedrock", br)+"hedge off")
	_, err := anthropicClient(p, "sk-client").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		t.Fatalf("error %v, want a 400", err)
	}
	var body struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if json.Unmarshal([]byte(apiErr.RawJSON()), &body) != nil || body.Type != "error" || body.Error.Type != "invalid_request_error" ||
		!strings.HasPrefix(body.Error.Message, "bedrock ValidationException: ") {
		t.Fatalf("client body %s: want Anthropic's error shape with Bedrock's words", apiErr.RawJSON())
	}
}

// Gemini clients through Vertex AI (publisher google): the genai SDK
// streams and not, the token from ADC, the client's key never sent.
func TestVertexGemini(t *testing.T) {
	vx := newVertex(t)
	p := startProxy(t, provider("vertex", vx, "api vertex", "region us-central1", "project sim-project")+"hedge off")
	ctx := ctxTimeout(t, 10*time.Second)
	for _, stream := range []bool{true, false} {
		text, um, err := geminiGenerate(ctx, geminiClient(t, p, "client-gemini-key"), "gemini-test", stream)
		if err != nil || text != wantText || um == nil || um.CandidatesTokenCount != 9 {
			t.Fatalf("stream %v: %v, text %q, usage %+v", stream, err, text, um)
		}
	}
	var got []string
	for _, r := range vx.Requests() {
		if r.URI == sim.VertexTokenPath {
			continue
		}
		got = append(got, r.URI)
		if r.Status != 200 || r.Authorization != "Bearer "+vertexToken || r.GoogAPIKey != "" || r.KeyParam != "" {
			t.Errorf("%s: status %d, Authorization %q, x-goog-api-key %q; want only the ADC token", r.URI, r.Status, r.Authorization, r.GoogAPIKey)
		}
	}
	const prefix = "/v1/projects/sim-project/locations/us-central1/publishers/google/models/gemini-test"
	if strings.Join(got, " ") != prefix+":streamGenerateContent?alt=sse "+prefix+":generateContent" {
		t.Errorf("Vertex URIs %v", got)
	}
}
