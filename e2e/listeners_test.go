package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// listenSockets returns the inodes of the TCP sockets listening on port
// at any address (Caddy binds a site's port on every interface, so
// /proc/net/tcp6 holds it), or nil where the kernel does not say.
func listenSockets(port int) map[string]bool {
	var out map[string]bool
	suffix := fmt.Sprintf(":%04X", port)
	for _, path := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if out == nil {
			out = map[string]bool{}
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) > 9 && strings.HasSuffix(fs[1], suffix) && fs[3] == "0A" {
				out[fs[9]] = true
			}
		}
		f.Close()
	}
	return out
}

// waitListenersReplaced waits until every socket of before has stopped
// listening on port and another listens there: a /load or a failed one
// has closed the old server's listener (SO_REUSEPORT: until then, a
// connection may land in its accept queue and be reset). Without
// /proc/net/tcp (before empty) it waits a pause instead.
func waitListenersReplaced(t testing.TB, port int, before map[string]bool) {
	t.Helper()
	if len(before) == 0 { // no /proc/net here: a pause instead
		time.Sleep(100 * time.Millisecond)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		now := listenSockets(port)
		replaced := len(now) > 0
		for ino := range now {
			if before[ino] {
				replaced = false
			}
		}
		if replaced {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %d: listening sockets %v, before the reload %v: the old listener was not replaced in 10s", port, keys(now), keys(before))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ports returns the site's and the admin endpoint's ports of p.
func (p *proxy) ports() (site, admin int) {
	site, _ = strconv.Atoi(strings.TrimPrefix(p.URL, "http://127.0.0.1:"))
	admin, _ = strconv.Atoi(strings.TrimPrefix(p.AdminURL, "http://127.0.0.1:"))
	return site, admin
}
