package cloud

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/anthropic"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// benchBedrockBody is an Anthropic Messages stream request of about size
// bytes, as a client sends it.
func benchBedrockBody(size int) []byte {
	text := strings.Repeat("The sea is wide and the sea is deep. ", max(1, size/37))
	return fmt.Appendf(nil, `{"model":"claude-sonnet","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":%q}]}`, text)
}

// benchBedrockRequest is an upstream request as the engine hands it to
// Prepare: cloudHeader's header (the client's Accept, Anthropic-Version,
// User-Agent), Content-Type and Content-Length set.
func benchBedrockRequest(tb testing.TB, body []byte) *http.Request {
	up, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://bedrock-runtime.us-east-1.amazonaws.com/v1/messages", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	up.Header = http.Header{
		"Accept":            {"application/json"},
		"Anthropic-Version": {"2023-06-01"},
		"User-Agent":        {"Anthropic/Python 0.49.0"},
		"Content-Type":      {"application/json"},
	}
	up.ContentLength = int64(len(body))
	return up
}

// benchBedrock is a Bedrock protocol for the benchmark: signing with static
// credentials behind the SDK's credentials cache (as LoadDefaultConfig
// provides them), or with a Bedrock API key.
func benchBedrock(tb testing.TB, key bool) *BedrockProtocol {
	base, _ := url.Parse("https://bedrock-runtime.us-east-1.amazonaws.com")
	tgt := Target{BaseURL: base, Opts: Options{Region: "us-east-1"}}
	if key {
		tgt.Key = "bedrock-api-key"
		p, err := NewBedrock(tgt)
		if err != nil {
			tb.Fatal(err)
		}
		return p.(*BedrockProtocol)
	}
	creds := aws.NewCredentialsCache(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", Source: "bench"}, nil
	}))
	return &BedrockProtocol{t: tgt, creds: creds, signer: newSigV4("bedrock", tgt.Opts.Region)}
}

// pieceBodies reads a rewrite from its pieces, as the engine's lease does
// (cloud.Bodies), without its lock.
type pieceBodies struct{}

func (pieceBodies) Gather(pieces [][]byte) io.ReadCloser {
	r := make([]io.Reader, len(pieces))
	for i, p := range pieces {
		r[i] = bytes.NewReader(p)
	}
	return io.NopCloser(io.MultiReader(r...))
}

func (pieceBodies) PayloadSums() *PayloadSums { return nil }

// BenchmarkBedrockPrepare is Prepare on a stream request with a small and
// a 150 KB body, parsed as the engine parses it, keyed (Bearer, nothing
// signed) and SigV4-signed: the difference is the signature's cost; and
// signed again by a later attempt of the same request.
func BenchmarkBedrockPrepare(b *testing.B) {
	for _, size := range []int{200, 150 << 10} {
		body := benchBedrockBody(size)
		req := &wire.Request{Dialect: anthropic.Dialect{}, Body: body, Model: "claude-sonnet", Stream: true}
		if err := req.Top.Index(body); err != nil {
			b.Fatal(err)
		}
		for _, name := range []string{"key", "sigv4", "sigv4-again"} {
			b.Run(fmt.Sprintf("%s/%dB", name, len(body)), func(b *testing.B) {
				p := benchBedrock(b, name == "key")
				// sigv4-again: a request's later attempt (a retry, a
				// hedge), whose body's hash the request keeps.
				var bodies Bodies = pieceBodies{}
				if name == "sigv4-again" {
					bodies = &memoBodies{}
				}
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					up := benchBedrockRequest(b, body)
					if err := p.Prepare(context.Background(), up, req, "anthropic.claude-sonnet-4-20250514-v1:0", body, bodies); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkSigV4AgainstSDK signs a 150 KB Bedrock request as the AWS SDK
// does for every attempt it makes (its InvokeModelWithResponseStream
// stack runs ComputePayloadHash, then Signing: the payload's SHA-256,
// then the signature) and as llm_hedge does for a request's first
// attempt; hash-only is the SHA-256 alone. It is what a client calling
// Bedrock directly pays per request, beside the proxy's cost for the same
// bytes: the hash is nearly all of both (docs/clouds.md).
func BenchmarkSigV4AgainstSDK(b *testing.B) {
	body := benchBedrockBody(150 << 10)
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	at := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	request := func() *http.Request {
		up := benchBedrockRequest(b, body)
		up.URL.Path = "/model/anthropic.claude-sonnet-4-20250514-v1:0/invoke-with-response-stream"
		return up
	}
	b.Run("sdk", func(b *testing.B) {
		signer := v4.NewSigner() // one signer, as an SDK client keeps it
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			up := request()
			sum := sha256.Sum256(body)
			if err := signer.SignHTTP(context.Background(), creds, up, hex.EncodeToString(sum[:]), "bedrock", "us-east-1", at); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("llm_hedge", func(b *testing.B) {
		s := newSigV4("bedrock", "us-east-1")
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			up := request()
			sum := sha256.Sum256(body)
			if err := s.sign(up, creds, &sum, at); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("hash-only", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			sha256.Sum256(body)
		}
	})
}
