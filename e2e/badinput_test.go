package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Bad input as a client sends it, black-box (SPEC 6, 10, 15): the answer
// is a fitting status in the client's dialect, bounded, and the request
// log line says what the client got.

// badInputPost sends body to path on the proxy and returns the status and
// the body.
func badInputPost(t *testing.T, p *proxy, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), http.MethodPost, p.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-goog-api-key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, readAll(resp)
}

// badInputGeminiError checks that body is a Gemini error object with the
// given code and returns its message.
func badInputGeminiError(t *testing.T, body string, code int, status string) string {
	t.Helper()
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != code || e.Error.Status != status || e.Error.Message == "" {
		t.Fatalf("not a Gemini %d %s error: %v: %.300s", code, status, err, body)
	}
	return e.Error.Message
}

// A Gemini model is a path segment, checked as the body's model is (SPEC
// 15, docs/security.md "One reading of the body"): at most 256 bytes, no
// control characters, and the error never echoes the name, so neither
// the answer nor the request log line grows with it.
func TestBadInputGeminiPathModelNotEchoed(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("only", up))
	bad := map[string]string{
		"16 KB name":    "long-" + strings.Repeat("a", 16<<10),
		"257 bytes":     "long-" + strings.Repeat("b", 252),
		"NUL":           "long-%00x",
		"escape":        "long-%1b[2J",
		"newline":       "long-x%0AINFO forged",
		"invalid UTF-8": "long-%ff%fe",
		"colon":         "long-a:b",
	}
	refused := 0
	for name, m := range bad {
		for _, method := range []string{":generateContent", ":streamGenerateContent?alt=sse"} {
			status, resp := badInputPost(t, p, "/v1beta/models/"+m+method, `{"contents":[{"parts":[{"text":"hi"}]}]}`)
			if status != http.StatusBadRequest {
				t.Fatalf("%s%s: status %d, want 400: %.300s", name, method, status, resp)
			}
			if len(resp) > 1024 {
				t.Fatalf("%s%s: the error answer is %d bytes: it echoes the name", name, method, len(resp))
			}
			msg := badInputGeminiError(t, resp, http.StatusBadRequest, "INVALID_ARGUMENT")
			if strings.Contains(msg, "long-") || !strings.Contains(msg, "model") {
				t.Fatalf("%s%s: message %q echoes the name or does not say what is wrong", name, method, msg)
			}
			refused++
		}
	}
	// The bound is inclusive: a 256-byte name is served as is.
	ok256 := "ok-" + strings.Repeat("c", 253)
	if status, resp := badInputPost(t, p, "/v1beta/models/"+ok256+":generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`); status != http.StatusOK {
		t.Fatalf("256-byte name: status %d: %.300s", status, resp)
	}
	if n := len(up.Requests()); n != 1 {
		t.Fatalf("the provider got %d requests; want only the one with the 256-byte name", n)
	}
	for _, l := range streamLogLines(t, p, refused+1) {
		b, _ := json.Marshal(l)
		if len(b) > 4<<10 || strings.Contains(string(b), "long-") {
			t.Fatalf("a request log line is %d bytes or names a refused model: %.300s", len(b), b)
		}
	}
	if fi, err := os.Stat(p.LogFile); err != nil || fi.Size() > 32<<10 {
		t.Fatalf("log file: %v, %d bytes; a 16 KB name was logged", err, fi.Size())
	}
}

// A model no configured provider serves is answered 404 in the client's
// dialect, and the request log line records that 404 (SPEC 7: the status
// the client got), not 0.
func TestBadInputUnservedModelLogsStatus(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("claude-only", up, "models claude-*"))
	status, resp := badInputPost(t, p, "/v1beta/models/gemini-unknown:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`)
	if status != http.StatusNotFound {
		t.Fatalf("status %d, want 404: %.300s", status, resp)
	}
	badInputGeminiError(t, resp, http.StatusNotFound, "NOT_FOUND")
	lines := streamLogLines(t, p, 1)
	if got, _ := lines[0]["status"].(float64); got != http.StatusNotFound || lines[0]["outcome"] != "client_error" {
		t.Fatalf("log line status %v outcome %v, want 404 client_error: %v", lines[0]["status"], lines[0]["outcome"], lines[0])
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("provider saw %d requests", n)
	}
}

// Another method on a completion path is a 405 with Allow: POST in the
// client's dialect, refused as a forwarded call is: one request log line
// (method, bounded path, status 405), and the answer does not echo the
// path.
func TestBadInputCompletionPathMethod(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("only", up))
	long := "/v1beta/models/g" + strings.Repeat("g", 8<<10) + ":streamGenerateContent"
	cases := []struct{ method, path, shape string }{
		{http.MethodGet, "/v1/messages", `"type":"error"`},
		{http.MethodPut, "/v1/chat/completions", `"type":"invalid_request_error"`},
		{http.MethodDelete, "/v1/responses", `"type":"invalid_request_error"`},
		{http.MethodGet, long, `"status":"FAILED_PRECONDITION"`},
		{http.MethodHead, "/v1beta/models/gemini-x:generateContent", ""},
	}
	for _, tc := range cases {
		req, _ := http.NewRequestWithContext(ctxTimeout(t, 10*time.Second), tc.method, p.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
			t.Fatalf("%s %.40s: status %d Allow %q, want 405 POST", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"))
		}
		if len(body) > 512 || !strings.Contains(body, tc.shape) || tc.method != http.MethodHead && !strings.Contains(body, "use POST") {
			t.Fatalf("%s %.40s: %d bytes, not the dialect's 405: %.300s", tc.method, tc.path, len(body), body)
		}
	}
	lines := streamLogLines(t, p, len(cases))
	for i, l := range lines {
		b, _ := json.Marshal(l)
		if l["status"] != float64(http.StatusMethodNotAllowed) || l["method"] != cases[i].method || len(b) > 4<<10 {
			t.Fatalf("log line %d: %d bytes, want status 405 and method %s: %.400s", i, len(b), cases[i].method, b)
		}
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("provider saw %d requests", n)
	}
}

// A client that sends Expect: 100-continue waits for the proxy's word
// before it sends the body. A refusal that never reads the body (413 by
// Content-Length, an unknown path) must reach it at once: under Caddy's
// read_body_idle (default 1m) net/http cannot see the 100-continue and
// would wait for the unsent body to drain it first, so the client got its
// 413 only when the idle timeout fired.
func TestBadInputExpectContinueRefusedAtOnce(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("only", up)+"max_body 4KiB")
	addr := strings.TrimPrefix(p.URL, "http://")
	for _, tc := range []struct {
		path   string
		status int
		shape  string
	}{
		{"/v1/messages", http.StatusRequestEntityTooLarge, `"type":"request_too_large"`},
		{"/v1/no-such-endpoint", http.StatusNotFound, `"error":{`},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		// Only a hang trips this deadline: the answer needs no body.
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nx-api-key: k\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", tc.path, addr, 1<<20)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: no answer before the body was sent: %v", tc.path, err)
		}
		body := readAll(resp)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.shape) {
			t.Fatalf("%s: status %d, want %d in the dialect: %.300s", tc.path, resp.StatusCode, tc.status, body)
		}
	}
	if n := len(up.Requests()); n != 0 {
		t.Fatalf("provider saw %d requests", n)
	}
}
