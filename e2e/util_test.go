package e2e

import (
	"io"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
)

func caddyDur(d time.Duration) caddy.Duration { return caddy.Duration(d) }

func readAll(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
