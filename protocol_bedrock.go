package llmhedge

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
)

// bedrockProtocol is Anthropic's Messages API on Amazon Bedrock (SPEC 11):
// `POST {base}/model/{model}/invoke` or `/invoke-with-response-stream`, the
// body without `model` and `stream` and with Bedrock's anthropic_version,
// signed with SigV4 (service bedrock, the provider's region) or sent with a
// Bedrock API key as Bearer (`key`). A streamed answer is AWS event-stream
// frames, read back as Anthropic SSE by bedrockStream.
type bedrockProtocol struct {
	p      *provider
	region string
	creds  aws.CredentialsProvider // nil with a key
	signer *v4.Signer
}

const bedrockAnthropicVersion = `"bedrock-2023-05-31"`

// awsCredentialTimeout bounds the credential lookup at provision time: the
// last link of the default chain asks the instance metadata service, which
// is not there off EC2.
const awsCredentialTimeout = 10 * time.Second

func init() {
	registerProtocol("bedrock", dialectAnthropic, newBedrockProtocol)
}

func newBedrockProtocol(pc *Provider, p *provider) (protocol, error) {
	b := &bedrockProtocol{p: p, region: pc.Region}
	if p.key != "" {
		return b, nil // a Bedrock API key, sent as Bearer
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(pc.Region)}
	chain := "the AWS default chain (environment, shared config and credentials files, web identity, container and instance roles)"
	if pc.AWSProfile != "" {
		opts = append(opts, config.WithSharedConfigProfile(pc.AWSProfile))
		chain = fmt.Sprintf("the AWS shared config profile %q (and the environment before it)", pc.AWSProfile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), awsCredentialTimeout)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("api bedrock: loading AWS config from %s: %w", chain, err)
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("api bedrock: no AWS credentials in %s; or set key to a Bedrock API key", chain)
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		// The error names the providers tried; it carries no secret.
		return nil, fmt.Errorf("api bedrock: no AWS credentials found in %s (or set key to a Bedrock API key): %w", chain, err)
	}
	b.creds = cfg.Credentials // a cache: refreshed before expiry
	b.signer = v4.NewSigner()
	return b, nil
}

func (*bedrockProtocol) String() string { return "bedrock" }

func (*bedrockProtocol) serves(d dialect) bool { return d == dialectAnthropic }

func (*bedrockProtocol) setKey(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }

func (b *bedrockProtocol) prepare(ctx context.Context, up *http.Request, req *llmRequest, model string, body []byte) error {
	set := map[string]json.RawMessage{"anthropic_version": json.RawMessage(bedrockAnthropicVersion)}
	if betas := anthropicBetas(up.Header); len(betas) > 0 {
		set["anthropic_beta"], _ = json.Marshal(betas)
	}
	up.Header.Del("Anthropic-Beta")
	up.Header.Del("Anthropic-Version")
	body, err := cloudBody(body, []string{"model", "stream"}, set)
	if err != nil {
		return err
	}
	op := "/invoke"
	if req.stream {
		op = "/invoke-with-response-stream"
		up.Header.Set("Accept", "application/vnd.amazon.eventstream")
	} else {
		up.Header.Set("Accept", "application/json")
	}
	// Model ids hold ':' (…-v1:0), which AWS escapes in the path it signs.
	if err := b.p.setURL(up, "/model/"+strings.ReplaceAll(url.PathEscape(model), ":", "%3A")+op); err != nil {
		return err
	}
	setBody(up, body)
	if b.creds == nil {
		return nil
	}
	creds, err := b.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("AWS credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	return b.signer.SignHTTP(ctx, creds, up, hex.EncodeToString(sum[:]), "bedrock", b.region, time.Now())
}

// anthropicBetas reads the anthropic-beta header's comma-separated list.
func anthropicBetas(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Anthropic-Beta") {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}

func (*bedrockProtocol) response(resp *http.Response) {
	if resp.StatusCode != http.StatusOK {
		kind, _, _ := strings.Cut(resp.Header.Get("X-Amzn-Errortype"), ":")
		cloudErrorBody(resp, dialectAnthropic, strings.TrimSpace("bedrock "+kind))
		return
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/vnd.amazon.eventstream") {
		return
	}
	resp.Body = newBedrockStream(resp.Body)
	resp.Header.Set("Content-Type", "text/event-stream")
}

// bedrockStream reads AWS event-stream frames and yields the Anthropic SSE
// they carry: each `chunk` event's base64 `bytes` is one Anthropic event
// JSON, written as `event: <its type>` and `data: <the JSON>`. An exception
// frame ends the stream with a *streamFault classed like its HTTP status.
type bedrockStream struct {
	r       io.ReadCloser
	br      *bufio.Reader // r: the decoder's small reads, and what has arrived
	cr      countReader
	dec     *eventstream.Decoder
	payload []byte // the frame payload's buffer, reused
	ev      []byte // the decoded chunk's buffer, reused
	out     []byte // SSE not yet read
	off     int
	err     error
}

// bedrockBatch bounds the SSE one Read decodes from frames already received.
const bedrockBatch = 16 << 10

func newBedrockStream(r io.ReadCloser) *bedrockStream {
	return &bedrockStream{r: r, br: bufio.NewReader(r), dec: eventstream.NewDecoder()}
}

func (s *bedrockStream) Close() error { return s.r.Close() }

// Read returns the SSE of the next frame and of every further frame
// already received whole: the reader gets a burst in one read, and the
// relay flushes it to the client once, as it does for an SSE upstream.
func (s *bedrockStream) Read(p []byte) (int, error) {
	if s.off == len(s.out) {
		s.out, s.off = s.out[:0], 0
		for len(s.out) == 0 && s.err == nil { // a frame may carry nothing for the client
			s.err = s.next()
		}
		for s.err == nil && len(s.out) < bedrockBatch && s.frameReceived() {
			s.err = s.next()
		}
		if len(s.out) == 0 {
			return 0, s.err
		}
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	return n, nil
}

// frameReceived reports whether the next frame is whole in the buffer, so
// decoding it does not wait for the network.
func (s *bedrockStream) frameReceived() bool {
	n := s.br.Buffered()
	if n < 4 {
		return false
	}
	b, _ := s.br.Peek(4)
	return uint64(n) >= uint64(binary.BigEndian.Uint32(b))
}

// next decodes one frame into s.out, or returns the error that ends the stream.
func (s *bedrockStream) next() error {
	s.cr.r, s.cr.n = s.br, 0
	msg, err := s.decode()
	switch {
	case err == nil:
	case errors.Is(err, io.EOF) && s.cr.n == 0:
		return io.EOF // at a frame boundary
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return io.ErrUnexpectedEOF // inside a frame
	default:
		if s.cr.eof { // a truncated payload shows as a checksum error
			return io.ErrUnexpectedEOF
		}
		return fmt.Errorf("bedrock event stream: %w", err)
	}
	switch mt := headerString(msg.Headers, ":message-type"); mt {
	case "exception":
		return bedrockException(headerString(msg.Headers, ":exception-type"), msg.Payload)
	case "error":
		return bedrockException(headerString(msg.Headers, ":error-code"), []byte(`{"message":`+jsonQuote(headerString(msg.Headers, ":error-message"))+`}`))
	case "event", "":
	default:
		return fmt.Errorf("bedrock event stream: unknown message type %q", mt)
	}
	if et := headerString(msg.Headers, ":event-type"); et != "chunk" {
		return nil // not an answer event: nothing for the client
	}
	b64, ok := jsonLookup(msg.Payload, "bytes")
	if !ok || len(b64) < 2 || b64[0] != '"' {
		return &streamFault{classMalformed, "bedrock chunk without bytes"}
	}
	ev := slices.Grow(s.ev[:0], base64.StdEncoding.DecodedLen(len(b64)-2))
	ev = ev[:cap(ev)]
	n, err := base64.StdEncoding.Decode(ev, b64[1:len(b64)-1])
	if err != nil {
		return &streamFault{classMalformed, "bedrock chunk: bytes are not base64"}
	}
	ev = ev[:n]
	s.ev = ev
	var name string
	if t, ok := jsonLookup(ev, "type"); ok {
		var s string
		if json.Unmarshal(t, &s) == nil {
			name = s
		}
	}
	if strings.ContainsAny(name, "\r\n") {
		name = ""
	}
	s.out = appendSSE(s.out, name, ev)
	return nil
}

// appendSSE writes one event; data lines split where the JSON has line ends
// (it has none unless pretty-printed).
func appendSSE(b []byte, name string, data []byte) []byte {
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	for {
		i := strings.IndexAny(string(data), "\r\n")
		b = append(b, "data: "...)
		if i < 0 {
			b = append(b, data...)
			break
		}
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return append(b, "\n\n"...)
}

// decode reads one frame. The SDK's decoder panics on a header value type
// it does not know (checked before the frame's checksum): a malformed
// frame, not a crash.
func (s *bedrockStream) decode() (msg eventstream.Message, err error) {
	defer func() {
		if v := recover(); v != nil {
			msg, err = eventstream.Message{}, &streamFault{classMalformed, fmt.Sprintf("bedrock event stream: malformed frame: %v", v)}
		}
	}()
	msg, err = s.dec.Decode(&s.cr, s.payload[:0])
	if cap(msg.Payload) > cap(s.payload) && cap(msg.Payload) <= bedrockBatch {
		s.payload = msg.Payload[:0] // grown by a larger frame: keep it
	}
	return msg, err
}

// countReader counts the bytes one frame's decoding read, and whether it
// reached the end of the stream.
type countReader struct {
	r   io.Reader
	n   int
	eof bool
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}

func headerString(hs eventstream.Headers, name string) string {
	if v := hs.Get(name); v != nil {
		if s, ok := v.Get().(string); ok {
			return s
		}
	}
	return ""
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// bedrockExceptionClasses map Bedrock's stream exceptions to the class the
// same failure has as an HTTP status (SPEC 11).
var bedrockExceptionClasses = map[string]failClass{
	"throttlingException":           classRateLimited, // 429
	"serviceUnavailableException":   classOverloaded,  // 503
	"modelNotReadyException":        classOverloaded,  // 429/503: not ready yet
	"internalServerException":       classStatus5xx,   // 500
	"modelStreamErrorException":     classStatus5xx,   // 424: the model failed mid-answer
	"modelTimeoutException":         classStatus5xx,   // 408
	"validationException":           classRequest,     // 400
	"accessDeniedException":         classAuth,        // 403
	"resourceNotFoundException":     classModelNotFound,
	"serviceQuotaExceededException": classRateLimited,
}

// bedrockException is the stream fault of an exception frame.
func bedrockException(kind string, payload []byte) error {
	c, ok := bedrockExceptionClasses[kind]
	if !ok {
		// Lower-camel in the stream, Upper-camel as an HTTP error type.
		if kind != "" {
			c, ok = bedrockExceptionClasses[strings.ToLower(kind[:1])+kind[1:]]
		}
		if !ok {
			c = classStatus5xx
		}
	}
	msg := upstreamMessage(payload)
	if m, ok := jsonLookup(payload, "message"); ok {
		var s string
		if json.Unmarshal(m, &s) == nil {
			msg = s
		}
	}
	if kind == "" {
		kind = "exception"
	}
	return &streamFault{c, "bedrock " + kind + ": " + msg}
}
