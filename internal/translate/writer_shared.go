package translate

import "errors"

// What the client-format stream writers (anthropicWriter, responsesWriter)
// share.

// writerPhase is where a writer stands in its stream: content may be
// written only between the start event and the terminal one.
type writerPhase struct {
	started, finished bool
}

// live is an error when content would come before the start or after the end.
func (p *writerPhase) live() error {
	switch {
	case !p.started:
		return malformed("content before the message start")
	case p.finished:
		return malformed("content after the message end")
	}
	return nil
}

// clientStreamError is what a writer's error event says for err: the
// upstream's own error, already in the client's format, when err carries
// one; else fallbackType and err's text.
func clientStreamError(err error, fallbackType string) UpstreamError {
	var ue *UpstreamError
	if errors.As(err, &ue) {
		return *ue
	}
	return UpstreamError{Type: fallbackType, Message: err.Error()}
}
