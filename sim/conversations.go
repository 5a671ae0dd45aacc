package sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// OpenAI Conversations: POST /v1/conversations creates one; GET, POST
// (metadata) and DELETE /v1/conversations/{id}, and its items. A
// conversation lives here only: a Responses request naming one this
// simulator does not hold (`conversation`, a string or {"id": ...}) is
// answered 404, as OpenAI answers a conversation of another project.

const maxConversations = 1000

type conversation struct {
	id       string
	created  int64
	metadata json.RawMessage
	items    []json.RawMessage
}

type conversationStore struct {
	mu    sync.Mutex
	byID  map[string]*conversation
	order []string
}

func (cs *conversationStore) put(c *conversation) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byID == nil {
		cs.byID = map[string]*conversation{}
	}
	cs.byID[c.id] = c
	cs.order = append(cs.order, c.id)
	for len(cs.byID) > maxConversations && len(cs.order) > 0 {
		delete(cs.byID, cs.order[0])
		cs.order = cs.order[1:]
	}
}

func (cs *conversationStore) get(id string) *conversation {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.byID[id]
}

func (cs *conversationStore) remove(id string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.byID, id)
}

func (c *conversation) object() []byte {
	meta := c.metadata
	if len(meta) == 0 || string(meta) == "null" {
		meta = json.RawMessage(`{}`)
	}
	return mustJSON(map[string]any{"id": c.id, "object": "conversation", "created_at": c.created, "metadata": meta})
}

// conversationsPath splits ".../conversations[/{id}[/rest]]".
func conversationsPath(p string) (id, rest string, ok bool) {
	p = strings.TrimSuffix(p, "/")
	if strings.HasSuffix(p, "/conversations") {
		return "", "", true
	}
	i := strings.LastIndex(p, "/conversations/")
	if i < 0 {
		return "", "", false
	}
	id, rest, _ = strings.Cut(p[i+len("/conversations/"):], "/")
	return id, rest, id != ""
}

// serveConversations answers the Conversations API paths; false for any other.
func serveConversations(ex *exchange) bool {
	id, rest, ok := conversationsPath(ex.r.URL.Path)
	if !ok {
		return false
	}
	ex.wire = openaiWire{}
	var body struct {
		Metadata json.RawMessage   `json:"metadata"`
		Items    []json.RawMessage `json:"items"`
	}
	if ex.r.Method == http.MethodPost {
		if err := json.NewDecoder(http.MaxBytesReader(ex.w, ex.r.Body, maxBody)).Decode(&body); err != nil {
			ex.fail(http.StatusBadRequest, "The request body is not valid JSON: "+err.Error())
			return true
		}
	}
	if id == "" {
		if ex.r.Method != http.MethodPost {
			ex.fail(http.StatusMethodNotAllowed, "Method Not Allowed: use POST")
			return true
		}
		var raw [12]byte
		_, _ = rand.Read(raw[:])
		c := &conversation{id: "conv_" + hex.EncodeToString(raw[:]), created: now().Unix(), metadata: body.Metadata, items: body.Items}
		ex.s.held.conversations.put(c)
		ex.sendJSON(c.object(), 0)
		return true
	}
	c := ex.s.held.conversations.get(id)
	switch {
	case c == nil:
		conversationNotFound(ex, id)
	case rest == "" && ex.r.Method == http.MethodGet:
		ex.sendJSON(c.object(), 0)
	case rest == "" && ex.r.Method == http.MethodDelete:
		ex.s.held.conversations.remove(id)
		ex.sendJSON(mustJSON(map[string]any{"id": id, "object": "conversation.deleted", "deleted": true}), 0)
	case rest == "items" && ex.r.Method == http.MethodGet:
		ex.sendJSON(mustJSON(map[string]any{"object": "list", "data": ex.s.held.conversations.items(c), "has_more": false}), 0)
	default:
		ex.fail(http.StatusMethodNotAllowed, "Method Not Allowed")
	}
	return true
}

func (cs *conversationStore) items(c *conversation) []json.RawMessage {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]json.RawMessage{}, c.items...)
}

func conversationNotFound(ex *exchange, id string) {
	ex.failWith(http.StatusNotFound, errorWith("Conversation with id '"+id+"' not found.", "invalid_request_error", "", ""))
}

// resolveConversation answers 404 for a Responses request naming a
// conversation this simulator does not hold.
func resolveConversation(ex *exchange, body []byte) bool {
	if ex.ep != endpointResponses || !strings.Contains(string(body), `"conversation"`) {
		return true
	}
	var req struct {
		Conversation json.RawMessage `json:"conversation"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Conversation) == 0 || string(req.Conversation) == "null" {
		return true
	}
	var id string
	if json.Unmarshal(req.Conversation, &id) != nil {
		var obj struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(req.Conversation, &obj)
		id = obj.ID
	}
	if id != "" && ex.s.held.conversations.get(id) == nil {
		conversationNotFound(ex, id)
		return false
	}
	return true
}
