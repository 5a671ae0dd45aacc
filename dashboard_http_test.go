package llmhedge

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestDashboardCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		in      string
		resets  bool
		wantErr bool
	}{
		{"llm_hedge_dashboard", false, false},
		{"llm_hedge_dashboard {\n resets on\n}", true, false},
		{"llm_hedge_dashboard {\n resets off\n}", false, false},
		{"llm_hedge_dashboard {\n resets yes\n}", false, true},
		{"llm_hedge_dashboard {\n resets\n}", false, true},
		{"llm_hedge_dashboard {\n resets on off\n}", true, true},
		{"llm_hedge_dashboard {\n colour blue\n}", false, true},
		{"llm_hedge_dashboard /path", false, true},
	} {
		var d DashboardHandler
		err := d.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
		if (err != nil) != tc.wantErr || (err == nil && d.Resets != tc.resets) {
			t.Errorf("%q: resets %v, err %v; want resets %v, error %v", tc.in, d.Resets, err, tc.resets, tc.wantErr)
		}
	}
}
