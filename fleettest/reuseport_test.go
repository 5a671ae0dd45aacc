package fleettest

import (
	"os"
	"strings"
	"testing"
)

// migrateReq is Linux's net.ipv4.tcp_migrate_req (5.14 and later).
const migrateReq = "/proc/sys/net/ipv4/tcp_migrate_req"

// migrateQueuedConnections keeps a reload from resetting queued connections, as docs/fleet.md tells
// operators to. Caddy gives each config its own SO_REUSEPORT socket on the
// port; the kernel spreads new connections over both while a reload runs,
// and when the old config's socket closes, the connections still in its
// accept queue are reset unless tcp_migrate_req hands them to the new one
// (a POST the instance never saw). The other race of a reload, an EOF on a
// connection the old server accepted as it stopped, is the balancer's
// POST retry's (fleet_test.go). The sysctl is per network namespace
// and is restored when the test ends. It reports false when the setting is
// off and this process may not change it.
func migrateQueuedConnections(t *testing.T) bool {
	t.Helper()
	old, err := os.ReadFile(migrateReq)
	if err != nil {
		t.Logf("%s: %v", migrateReq, err)
		return false
	}
	if strings.TrimSpace(string(old)) == "1" {
		return true
	}
	if err := os.WriteFile(migrateReq, []byte("1"), 0o644); err != nil {
		t.Logf("cannot set %s (%v)", migrateReq, err)
		return false
	}
	t.Cleanup(func() { _ = os.WriteFile(migrateReq, old, 0o644) })
	return true
}
