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

func oldInspectAnthropic(ev sse.Event, withText bool) wire.EventInfo {
	var info wire.EventInfo
	named := string(ev.Name) == "error"
	data := ev.Data
	start := jsonscan.SkipSpace(data, 0)
	if start == len(data) {
		// No payload (a comment, or a bare keepalive): the name decides.
		switch {
		case named:
			info.Class = wire.EvError
		case string(ev.Name) == "message_stop":
			info.Class = wire.EvTerminal
		}
		return info
	}
	var typ []byte
	var stopBy string
	it, ok := jsonscan.Open(data, start, 0)
	if ok && it.IsObject() {
		for it.Next() {
			switch {
			case it.KeyIs("type"):
				typ = it.Value()
			case it.KeyIs("error"):
				info.ErrVal = it.Value()
			case it.KeyIs("delta"):
				if d, ok := it.Enter(); ok {
					for d.IsObject() && d.Next() {
						if withText && d.KeyIs("text") {
							if v := d.Value(); jsonscan.IsString(v) {
								info.Text = v
							}
						} else if d.KeyIs("stop_reason") {
							switch v := d.Value(); { // an answer of no content (not in 889e452)
							case jsonscan.StringIs(v, "refusal"), jsonscan.StringIs(v, "max_tokens"), jsonscan.StringIs(v, "model_context_window_exceeded"):
								stopBy = string(jsonscan.AppendString(nil, v))
							default:
								stopBy = ""
							}
						}
					}
					it.Leave(&d)
				}
			}
		}
	}
	switch {
	case named:
		info.Class = wire.EvError
		return info
	case !ok || !it.IsObject() || !it.End():
		info.Class = wire.EvMalformed
		return info
	case info.ErrVal != nil && !jsonscan.IsNull(info.ErrVal) || jsonscan.StringIs(typ, "error"):
		info.Class = wire.EvError
		return info
	}
	var isDelta, isStop, isMessageDelta bool
	if ev.Name != nil {
		isDelta = string(ev.Name) == "content_block_delta"
		isStop = string(ev.Name) == "message_stop"
		isMessageDelta = string(ev.Name) == "message_delta"
	} else {
		isDelta = jsonscan.StringIs(typ, "content_block_delta")
		isStop = jsonscan.StringIs(typ, "message_stop")
		isMessageDelta = jsonscan.StringIs(typ, "message_delta")
	}
	switch {
	case isMessageDelta && stopBy != "" && !isDelta && !isStop:
		info.Class, info.By = wire.EvFinish, stopBy // a refusal or a limit is an answer (not in 889e452)
	case isDelta:
		info.Class, info.By = wire.EvOutput, "content_block_delta"
	case isStop:
		info.Class = wire.EvTerminal
	}
	if info.Class != wire.EvOutput {
		info.Text = nil
	}
	return info
}

func oldInspectResponses(ev sse.Event, withText bool) wire.EventInfo {
	var info wire.EventInfo
	named := string(ev.Name) == "error"
	data := ev.Data
	start := jsonscan.SkipSpace(data, 0)
	if start == len(data) {
		// No payload (a comment, a keepalive): no client sees it as an
		// event, so only an `event: error` means anything.
		if named {
			info.Class = wire.EvError
		}
		return info
	}
	var typ, delta, resp, code, msg []byte
	it, ok := jsonscan.Open(data, start, 0)
	if ok && it.IsObject() {
		for it.Next() {
			switch {
			case it.KeyIs("type"):
				typ = it.Value()
			case it.KeyIs("error"):
				info.ErrVal = it.Value()
			case it.KeyIs("delta"):
				delta = it.Value()
			case it.KeyIs("response"):
				resp = it.Value()
			case it.KeyIs("code"):
				code = it.Value()
			case it.KeyIs("message"):
				msg = it.Value()
			}
		}
	}
	valid := ok && it.IsObject() && it.End()
	if !valid && !named {
		info.Class = wire.EvMalformed
		info.ErrVal = nil
		return info
	}
	var buf [64]byte
	kind := oldResponsesKind(typ, ev.Name, buf[:0])
	switch {
	case named || string(kind) == "error" || info.ErrVal != nil && !jsonscan.IsNull(info.ErrVal):
		info.Class = wire.EvError
		if !valid || info.ErrVal == nil || jsonscan.IsNull(info.ErrVal) {
			info.ErrVal = oldResponsesFlatError(code, msg)
		}
		return info
	case string(kind) == "response.failed":
		info.Class = wire.EvError
		info.ErrVal = nil
		if v, ok := jsonscan.Lookup(resp, "error"); ok && !jsonscan.IsNull(v) {
			info.ErrVal = v
		}
		return info
	}
	info.ErrVal = nil
	info.Class, info.By = oldResponsesClass(kind)
	if withText && info.By == "response.output_text.delta" && jsonscan.IsString(delta) {
		info.Text = delta
	}
	return info
}

func oldResponsesKind(typ, name, buf []byte) []byte {
	if !jsonscan.IsString(typ) {
		return name
	}
	if bytes.IndexByte(typ, '\\') < 0 {
		return typ[1 : len(typ)-1]
	}
	return jsonscan.AppendString(buf, typ)
}

func oldResponsesClass(kind []byte) (wire.EventClass, string) {
	switch string(kind) {
	case "response.completed":
		return wire.EvTerminal, ""
	case "response.incomplete":
		return wire.EvTerminal, "response.incomplete" // an answer before any output (not in 889e452)
	case "response.output_item.done":
		return wire.EvOutput, "response.output_item.done"
	case "response.output_text.delta":
		return wire.EvOutput, "response.output_text.delta"
	case "response.function_call_arguments.delta":
		return wire.EvOutput, "response.function_call_arguments.delta"
	case "response.reasoning_summary_text.delta":
		return wire.EvOutput, "response.reasoning_summary_text.delta"
	case "response.reasoning_text.delta":
		return wire.EvOutput, "response.reasoning_text.delta"
	case "response.refusal.delta":
		return wire.EvOutput, "response.refusal.delta"
	case "response.custom_tool_call_input.delta":
		return wire.EvOutput, "response.custom_tool_call_input.delta"
	case "response.audio.delta":
		return wire.EvOutput, "response.audio.delta"
	case "response.audio.transcript.delta":
		return wire.EvOutput, "response.audio.transcript.delta"
	case "response.code_interpreter_call_code.delta":
		return wire.EvOutput, "response.code_interpreter_call_code.delta"
	case "response.mcp_call_arguments.delta":
		return wire.EvOutput, "response.mcp_call_arguments.delta"
	case "response.image_generation_call.partial_image":
		// Model output, and each one is a large base64 image: holding them
		// until output_item.done would overflow the gate's buffer.
		return wire.EvOutput, "response.image_generation_call.partial_image"
	}
	if bytes.HasPrefix(kind, []byte("response.")) && bytes.HasSuffix(kind, []byte(".delta")) {
		return wire.EvOutput, "response.*.delta"
	}
	return wire.EvPrelude, ""
}

func oldResponsesFlatError(code, msg []byte) []byte {
	if !jsonscan.IsString(code) && !jsonscan.IsString(msg) {
		return nil
	}
	out := []byte(`{`)
	if jsonscan.IsString(code) {
		out = append(append(out, `"code":`...), code...)
	}
	if jsonscan.IsString(msg) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(out, `"message":`...), msg...)
	}
	return append(out, '}')
}

func oldInspectOpenAI(ev sse.Event, withText bool, cs *wire.ChoiceSet) wire.EventInfo {
	var info wire.EventInfo
	data := ev.Data
	start := jsonscan.SkipSpace(data, 0)
	if string(ev.Name) == "error" {
		info.Class = wire.EvError
		info.ErrVal, _ = jsonscan.Lookup(data, "error")
		return info
	}
	if start == len(data) {
		return info // no payload: a comment or keepalive
	}
	if data[start] == '[' && oldIsDoneMarker(data[start:]) {
		info.Class = wire.EvTerminal
		return info
	}
	it, ok := jsonscan.Open(data, start, 0)
	if !ok || !it.IsObject() {
		info.Class = wire.EvMalformed
		return info
	}
	finish := false
	for it.Next() {
		switch {
		case it.KeyIs("error"):
			info.ErrVal = it.Value()
		case it.KeyIs("choices"):
			choices, ok := it.Enter()
			if !ok {
				continue
			}
			for !choices.IsObject() && choices.Next() {
				choice, ok := choices.Enter()
				index, finished := int64(0), false // a choice without an index is choice 0
				for ok && choice.IsObject() && choice.Next() {
					switch {
					case choice.KeyIs("finish_reason"):
						if jsonscan.NonEmpty(choice.Value()) {
							finish, finished = true, true
						}
					case choice.KeyIs("index"):
						if n, isInt := jsonscan.Int(choice.Value()); isInt {
							index = n
						} else {
							index = -1
						}
					case choice.KeyIs("delta"):
						if delta, ok := choice.Enter(); ok {
							oldOpenAIDelta(&delta, &info, withText)
							choice.Leave(&delta)
						}
					}
				}
				if ok {
					choices.Leave(&choice)
					if cs != nil && choice.IsObject() {
						cs.Note(index, finished)
					}
				}
			}
			it.Leave(&choices)
		}
	}
	switch {
	case !it.End():
		info.Class = wire.EvMalformed
	case info.ErrVal != nil && !jsonscan.IsNull(info.ErrVal):
		info.Class = wire.EvError
	case finish:
		info.Class = wire.EvFinish
		if info.By == "" {
			info.By = "finish_reason"
		}
	case info.By != "":
		info.Class = wire.EvOutput
	}
	return info
}

func oldOpenAIDelta(delta *jsonscan.Iter, info *wire.EventInfo, withText bool) {
	for delta.IsObject() && delta.Next() {
		var name string
		switch {
		case delta.KeyIs("content"):
			name = "content"
		case delta.KeyIs("reasoning_content"):
			name = "reasoning_content"
		case delta.KeyIs("reasoning"):
			name = "reasoning"
		case delta.KeyIs("tool_calls"):
			name = "tool_calls"
		case delta.KeyIs("function_call"):
			name = "function_call"
		case delta.KeyIs("refusal"):
			name = "refusal"
		default:
			continue
		}
		v := delta.Value()
		if info.By == "" && jsonscan.NonEmpty(v) {
			info.By = name
		}
		if withText && name == "content" && info.Text == nil && jsonscan.IsString(v) {
			info.Text = v
		}
	}
}

func oldIsDoneMarker(b []byte) bool {
	return len(b) >= 6 && string(b[:6]) == "[DONE]" && jsonscan.SkipSpace(b, 6) == len(b)
}
