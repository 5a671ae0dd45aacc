package sim

import (
	"encoding/json"
	"sync"
)

// Bounds of the stored responses; the oldest are forgotten first.
const (
	maxStoredResponses = 1000
	maxStoredBytes     = 64 << 20
)

// storedResponse is a response this simulator created. Its fields are set
// before it is stored and never change, except status, completedAt and err,
// which the store guards.
type storedResponse struct {
	id, msgID, model string
	created          int64
	prevID           string
	instructions     json.RawMessage
	metadata         json.RawMessage
	store            bool
	input            []json.RawMessage
	text             string
	call             *scriptedCall // a scripted tool call, the output instead of text
	usage            responsesUsage
	size             int

	status      string
	completedAt int64
	err         *responsesError
}

// responseStore keeps the latest responses by id, bounded in count and size.
type responseStore struct {
	mu    sync.Mutex
	byID  map[string]*storedResponse
	order []string // oldest first; may name removed ids
	bytes int
}

func (st *responseStore) put(sr *storedResponse) {
	sr.size = 512 + len(sr.instructions) + len(sr.metadata)
	for _, it := range sr.input {
		sr.size += len(it)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byID == nil {
		st.byID = make(map[string]*storedResponse)
	}
	st.byID[sr.id] = sr
	st.order = append(st.order, sr.id)
	st.bytes += sr.size
	for len(st.order) > 0 && (len(st.byID) > maxStoredResponses || st.bytes > maxStoredBytes) {
		st.removeLocked(st.order[0])
		st.order = st.order[1:]
	}
	if len(st.order) > 2*maxStoredResponses {
		st.order = compactOrder(st.order, st.byID)
	}
}

// compactOrder drops the ids no longer stored.
func compactOrder(order []string, byID map[string]*storedResponse) []string {
	out := make([]string, 0, len(byID))
	for _, id := range order {
		if _, ok := byID[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

func (st *responseStore) get(id string) *storedResponse {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.byID[id]
}

func (st *responseStore) remove(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.removeLocked(id)
}

func (st *responseStore) removeLocked(id string) {
	if sr, ok := st.byID[id]; ok {
		delete(st.byID, id)
		st.bytes -= sr.size
	}
}

// finish sets the final status of a response.
func (st *responseStore) finish(sr *storedResponse, status string, completedAt int64, e *responsesError) {
	st.mu.Lock()
	defer st.mu.Unlock()
	sr.status, sr.completedAt, sr.err = status, completedAt, e
}

// settle marks a response that is still in progress cancelled: its request
// ended, or was told to cancel, before response.completed. sr may be nil.
func (st *responseStore) settle(sr *storedResponse) {
	if sr == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if sr.status == "in_progress" {
		sr.status = "cancelled"
	}
}

// render is the JSON of a response at its current status.
func (st *responseStore) render(sr *storedResponse) []byte {
	st.mu.Lock()
	status, completedAt, e := sr.status, sr.completedAt, sr.err
	st.mu.Unlock()
	return mustJSON(sr.object(status, completedAt, e))
}
