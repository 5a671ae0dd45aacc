package llmhedge

import (
	"strings"
	"testing"
)

func TestBudgetMismatch(t *testing.T) {
	tests := []struct {
		pct, budget float64
		want        string // substring; "" means no warning
	}{
		{90, 10, ""},
		{95, 10, ""},
		{80, 10, ""},
		{90, 5, ""},
		{99, 10, "will not bound"},
		{50, 10, "most hedges will be refused"},
		{90, 30, "will not bound"},
		{90, 0, ""},
	}
	for _, tt := range tests {
		got := budgetMismatch(tt.pct, tt.budget)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("budgetMismatch(p%g, %g%%) = %q, want %q", tt.pct, tt.budget, got, tt.want)
		}
	}
}
