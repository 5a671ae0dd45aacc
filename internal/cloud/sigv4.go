package cloud

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// sigV4 signs an upstream request with AWS Signature Version 4 in a
// header, as the SDK's v4.Signer.SignHTTP does (the same X-Amz-Date,
// X-Amz-Security-Token and Authorization, and the same rewrites of the
// request: the query in canonical order, a default port dropped from the
// Host), at a fraction of its cost: the canonical request is built in one
// buffer, no header map or string per header is made, the path is escaped
// without fmt, and the derived signing key of the day is one atomic load
// (no lock), recomputed when the secret or the date changes.
// TestSigV4MatchesSDK holds it to the SDK's bytes. A request it does not
// take to be the usual one (an opaque URL, two header keys that differ only
// in case) is signed by the SDK's signer.
type sigV4 struct {
	service, region string
	scope           string // "/{region}/{service}/aws4_request"
	key             atomic.Pointer[sigV4Key]
}

// sigV4Key is the derived signing key of one secret and UTC date, as the
// two HMAC pads its signatures start from.
type sigV4Key struct {
	secret, date string
	ipad, opad   [sha256.BlockSize]byte
}

func newSigV4(service, region string) *sigV4 {
	return &sigV4{service: service, region: region, scope: "/" + region + "/" + service + "/aws4_request"}
}

const sigV4Algorithm = "AWS4-HMAC-SHA256"

// sigV4HeaderBytes is an upper bound of what a signature with creds adds
// to an HTTP/1.1 request's header: "Authorization: " with the algorithm,
// credential scope, a signed-headers list of the usual length (128 bytes)
// and the signature; "X-Amz-Date: "; and "X-Amz-Security-Token: " with
// the session token.
func sigV4HeaderBytes(creds aws.Credentials, region string) int {
	n := len("Authorization: "+sigV4Algorithm+" Credential=/20060102//bedrock/aws4_request, SignedHeaders=, Signature=\r\n") +
		len(creds.AccessKeyID) + len(region) + 128 + 2*sha256.Size + len("X-Amz-Date: 20060102T150405Z\r\n")
	if creds.SessionToken != "" {
		n += len("X-Amz-Security-Token: \r\n") + len(creds.SessionToken)
	}
	return n
}

// sigV4Header is one header to sign: its lower-case name and its values.
type sigV4Header struct {
	name string
	vals []string
	own  bool // host, x-amz-date or content-length: the signer's value
}

// sigV4Ignored are the headers the SDK leaves unsigned (v4Internal's
// IgnoredHeaders), matched as it does: the map key exactly.
func sigV4Ignored(k string) bool {
	switch k {
	case "Authorization", "User-Agent", "X-Amzn-Trace-Id", "Expect", "Transfer-Encoding":
		return true
	}
	return false
}

// sigV4Lower is a header key in lower case, without an allocation for
// the ones a Bedrock request carries.
func sigV4Lower(k string) string {
	switch k {
	case "Accept":
		return "accept"
	case "Content-Type":
		return "content-type"
	case "X-Amz-Date":
		return "x-amz-date"
	case "X-Amz-Security-Token":
		return "x-amz-security-token"
	case "Anthropic-Version":
		return "anthropic-version"
	case "Anthropic-Beta":
		return "anthropic-beta"
	}
	return strings.ToLower(k)
}

// sign sets up's X-Amz-Date, X-Amz-Security-Token (with a session token)
// and Authorization for the payload's SHA-256 at now.
func (s *sigV4) sign(up *http.Request, creds aws.Credentials, payload *[sha256.Size]byte, now time.Time) error {
	if up.URL.Opaque != "" {
		return s.signSDK(up, creds, payload, now)
	}
	// The headers to sign: the request's, X-Amz-Date and the session
	// token as they will be set, the Host and Content-Length net/http sends.
	h := up.Header
	token := creds.SessionToken
	var hdrArr [12]sigV4Header
	hdrs := append(hdrArr[:0], sigV4Header{name: "host", own: true}, sigV4Header{name: "x-amz-date", own: true})
	if up.ContentLength > 0 {
		hdrs = append(hdrs, sigV4Header{name: "content-length", own: true})
	}
	if token != "" {
		hdrs = append(hdrs, sigV4Header{name: "x-amz-security-token", own: true})
	}
	for k, v := range h {
		if sigV4Ignored(k) || k == "X-Amz-Date" || (token != "" && k == "X-Amz-Security-Token") || strings.EqualFold(k, "content-length") {
			continue
		}
		hdrs = append(hdrs, sigV4Header{name: sigV4Lower(k), vals: v})
	}
	slices.SortFunc(hdrs, func(a, b sigV4Header) int { return strings.Compare(a.name, b.name) })
	for i := 1; i < len(hdrs); i++ {
		if hdrs[i].name == hdrs[i-1].name {
			// Two keys differ in case only: the SDK merges them in
			// its map's order; let it sign such a request.
			return s.signSDK(up, creds, payload, now)
		}
	}

	var stamp [16]byte // 20060102T150405Z
	amzDate := appendAmzDate(stamp[:0], now.UTC())
	if up.URL.RawQuery != "" {
		q := up.URL.Query()
		for k := range q {
			sort.Strings(q[k])
		}
		up.URL.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	}
	sanitizeHostForHeader(up)
	host := up.URL.Host
	if up.Host != "" {
		host = up.Host
	}

	var bufArr [1024]byte
	buf := append(bufArr[:0], up.Method...)
	buf = append(buf, '\n')
	buf = appendAmzEscapedPath(buf, up.URL.EscapedPath())
	buf = append(buf, '\n')
	buf = append(buf, up.URL.RawQuery...)
	buf = append(buf, '\n')
	for _, hd := range hdrs {
		buf = append(buf, hd.name...)
		buf = append(buf, ':')
		switch {
		case !hd.own:
		case hd.name == "host":
			buf = append(buf, stripExcessSpaces(host)...)
		case hd.name == "x-amz-date":
			buf = append(buf, amzDate...)
		case hd.name == "x-amz-security-token":
			buf = append(buf, strings.TrimSpace(stripExcessSpaces(token))...)
		default: // content-length
			buf = strconv.AppendInt(buf, up.ContentLength, 10)
		}
		if !hd.own {
			for j, v := range hd.vals {
				if j > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, strings.TrimSpace(stripExcessSpaces(v))...)
			}
		}
		buf = append(buf, '\n')
	}
	buf = append(buf, '\n')
	signedStart := len(buf)
	for i, hd := range hdrs {
		if i > 0 {
			buf = append(buf, ';')
		}
		buf = append(buf, hd.name...)
	}
	signedEnd := len(buf)
	buf = append(buf, '\n')
	buf = hex.AppendEncode(buf, payload[:])
	canonical := sha256.Sum256(buf)

	key := s.derivedKey(creds.SecretAccessKey, amzDate[:8])
	var stsArr [320]byte
	sts := append(stsArr[:0], key.ipad[:]...)
	sts = append(sts, sigV4Algorithm+"\n"...)
	sts = append(sts, amzDate...)
	sts = append(sts, '\n')
	sts = append(sts, amzDate[:8]...)
	sts = append(sts, s.scope...)
	sts = append(sts, '\n')
	sts = hex.AppendEncode(sts, canonical[:])
	inner := sha256.Sum256(sts)
	var outerArr [sha256.BlockSize + sha256.Size]byte
	copy(outerArr[:], key.opad[:])
	copy(outerArr[sha256.BlockSize:], inner[:])
	sig := sha256.Sum256(outerArr[:])

	// X-Amz-Date and Authorization go after the canonical request, in
	// the same buffer, and become one string.
	a := len(buf)
	buf = append(buf, amzDate...)
	buf = append(buf, sigV4Algorithm+" Credential="...)
	buf = append(buf, creds.AccessKeyID...)
	buf = append(buf, '/')
	buf = append(buf, amzDate[:8]...)
	buf = append(buf, s.scope...)
	buf = append(buf, ", SignedHeaders="...)
	buf = append(buf, buf[signedStart:signedEnd]...)
	buf = append(buf, ", Signature="...)
	buf = hex.AppendEncode(buf, sig[:])
	// One string holds X-Amz-Date's value and Authorization's, one
	// slice the header's values of both and of X-Amz-Security-Token.
	both := string(buf[a:])
	vals := make([]string, 3)
	vals[0], vals[1], vals[2] = both[:len(amzDate)], both[len(amzDate):], token
	h["X-Amz-Date"], h["Authorization"] = vals[0:1:1], vals[1:2:2]
	if token != "" {
		h["X-Amz-Security-Token"] = vals[2:3:3]
	}
	return nil
}

// signSDK signs with the SDK's signer: a new one, whose cache of derived
// keys (per access key id, not per secret) cannot serve a stale key.
func (s *sigV4) signSDK(up *http.Request, creds aws.Credentials, payload *[sha256.Size]byte, now time.Time) error {
	return v4.NewSigner().SignHTTP(up.Context(), creds, up, hex.EncodeToString(payload[:]), s.service, s.region, now)
}

// derivedKey is the signing key of secret on date (20060102): the cached
// one while both are the same, else derived and cached.
func (s *sigV4) derivedKey(secret string, date []byte) *sigV4Key {
	if k := s.key.Load(); k != nil && k.date == string(date) && k.secret == secret {
		return k
	}
	mac := func(key []byte, data string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(data))
		return m.Sum(nil)
	}
	k := &sigV4Key{secret: secret, date: string(date)}
	dk := mac(mac(mac(mac([]byte("AWS4"+secret), k.date), s.region), s.service), "aws4_request")
	for i := range k.ipad {
		k.ipad[i], k.opad[i] = 0x36, 0x5c
	}
	for i, c := range dk {
		k.ipad[i] ^= c
		k.opad[i] ^= c
	}
	s.key.Store(k)
	return k
}

// appendAmzDate appends t (UTC) as 20060102T150405Z.
func appendAmzDate(b []byte, t time.Time) []byte {
	y, mo, d := t.Date()
	hh, mm, ss := t.Clock()
	if y < 0 || y > 9999 {
		return t.AppendFormat(b, "20060102T150405Z")
	}
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10))
	for _, n := range [...]int{int(mo), d} {
		b = append(b, byte('0'+n/10), byte('0'+n%10))
	}
	b = append(b, 'T')
	for _, n := range [...]int{hh, mm, ss} {
		b = append(b, byte('0'+n/10), byte('0'+n%10))
	}
	return append(b, 'Z')
}

// appendAmzEscapedPath appends the escaped path as the SDK signs it
// (httpbinding.EscapePath without escaping '/'): every byte but the
// unreserved ones and '/' percent-encoded, so an escape is escaped again.
// An empty path is "/".
func appendAmzEscapedPath(b []byte, path string) []byte {
	if path == "" {
		return append(b, '/')
	}
	const hexUpper = "0123456789ABCDEF"
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~', c == '/':
			b = append(b, c)
		default:
			b = append(b, '%', hexUpper[c>>4], hexUpper[c&15])
		}
	}
	return b
}

// sanitizeHostForHeader drops a default port from the request's Host, as
// the SDK does before signing (v4Internal.SanitizeHostForHeader).
func sanitizeHostForHeader(r *http.Request) {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	colon := strings.IndexByte(host, ':')
	if colon < 0 {
		return
	}
	var port string
	if i := strings.Index(host, "]:"); i >= 0 {
		port = host[i+len("]:"):]
	} else if strings.Contains(host, "]") {
		return
	} else {
		port = host[colon+1:]
	}
	scheme := strings.ToLower(r.URL.Scheme)
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		if i := strings.IndexByte(host, ']'); i >= 0 {
			r.Host = strings.TrimPrefix(host[:i], "[")
		} else {
			r.Host = host[:colon]
		}
	}
}

// stripExcessSpaces trims the spaces at both ends of str and turns every
// run of spaces inside it into one, as the SDK does with a header value
// (v4Internal.StripExcessSpaces): a string without a double space is
// sliced, not copied.
func stripExcessSpaces(str string) string {
	str = strings.Trim(str, " ")
	j := strings.Index(str, "  ")
	if j < 0 {
		return str
	}
	buf := []byte(str)
	m, spaces := j, 0
	for k := j; k < len(buf); k++ {
		if buf[k] == ' ' {
			if spaces == 0 {
				buf[m] = buf[k]
				m++
			}
			spaces++
		} else {
			spaces = 0
			buf[m] = buf[k]
			m++
		}
	}
	return string(buf[:m])
}
