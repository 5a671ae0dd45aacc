package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/anthropic"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// bedrockProtocol is Anthropic's Messages API on Amazon Bedrock (SPEC 11):
// `POST {base}/model/{model}/invoke` or `/invoke-with-response-stream`, the
// body without `model` and `stream` and with Bedrock's anthropic_version,
// signed with SigV4 (service bedrock, the provider's region) or sent with a
// Bedrock API key as Bearer (`key`). A streamed answer is AWS event-stream
// frames, read back as Anthropic SSE by bedrockStream.
type BedrockProtocol struct {
	t      Target
	creds  aws.CredentialsProvider // nil with a key
	signer *sigV4
	Chain  string // where the credentials come from, for the log
	// authBytes is what the signature adds to a request's header, as the
	// provisioned credentials sign (AuthHeaderBytes).
	authBytes int
}

const BedrockAnthropicVersion = `"bedrock-2023-05-31"`

// awsCredentialTimeout bounds the credential lookup at provision time: the
// last link of the default chain asks the instance metadata service, which
// is not there off EC2.
const awsCredentialTimeout = 10 * time.Second

func NewBedrock(t Target) (Protocol, error) {
	b := &BedrockProtocol{t: t, Chain: "the provider's key (a Bedrock API key)"}
	if t.Key != "" {
		return b, nil // a Bedrock API key, sent as Bearer
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(t.Opts.Region)}
	chain := "the AWS default chain (environment, shared config and credentials files, web identity, container and instance roles)"
	if t.Opts.AWSProfile != "" {
		opts = append(opts, config.WithSharedConfigProfile(t.Opts.AWSProfile))
		chain = fmt.Sprintf("the AWS shared config profile %q (and the environment before it)", t.Opts.AWSProfile)
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
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		// The error names the providers tried; it carries no secret.
		return nil, fmt.Errorf("api bedrock: no AWS credentials found in %s (or set key to a Bedrock API key): %w", chain, err)
	}
	b.authBytes = sigV4HeaderBytes(creds, t.Opts.Region)
	b.creds = cfg.Credentials // a cache: refreshed before expiry
	b.signer = newSigV4("bedrock", t.Opts.Region)
	b.Chain = chain
	return b, nil
}

func (*BedrockProtocol) String() string { return "bedrock" }

// AuthHeaderBytes is what SigV4 adds to the header of a request: its
// Authorization, X-Amz-Date and, with a session token, X-Amz-Security-
// Token (about 300 bytes, 1.5-2 KiB with a token); 0 with a key.
func (b *BedrockProtocol) AuthHeaderBytes() int { return b.authBytes }

func (*BedrockProtocol) Serves(d wire.Dialect) bool { return isDialect[anthropic.Dialect](d) }

func (*BedrockProtocol) SetKey(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }

// DropsModel: Bedrock's body has no model (ModelDropper).
func (*BedrockProtocol) DropsModel(wire.Dialect) bool { return true }

func (b *BedrockProtocol) Prepare(ctx context.Context, up *http.Request, req *wire.Request, model string, body []byte, bodies Bodies) error {
	set := map[string]json.RawMessage{"anthropic_version": json.RawMessage(BedrockAnthropicVersion)}
	if betas := anthropicBetas(up.Header); len(betas) > 0 {
		set["anthropic_beta"], _ = json.Marshal(betas)
	}
	up.Header.Del("Anthropic-Beta")
	up.Header.Del("Anthropic-Version")
	pieces, n, err := cloudPieces(body, &req.Top, []string{"model", "stream"}, set)
	if err != nil {
		return err
	}
	op := "/invoke"
	if req.Stream {
		op = "/invoke-with-response-stream"
		up.Header.Set("Accept", "application/vnd.amazon.eventstream")
	} else {
		up.Header.Set("Accept", "application/json")
	}
	seg, err := ModelSegment(model)
	if err != nil {
		return err
	}
	// Model ids hold ':' (…-v1:0), which AWS escapes in the path it signs.
	if err := b.t.setURL(up, "/model/"+strings.ReplaceAll(seg, ":", "%3A")+op); err != nil {
		return err
	}
	setBody(up, pieces, n, bodies)
	if b.creds == nil {
		return nil
	}
	creds, err := b.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("AWS credentials: %w", err)
	}
	var sums *PayloadSums
	if bodies != nil {
		sums = bodies.PayloadSums()
	}
	sum := sums.of(pieces)
	return b.signer.sign(up, creds, &sum, time.Now())
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

func (b *BedrockProtocol) Response(resp *http.Response) Verdict {
	if resp.StatusCode != http.StatusOK {
		kind, _, _ := strings.Cut(resp.Header.Get("X-Amzn-Errortype"), ":")
		kind = strings.TrimSpace(kind)
		msg := cloudErrorBody(resp, anthropic.Dialect{}, strings.TrimSpace("bedrock "+kind))
		return b.Verdict(kind, msg)
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/vnd.amazon.eventstream") {
		resp.Body = NewBedrockStream(resp.Body)
		resp.Header.Set("Content-Type", "text/event-stream")
	}
	return Verdict{}
}

// bedrockCredentialErrors are the error types with which AWS refuses the
// caller's credential itself: the proxy's, since no client header is signed
// (cloudClientHeaders).
var bedrockCredentialErrors = []string{
	"UnrecognizedClientException", "InvalidSignatureException", "ExpiredTokenException",
	"IncompleteSignatureException", "MissingAuthenticationTokenException",
}

// bedrockModelDenied reports whether an AccessDeniedException's message
// (lower case) is about the model, not the caller: "You don't have access
// to the model with the specified model ID.", and the AWS Marketplace
// subscription a third-party model needs ("Model access is denied due to
// ... to enable access to this model", "Your account is not authorized to
// access this model because your AWS Marketplace subscription ... is still
// being processed"). "Your account is not authorized to invoke this API
// operation." and an IAM policy's denial are the caller's.
func bedrockModelDenied(msg string) bool {
	for _, s := range []string{"access to the model", "access to this model", "model access is denied"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// verdict reads a Bedrock error's type and message (SPEC 15). An
// AccessDeniedException "You don't have access to the model with the
// specified model ID." is about that model for this account: it cools the
// model on this provider, as a missing model does, and says nothing of the
// provider's health. A refused credential is the provider's failure and
// the operator's to fix. Any other answer classifies by its status.
func (b *BedrockProtocol) Verdict(kind, msg string) Verdict {
	switch {
	case slices.Contains(bedrockCredentialErrors, kind):
		return Verdict{Class: wire.ClassAuth, Credential: b.Chain}
	case kind == "AccessDeniedException" && bedrockModelDenied(strings.ToLower(msg)):
		return Verdict{Class: wire.ClassModelNotFound}
	case kind == "ValidationException" && (strings.Contains(msg, "model identifier is invalid") || strings.Contains(msg, "with on-demand throughput")):
		// The model id (after the provider's rewrite) names no model
		// in this region, or one served here only through an inference
		// profile: this provider's, not the request's; another serves it.
		return Verdict{Class: wire.ClassModelNotFound}
	case kind == "ModelErrorException", kind == "ServiceQuotaExceededException":
		// Documented as 424 and 400, statuses that read as the request's
		// fault: the model failed, the account's quota ran out. Classed
		// as the same failure in a stream's exception frame.
		return Verdict{Class: bedrockExceptionClasses[strings.ToLower(kind[:1])+kind[1:]]}
	}
	return Verdict{}
}
