package cloud

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/anthropic"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// memoBodies is a request's Bodies keeping its PayloadSums, as the
// engine's lease does.
type memoBodies struct {
	pieceBodies
	sums PayloadSums
}

func (m *memoBodies) PayloadSums() *PayloadSums { return &m.sums }

// checkSigned reads up's body and checks its signature against one made
// anew over the bytes read, at the same time (the signer is the SDK's to
// the byte: TestSigV4MatchesSDK), as Bedrock would.
func checkSigned(t *testing.T, p *BedrockProtocol, up *http.Request, creds aws.Credentials) []byte {
	t.Helper()
	body, err := io.ReadAll(up.Body)
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse("20060102T150405Z", up.Header.Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	check := up.Clone(context.Background())
	sum := sha256.Sum256(body)
	if err := p.signer.sign(check, creds, &sum, at); err != nil {
		t.Fatal(err)
	}
	if got, want := up.Header.Get("Authorization"), check.Header.Get("Authorization"); got != want {
		t.Errorf("signature %q, want %q over the %d bytes sent", got, want, len(body))
	}
	return body
}

// A request's attempts on Bedrock sign its body's hash made once: the
// retry, the hedge and the other region each send the same rewrite and
// sign it correctly; a rewrite that differs (another anthropic-beta) is
// hashed anew, and another request hashes its own.
func TestPayloadSumsOncePerRequest(t *testing.T) {
	p := benchBedrock(t, false)
	creds, err := p.creds.Retrieve(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	body := benchBedrockBody(150 << 10)
	req := &wire.Request{Dialect: anthropic.Dialect{}, Body: body, Model: "claude-sonnet", Stream: true}
	if err := req.Top.Index(body); err != nil {
		t.Fatal(err)
	}
	attempt := func(bodies Bodies, beta string) []byte {
		up := benchBedrockRequest(t, body)
		if beta != "" {
			up.Header.Set("Anthropic-Beta", beta)
		}
		if err := p.Prepare(context.Background(), up, req, "anthropic.claude-sonnet-4-20250514-v1:0", body, bodies); err != nil {
			t.Fatal(err)
		}
		return checkSigned(t, p, up, creds)
	}
	one := &memoBodies{}
	first := attempt(one, "")
	for range 3 {
		if again := attempt(one, ""); !bytes.Equal(again, first) {
			t.Fatalf("a later attempt sent another body")
		}
	}
	if one.sums.hashes != 1 {
		t.Errorf("four attempts of one request hashed the body %d times, want 1", one.sums.hashes)
	}
	beta := attempt(one, "context-1m-2025-08-07")
	if bytes.Equal(beta, first) || !bytes.Contains(beta, []byte(`"anthropic_beta":["context-1m-2025-08-07"]`)) {
		t.Fatalf("the beta's rewrite: %.80q…", beta[len(beta)-80:])
	}
	if one.sums.hashes != 2 {
		t.Errorf("a different rewrite: %d hashes, want 2", one.sums.hashes)
	}
	other := &memoBodies{}
	attempt(other, "")
	if other.sums.hashes != 1 {
		t.Errorf("another request: %d hashes, want its own 1", other.sums.hashes)
	}
	attempt(nil, "") // no Bodies (a small body, not leased): hashed, signed
}

func TestSamePieces(t *testing.T) {
	body := []byte(`{"a":1,"b":2}`)
	tail := []byte(`,"v":3}`)
	for _, c := range []struct {
		a, b [][]byte
		want bool
	}{
		{[][]byte{body[:6], tail}, [][]byte{body[:6], []byte(`,"v":3}`)}, true},  // the tail made anew
		{[][]byte{body[:6], tail}, [][]byte{[]byte(`{"a":1`), tail}, true},       // equal bytes elsewhere
		{[][]byte{body[:6], tail}, [][]byte{body[:7], tail}, false},              // same start, longer
		{[][]byte{body[:6], tail}, [][]byte{body[:6], []byte(`,"v":4}`)}, false}, // another value
		{[][]byte{body[:6], tail}, [][]byte{body[:6], tail, []byte(`}`)}, false}, // another count
		{[][]byte{body[:6], tail}, [][]byte{[]byte(`{"a":2`), tail}, false},      // another run
		{nil, nil, false}, // nothing hashed yet
		{[][]byte{{}, tail}, [][]byte{{}, tail}, true}, // an empty piece
	} {
		if got := samePieces(c.a, c.b); got != c.want {
			t.Errorf("samePieces(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// Attempts at once (a hedge) share the request's PayloadSums: each gets
// the body's hash, whichever hashed it (run under -race).
func TestPayloadSumsAttemptsAtOnce(t *testing.T) {
	body := benchBedrockBody(64 << 10)
	pieces := [][]byte{body[:len(body)-1], []byte(`,"anthropic_version":"bedrock-2023-05-31"}`)}
	want := sha256.Sum256(bytes.Join(pieces, nil))
	var sums PayloadSums
	var wg sync.WaitGroup
	got := make([][sha256.Size]byte, 4)
	for i := range got {
		wg.Go(func() {
			// Each attempt makes its own tail, as Prepare does.
			own := [][]byte{pieces[0], bytes.Clone(pieces[1])}
			got[i] = sums.of(own)
		})
	}
	wg.Wait()
	for i, g := range got {
		if g != want {
			t.Errorf("attempt %d: a hash of other bytes", i)
		}
	}
	if sums.hashes < 1 || sums.hashes > len(got) {
		t.Errorf("%d hashes for %d attempts", sums.hashes, len(got))
	}
	before := sums.hashes
	if again := sums.of(pieces); again != want || sums.hashes != before {
		t.Errorf("a later attempt: %d hashes after %d, or another hash", sums.hashes, before)
	}
}
