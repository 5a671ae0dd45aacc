// Package sim is a fake LLM provider speaking the Anthropic Messages API,
// OpenAI Chat Completions, the OpenAI Responses API and the Gemini API
// (generateContent), with configurable
// latency and injected faults. It
// is the embedded default upstream of llm_hedge (the Caddy module
// http.handlers.llm_sim) and the upstream of its tests: New returns an
// http.Handler to run under httptest, with runtime control and a request log.
package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// now is the clock of the records.
var now = time.Now

// Simulator is a fake LLM provider. It is an http.Handler, and its methods
// are safe for concurrent use.
type Simulator struct {
	plan  atomic.Pointer[plan]
	setMu sync.Mutex // serializes SetConfig and SetFaults
	rec   recorder
	store responseStore // Responses API responses, for GET by id and previous_response_id
	held  heldObjects   // uploaded files and conversations (files.go, conversations.go)
	files fileStore     // uploaded files (files.go)
	ids   atomic.Uint64
	quota quotaBook // per-key use of the quotas

	// unloaded ends stalls when the Caddy module is unloaded; nil otherwise.
	unloaded <-chan struct{}
}

// plan is one immutable configuration, compiled for serving.
type plan struct {
	cfg                               Config // defaults applied
	firstToken, slowToken, tokenDelay time.Duration
	deltas                            []string
	text                              string   // the deltas joined
	anthropicDeltas                   [][]byte // complete SSE events
	openaiDeltas                      [][]byte // the "delta" objects
	responsesDeltas                   [][]byte // the deltas as JSON strings
	faults                            []*faultRule
	rng                               *lockedRand
}

// New returns a simulator configured by cfg. It panics if cfg is invalid
// (see Config.Validate): configs in tests are literals.
func New(cfg Config) *Simulator {
	s, err := newSimulator(cfg, nil)
	if err != nil {
		panic(fmt.Sprintf("sim.New: %v", err))
	}
	return s
}

func newSimulator(cfg Config, unloaded <-chan struct{}) (*Simulator, error) {
	s := &Simulator{unloaded: unloaded}
	s.ids.Store(rand.Uint64() >> 16)
	return s, s.SetConfig(cfg)
}

// SetConfig replaces the whole configuration, faults included (their counts
// start over). Requests in flight finish with the configuration they began
// with.
func (s *Simulator) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	cfg = cfg.withDefaults()
	cfg.Pings, cfg.Faults = new(*cfg.Pings), slices.Clone(cfg.Faults) // the caller's copies stay theirs
	cfg.ToolCalls = slices.Clone(cfg.ToolCalls)
	p := compile(cfg)
	s.setMu.Lock()
	defer s.setMu.Unlock()
	s.plan.Store(p)
	return nil
}

// SetFaults replaces the faults and keeps the rest of the configuration;
// the counts of the new faults start at zero. SetFaults(nil) makes the
// simulator healthy.
func (s *Simulator) SetFaults(faults []Fault) error {
	for i, f := range faults {
		if err := f.Validate(); err != nil {
			return fmt.Errorf("sim: fault %d: %w", i, err)
		}
	}
	s.setMu.Lock()
	defer s.setMu.Unlock()
	p := *s.plan.Load()
	p.cfg.Faults = slices.Clone(faults)
	p.faults = compileFaults(p.cfg.Faults)
	s.plan.Store(&p)
	return nil
}

// Config returns the configuration in use, with defaults applied.
func (s *Simulator) Config() Config {
	cfg := s.plan.Load().cfg
	cfg.Pings, cfg.Faults = new(*cfg.Pings), slices.Clone(cfg.Faults)
	cfg.ToolCalls = slices.Clone(cfg.ToolCalls)
	return cfg
}

func compile(cfg Config) *plan {
	seed := uint64(cfg.Seed)
	if cfg.Seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	p := &plan{
		cfg:        cfg,
		firstToken: time.Duration(cfg.FirstToken),
		slowToken:  time.Duration(cfg.SlowFirstToken),
		tokenDelay: time.Duration(cfg.TokenDelay),
		deltas:     splitText(cfg.Text, cfg.Tokens),
		faults:     compileFaults(cfg.Faults),
		rng:        &lockedRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))},
	}
	p.setDeltas(p.deltas)
	return p
}

// setDeltas makes deltas the answer, rendered for every dialect.
func (p *plan) setDeltas(deltas []string) {
	p.deltas, p.text = deltas, strings.Join(deltas, "")
	p.anthropicDeltas, p.openaiDeltas, p.responsesDeltas = nil, nil, nil
	for _, d := range deltas {
		p.anthropicDeltas = append(p.anthropicDeltas, anthropicDeltaEvent(d))
		p.openaiDeltas = append(p.openaiDeltas, openaiContentDelta(d))
		p.responsesDeltas = append(p.responsesDeltas, mustJSON(d))
	}
}

// firstTokenDelay draws the wait before the first delta of one request.
func (p *plan) firstTokenDelay() time.Duration {
	d := p.firstToken
	if p.cfg.SlowPercent > 0 && p.rng.chance(p.cfg.SlowPercent) {
		d = p.slowToken
	}
	if j := p.cfg.FirstTokenJitter; j > 0 && d > 0 {
		d = time.Duration(float64(d) * (1 + j/100*(2*p.rng.float()-1)))
	}
	return d
}

// lockedRand is a seeded source shared by the requests.
type lockedRand struct {
	mu         sync.Mutex
	r          *rand.Rand
	lastSample string // the text of the latest sampled answer
}

// float draws from [0, 1).
func (l *lockedRand) float() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// chance reports true with probability percent/100.
func (l *lockedRand) chance(percent float64) bool {
	if percent >= 100 {
		return true
	}
	if percent <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()*100 < percent
}

// ServeHTTP serves one request as the configured provider would.
func (s *Simulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := s.rec.begin(r, now())
	defer func() { s.rec.end(rec, now()) }()
	defer s.watchCancel(r.Context(), rec)()

	if wire := s.plan.Load().cfg.Wire; wire != "" {
		var finish func()
		var ok bool
		if w, r, finish, ok = s.cloud(wire, w, r, rec); !ok {
			return
		}
		defer finish()
	}
	ex := &exchange{
		s:   s,
		p:   s.plan.Load(),
		w:   w,
		r:   r,
		rc:  http.NewResponseController(w),
		rec: rec,
	}
	ex.serve()
}

// watchCancel records the moment the client goes away, even while the
// request is busy writing. The returned stop must run before the request
// ends, so no goroutine outlives it.
func (s *Simulator) watchCancel(ctx context.Context, rec *RequestRecord) (stop func()) {
	done := make(chan struct{})
	stopWatch := context.AfterFunc(ctx, func() {
		defer close(done)
		s.rec.canceled(rec, now())
	})
	return func() {
		if !stopWatch() {
			<-done
			return
		}
		// The request may have seen Done before the watch was told.
		if ctx.Err() != nil {
			s.rec.canceled(rec, now())
		}
	}
}
