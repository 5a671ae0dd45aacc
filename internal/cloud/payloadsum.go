package cloud

import (
	"bytes"
	"crypto/sha256"
	"sync"
)

// SigV4 signs the SHA-256 of the body: 70-100 µs for an agent's 150 KB
// turn, even with SHA-NI, and all of it again at every attempt. A
// request's later attempts on Bedrock (the retry after a 503, a hedge, a
// failover to another account or region) send the
// same rewrite of the same body, so the request keeps the hash of the
// last rewrite it signed and signs them with it: a body is hashed once
// per request, as its derived key is made once per day.
//
// It lives as long as the request (the engine's body lease holds it), and
// keeps nothing of a body past it: a session's next turn, though it
// repeats the last one's bytes, is hashed in full
// (docs/design-decisions.md, "Signing an agent's body").

// PayloadSums is a request's hash of the last rewrite it signed.
type PayloadSums struct {
	mu     sync.Mutex
	pieces [][]byte // the rewrite hashed, as its pieces
	sum    [sha256.Size]byte
	hashes int // bodies hashed, for the tests
}

// of is the SHA-256 of the body the pieces make: the one kept when they
// make the same bytes as the last rewrite hashed. Without PayloadSums (a
// body the engine did not lease: under 16 KiB) it hashes the pieces.
func (m *PayloadSums) of(pieces [][]byte) [sha256.Size]byte {
	if m == nil {
		return payloadSum(pieces)
	}
	m.mu.Lock()
	if samePieces(m.pieces, pieces) {
		sum := m.sum
		m.mu.Unlock()
		return sum
	}
	m.mu.Unlock()
	// Hashed outside the lock: two attempts at once (a hedge) may both
	// hash, and the later keeps its own.
	sum := payloadSum(pieces)
	m.mu.Lock()
	m.pieces, m.sum = pieces, sum
	m.hashes++
	m.mu.Unlock()
	return sum
}

// samePieces reports whether two rewrites are the same bytes, piece by
// piece: the same run of the request's body (which does not change while
// the request lasts), or equal bytes (the tail, made anew each time).
func samePieces(a, b [][]byte) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		switch {
		case len(a[i]) != len(b[i]):
			return false
		case len(a[i]) > 0 && &a[i][0] == &b[i][0]:
		case !bytes.Equal(a[i], b[i]):
			return false
		}
	}
	return true
}

// payloadSum is the SHA-256 of the body the pieces make (SigV4's payload
// hash).
func payloadSum(pieces [][]byte) (sum [sha256.Size]byte) {
	h := sha256.New()
	for _, p := range pieces {
		h.Write(p)
	}
	h.Sum(sum[:0])
	return sum
}
