package gemini

// What the candidates array of one Gemini chunk holds (stream.go reads
// the chunk around it).

import (
	"bytes"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// geminiCandidates is what the candidates array of one chunk holds.
type geminiCandidates struct {
	bad      bool // candidates is neither an array nor null
	n        int  // candidates (any JSON value)
	finished int  // candidates with a finishReason
	by       string
	text     []byte
	notes    wire.ChoiceSet
	// plain: the one candidate is text and nothing else, as the resumer
	// reads it (withText only; see EventInfo.Plain).
	plain bool
}

// plainPart is what scan finds in one candidate, candidate 0, whose
// content is one part of non-empty text (plainCandidates): "text" output,
// plain; or, for a thought, "thought" output without the text, not plain
// (geminiScanPart).
func (sc *geminiCandidates) plainPart(text []byte, thought, withText bool) {
	sc.n = 1
	sc.notes.Note(0, false)
	if thought {
		sc.by = "thought"
		return
	}
	sc.by, sc.plain = "text", withText
	if withText {
		sc.text = text
	}
}

// scan walks a candidates array once: each candidate's index and
// finishReason, the first part that carries output (and with withText
// the first non-thought text). Like encoding/json, the last of duplicate
// keys counts, so a repeated content or parts member replaces what an
// earlier one said.
func (sc *geminiCandidates) scan(arr *jsonscan.Iter, withText bool) {
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
		var contents, reasons, indexes int
		plain := withText && sc.n == 1
		for cand.Next() {
			switch {
			case cand.KeyIs("content"):
				contents++
				by, text = "", nil
				if content, ok := cand.Enter(); ok {
					by, text = geminiScanContent(&content, withText, &plain)
					cand.Leave(&content)
				} else {
					plain = false
				}
			case cand.KeyIs("finishReason"):
				reasons++
				reason = cand.Value()
			case cand.KeyIs("index"):
				indexes++
				index = cand.Value()
			}
		}
		arr.Leave(&cand)
		finished := geminiFinishReason(reason)
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
		if sc.n == 1 {
			sc.plain = plain && idx == 0 && contents == 1 && reasons <= 1 && indexes <= 1
		}
		if sc.by == "" {
			sc.by = by
		}
		if withText && sc.text == nil {
			sc.text = text
		}
	}
}

// geminiScanContent reads a candidate's content: what its parts carry.
func geminiScanContent(content *jsonscan.Iter, withText bool, plain *bool) (by string, text []byte) {
	partsKeys, texts := 0, 0
	if !content.IsObject() {
		*plain = false
	}
	for content.IsObject() && content.Next() {
		if !content.KeyIs("parts") {
			continue
		}
		partsKeys++
		by, text = "", nil
		parts, ok := content.Enter()
		if !ok || parts.IsObject() {
			*plain = false
		}
		if !ok {
			continue
		}
		for !parts.IsObject() && parts.Next() {
			part, ok := parts.Enter()
			if !ok || !part.IsObject() {
				*plain = false
			}
			if !ok {
				continue
			}
			pby, ptext := geminiScanPart(&part, plain)
			if ptext != nil {
				texts++
			}
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
	if partsKeys != 1 || texts > 1 {
		*plain = false
	}
	return by, text
}

// geminiFinishReason reports whether a raw finishReason ends its
// candidate: any non-empty string but FINISH_REASON_UNSPECIFIED, which
// the continuation protocol sends on intermediate checkpoint chunks.
func geminiFinishReason(v []byte) bool {
	return jsonscan.IsString(v) && len(v) > 2 && !jsonscan.StringIs(v, "FINISH_REASON_UNSPECIFIED")
}

// geminiBlocked reports whether a raw promptFeedback blocks the prompt:
// a blockReason that is a non-empty string but BLOCKED_REASON_UNSPECIFIED.
func geminiBlocked(feedback []byte) bool {
	v, _ := geminiLast(feedback, "blockReason")
	return jsonscan.IsString(v) && len(v) > 2 && !jsonscan.StringIs(v, "BLOCKED_REASON_UNSPECIFIED")
}

// geminiPartOutput names what output a raw part carries ("" for none)
// and, for a non-empty non-thought text part, returns its raw JSON string.
func geminiPartOutput(part []byte) (by string, text []byte) {
	it, ok := jsonscan.Open(part, 0, 0)
	if !ok {
		return "", nil
	}
	plain := false
	return geminiScanPart(&it, &plain)
}

// geminiScanPart is geminiPartOutput of the part it walks (nothing for an
// array). Output is non-empty text (thought text when "thought" is true),
// or a functionCall, inlineData, executableCode or codeExecutionResult
// object. A part with any member but one string text and a
// thoughtSignature is not plain.
func geminiScanPart(it *jsonscan.Iter, plain *bool) (by string, text []byte) {
	var txt, thought, fc, inline, code, result []byte
	texts := 0
	for it.IsObject() && it.Next() {
		switch {
		case it.KeyIs("text"):
			texts++
			txt = it.Value()
			if texts > 1 || !jsonscan.IsString(txt) {
				*plain = false
			}
			continue
		case it.KeyIs("thoughtSignature"):
			continue
		}
		*plain = false
		switch {
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

// geminiLast returns the raw value of the last member named key of the
// object obj (encoding/json's reading of duplicate keys).
func geminiLast(obj []byte, key string) ([]byte, bool) {
	var v []byte
	it, ok := jsonscan.Open(obj, 0, 0)
	for ok && it.IsObject() && it.Next() {
		if it.KeyIs(key) {
			v = it.Value()
		}
	}
	return v, v != nil
}
