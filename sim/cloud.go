package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The clouds a simulator can front (Config.Wire).
const (
	WireBedrock = "bedrock"
	WireVertex  = "vertex"
	WireAzure   = "azure"
)

// VertexTokenPath is where the simulator of wire vertex issues OAuth access
// tokens (its Key) to any JWT-bearer assertion: a service-account file whose
// token_uri points here exercises the real Application Default Credentials flow.
const VertexTokenPath = "/token"

// cloud checks a request against the cloud's URL, body and auth rules and
// turns it into the native request the exchange serves; the returned writer
// renders the answer in the cloud's framing, and finish completes it. When
// ok is false the request was answered (an error).
func (s *Simulator) cloud(wire string, w http.ResponseWriter, r *http.Request, rec *RequestRecord) (http.ResponseWriter, *http.Request, func(), bool) {
	cfg := s.plan.Load().cfg
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	s.rec.update(rec, func(rec *RequestRecord) { rec.CloudBody, rec.CloudHeader = body, r.Header.Clone() })
	deny := func(status int, kind, msg string) (http.ResponseWriter, *http.Request, func(), bool) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", kind)
		w.WriteHeader(status)
		w.Write(mustJSON(map[string]string{"message": kind + ": " + msg}))
		s.rec.status(rec, status)
		return nil, nil, nil, false
	}
	if wire == WireVertex && r.URL.Path == VertexTokenPath {
		form, err := url.ParseQuery(string(body))
		if r.Method != http.MethodPost || err != nil || !strings.Contains(form.Get("grant_type"), "jwt-bearer") || form.Get("assertion") == "" {
			return deny(http.StatusBadRequest, "invalid_grant", "want a JWT-bearer assertion")
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(mustJSON(map[string]any{"access_token": cfg.Key, "token_type": "Bearer", "expires_in": 3600}))
		return nil, nil, nil, false
	}
	nr := r.Clone(r.Context())
	nr.URL.RawPath, nr.URL.RawQuery = "", ""
	native := func(path string, model string, stream bool) {
		nr.URL.Path = path
		var m map[string]json.RawMessage
		json.Unmarshal(body, &m)
		if model != "" {
			m["model"] = mustJSON(model)
		}
		if path == "/v1/messages" {
			m["stream"] = mustJSON(stream)
			delete(m, "anthropic_version")
			delete(m, "anthropic_beta")
		}
		nb := mustJSON(m)
		nr.Body, nr.ContentLength = io.NopCloser(bytes.NewReader(nb)), int64(len(nb))
		nr.Header.Del("Content-Length")
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return deny(http.StatusBadRequest, "ValidationException", "the body is not a JSON object")
	}
	switch wire {
	case WireAzure:
		if r.Header.Get("Api-Key") != cfg.Key || r.Header.Get("Authorization") != "" {
			return deny(http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint.")
		}
		p := r.URL.Path
		switch {
		case p == "/openai/v1/chat/completions":
			native("/v1/chat/completions", "", false)
		case p == "/openai/v1/responses":
			native("/v1/responses", "", false)
		case strings.HasPrefix(p, "/openai/deployments/") && strings.HasSuffix(p, "/chat/completions"):
			if r.URL.Query().Get("api-version") == "" {
				return deny(http.StatusNotFound, "404", "the deployments form needs api-version")
			}
			native("/v1/chat/completions", strings.TrimSuffix(strings.TrimPrefix(p, "/openai/deployments/"), "/chat/completions"), false)
		default:
			return deny(http.StatusNotFound, "404", "Resource not found")
		}
		nr.Header.Set("Authorization", "Bearer "+cfg.Key)
		return w, nr, func() {}, true

	case WireVertex:
		if r.Header.Get("Authorization") != "Bearer "+cfg.Key || r.Header.Get("X-Api-Key") != "" {
			return deny(http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1/projects/")
		_, rest, ok2 := strings.Cut(rest, "/locations/")
		if _, gm, google := strings.Cut(rest, "/publishers/google/models/"); ok && ok2 && google {
			// Gemini on Vertex: the Gemini API's own request and answer.
			nr.URL.Path = "/v1beta/models/" + gm
			nr.URL.RawQuery = r.URL.RawQuery
			nr.Body, nr.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			nr.Header.Set("X-Goog-Api-Key", cfg.Key)
			return w, nr, func() {}, true
		}
		_, model, ok3 := strings.Cut(rest, "/publishers/anthropic/models/")
		model, verb, ok4 := strings.Cut(model, ":")
		if !ok || !ok2 || !ok3 || !ok4 || (verb != "rawPredict" && verb != "streamRawPredict") {
			return deny(http.StatusNotFound, "NOT_FOUND", "no such Vertex AI method: "+r.URL.Path)
		}
		if _, has := m["model"]; has || string(m["anthropic_version"]) != `"vertex-2023-10-16"` {
			return deny(http.StatusBadRequest, "INVALID_ARGUMENT", "want no model and anthropic_version vertex-2023-10-16")
		}
		stream := string(m["stream"]) == "true"
		if stream != (verb == "streamRawPredict") {
			return deny(http.StatusBadRequest, "INVALID_ARGUMENT", "stream must match the method")
		}
		native("/v1/messages", model, stream)
		nr.Header.Set("X-Api-Key", cfg.Key)
		return w, nr, func() {}, true

	case WireBedrock:
		if kind, err := s.bedrockAuth(cfg, r, body); err != "" {
			return deny(http.StatusForbidden, kind, err)
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/model/")
		model, op, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 || (op != "invoke" && op != "invoke-with-response-stream") {
			return deny(http.StatusNotFound, "UnknownOperationException", r.URL.Path)
		}
		_, hasModel := m["model"]
		_, hasStream := m["stream"]
		switch {
		case hasModel || hasStream:
			return deny(http.StatusBadRequest, "ValidationException", "extraneous key [model/stream] is not permitted")
		case string(m["anthropic_version"]) != `"bedrock-2023-05-31"`:
			return deny(http.StatusBadRequest, "ValidationException", "anthropic_version bedrock-2023-05-31 is required")
		case r.Header.Get("Anthropic-Beta") != "":
			return deny(http.StatusBadRequest, "ValidationException", "anthropic-beta belongs in the body's anthropic_beta")
		}
		stream := op == "invoke-with-response-stream"
		native("/v1/messages", model, stream)
		nr.Header.Set("X-Api-Key", cfg.Key)
		bw := &bedrockWriter{w: w, stream: stream}
		return bw, nr, bw.finish, true
	}
	return w, r, func() {}, true
}

// bedrockAuth verifies the request's SigV4 signature with the configured
// secret, or its Bearer API key; it returns what is wrong, as AWS names it
// (its error type) and words it, or "". As AWS does, it reads an
// X-Amz-Security-Token as the session token of the credential: the
// configured one has none, so any such header is an invalid token.
func (s *Simulator) bedrockAuth(cfg Config, r *http.Request, body []byte) (kind, msg string) {
	const denied, unrecognized, badSignature = "AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException"
	auth := r.Header.Get("Authorization")
	if cfg.AWSAccessKey == "" {
		if auth != "Bearer "+cfg.Key {
			return denied, "want a Bedrock API key as Bearer"
		}
		return "", ""
	}
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	const alg = "AWS4-HMAC-SHA256 Credential="
	cred, ok := strings.CutPrefix(auth, alg)
	if !ok {
		return "MissingAuthenticationTokenException", "want a SigV4 Authorization header"
	}
	scope, _, _ := strings.Cut(cred, ",")
	parts := strings.Split(scope, "/")
	if len(parts) != 5 || parts[2] != region || parts[3] != "bedrock" || parts[4] != "aws4_request" {
		return badSignature, "credential scope " + scope + ": want " + cfg.AWSAccessKey + "/<date>/" + region + "/bedrock/aws4_request"
	}
	if parts[0] != cfg.AWSAccessKey || r.Header.Get("X-Amz-Security-Token") != "" {
		return unrecognized, "The security token included in the request is invalid."
	}
	_, signed, _ := strings.Cut(auth, "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	t, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "IncompleteSignatureException", "missing X-Amz-Date"
	}
	check := r.Clone(context.Background())
	check.Header = http.Header{}
	for _, h := range strings.Split(signed, ";") {
		if h != "host" && h != "content-length" {
			check.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	check.ContentLength = int64(len(body))
	sum := sha256.Sum256(body)
	creds := aws.Credentials{AccessKeyID: cfg.AWSAccessKey, SecretAccessKey: cfg.AWSSecretKey}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, check, hex.EncodeToString(sum[:]), "bedrock", region, t); err != nil {
		return badSignature, err.Error()
	}
	if check.Header.Get("Authorization") != auth {
		return badSignature, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
	}
	return "", ""
}

// bedrockWriter renders the native Anthropic answer as Bedrock does: a
// stream's SSE events become event-stream `chunk` frames (an error event an
// exception frame); an error status gets Bedrock's body and error type.
type bedrockWriter struct {
	w      http.ResponseWriter
	stream bool
	status int
	buf    []byte

	enc *eventstream.Encoder
}

// bedrockErrorTypes are Bedrock's HTTP error types by status.
var bedrockErrorTypes = map[int]string{
	400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
	429: "ThrottlingException", 500: "InternalServerException", 503: "ServiceUnavailableException",
	424: "ModelErrorException", 408: "ModelTimeoutException",
}

// bedrockExceptions are the stream exception types for an Anthropic error type.
var bedrockExceptions = map[string]string{
	"rate_limit_error": "throttlingException", "overloaded_error": "serviceUnavailableException",
	"api_error": "internalServerException", "invalid_request_error": "validationException",
}

func (b *bedrockWriter) Header() http.Header { return b.w.Header() }

func (b *bedrockWriter) Unwrap() http.ResponseWriter { return b.w }

func (b *bedrockWriter) Flush() {
	if f, ok := b.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (b *bedrockWriter) WriteHeader(status int) {
	if status == statusOverloaded {
		status = http.StatusServiceUnavailable
	}
	b.status = status
	switch {
	case status != http.StatusOK:
		kind := bedrockErrorTypes[status]
		if kind == "" {
			kind = "InternalServerException"
		}
		b.w.Header().Set("X-Amzn-Errortype", kind)
		b.w.Header().Del("Content-Length")
	case b.stream:
		b.w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		b.enc = eventstream.NewEncoder()
	}
	b.w.WriteHeader(status)
}

func (b *bedrockWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.WriteHeader(http.StatusOK)
	}
	if b.status != http.StatusOK {
		b.buf = append(b.buf, p...) // rewritten at finish
		return len(p), nil
	}
	if b.enc == nil {
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	for {
		i := bytes.Index(b.buf, []byte("\n\n"))
		if i < 0 {
			return len(p), nil
		}
		ev := b.buf[:i]
		var name, data []byte
		for line := range bytes.SplitSeq(ev, []byte("\n")) {
			if v, ok := bytes.CutPrefix(line, []byte("event: ")); ok {
				name = v
			} else if v, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				data = v
			}
		}
		var frame bytes.Buffer
		if err := b.enc.Encode(&frame, bedrockFrame(name, data)); err != nil {
			return 0, err
		}
		b.buf = b.buf[i+2:]
		if _, err := b.w.Write(frame.Bytes()); err != nil {
			return 0, err
		}
	}
}

// bedrockFrame is the event-stream message for one Anthropic SSE event.
func bedrockFrame(name, data []byte) eventstream.Message {
	var msg eventstream.Message
	if string(name) == "error" {
		var e struct {
			Error struct{ Type, Message string } `json:"error"`
		}
		json.Unmarshal(data, &e)
		kind := bedrockExceptions[e.Error.Type]
		if kind == "" {
			kind = "modelStreamErrorException"
		}
		msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
		msg.Headers.Set(":exception-type", eventstream.StringValue(kind))
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Payload = mustJSON(map[string]string{"message": e.Error.Message})
		return msg
	}
	msg.Headers.Set(":message-type", eventstream.StringValue("event"))
	msg.Headers.Set(":event-type", eventstream.StringValue("chunk"))
	msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	msg.Payload = mustJSON(map[string]string{"bytes": base64.StdEncoding.EncodeToString(data)})
	return msg
}

// finish writes an error's Bedrock body: {"message": ...}.
func (b *bedrockWriter) finish() {
	if b.status == http.StatusOK || b.status == 0 {
		return
	}
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	json.Unmarshal(b.buf, &e)
	b.w.Write(mustJSON(map[string]string{"message": e.Error.Message}))
}
