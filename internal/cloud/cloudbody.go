package cloud

// A cloud's request body is the client's with a few top-level members
// dropped (model, stream) and one or two set (anthropic_version,
// anthropic_beta). An agent's turn is a hundred kilobytes and more, and
// those members are a few bytes of it: the rewrite is a list of pieces,
// most of them the client's body where it lies, and the few new bytes.
// Nothing of the body is copied to send it (the engine's lease reads the
// pieces in turn), and SigV4 hashes them in turn.

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Bodies reads a rewritten body from its pieces: the engine's request
// lease, whose buffer goes back when the request ends and whose readers it
// revokes then (a transport may still be writing a lost attempt's body).
type Bodies interface {
	// Gather reads the pieces in turn, as one body.
	Gather(pieces [][]byte) io.ReadCloser
	// PayloadSums is the request's hash of the last rewrite it signed
	// (payloadsum.go); nil when it keeps none.
	PayloadSums() *PayloadSums
}

// setBody replaces the body of an upstream request with the pieces, and
// GetBody with it (the module resends a stream refused unprocessed from
// it: roundTrip). Without Bodies the pieces are joined: the body was not
// leased (a small one), so the copy costs little.
func setBody(up *http.Request, pieces [][]byte, n int, bodies Bodies) {
	var read func() io.ReadCloser
	if bodies != nil {
		read = func() io.ReadCloser { return bodies.Gather(pieces) }
	} else {
		b := bytes.Join(pieces, nil)
		read = func() io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }
	}
	up.Body = read()
	up.GetBody = func() (io.ReadCloser, error) { return read(), nil }
	up.ContentLength = int64(n)
}

// CloudBody edits a JSON request body for a cloud: drops the named members
// (every occurrence, however its key is escaped) and sets others (values
// are raw JSON, appended in key order). The other members are kept as
// written, in their order, with what lies between them: nothing is
// re-encoded. A compact body's rewrite is its members joined by commas.
func CloudBody(body []byte, drop []string, set map[string]json.RawMessage) ([]byte, error) {
	pieces, _, err := cloudPieces(body, nil, drop, set)
	if err != nil {
		return nil, err
	}
	return bytes.Join(pieces, nil), nil
}

// cloudPieces is CloudBody as the pieces of the result, and its length,
// reading the members from top (the parse's index of body) when it holds
// one: runs of the kept members as they lie in body (each run after a
// dropped member starts with the comma that followed it), then the set
// members and the closing brace. A body whose members are all kept is one
// run.
func cloudPieces(body []byte, top *jsonscan.Top, drop []string, set map[string]json.RawMessage) (pieces [][]byte, n int, err error) {
	keys := slices.Sorted(maps.Keys(set))
	open := jsonscan.SkipSpace(body, 0) // the object's brace, once the scan has found an object
	pieces = make([][]byte, 0, 4)
	run, runEnd := -1, 0 // the run being made: its start, and its last member's end
	prev := open + 1     // where the member before ended (the brace, for the first)
	err = top.Scan(body, func(key []byte, vStart, vEnd int) bool {
		if dropped(key, drop, keys) {
			if run >= 0 {
				pieces, run = append(pieces, body[run:runEnd]), -1
			}
			prev = vEnd
			return true
		}
		if run < 0 {
			switch {
			case prev == open+1: // the first member: the run takes the brace
				run = open
			case len(pieces) == 0: // after dropped members only: the brace, then this member without the comma before it
				pieces = append(pieces, body[open:open+1])
				run = jsonscan.SkipSpace(body, jsonscan.SkipSpace(body, prev)+1)
			default:
				run = prev
			}
		}
		runEnd, prev = vEnd, vEnd
		return true
	})
	if err != nil {
		return nil, 0, err
	}
	if run >= 0 {
		pieces = append(pieces, body[run:runEnd])
	}
	kept := len(pieces) > 0
	if !kept {
		pieces = append(pieces, body[open:open+1])
	}
	size := 1
	for _, k := range keys {
		size += len(k) + len(set[k]) + 8
	}
	tail := make([]byte, 0, size)
	for i, k := range keys {
		if kept || i > 0 {
			tail = append(tail, ',')
		}
		tail = wire.AppendJSONString(tail, k)
		tail = append(tail, ':')
		tail = append(tail, set[k]...)
	}
	pieces = append(pieces, append(tail, '}'))
	for _, p := range pieces {
		n += len(p)
	}
	return pieces, n, nil
}

// dropped reports whether a member named key is left out: dropped, or set.
func dropped(key []byte, drop, set []string) bool {
	for _, k := range drop {
		if jsonscan.KeyIs(key, k) {
			return true
		}
	}
	for _, k := range set {
		if jsonscan.KeyIs(key, k) {
			return true
		}
	}
	return false
}
