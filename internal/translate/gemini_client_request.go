package translate

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Gemini generateContent requests of a client (Gemini CLI, genai), decoded
// into the intermediate form. The model and the stream mode are in the
// client's path, not its body: the engine gives the target model to
// Translate, and marks a streamed request (streamGenerateContent?alt=sse)
// with WithGeminiStream before it.

// WithGeminiStream marks a Gemini client's body as streamed: Gemini names
// the stream mode in the path (streamGenerateContent?alt=sse), the other
// formats in the body, so the engine adds it before Translate. The member
// it adds, "stream": true, is read only by this package's Gemini client
// decoder; the body is never sent to Google as such.
func WithGeminiStream(body []byte) []byte {
	if out, ok := withStreamMember(body); ok {
		return out
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top == nil {
		return body // not an object: Translate reports it
	}
	top["stream"] = json.RawMessage("true")
	out, err := json.Marshal(top)
	if err != nil {
		return body
	}
	return out
}

// geminiClientFields classifies the request's fields; a field not listed
// is material, never dropped unseen.
var geminiClientFields = map[string]string{
	"contents": "carried", "systemInstruction": "carried", "tools": "carried", "toolConfig": "carried",
	"generationConfig": "carried", "safetySettings": "carried", "cachedContent": "carried",
	"model":  "carried", // Vertex and some clients repeat the path's model
	"stream": "carried", // WithGeminiStream's mark of the path's stream mode
	// Vertex's billing labels: how the request is accounted, not what it asks.
	"labels": "advisory",
}

// geminiGenerationFields classifies generationConfig's fields.
var geminiGenerationFields = map[string]string{
	"temperature": "carried", "topP": "carried", "topK": "carried", "maxOutputTokens": "carried",
	"stopSequences": "carried", "candidateCount": "carried", "responseMimeType": "carried",
	"responseModalities": "carried", "responseLogprobs": "carried", "logprobs": "carried",
	// How much the model thinks, not what it answers; its thoughts are not
	// shown across vendors anyway.
	"thinkingConfig": "advisory",
	"seed":           "carried", "presencePenalty": "carried", "frequencyPenalty": "carried",
	"mediaResolution": "advisory", "enableEnhancedCivicAnswers": "advisory",
	"routingConfig": "advisory", "modelSelectionConfig": "advisory",
	// Structured output: carried as Request.ResponseFormat (json_schema),
	// which a target that cannot enforce it refuses. Other modalities: what the answer must be.
	"responseSchema": "carried", "responseJsonSchema": "carried",
	"speechConfig": "material", "audioTimestamp": "material", "imageConfig": "material",
}

// geminiPartFields are the fields of a content part the decoder reads.
var geminiPartFields = map[string]bool{
	"text": true, "thought": true, "thoughtSignature": true, "inlineData": true,
	"functionCall": true, "functionResponse": true,
}

// geminiFunctionFields are the fields of a function declaration the
// decoder reads.
var geminiFunctionFields = map[string]bool{
	"name": true, "description": true, "parameters": true, "parametersJsonSchema": true,
}

type geminiClientPart struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature string  `json:"thoughtSignature"`
	InlineData       *struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	} `json:"inlineData"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string            `json:"id"`
		Name     string            `json:"name"`
		Response json.RawMessage   `json:"response"`
		Parts    []json.RawMessage `json:"parts"`
	} `json:"functionResponse"`
}

type geminiClientContent struct {
	Role  string            `json:"role"`
	Parts []json.RawMessage `json:"parts"`
}

// geminiThoughtSignatureLoss names the Gemini thought signatures of a
// Gemini client's history, which stay with Gemini.
const geminiThoughtSignatureLoss = "Gemini thought signatures in history (kept for Gemini only)"

func decodeGeminiClientRequest(body []byte) (*Request, []Loss, error) {
	var buf [16]member
	top, err := objectMembers(body, buf[:0])
	if err != nil {
		return nil, nil, fmt.Errorf("gemini request: %w", err)
	}
	losses := fieldLosses(nil, top, geminiClientFields, unsetValue)
	var in struct {
		Contents          []geminiClientContent `json:"contents"`
		SystemInstruction *geminiClientContent  `json:"systemInstruction"`
		Tools             []json.RawMessage     `json:"tools"`
		ToolConfig        *struct {
			FunctionCallingConfig *struct {
				Mode                 string   `json:"mode"`
				AllowedFunctionNames []string `json:"allowedFunctionNames"`
			} `json:"functionCallingConfig"`
			RetrievalConfig json.RawMessage `json:"retrievalConfig"`
		} `json:"toolConfig"`
		GenerationConfig map[string]json.RawMessage `json:"generationConfig"`
		SafetySettings   json.RawMessage            `json:"safetySettings"`
		CachedContent    string                     `json:"cachedContent"`
		Stream           bool                       `json:"stream"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, fmt.Errorf("gemini request: %w", err)
	}
	if !unsetValue(in.SafetySettings) {
		// What may be said and what is blocked, at Google's thresholds.
		losses = addLoss(losses, "safetySettings", true)
	}
	if in.CachedContent != "" {
		// The cached prefix of the conversation lives at Google.
		losses = addLoss(losses, "cachedContent (the cache lives at Google)", true)
	}
	r := &Request{Stream: in.Stream}
	if losses, err = geminiGeneration(r, in.GenerationConfig, losses); err != nil {
		return nil, nil, err
	}
	if in.SystemInstruction != nil {
		var blocks []Block
		if blocks, losses, err = geminiClientParts(in.SystemInstruction.Parts, "systemInstruction", losses); err != nil {
			return nil, nil, err
		}
		r.System = blocks
	}
	if losses, err = geminiClientContents(r, in.Contents, losses); err != nil {
		return nil, nil, err
	}
	// A model turn last: Gemini answers anew after it, as Chat does;
	// Anthropic would continue it, which its encoder names (material).
	for _, raw := range in.Tools {
		if losses, err = geminiClientTool(r, raw, losses); err != nil {
			return nil, nil, err
		}
	}
	if tc := in.ToolConfig; tc != nil {
		if !unsetValue(tc.RetrievalConfig) {
			losses = addLoss(losses, "toolConfig.retrievalConfig", true)
		}
		if fc := tc.FunctionCallingConfig; fc != nil {
			if r.ToolChoice, losses, err = geminiFunctionCalling(fc.Mode, fc.AllowedFunctionNames, losses); err != nil {
				return nil, nil, err
			}
		}
	}
	return r, losses, nil
}

// geminiClientContents reads the conversation. Function calls keep the
// client's ids when it sent usable ones (Gemini CLI and genai send back
// the ids of the answers); calls without (older API versions) get ids made
// of their place, and each functionResponse answers the call with its id,
// or else the first unanswered call of its name, as Gemini pairs them.
func geminiClientContents(r *Request, contents []geminiClientContent, losses []Loss) ([]Loss, error) {
	type call struct {
		clientID, id, name string
		answered           bool
	}
	var calls []call
	used := map[string]bool{}
	for ci, c := range contents {
		role := "user"
		switch c.Role {
		case "model":
			role = "assistant"
		case "", "user", "function", "tool":
		default:
			return losses, fmt.Errorf("gemini request: content %d: role %q", ci, c.Role)
		}
		var blocks []Block
		for pi, raw := range c.Parts {
			var p geminiClientPart
			if err := json.Unmarshal(raw, &p); err != nil {
				return losses, fmt.Errorf("gemini request: content %d part %d: %w", ci, pi, err)
			}
			switch {
			case p.FunctionCall != nil:
				losses = unreadFieldLosses(raw, "part", geminiPartFields, losses)
				fc := p.FunctionCall
				if fc.Name == "" {
					return losses, fmt.Errorf("gemini request: content %d part %d: functionCall without a name", ci, pi)
				}
				args := fc.Args
				if isNullish(args) {
					args = json.RawMessage(`{}`)
				}
				if err := checkArgs(args); err != nil {
					return losses, fmt.Errorf("gemini request: content %d part %d: functionCall %s: %w", ci, pi, fc.Name, err)
				}
				id := fc.ID
				if !anthropicIDChars(id) || used[id] {
					id = "call_g" + strconv.Itoa(ci) + "_" + strconv.Itoa(pi)
				}
				used[id] = true
				calls = append(calls, call{clientID: fc.ID, id: id, name: fc.Name})
				b := Block{Kind: KindToolCall, ToolID: id, ToolName: fc.Name, Args: compactJSON(args)}
				if p.ThoughtSignature != "" {
					b.Opaque = &Opaque{Origin: Gemini, Kind: "thought_signature", Value: p.ThoughtSignature}
					losses = addLoss(losses, geminiThoughtSignatureLoss, false)
				}
				blocks = append(blocks, b)
			case p.FunctionResponse != nil:
				losses = unreadFieldLosses(raw, "part", geminiPartFields, losses)
				fr := p.FunctionResponse
				var fields map[string]json.RawMessage
				_ = json.Unmarshal(raw, &fields)
				losses = unreadFieldLosses(fields["functionResponse"], "functionResponse",
					map[string]bool{"id": true, "name": true, "response": true, "parts": true}, losses)
				match := -1
				for i := range calls {
					if !calls[i].answered && fr.ID != "" && calls[i].clientID == fr.ID {
						match = i
						break
					}
				}
				for i := range calls {
					if match < 0 && !calls[i].answered && calls[i].name == fr.Name && (fr.ID == "" || calls[i].clientID == "") {
						match = i
					}
				}
				if match < 0 {
					losses = addLoss(losses, "functionResponse for a call not in the conversation", true)
					continue
				}
				calls[match].answered = true
				result, isErr, more, err := geminiFunctionResult(fr.Response, fr.Parts, losses)
				if err != nil {
					return losses, fmt.Errorf("gemini request: content %d part %d: %w", ci, pi, err)
				}
				losses = more
				blocks = append(blocks, Block{Kind: KindToolResult, ToolID: calls[match].id, Result: result, IsError: isErr})
			default:
				var more []Block
				var err error
				if more, losses, err = geminiClientParts([]json.RawMessage{raw}, "content", losses); err != nil {
					return losses, fmt.Errorf("gemini request: content %d part %d: %w", ci, pi, err)
				}
				blocks = append(blocks, more...)
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
			r.Messages[n-1].Blocks = append(r.Messages[n-1].Blocks, blocks...)
		} else {
			r.Messages = append(r.Messages, Message{Role: role, Blocks: blocks})
		}
	}
	return losses, nil
}

// geminiClientParts reads parts that are neither calls nor results: text,
// thoughts and inline data.
func geminiClientParts(raws []json.RawMessage, where string, losses []Loss) ([]Block, []Loss, error) {
	var out []Block
	for _, raw := range raws {
		var p geminiClientPart
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, losses, err
		}
		var fields map[string]json.RawMessage
		_ = json.Unmarshal(raw, &fields)
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if !geminiPartFields[k] && !unsetValue(fields[k]) {
				// fileData (files stored at Google), executableCode,
				// codeExecutionResult, videoMetadata...
				losses = addLoss(losses, where+" part "+k, true)
			}
		}
		switch {
		case p.Thought:
			b := Block{Kind: KindReasoning}
			if p.Text != nil {
				b.Text = *p.Text
			}
			if p.ThoughtSignature != "" {
				b.Opaque = &Opaque{Origin: Gemini, Kind: "thought_signature", Value: p.ThoughtSignature}
			}
			out = append(out, b)
		case p.Text != nil:
			if p.ThoughtSignature != "" {
				losses = addLoss(losses, geminiThoughtSignatureLoss, false)
			}
			out = append(out, Block{Kind: KindText, Text: *p.Text})
		case p.InlineData != nil:
			b, more, err := geminiInline(p.InlineData.MimeType, p.InlineData.Data, losses)
			if err != nil {
				return nil, losses, err
			}
			losses = more
			if b != nil {
				out = append(out, *b)
			}
		}
	}
	return out, losses, nil
}

// geminiInline reads inline data: an image, a PDF, or plain text (a
// document of text); audio, video and other types are not carried.
func geminiInline(mime, data string, losses []Loss) (*Block, []Loss, error) {
	switch {
	case strings.HasPrefix(mime, "image/"):
		return &Block{Kind: KindImage, MediaType: mime, Data: data}, losses, nil
	case mime == "application/pdf":
		return &Block{Kind: KindDocument, MediaType: mime, Data: data}, losses, nil
	case mime == "text/plain":
		text, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, losses, fmt.Errorf("inlineData text/plain: %w", err)
		}
		return &Block{Kind: KindDocument, MediaType: mime, Data: string(text)}, losses, nil
	}
	return nil, addLoss(losses, "inlineData "+mime, true), nil
}

// geminiFunctionResult reads a functionResponse's response object: one
// string member output, result or error (the conventions of Gemini CLI,
// the docs and this package's encoder) is its text; an error member marks
// an error. Any other object is given as its JSON text, as the model
// reads it at Google. Multimodal parts (Gemini 3) follow as images.
func geminiFunctionResult(resp json.RawMessage, parts []json.RawMessage, losses []Loss) ([]Block, bool, []Loss, error) {
	var out []Block
	isErr := false
	var obj map[string]json.RawMessage
	if !isNullish(resp) {
		if err := json.Unmarshal(resp, &obj); err != nil {
			return nil, false, losses, fmt.Errorf("functionResponse.response is not an object: %w", err)
		}
	}
	if len(obj) == 1 {
		for k, v := range obj {
			var s string
			if (k == "output" || k == "result" || k == "error" || k == "content") && json.Unmarshal(v, &s) == nil {
				out = append(out, Block{Kind: KindText, Text: s})
				isErr = k == "error"
			}
		}
	}
	if out == nil && len(obj) > 0 {
		out = append(out, Block{Kind: KindText, Text: string(compactJSON(resp))})
	}
	for _, raw := range parts {
		var p struct {
			InlineData *struct {
				MimeType string `json:"mimeType"`
				Data     string `json:"data"`
			} `json:"inlineData"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, false, losses, fmt.Errorf("functionResponse part: %w", err)
		}
		if p.InlineData == nil {
			losses = addLoss(losses, "functionResponse part other than inlineData", true)
			continue
		}
		b, more, err := geminiInline(p.InlineData.MimeType, p.InlineData.Data, losses)
		if err != nil {
			return nil, false, losses, err
		}
		losses = more
		if b != nil {
			out = append(out, *b)
		}
	}
	return out, isErr, losses, nil
}
