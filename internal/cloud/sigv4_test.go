package cloud

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// sigV4Case is one request to sign: a URL, the header the engine and
// header_up give it, a body length, credentials and a time.
type sigV4Case struct {
	url    string
	header http.Header
	length int64
	creds  aws.Credentials
	at     time.Time
	region string
}

func (c sigV4Case) request(t *testing.T) *http.Request {
	t.Helper()
	up, err := http.NewRequestWithContext(context.Background(), http.MethodPost, c.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	up.Header = http.Header{}
	for k, v := range c.header {
		up.Header[k] = append([]string(nil), v...)
	}
	up.ContentLength = c.length
	return up
}

// sigV4Cases are the requests of TestSigV4MatchesSDK: every combination
// of the URLs, header sets, credentials, body lengths and regions, at
// times in order across two day boundaries (and back), the one signer of
// each region signing them all in turn, so its derived key of the day is
// reused, and replaced at a date or secret change.
func sigV4Cases() []sigV4Case {
	urls := []string{
		"https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke-with-response-stream",
		"https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/invoke",
		// An inference profile's ARN as one segment: its '/' and ':' escaped.
		"https://bedrock-runtime.eu-west-3.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aeu-west-3%3A123456789012%3Ainference-profile%2Feu.anthropic.claude-v2%3A1/invoke",
		// A base path, the default port (dropped from the Host), a query in no order.
		"https://gateway.example.com:443/aws/bedrock/model/m%3A0/invoke?b=2&a=1&a=0&x=hello+world&y=%2F%20~&z",
		"http://127.0.0.1:80/model/m/invoke?X-Amz-Custom=1",
		"http://127.0.0.1:9876/model/claude%20bench%3A0/invoke-with-response-stream",
		"https://[::1]:443/model/m%3A0/invoke",
		"https://[fe80::1]:8443/model/m-._~%21%24/invoke",
		"https://bedrock-runtime.us-east-1.amazonaws.com",
		"https://host.example/model/%E2%9C%93/invoke?empty=&flag",
	}
	base := http.Header{"Accept": {"application/vnd.amazon.eventstream"}, "Content-Type": {"application/json"}, "User-Agent": {"Anthropic/Python 0.49.0"}}
	with := func(kv ...string) http.Header {
		h := base.Clone()
		for i := 0; i < len(kv); i += 2 {
			h[kv[i]] = append(h[kv[i]], kv[i+1])
		}
		return h
	}
	headers := []http.Header{
		base,
		with("Anthropic-Version", "2023-06-01", "Anthropic-Beta", "a,b"),
		// header_up's: spaces inside and around values, two values, a
		// tab, an empty value, a lower-case key, the headers the SDK
		// leaves unsigned, a stale signature and date.
		with("X-Custom", "  a   b  c ", "X-Custom", "\tsecond\t", "X-Empty", "", "x-lower", "v",
			"X-Amzn-Trace-Id", "Root=1", "Expect", "100-continue", "Authorization", "Bearer stale",
			"X-Amz-Date", "20000101T000000Z", "Content-Length", "999"),
		// An X-Amz-Security-Token of header_up: signed as is without a
		// session token, replaced with one.
		with("X-Amz-Security-Token", "from-header-up"),
		{"Content-Type": {"application/json"}},
		// Two keys that differ in case only, as the SDK merges them
		// (same values, so its map order does not matter).
		with("X-Dup", "same", "x-dup", "same"),
	}
	credsets := []aws.Credentials{
		{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"},
		{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret-two", SessionToken: "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ" + strings.Repeat("Zm9vYmFy", 100)},
		{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "secret-three", SessionToken: " token  with   spaces "},
	}
	day := time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)
	plus5 := time.FixedZone("+05", 5*3600)
	times := []time.Time{
		day.Add(12 * time.Hour),
		day.Add(24*time.Hour - time.Nanosecond), // 23:59:59.999999999 on the 31st
		day.Add(24 * time.Hour),                 // 2027-01-01 00:00:00
		day.Add(24*time.Hour + time.Second),
		day.Add(2 * time.Hour).In(plus5), // 07:00 on the 31st there
		day.Add(-time.Hour).In(plus5),    // the 31st there, the 30th in UTC
		day.Add(48*time.Hour + 59*time.Minute),
	}
	var out []sigV4Case
	for _, at := range times {
		for _, cr := range credsets {
			for _, u := range urls {
				for _, h := range headers {
					for _, n := range []int64{0, 154321} {
						for _, region := range []string{"us-east-1", "ap-southeast-2"} {
							out = append(out, sigV4Case{url: u, header: h, length: n, creds: cr, at: at, region: region})
						}
					}
				}
			}
		}
	}
	return out
}

// The lean signer sets the same headers and makes the same rewrites of the
// request (the query's order, the Host's default port) as the SDK's
// v4.Signer.SignHTTP, for the same inputs and time: Authorization,
// X-Amz-Date and X-Amz-Security-Token byte for byte, and every other
// header (no X-Amz-Content-Sha256 is added by either).
func TestSigV4MatchesSDK(t *testing.T) {
	signers := map[string]*sigV4{}
	cases := sigV4Cases()
	for i, c := range cases {
		s := signers[c.region]
		if s == nil {
			s = newSigV4("bedrock", c.region)
			signers[c.region] = s
		}
		payload := sha256.Sum256(fmt.Appendf(nil, "body %d", i))
		want, got := c.request(t), c.request(t)
		// A new SDK signer each time: its cache of derived keys is per
		// access key id, and two of the credentials share one.
		if err := v4.NewSigner().SignHTTP(context.Background(), c.creds, want, fmt.Sprintf("%x", payload), "bedrock", c.region, c.at); err != nil {
			t.Fatal(err)
		}
		if err := s.sign(got, c.creds, &payload, c.at); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-Sha256"} {
			if !reflect.DeepEqual(got.Header[k], want.Header[k]) {
				t.Fatalf("case %d %+v: %s\n got %q\nwant %q", i, c, k, got.Header[k], want.Header[k])
			}
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Fatalf("case %d %+v: header\n got %q\nwant %q", i, c, got.Header, want.Header)
		}
		if got.URL.String() != want.URL.String() || got.Host != want.Host {
			t.Fatalf("case %d %+v: URL %s host %q, want %s host %q", i, c, got.URL, got.Host, want.URL, want.Host)
		}
	}
	// Every case's time is later than or the same day as the one before,
	// but for the last two (a zone behind UTC, then two days on): the key
	// of each region was derived again at each date and secret change.
	if len(cases) < 2000 {
		t.Fatalf("only %d cases", len(cases))
	}
}

// The derived key is the SDK's for each (secret, date, region): kept while
// they hold, derived again at a date change (and back), and per secret.
func TestSigV4DerivedKeyPerDay(t *testing.T) {
	s := newSigV4("bedrock", "us-east-1")
	k1 := s.derivedKey("secret", []byte("20261231"))
	if s.derivedKey("secret", []byte("20261231")) != k1 {
		t.Fatal("the key of the same secret and date was derived again")
	}
	k2 := s.derivedKey("secret", []byte("20270101"))
	if k2 == k1 || k2.date != "20270101" || k2.ipad == k1.ipad {
		t.Fatal("a new date kept the previous day's key")
	}
	if k3 := s.derivedKey("other", []byte("20270101")); k3 == k2 || k3.ipad == k2.ipad {
		t.Fatal("another secret kept the previous secret's key")
	}
	if k4 := s.derivedKey("secret", []byte("20261231")); k4.ipad != k1.ipad {
		t.Fatal("the key of a date back differs from the one derived before")
	}
}

// A usual Bedrock request (no session token, the engine's header) costs
// the signer no more than its own few allocations: the header values and
// the path's unescaping by net/url.
func TestSigV4Allocations(t *testing.T) {
	s := newSigV4("bedrock", "us-east-1")
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret"}
	u, _ := url.Parse("https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke-with-response-stream")
	var payload [sha256.Size]byte
	at := time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC)
	ups := make([]*http.Request, 0, 200)
	for range cap(ups) {
		h := http.Header{"Accept": {"application/vnd.amazon.eventstream"}, "Content-Type": {"application/json"}, "User-Agent": {"Go-http-client/1.1"}}
		ups = append(ups, &http.Request{Method: http.MethodPost, URL: u, ContentLength: 1234, Header: h})
	}
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		up := ups[i]
		i++
		if err := s.sign(up, creds, &payload, at); err != nil {
			t.Fatal(err)
		}
	})
	// The string and the values slice of the signature's headers, the
	// path unescaped by URL.EscapedPath. (The SDK's signer made 49.)
	if allocs > 3 {
		t.Fatalf("%.1f allocations per signature, want at most 3", allocs)
	}
}

// sigV4HeaderBytes bounds what signing adds to a request's header as
// net/http writes it, with and without a session token, so the provider's
// write buffer (AuthHeaderBytes) holds the whole header of a signed request.
func TestSigV4HeaderBytesBound(t *testing.T) {
	for _, c := range sigV4Cases()[:2*10*6*2*2] { // the first time, two credentials
		if c.header.Get("X-Custom") != "" {
			continue // header_up's long list of signed headers
		}
		up := c.request(t)
		var before, after strings.Builder
		up.Header.Write(&before)
		payload := sha256.Sum256(nil)
		if err := newSigV4("bedrock", c.region).sign(up, c.creds, &payload, c.at); err != nil {
			t.Fatal(err)
		}
		up.Header.Write(&after)
		added, bound := after.Len()-before.Len(), sigV4HeaderBytes(c.creds, c.region)
		if added > bound || bound > added+160 {
			t.Fatalf("%+v: the signature adds %d bytes to the header, bound %d", c, added, bound)
		}
	}
}
