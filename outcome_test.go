package llmhedge

import (
	"fmt"
	"testing"
)

// BookkeepingReport is what one request's provider bookkeeping came to.
type BookkeepingReport struct {
	Attempts, Probes int
	Problems         []string // attempts whose begin/end or verdict did not pair up
}

// WatchBookkeeping makes every request report its bookkeeping once it is
// done (after the winner's end), for the e2e tests in package
// llmhedge_test: one end per begin, one verdict per completion attempt
// (so one per probe).
func WatchBookkeeping(t testing.TB) <-chan BookkeepingReport {
	ch := make(chan BookkeepingReport, 64)
	check := func(st *requestState) {
		rep := BookkeepingReport{Attempts: len(st.attempts)}
		for _, a := range st.attempts {
			if a.begun != 1 || a.ended != 1 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("attempt %d on %s: begun %d, ended %d", a.n, a.p.name, a.begun, a.ended))
			}
			if !st.forwarded && a.verdicts != 1 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("attempt %d on %s (probe %v): %d verdicts", a.n, a.p.name, a.probe, a.verdicts))
			}
			if a.probe {
				rep.Probes++
			}
		}
		select {
		case ch <- rep:
		default:
		}
	}
	bookkeepingDone.Store(&check)
	t.Cleanup(func() { bookkeepingDone.Store(nil) })
	return ch
}
