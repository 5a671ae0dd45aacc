package sim

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// maxRecords bounds the request log; the oldest records are dropped first.
const maxRecords = 10_000

// RequestRecord is what the simulator saw of one request.
type RequestRecord struct {
	ID       string // message / completion id of the response ("" for other endpoints)
	Method   string
	Path     string
	Model    string // as requested
	Stream   bool
	BodySize int64

	// The previous_response_id of a Responses API request, verbatim.
	PreviousResponseID string

	// Credentials received, verbatim: tests check a client's own key is not
	// forwarded to a provider that has its own.
	APIKey        string // x-api-key
	Authorization string // Authorization
	GoogAPIKey    string // x-goog-api-key (Gemini)
	KeyParam      string // the key query parameter (Gemini ?key=)
	AzureKey      string // api-key (Azure OpenAI)

	// URI is the request target as received (escaped path and query), and
	// CloudBody and CloudHeader the body and headers, for a simulator with
	// a wire (bedrock, vertex, azure): tests check the cloud's URL, body and
	// header rules.
	URI         string
	CloudBody   []byte
	CloudHeader http.Header

	Start      time.Time
	FirstDelta time.Time // first content delta sent (non-stream: body sent); zero if none
	End        time.Time // zero while in flight

	// Canceled: the request context was cancelled (the client went away)
	// before the simulator finished; CanceledAt is when that was observed.
	Canceled   bool
	CanceledAt time.Time

	// Prefilled: the conversation ended in an assistant turn, whose text
	// is Prefill (see Config.Prefill), whether it was continued, answered
	// in full or refused.
	Prefilled bool
	Prefill   string

	// A scripted tool loop (Config.ToolCalls): the tool the answer called
	// (a call's stream is never an answer a proxy may continue), and
	// whether the request's last turn carried a tool result.
	ToolCall   string
	ToolResult bool

	Status int    // HTTP status sent; 0 if none (reset, stall before headers)
	Deltas int    // content deltas sent
	Fault  *Fault // the fault applied, nil if none
}

// Stats are totals since the simulator started or ResetStats.
type Stats struct {
	Requests int64 // requests received
	InFlight int64 // requests being served now
	Canceled int64 // requests whose client went away before the end
	Faulted  int64 // requests a fault applied to

	// Responses API requests whose previous_response_id this simulator does
	// not know, answered 404 previous_response_not_found.
	PreviousNotFound int64

	// Requests whose conversation ended in an assistant turn (a prefill),
	// continued, answered in full or refused.
	Prefills int64
}

// recorder keeps the stats and a ring of the latest records. Every field is
// guarded by mu; records are updated in place while their request runs.
type recorder struct {
	mu      sync.Mutex
	stats   Stats
	ring    []*RequestRecord
	next    int // where the next record goes once the ring is full
	changed chan struct{}
}

func (rc *recorder) begin(r *http.Request, now time.Time) *RequestRecord {
	rec := &RequestRecord{
		Method:        r.Method,
		Path:          r.URL.Path,
		APIKey:        r.Header.Get("X-Api-Key"),
		Authorization: r.Header.Get("Authorization"),
		GoogAPIKey:    r.Header.Get("X-Goog-Api-Key"),
		AzureKey:      r.Header.Get("Api-Key"),
		URI:           r.URL.RequestURI(),
		Start:         now,
	}
	if r.URL.RawQuery != "" {
		rec.KeyParam = r.URL.Query().Get("key")
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.stats.Requests++
	rc.stats.InFlight++
	if len(rc.ring) < maxRecords {
		rc.ring = append(rc.ring, rec)
	} else {
		rc.ring[rc.next] = rec
		rc.next = (rc.next + 1) % maxRecords
	}
	rc.notify()
	return rec
}

// update changes a live record.
func (rc *recorder) update(rec *RequestRecord, change func(*RequestRecord)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	change(rec)
	rc.notify()
}

func (rc *recorder) status(rec *RequestRecord, code int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec.Status = code
	rc.notify()
}

// deltas counts n content deltas sent; the first ones are a change worth
// waking waiters for.
func (rc *recorder) deltas(rec *RequestRecord, n int, now time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec.Deltas += n
	if rec.FirstDelta.IsZero() {
		rec.FirstDelta = now
		rc.notify()
	}
}

func (rc *recorder) canceled(rec *RequestRecord, now time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec.Canceled, rec.CanceledAt = true, now
	rc.stats.Canceled++
	rc.notify()
}

func (rc *recorder) faulted(rec *RequestRecord, f *Fault) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec.Fault = f
	rc.stats.Faulted++
	rc.notify()
}

func (rc *recorder) prefilled(rec *RequestRecord, text string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec.Prefilled, rec.Prefill = true, text
	rc.stats.Prefills++
	rc.notify()
}

func (rc *recorder) previousNotFound() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.stats.PreviousNotFound++
	rc.notify()
}

func (rc *recorder) end(rec *RequestRecord, now time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rec.End = now
	rc.stats.InFlight--
	rc.notify()
}

// notify wakes the waiters of Changed; it costs nothing when nobody waits.
func (rc *recorder) notify() {
	if rc.changed != nil {
		close(rc.changed)
		rc.changed = nil
	}
}

// Stats returns the totals.
func (s *Simulator) Stats() Stats {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	return s.rec.stats
}

// Requests returns a copy of the latest records (at most 10,000), oldest
// first, including the requests still in flight.
func (s *Simulator) Requests() []RequestRecord {
	rc := &s.rec
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]RequestRecord, 0, len(rc.ring))
	for i := range rc.ring {
		out = append(out, *rc.ring[(rc.next+i)%len(rc.ring)])
	}
	return out
}

// ResetStats forgets the records and zeroes the totals, except InFlight,
// which stays the number of requests being served.
func (s *Simulator) ResetStats() {
	rc := &s.rec
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.stats = Stats{InFlight: rc.stats.InFlight}
	rc.ring, rc.next = nil, 0
	rc.notify()
}

// Changed returns a channel closed at the next change of the records: a
// request starts, is read, gets a fault, sends its status or its first
// delta, sees its client go away, or ends.
// Take it before checking Requests or Stats so no change is missed.
func (s *Simulator) Changed() <-chan struct{} {
	rc := &s.rec
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.changed == nil {
		rc.changed = make(chan struct{})
	}
	return rc.changed
}

// WaitIdle waits until no request is in flight, or ctx is done.
func (s *Simulator) WaitIdle(ctx context.Context) error {
	for {
		changed := s.Changed()
		if s.Stats().InFlight == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
