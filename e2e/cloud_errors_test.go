package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud/cloudtest"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// cloudAnswer is one error answer of a real cloud, as the service sends it
// (status, headers, body), from AWS's, Google's and Azure's documentation
// and the answers users quote in their bug reports.
type cloudAnswer struct {
	name   string
	api    string // bedrock, vertex or azure
	status int
	header map[string]string
	body   string
	// wantClass is the attempt's error_class; a passed-through answer
	// (request_error) reaches the client with wantStatus and no failover.
	wantClass  string
	wantStatus int
	// aloneStatus is the client's status when this cloud is the only
	// provider: the status of the failure's class, in the client's dialect.
	aloneStatus int
}

// newCloudFake answers every request with a; hits counts them.
func newCloudFake(t *testing.T, a cloudAnswer) (string, *atomic.Int32) {
	hits := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hits.Add(1)
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, hits
}

var cloudRealErrors = []cloudAnswer{
	// InvokeModel's documented errors: ModelErrorException is a 424 ("an
	// error while processing the model"), the stream's
	// modelStreamErrorException as an HTTP answer.
	{name: "bedrock ModelErrorException 424", api: "bedrock", status: 424,
		header:    map[string]string{"X-Amzn-Errortype": "ModelErrorException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
		body:      `{"message":"The system encountered an unexpected error during processing. Try your request again.","originalStatusCode":500}`,
		wantClass: "status_5xx", aloneStatus: 503},
	// ServiceQuotaExceededException is documented as HTTP 400: "Your
	// request exceeds the service quota for your account ... resubmit later".
	{name: "bedrock ServiceQuotaExceededException 400", api: "bedrock", status: 400,
		header:    map[string]string{"X-Amzn-Errortype": "ServiceQuotaExceededException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
		body:      `{"message":"Your request exceeds the service quota for your account. You can view your quotas at Viewing service quotas. You can resubmit your request later."}`,
		wantClass: "rate_limited", aloneStatus: 429},
	{name: "bedrock ModelTimeoutException 408", api: "bedrock", status: 408,
		header:    map[string]string{"X-Amzn-Errortype": "ModelTimeoutException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
		body:      `{"message":"Model has timed out in processing the request. Try your request again."}`,
		wantClass: "status_5xx", aloneStatus: 503},
	{name: "bedrock ModelNotReadyException 429", api: "bedrock", status: 429,
		header:    map[string]string{"X-Amzn-Errortype": "ModelNotReadyException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
		body:      `{"message":"Model is not ready to serve inference requests."}`,
		wantClass: "rate_limited", aloneStatus: 429},
	// A third-party model's AWS Marketplace subscription missing: that
	// model only.
	{name: "bedrock AccessDeniedException marketplace", api: "bedrock", status: 403,
		header: map[string]string{"X-Amzn-Errortype": "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
		body: `{"message":"Model access is denied due to IAM user or service role is not authorized to perform the required AWS Marketplace actions ` +
			`(aws-marketplace:ViewSubscriptions, aws-marketplace:Subscribe) to enable access to this model. Refer to the Amazon Bedrock documentation for further details. ` +
			`Your AWS Marketplace subscription for this model cannot be completed at this time. If you recently fixed this issue, try again after 5 minutes."}`,
		wantClass: "model_not_found", aloneStatus: 404},
	// The account itself: a provider failure.
	{name: "bedrock AccessDeniedException account", api: "bedrock", status: 403,
		header:    map[string]string{"X-Amzn-Errortype": "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
		body:      `{"message":"Your account is not authorized to invoke this API operation."}`,
		wantClass: "auth"},
	// The model id names no model in this region, or one that needs an
	// inference profile there: the provider's configuration, not the
	// request's fault.
	{name: "bedrock ValidationException invalid model id", api: "bedrock", status: 400,
		header:    map[string]string{"X-Amzn-Errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
		body:      `{"message":"The provided model identifier is invalid."}`,
		wantClass: "model_not_found", aloneStatus: 404},
	{name: "bedrock ValidationException on-demand throughput", api: "bedrock", status: 400,
		header: map[string]string{"X-Amzn-Errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
		body: `{"message":"Invocation of model ID anthropic.claude-test-v1:0 with on-demand throughput isn’t supported. ` +
			`Retry your request with the ID or ARN of an inference profile that contains this model."}`,
		wantClass: "model_not_found", aloneStatus: 404},
	{name: "bedrock ValidationException 400", api: "bedrock", status: 400,
		header:    map[string]string{"X-Amzn-Errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
		body:      `{"message":"max_tokens: 1000000 > 64000, which is the maximum allowed number of output tokens for claude-test"}`,
		wantClass: "request_error", wantStatus: 400},
	// A Claude model not enabled in the project's Model Garden.
	{name: "vertex FAILED_PRECONDITION model not allowed", api: "vertex", status: 400,
		body: `{"error":{"code":400,"message":"Project ` + "`123456`" + ` is not allowed to use Publisher Model ` +
			"`projects/p/locations/us-east5/publishers/anthropic/models/claude-test@20250101`" + `","status":"FAILED_PRECONDITION"}}`,
		wantClass: "model_not_found", aloneStatus: 404},
	// The same for Gemini on Vertex (publisher google), in Google's shape.
	{name: "vertex gemini FAILED_PRECONDITION model not allowed", api: "vertex-gemini", status: 400,
		body: `{"error":{"code":400,"message":"Project ` + "`123456`" + ` is not allowed to use Publisher Model ` +
			"`projects/p/locations/us-east5/publishers/google/models/gemini-test`" + `","status":"FAILED_PRECONDITION"}}`,
		wantClass: "model_not_found", aloneStatus: 404},
	// The proxy's token or project refused (a 403 PERMISSION_DENIED whose
	// ErrorInfo says why): a provider failure, not the client's object.
	{name: "vertex gemini ACCESS_TOKEN_SCOPE_INSUFFICIENT", api: "vertex-gemini", status: 403,
		body: `{"error":{"code":403,"message":"Request had insufficient authentication scopes.","status":"PERMISSION_DENIED","details":[` +
			`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"ACCESS_TOKEN_SCOPE_INSUFFICIENT","domain":"googleapis.com",` +
			`"metadata":{"service":"aiplatform.googleapis.com","method":"google.cloud.aiplatform.v1.PredictionService.GenerateContent"}}]}}`,
		wantClass: "auth"},
	{name: "vertex gemini BILLING_DISABLED", api: "vertex-gemini", status: 403,
		body: `{"error":{"code":403,"message":"This API method requires billing to be enabled. Please enable billing on project #123 by visiting ` +
			`https://console.developers.google.com/billing/enable?project=123 then retry.","status":"PERMISSION_DENIED","details":[` +
			`{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"BILLING_DISABLED","domain":"googleapis.com",` +
			`"metadata":{"service":"aiplatform.googleapis.com","consumer":"projects/123"}}]}}`,
		wantClass: "auth"},
	{name: "vertex gemini INVALID_ARGUMENT", api: "vertex-gemini", status: 400,
		body:      `{"error":{"code":400,"message":"Please use a valid role: user, model.","status":"INVALID_ARGUMENT"}}`,
		wantClass: "request_error", wantStatus: 400},
	{name: "vertex NOT_FOUND publisher model", api: "vertex", status: 404,
		body: `{"error":{"code":404,"message":"Publisher Model ` +
			"`projects/p/locations/us-east5/publishers/anthropic/models/claude-test@20250101`" + ` not found.","status":"NOT_FOUND"}}`,
		wantClass: "model_not_found", aloneStatus: 404},
	{name: "vertex INVALID_ARGUMENT", api: "vertex", status: 400,
		body:      `{"error":{"code":400,"message":"messages: roles must alternate between \"user\" and \"assistant\"","status":"INVALID_ARGUMENT"}}`,
		wantClass: "request_error", wantStatus: 400},
	// The deployment the (rewritten) model names does not exist on this
	// Azure resource: another provider may serve the model.
	{name: "azure DeploymentNotFound 404", api: "azure", status: 404,
		body:      `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again."}}`,
		wantClass: "model_not_found", aloneStatus: 404},
	{name: "azure content_filter 400", api: "azure", status: 400,
		body:      `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400}}`,
		wantClass: "request_error", wantStatus: 400},
}

// cloudBlock is a provider block for the fake cloud at url.
func cloudBlock(api, url string, opts ...string) string {
	var o []string
	switch api {
	case "bedrock":
		o = []string{"api bedrock", "region us-west-2", "key br-key", "model claude-test " + bedrockModel}
	case "vertex", "vertex-gemini":
		o = []string{"api vertex", "region us-east5", "project p", "key vx-token", "model claude-test claude-test@20250101"}
	case "azure":
		o = []string{"api azure", "key az-key"}
	}
	return provider("cloud", &upstream{URL: url}, append(o, opts...)...)
}

// askCloud sends one completion in the dialect the cloud serves: the
// client's status (200 on success) and error.
func askCloud(t *testing.T, p *proxy, api string) (int, error) {
	ctx := ctxTimeout(t, 10*time.Second)
	switch api {
	case "vertex-gemini":
		status, body, err := geminiPost(ctx, p, "/v1beta/models/gemini-test:generateContent")
		if err == nil && status != 200 {
			err = errors.New(body)
		}
		return status, err
	case "azure":
		_, err := openaiClient(p, "sk-client").Chat.Completions.New(ctx, openaiParams("gpt-test"))
		var e *openai.Error
		if errors.As(err, &e) {
			return e.StatusCode, err
		}
		return 200, err
	}
	_, err := anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams("claude-test"))
	var e *anthropic.Error
	if errors.As(err, &e) {
		return e.StatusCode, err
	}
	return 200, err
}

// A cloud's real error answers classify by what they mean: a failure of
// the cloud (a model error, an exhausted quota, a model the project or
// resource does not have) fails over to the next provider, and a model
// missing there is not asked for again; the request's own error (a
// validation error, a content filter) is the client's answer, passed
// through without a failover. With the cloud alone, the client gets the
// status of the failure's class (SPEC 6), not the cloud's 400 or 424 that
// its SDK reads as its own request's fault.
func TestCloudRealErrors(t *testing.T) {
	const noRetry = "hedge off\nretry {\n same_provider 0\n }"
	for _, tc := range cloudRealErrors {
		t.Run(tc.name, func(t *testing.T) {
			url, hits := newCloudFake(t, tc)
			native := newUpstream(t, sim.Config{})
			nativeAPI := map[string]string{"azure": "api openai", "vertex-gemini": "api gemini"}[tc.api]
			if nativeAPI == "" {
				nativeAPI = "api anthropic"
			}
			p := startProxy(t, cloudBlock(tc.api, url, "priority 0")+provider("native", native, nativeAPI, "key sk-op", "priority 1")+noRetry)
			status, err := askCloud(t, p, tc.api)
			chain := observeChain(t, observeRequestLines(t, p.LogFile, 1)[0])
			if len(chain) == 0 || chain[0]["error_class"] != tc.wantClass {
				t.Fatalf("chain %v: want the cloud's attempt classed %s", chain, tc.wantClass)
			}
			if tc.wantStatus != 0 {
				if status != tc.wantStatus || len(native.Requests()) != 0 {
					t.Fatalf("client got %d (%v), native asked %d times: want the cloud's %d passed through, no failover",
						status, err, len(native.Requests()), tc.wantStatus)
				}
				return
			}
			if err != nil || len(native.Requests()) != 1 {
				t.Fatalf("client got %v, native asked %d times: want the answer of the next provider", err, len(native.Requests()))
			}
			if tc.wantClass == "model_not_found" {
				if _, err := askCloud(t, p, tc.api); err != nil || hits.Load() != 1 {
					t.Fatalf("second request: %v; the cloud was asked %d times, want once (the model is cooled there)", err, hits.Load())
				}
			}
			if tc.aloneStatus == 0 {
				return
			}
			url, _ = newCloudFake(t, tc) // health is kept per provider across proxies: a fresh one
			alone := startProxy(t, cloudBlock(tc.api, url)+noRetry)
			if status, err := askCloud(t, alone, tc.api); status != tc.aloneStatus {
				t.Fatalf("cloud alone: client got %d (%v), want %d", status, err, tc.aloneStatus)
			}
		})
	}
}

// AWS answers a signature it cannot match with InvalidSignatureException
// and the request as it expected it signed: "The Canonical String for this
// request should have been ..." lists every signed header with its value,
// the proxy's X-Amz-Security-Token (temporary credentials: SSO, IRSA, an
// instance role) among them. That session token reached the error log,
// the request log line and the admin view's last_error; the AWS sentence
// before it still does.
func TestBedrockSignatureErrorHidesSessionToken(t *testing.T) {
	awsTestEnv(t)
	const token = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
	t.Setenv("AWS_SESSION_TOKEN", token)
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		got.Store(r.Header.Get("X-Amz-Security-Token"))
		canonical := "POST\n" + r.URL.EscapedPath() + "\n\ncontent-type:application/json\nhost:" + r.Host +
			"\nx-amz-date:" + r.Header.Get("X-Amz-Date") + "\nx-amz-security-token:" + r.Header.Get("X-Amz-Security-Token") +
			"\n\ncontent-type;host;x-amz-date;x-amz-security-token\nfea7815fd74adf3e"
		msg := "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. " +
			"Consult the service documentation for details.\n\nThe Canonical String for this request should have been\n'" + canonical +
			"'\n\nThe String-to-Sign should have been\n'AWS4-HMAC-SHA256\n20250921T101604Z\n20250921/us-west-2/bedrock/aws4_request\nd61e31a0'\n"
		b, _ := json.Marshal(map[string]string{"message": msg})
		w.Header().Set("X-Amzn-Errortype", "InvalidSignatureException:http://internal.amazon.com/coral/com.amazon.coral.service/")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	p := startProxy(t, provider("bedrock", &upstream{URL: srv.URL}, "api bedrock", "region us-west-2", "model claude-test "+bedrockModel)+
		"hedge off\nretry {\n same_provider 0\n }")
	_, err := anthropicClient(p, "sk-client").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("claude-test"))
	if err == nil || got.Load() != token {
		t.Fatalf("client got %v, the cloud got session token %q: want a failure of a request signed with %q", err, got.Load(), token)
	}
	observeRequestLines(t, p.LogFile, 1)
	logs, _ := os.ReadFile(p.LogFile)
	_, _, admin := healthAdmin(t, p, http.MethodGet, "/llm_hedge/providers")
	for where, s := range map[string]string{"the log": string(logs), "the admin view": admin, "the client's answer": err.Error()} {
		if strings.Contains(s, token) {
			t.Errorf("%s holds the proxy's AWS session token", where)
		}
	}
	if !strings.Contains(string(logs), "InvalidSignatureException: The request signature we calculated does not match") {
		t.Errorf("the log lost AWS's own sentence about the signature")
	}
}

// InvokeModelWithResponseStream answers 200 and may report the failure
// in its first frame: a validationException ("Input is too long for
// requested model.") is the request's own error, a throttlingException the
// account's rate limit. The first reached the streaming client as an
// empty 200 stream, no error at all (passed through with the 200's empty
// body); the second, with Bedrock alone, as a 503. Now a 400
// invalid_request_error with Bedrock's words and no failover, and a
// failover, or a 429 when Bedrock is alone.
func TestBedrockStreamExceptionBeforeCommit(t *testing.T) {
	for _, tc := range []struct {
		kind, message string
		alone         int    // the client's status with Bedrock alone
		aloneType     string // its Anthropic error type
		failover      bool   // a second provider answers
	}{
		{"validationException", "Input is too long for requested model.", 400, "invalid_request_error", false},
		{"throttlingException", "Too many tokens, please wait before trying again.", 429, "rate_limit_error", true},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(cloudtest.ExceptionFrame(t, tc.kind, tc.message))
			}))
			t.Cleanup(srv.Close)
			bedrock := provider("bedrock", &upstream{URL: srv.URL}, "api bedrock", "region us-west-2", "key br-key",
				"model claude-test "+bedrockModel, "priority 0")
			const noRetry = "hedge off\nretry {\n same_provider 0\n }"
			p := startProxy(t, bedrock+noRetry)
			_, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
			var e *anthropic.Error
			if !errors.As(err, &e) || e.StatusCode != tc.alone || !strings.Contains(e.RawJSON(), `"type":"`+tc.aloneType+`"`) {
				t.Fatalf("bedrock alone: client got %v, want %d %s", err, tc.alone, tc.aloneType)
			}
			if tc.alone == 400 && !strings.Contains(e.RawJSON(), tc.message) {
				t.Errorf("client's 400 %s lacks Bedrock's words %q", e.RawJSON(), tc.message)
			}
			native := newUpstream(t, sim.Config{})
			p.reload(t, bedrock+provider("native", native, "api anthropic", "key sk-op", "priority 1")+noRetry)
			m, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
			if tc.failover {
				if err != nil || messageText(m) != wantText {
					t.Fatalf("with a second provider: %v %q, want its answer", err, messageText(m))
				}
				return
			}
			if !errors.As(err, &e) || e.StatusCode != 400 || len(native.Requests()) != 0 {
				t.Fatalf("with a second provider: client got %v, native asked %d times: want the 400, no failover", err, len(native.Requests()))
			}
		})
	}
}

// A key pool (`key k1 k2`, SPEC 14) is a key: an Azure provider with one
// was refused at parse ("api azure needs key"), and so was a translating
// provider ("translate needs the provider's own key"). With the pool, an
// Azure key refused with 401 is disabled and the other key answers.
func TestCloudKeyPoolIsAKey(t *testing.T) {
	az := newUpstream(t, sim.Config{Wire: sim.WireAzure, Key: "az-two"})
	p := startProxy(t, provider("azure", az, "api azure", "key az-one az-two")+"hedge off")
	for i := range 2 {
		if _, err := openaiClient(p, "sk-client").Chat.Completions.New(ctxTimeout(t, 10*time.Second), openaiParams("gpt-test")); err != nil {
			t.Fatalf("request %d through the Azure pool: %v", i, err)
		}
	}
	if v := quotaView(t, p, "azure", az); v.key(t, "az-one").State != "disabled" || v.key(t, "az-two").State != "ok" {
		t.Errorf("keys %+v: want az-one disabled by its 401, az-two ok", v.Keys)
	}
	native := newUpstream(t, sim.Config{})
	p.reload(t, provider("openai", native, "api openai", "key sk-one sk-two", "translate anthropic")+"hedge off")
	if _, err := anthropicClient(p, "sk-client").Messages.New(ctxTimeout(t, 10*time.Second), anthropicParams("gpt-test")); err != nil {
		t.Fatalf("an Anthropic client through a translating provider with a key pool: %v", err)
	}
}

// An Azure resource whose network rules refuse the proxy answers 403
// "Access denied due to Virtual Network/Firewall rules." to every key
// alike. It disabled the pool's first key until an admin reset, which no
// fix of the rules undid; it is the provider's failure (SPEC 15: only an
// invalid or disabled key fails a key): its breaker opens, its keys stay.
func TestAzureNetworkRuleFailsTheProvider(t *testing.T) {
	url, hits := newCloudFake(t, cloudAnswer{status: http.StatusForbidden,
		body: `{"error":{"code":"403","message":"Access denied due to Virtual Network/Firewall rules."}}`})
	u := &upstream{URL: url}
	p := startProxy(t, provider("azure", u, "api azure", "key az-one az-two")+"hedge off\nretry {\n same_provider 0\n }\ncooldown {\n failures 1\n }")
	if status, err := askCloud(t, p, "azure"); status == 200 {
		t.Fatalf("client got %d %v, want a failure", status, err)
	}
	v := quotaView(t, p, "azure", u)
	if v.key(t, "az-one").State != "ok" || v.key(t, "az-two").State != "ok" || v.State != "open" {
		t.Fatalf("provider %s, keys %+v: want both keys ok and the breaker open", v.State, v.Keys)
	}
	if hits.Load() != 1 {
		t.Errorf("azure asked %d times, want once: the refusal is not retried with the other key", hits.Load())
	}
}
