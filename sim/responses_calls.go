package sim

// The Responses API calls besides a completion: compact, input token counts, and the calls on a stored response.

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// compact answers POST /v1/responses/compact: the user messages of the
// input followed by one compaction item, whose encrypted_content is opaque
// (here the simulator's text, base64). It is not stored.
func compact(ex *exchange) {
	ex.newID()
	if !ex.wait(ex.p.firstTokenDelay() + time.Duration(len(ex.p.deltas))*ex.p.tokenDelay) {
		return
	}
	output := []json.RawMessage{}
	for _, item := range inputItems(ex.req.Input, "msg_sim_"+strings.TrimPrefix(ex.id, "resp_sim_")) {
		var m struct {
			Role string `json:"role"`
		}
		if json.Unmarshal(item, &m) == nil && m.Role == "user" {
			output = append(output, item)
		}
	}
	output = append(output, mustJSON(struct {
		ID               string `json:"id"`
		Type             string `json:"type"`
		EncryptedContent string `json:"encrypted_content"`
	}{"cmp_sim_" + strings.TrimPrefix(ex.id, "resp_sim_"), "compaction", base64.StdEncoding.EncodeToString([]byte(ex.p.text))}))
	ex.sendJSON(mustJSON(struct {
		ID        string            `json:"id"`
		Object    string            `json:"object"`
		CreatedAt int64             `json:"created_at"`
		Output    []json.RawMessage `json:"output"`
		Usage     responsesUsage    `json:"usage"`
	}{ex.id, "response.compaction", ex.created, output, responsesUsageOf(ex)}), len(ex.p.deltas))
}

// inputTokensBody answers POST /v1/responses/input_tokens.
func inputTokensBody(inputTokens int) []byte {
	b := strconv.AppendInt([]byte(`{"object":"response.input_tokens","input_tokens":`), int64(inputTokens), 10)
	return append(b, '}')
}

// inputItems are the input of a request as input items with ids: a string
// is one user message; a list keeps its objects, with an id, a type and
// list content added where they lack them.
func inputItems(raw json.RawMessage, idBase string) []json.RawMessage {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []json.RawMessage{inputMessage(idBase+"_in0", "user", text)}
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	out := make([]json.RawMessage, 0, len(list))
	for i, item := range list {
		var fields map[string]json.RawMessage
		if json.Unmarshal(item, &fields) != nil || fields == nil {
			continue
		}
		id := idBase + "_in" + strconv.Itoa(i)
		var role, content string
		json.Unmarshal(fields["role"], &role)
		if json.Unmarshal(fields["content"], &content) == nil && role != "" {
			out = append(out, inputMessage(id, role, content))
			continue
		}
		if _, ok := fields["id"]; !ok {
			fields["id"] = mustJSON(id)
		}
		if _, ok := fields["type"]; !ok && role != "" {
			fields["type"] = json.RawMessage(`"message"`)
		}
		out = append(out, mustJSON(fields))
	}
	return out
}

// inputMessage is a message input item with text content.
func inputMessage(id, role, text string) json.RawMessage {
	partType := "input_text"
	if role == "assistant" {
		partType = "output_text"
	}
	return mustJSON(struct {
		ID      string           `json:"id"`
		Type    string           `json:"type"`
		Role    string           `json:"role"`
		Status  string           `json:"status"`
		Content []map[string]any `json:"content"`
	}{id, "message", role, "completed", []map[string]any{{"type": partType, "text": text}}})
}

// serveStored answers the endpoints of a stored response (found by
// resolveResponse).
func serveStored(ex *exchange, ep endpoint) {
	switch ep {
	case endpointGetResponse:
		ex.sendJSON(ex.s.store.render(ex.stored), 0)
	case endpointDeleteResponse:
		ex.s.store.remove(ex.stored.id)
		ex.sendJSON(mustJSON(struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Deleted bool   `json:"deleted"`
		}{ex.stored.id, "response.deleted", true}), 0)
	case endpointCancelResponse:
		ex.s.store.settle(ex.stored)
		ex.sendJSON(ex.s.store.render(ex.stored), 0)
	case endpointResponseInputItems:
		ex.sendJSON(inputItemsList(ex), 0)
	}
}

// inputItemsList is the list object of GET /v1/responses/{id}/input_items,
// with the query's order (default desc), after and limit (default 20).
func inputItemsList(ex *exchange) []byte {
	items := ex.stored.input
	q := ex.r.URL.Query()
	if q.Get("order") != "asc" {
		rev := make([]json.RawMessage, len(items))
		for i, it := range items {
			rev[len(items)-1-i] = it
		}
		items = rev
	}
	if after := q.Get("after"); after != "" {
		for i, it := range items {
			var m struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(it, &m) == nil && m.ID == after {
				items = items[i+1:]
				break
			}
		}
	}
	limit := 20
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n >= 1 && n <= 100 {
		limit = n
	}
	hasMore := len(items) > limit
	items = items[:min(limit, len(items))]
	list := struct {
		Object  string            `json:"object"`
		Data    []json.RawMessage `json:"data"`
		FirstID *string           `json:"first_id"`
		LastID  *string           `json:"last_id"`
		HasMore bool              `json:"has_more"`
	}{Object: "list", Data: items, HasMore: hasMore}
	if list.Data == nil {
		list.Data = []json.RawMessage{}
	}
	if len(items) > 0 {
		first, last := itemID(items[0]), itemID(items[len(items)-1])
		list.FirstID, list.LastID = &first, &last
	}
	return mustJSON(list)
}

func itemID(item json.RawMessage) string {
	var m struct {
		ID string `json:"id"`
	}
	json.Unmarshal(item, &m)
	return m.ID
}
