package translate

// The client side of a translated stream. A target's stream decoder
// (chat_stream.go, gemini_stream.go, responses_stream.go,
// anthropic_stream.go) reads the target's events and writes the client's
// through one of two sinks, so that one decoder serves every client
// format (a pair is glue):
//
//   - blockSink: content blocks, Anthropic's model (anthropicWriter for
//     Anthropic clients, chatWriter for Chat clients). The Gemini and
//     Responses decoders write it.
//   - itemSink: output items numbered by the target's block index,
//     Responses' model (responsesWriter, and chatItems over a chatWriter).
//     The Anthropic decoder writes it: a Responses client's item ids carry
//     the target's block index, which skipped thinking blocks keep.
//
// A decoder's UpstreamError is in the vocabulary its first client read
// (Anthropic's error types from the Gemini and Responses decoders,
// OpenAI's from the Anthropic decoder); chatWriter reads either
// (chatErrorOf).

type blockSink interface {
	begun() bool
	start(dst []byte, id, model string, u Usage) ([]byte, error)
	text(dst, escaped []byte) ([]byte, error)
	toolStart(dst []byte, id, name string, n int) ([]byte, error)
	toolArgs(dst, escaped []byte) ([]byte, error)
	toolArgsJSON(dst, args []byte) ([]byte, error)
	closeBlock(dst []byte) ([]byte, error)
	finish(dst []byte, stop, stopSeq string, u Usage) ([]byte, error)
	fail(dst []byte, err error) []byte
}

type itemSink interface {
	begun() bool
	start(dst []byte, id, model string) ([]byte, error)
	openItem(dst []byte, kind Kind, block int, callID, name string) ([]byte, error)
	delta(dst []byte, kind Kind, escaped []byte) ([]byte, error)
	closeItem(dst []byte) ([]byte, error)
	finish(dst []byte, stop string, u Usage) ([]byte, error)
	fail(dst []byte, err error) []byte
}

// begun reports that the writer wrote its start.
func (p *writerPhase) begun() bool { return p.started }

var (
	_ blockSink = (*anthropicWriter)(nil)
	_ blockSink = (*chatWriter)(nil)
	_ itemSink  = (*responsesWriter)(nil)
	_ itemSink  = (*chatItems)(nil)
)
