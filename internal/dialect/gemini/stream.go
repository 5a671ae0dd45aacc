package gemini

// The Gemini dialect (dialect.go): what the chunks of a stream say.

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// geminiStream is what the chunks of one Gemini stream have said so far
// about its end. Gemini sends no terminal event: the answer is complete
// when every candidate seen has a finishReason (or the prompt was
// blocked), and the body then ends. The end of the body before that is a
// cut.
type Stream struct {
	candidates wire.ChoiceSet // by candidate index (an absent index is 0)
	blocked    bool           // promptFeedback.blockReason with no candidates
}

// done reports whether the end of the body after the chunks seen is the
// end of a complete answer.
func (s *Stream) Done() bool { return s.blocked || s.candidates.AllFinished() }

// inspectGemini classifies one chunk of a Gemini stream; withText also
// returns the raw JSON string of the first non-thought text part, which
// the gate checks for rejected phrases.
func InspectGemini(ev sse.Event, withText bool) wire.EventInfo {
	return InspectGeminiStream(ev, withText, nil)
}

// inspectGeminiStream is inspectGemini that also notes, in st (when not
// nil), the candidates the chunk carries and which of them finished.
//
// Classes: a non-null top-level "error" is evError (errVal is that
// object: upstreamErrorMessage renders its message); data
// that is not a JSON object, or whose candidates is neither an array nor
// null, is evMalformed (the SDK cannot decode it either). A chunk in
// which every candidate has a finishReason is evFinish: the answer is
// done, and a finishReason is the model's own verdict (STOP, MAX_TOKENS,
// SAFETY...) even with no text, as OpenAI's finish_reason is. A chunk
// with a candidate part holding non-empty text, thought text, a
// functionCall, inlineData (an image model's output, each part a large
// base64 blob that would overflow the gate's buffer if held),
// executableCode or codeExecutionResult is evOutput. A promptFeedback
// with a blockReason and no candidates is evFinish by "prompt_feedback":
// it is the truth about the prompt, which every provider would
// give, so the gate commits it and the relay passes it through as a
// complete answer; failing over would only repeat it elsewhere. Anything
// else (usage-only chunks, comments) is evPrelude.
func InspectGeminiStream(ev sse.Event, withText bool, st *Stream) wire.EventInfo {
	var info wire.EventInfo
	data := ev.Data
	start := jsonscan.SkipSpace(data, 0)
	if start == len(data) {
		return info // no payload: a comment or keepalive
	}
	if text, usage, model, thought, counts, ok := st.framedChunk(data); ok {
		// the stream's last plain chunk around another text (stream_memo.go)
		var sc geminiCandidates
		sc.plainPart(text, thought, withText)
		info.Counts = counts
		st.finish(&info, &sc, 1, usage, model, false, nil, withText)
		return info
	}
	it, ok := jsonscan.Open(data, start, 0)
	if !ok || !it.IsObject() {
		info.Class = wire.EvMalformed
		return info
	}
	var sc geminiCandidates
	var feedback []byte
	candidateKeys := 0
	var usage, model []byte
	usageOdd := false
	usageSeen, usageWalked := false, false // the last usageMetadata: matched the memo, walked as an object
	var frame [3]int                       // plain candidates read token by token: where they start, where their text starts and ends
	frameEnd := 0                          // and where they end
	textAt, textEnd := 0, 0                // plain candidates' text, read either way
	thought := false                       // and whether it is a thought
	tailAt, tailPlain := -1, false         // where the members after usageMetadata start; they told nothing but the model
	var tailModel [2]int                   // where the model's value stands in them
	for it.Next() {
		switch {
		case it.KeyIs("usageMetadata"):
			usageOdd = usageOdd || usage != nil || string(it.Key) != "usageMetadata"
			// One walk validates it and reads its counts, unless the
			// stream's last chunk had the same bytes there (st.memo).
			start := it.Pos
			if m := st.memo(); m != nil && len(m.Raw) > 0 && bytes.HasPrefix(data[start:], m.Raw) {
				it.SkipValue(start + len(m.Raw))
				info.Counts, usage = m.Counts, data[start:it.Pos]
				usageSeen, usageWalked = true, false
			} else if um, ok := it.Enter(); ok {
				info.Counts = readGeminiCounts(&um)
				it.Leave(&um)
				usage = data[start:it.Pos]
				usageSeen, usageWalked = false, true
			} else {
				info.Counts = wire.UsageCounts{}
				usage, usageSeen, usageWalked = it.Value(), false, false
			}
			// What follows usageMetadata (modelVersion, responseId, the
			// close) is, chunk after chunk, the same bytes: read once.
			at := it.Pos
			if m := st.memo(); m != nil && len(m.Tail) > 0 && bytes.Equal(data[at:], m.Tail) && it.SkipRest(len(data)) {
				if m.TailModel[1] > 0 {
					usageOdd = usageOdd || model != nil
					model = data[at+m.TailModel[0] : at+m.TailModel[1]]
				}
				tailAt = -1
				continue
			}
			tailAt, tailPlain, tailModel = at, true, [2]int{}
		case it.KeyIs("modelVersion"):
			usageOdd = usageOdd || model != nil || string(it.Key) != "modelVersion"
			at := it.Pos
			model = it.Value()
			if tailAt >= 0 {
				if tailModel[1] > 0 || model == nil || string(it.Key) != "modelVersion" {
					tailPlain = false
				} else {
					tailModel = [2]int{at - tailAt, at - tailAt + len(model)}
				}
			}
		case it.KeyIs("error"):
			info.ErrVal = it.Value()
			tailPlain = false
		case it.KeyIs("candidates"):
			tailPlain = false
			candidateKeys++
			sc = geminiCandidates{} // the last of duplicate keys counts
			if text, th, end, ok := st.framedText(data, it.Pos); ok {
				it.SkipValue(end) // the last plain chunk's candidates around another text
				sc.plainPart(text, th, withText)
				if at := jsonscan.OffsetOf(data, text); at > 0 {
					textAt, textEnd, thought = at, at+len(text), th
				}
				continue
			}
			if text, th, end, ok := plainCandidates(data, it.Pos); ok {
				if at := jsonscan.OffsetOf(data, text); at > 0 {
					frame, frameEnd = [3]int{it.Pos, at, at + len(text)}, end
					textAt, textEnd, thought = at, at+len(text), th
				}
				it.SkipValue(end)
				sc.plainPart(text, th, withText)
				continue
			}
			arr, ok := it.Enter()
			if !ok {
				sc.bad = !jsonscan.IsNull(it.Value())
				continue
			}
			if arr.IsObject() {
				sc.bad = true
			} else {
				sc.scan(&arr, withText)
			}
			it.Leave(&arr)
		case it.KeyIs("promptFeedback"):
			feedback = it.Value()
			tailPlain = false
		}
	}
	switch {
	case !it.End():
		info.Class, info.ErrVal = wire.EvMalformed, nil
		return info
	case info.ErrVal != nil && !jsonscan.IsNull(info.ErrVal):
		info.Class = wire.EvError
		return info
	case sc.bad:
		info.Class, info.ErrVal = wire.EvMalformed, nil
		return info
	}
	info.ErrVal = nil
	if usageWalked && !usageSeen && st != nil {
		st.remember(usage, info.Counts)
	}
	if tailAt >= 0 && tailPlain && st != nil {
		st.ownMemo().RememberTail(data[tailAt:], tailModel)
	}
	if frameEnd > 0 && candidateKeys == 1 && st != nil {
		st.rememberFrame(data[frame[0]:frame[1]], data[frame[2]:frameEnd], thought)
	}
	st.finish(&info, &sc, candidateKeys, usage, model, usageOdd, feedback, withText)
	// Kept once its usage has repeated (the usage memo matched it, or it
	// has none): a stream whose counts change every chunk would only pay
	// for a copy and a failed comparison.
	if textEnd-textAt > 2 && candidateKeys == 1 && !usageOdd && feedback == nil && info.Class == wire.EvOutput && st != nil &&
		(usageSeen || usage == nil) {
		st.rememberChunk(data, textAt, textEnd, usage, model, thought, info.Counts)
	}
	return info
}

// finish is InspectGeminiStream's reading of a valid chunk without an
// error, once its members are read: sc its candidates, candidateKeys how
// many candidates members it had.
func (st *Stream) finish(info *wire.EventInfo, sc *geminiCandidates, candidateKeys int, usage, model []byte, usageOdd bool, feedback []byte, withText bool) {
	info.By = sc.by
	info.Plain = withText && candidateKeys == 1 && sc.n == 1 && sc.plain
	info.UsageRead, info.Usage, info.Model = !usageOdd, usage, model
	if st != nil {
		st.candidates.Merge(&sc.notes)
	}
	switch {
	case sc.n > 0 && sc.finished == sc.n:
		info.Class = wire.EvFinish
		if info.By == "" {
			info.By = "finishReason"
		}
	case info.By != "":
		info.Class = wire.EvOutput
	case sc.n == 0 && geminiBlocked(feedback):
		info.Class, info.By = wire.EvFinish, "prompt_feedback"
		if st != nil {
			st.blocked = true
		}
	}
	if info.Class != wire.EvPrelude {
		info.Text = sc.text
	}
}
