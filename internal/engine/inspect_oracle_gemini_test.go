package engine

// The classification of stream events as it was before issue 24's
// changes (889e452), kept as the oracle of inspect_equiv_test.go: the
// fast paths must classify, read text and usage exactly as this did.

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

type oldGeminiStream struct {
	candidates wire.ChoiceSet // by candidate index (an absent index is 0)
	blocked    bool           // promptFeedback.blockReason with no candidates
}

type oldGeminiCandidates struct {
	bad      bool // candidates is neither an array nor null
	n        int  // candidates (any JSON value)
	finished int  // candidates with a finishReason
	by       string
	text     []byte
	notes    wire.ChoiceSet
}

func oldInspectGeminiStream(ev sse.Event, withText bool, st *oldGeminiStream) wire.EventInfo {
	var info wire.EventInfo
	data := ev.Data
	start := jsonscan.SkipSpace(data, 0)
	if start == len(data) {
		return info // no payload: a comment or keepalive
	}
	it, ok := jsonscan.Open(data, start, 0)
	if !ok || !it.IsObject() {
		info.Class = wire.EvMalformed
		return info
	}
	var sc oldGeminiCandidates
	var feedback []byte
	for it.Next() {
		switch {
		case it.KeyIs("error"):
			info.ErrVal = it.Value()
		case it.KeyIs("candidates"):
			sc = oldGeminiCandidates{} // the last of duplicate keys counts
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
	info.By = sc.by
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
	case sc.n == 0 && oldGeminiBlocked(feedback):
		info.Class, info.By = wire.EvFinish, "prompt_feedback"
		if st != nil {
			st.blocked = true
		}
	}
	if info.Class != wire.EvPrelude {
		info.Text = sc.text
	}
	return info
}

func (sc *oldGeminiCandidates) scan(arr *jsonscan.Iter, withText bool) {
	for arr.Next() {
		sc.n++
		cand, ok := arr.Enter()
		if !ok {
			continue // a scalar: the next call skips it
		}
		if !cand.IsObject() {
			arr.Leave(&cand)
			continue
		}
		var reason, index []byte
		var by string
		var text []byte
		for cand.Next() {
			switch {
			case cand.KeyIs("content"):
				by, text = "", nil
				if content, ok := cand.Enter(); ok {
					by, text = oldGeminiScanContent(&content, withText)
					cand.Leave(&content)
				}
			case cand.KeyIs("finishReason"):
				reason = cand.Value()
			case cand.KeyIs("index"):
				index = cand.Value()
			}
		}
		arr.Leave(&cand)
		finished := oldGeminiFinishReason(reason)
		if finished {
			sc.finished++
		}
		idx := int64(0) // an absent index is candidate 0
		if index != nil && !jsonscan.IsNull(index) {
			if n, ok := jsonscan.Int(index); ok && bytes.IndexAny(index, ".eE") < 0 {
				idx = n
			} else {
				idx = -1
			}
		}
		sc.notes.Note(idx, finished)
		if sc.by == "" {
			sc.by = by
		}
		if withText && sc.text == nil {
			sc.text = text
		}
	}
}

func oldGeminiScanContent(content *jsonscan.Iter, withText bool) (by string, text []byte) {
	for content.IsObject() && content.Next() {
		if !content.KeyIs("parts") {
			continue
		}
		by, text = "", nil
		parts, ok := content.Enter()
		if !ok {
			continue
		}
		for !parts.IsObject() && parts.Next() {
			part, ok := parts.Enter()
			if !ok {
				continue
			}
			pby, ptext := oldGeminiScanPart(&part)
			parts.Leave(&part)
			if by == "" {
				by = pby
			}
			if withText && text == nil {
				text = ptext
			}
		}
		content.Leave(&parts)
	}
	return by, text
}

func oldGeminiFinishReason(v []byte) bool {
	return jsonscan.IsString(v) && len(v) > 2 && !jsonscan.StringIs(v, "FINISH_REASON_UNSPECIFIED")
}

func oldGeminiBlocked(feedback []byte) bool {
	v, _ := oldGeminiLast(feedback, "blockReason")
	return jsonscan.IsString(v) && len(v) > 2 && !jsonscan.StringIs(v, "BLOCKED_REASON_UNSPECIFIED")
}

func oldGeminiScanPart(it *jsonscan.Iter) (by string, text []byte) {
	var txt, thought, fc, inline, code, result []byte
	for it.IsObject() && it.Next() {
		switch {
		case it.KeyIs("text"):
			txt = it.Value()
		case it.KeyIs("thought"):
			thought = it.Value()
		case it.KeyIs("functionCall"):
			fc = it.Value()
		case it.KeyIs("inlineData"):
			inline = it.Value()
		case it.KeyIs("executableCode"):
			code = it.Value()
		case it.KeyIs("codeExecutionResult"):
			result = it.Value()
		}
	}
	isObj := func(v []byte) bool { return len(v) > 0 && v[0] == '{' }
	switch {
	case jsonscan.IsString(txt) && len(txt) > 2:
		if string(thought) == "true" {
			return "thought", nil
		}
		return "text", txt
	case isObj(fc):
		return "functionCall", nil
	case isObj(inline):
		return "inlineData", nil
	case isObj(code):
		return "executableCode", nil
	case isObj(result):
		return "codeExecutionResult", nil
	}
	return "", nil
}

func oldGeminiLast(obj []byte, key string) ([]byte, bool) {
	var v []byte
	it, ok := jsonscan.Open(obj, 0, 0)
	for ok && it.IsObject() && it.Next() {
		if it.KeyIs(key) {
			v = it.Value()
		}
	}
	return v, v != nil
}

func oldObserveGeminiEvent(u *wire.Usage, ev sse.Event) {
	if u == nil || len(ev.Data) == 0 {
		return
	}
	if !bytes.Contains(ev.Data, []byte(`"usageMetadata"`)) && (u.Model != "" || !bytes.Contains(ev.Data, []byte(`"modelVersion"`))) {
		return
	}
	oldObserveGeminiObject(u, ev.Data)
}

func oldObserveGeminiObject(u *wire.Usage, obj []byte) {
	it, ok := jsonscan.Open(obj, 0, 0)
	for ok && it.IsObject() && it.Next() {
		switch {
		case it.KeyIs("modelVersion"):
			if v := it.Value(); u.Model == "" && len(v) > 2 && v[0] == '"' {
				name := wire.JSONStringValue(v)
				if len(name) > wire.MaxModelLen {
					name = name[:wire.MaxModelLen]
				}
				u.Model = name
			}
		case it.KeyIs("usageMetadata"):
			um, ok := it.Enter()
			if !ok {
				continue
			}
			var prompt, tool, cands, thoughts, cached int64
			var hasPrompt, hasOutput, hasCached bool
			for um.IsObject() && um.Next() {
				var n *int64
				switch {
				case um.KeyIs("promptTokenCount"):
					n, hasPrompt = &prompt, true
				case um.KeyIs("toolUsePromptTokenCount"):
					n = &tool
				case um.KeyIs("candidatesTokenCount"):
					n, hasOutput = &cands, true
				case um.KeyIs("thoughtsTokenCount"):
					n, hasOutput = &thoughts, true
				case um.KeyIs("cachedContentTokenCount"):
					n, hasCached = &cached, true
				default:
					continue
				}
				if v, ok := jsonscan.Int(um.Value()); ok {
					*n = v
				}
			}
			it.Leave(&um)
			if !um.IsObject() {
				continue
			}
			if hasPrompt {
				u.Input = prompt + tool
			}
			if hasOutput {
				u.Output = cands + thoughts
			}
			if hasCached {
				u.CacheRead = cached
			}
		}
	}
}
