package sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// The Files APIs: OpenAI's (POST /v1/files, multipart file and purpose)
// and Anthropic's (the same path, with anthropic-version or x-api-key).
// A file lives here only: a completion naming a file_id this simulator
// does not hold is answered 404 in its dialect, as a provider without
// that file does.

// maxStoredFiles bounds the files kept; the oldest are forgotten first.
const maxStoredFiles = 1000

// heldObjects are the objects besides responses this simulator holds.
type heldObjects struct {
	files         fileStore
	conversations conversationStore
	geminiFiles   nameStore // Gemini Files API (gemini_objects.go)
	caches        nameStore // Gemini cachedContents
}

// storedFile is an uploaded file.
type storedFile struct {
	id, name, purpose, mime string
	size                    int64
	created                 time.Time
	anthropic               bool
}

type fileStore struct {
	mu    sync.Mutex
	byID  map[string]*storedFile
	order []string
}

func (fs *fileStore) put(f *storedFile) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.byID == nil {
		fs.byID = map[string]*storedFile{}
	}
	fs.byID[f.id] = f
	fs.order = append(fs.order, f.id)
	for len(fs.byID) > maxStoredFiles && len(fs.order) > 0 {
		delete(fs.byID, fs.order[0])
		fs.order = fs.order[1:]
	}
}

func (fs *fileStore) get(id string) *storedFile {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.byID[id]
}

func (fs *fileStore) remove(id string) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	_, ok := fs.byID[id]
	delete(fs.byID, id)
	return ok
}

// object is the file as its API describes it.
func (f *storedFile) object() []byte {
	if f.anthropic {
		return mustJSON(map[string]any{"id": f.id, "type": "file", "filename": f.name, "mime_type": f.mime,
			"size_bytes": f.size, "created_at": f.created.UTC().Format(time.RFC3339), "downloadable": false})
	}
	return mustJSON(map[string]any{"id": f.id, "object": "file", "bytes": f.size, "created_at": f.created.Unix(),
		"filename": f.name, "purpose": f.purpose, "status": "processed", "expires_at": nil, "status_details": nil})
}

// filesPath splits ".../files[/{id}[/content]]"; ok is false for any other path.
func filesPath(p string) (id, action string, ok bool) {
	p = strings.TrimSuffix(p, "/")
	if strings.HasSuffix(p, "/files") {
		return "", "", true
	}
	i := strings.LastIndex(p, "/files/")
	if i < 0 {
		return "", "", false
	}
	id, action, _ = strings.Cut(p[i+len("/files/"):], "/")
	if id == "" || (action != "" && action != "content") {
		return "", "", false
	}
	return id, action, true
}

// serveFiles answers the Files API paths; false for any other path.
func serveFiles(ex *exchange) bool {
	id, action, ok := filesPath(ex.r.URL.Path)
	if !ok {
		return false
	}
	anthropic := ex.r.Header.Get("Anthropic-Version") != "" || ex.r.Header.Get("X-Api-Key") != ""
	ex.wire = openaiWire{}
	if anthropic {
		ex.wire = anthropicWire{}
	}
	switch {
	case id == "" && ex.r.Method == http.MethodPost:
		uploadFile(ex, anthropic)
	case id == "":
		ex.fail(http.StatusMethodNotAllowed, "Method Not Allowed: use POST")
	case ex.s.held.files.get(id) == nil:
		fileNotFound(ex, id)
	case ex.r.Method == http.MethodGet && action == "":
		ex.sendJSON(ex.s.held.files.get(id).object(), 0)
	case ex.r.Method == http.MethodGet:
		ex.writeHeader(http.StatusOK, "application/octet-stream")
		_, _ = io.WriteString(ex.w, "simulated file "+id)
	case ex.r.Method == http.MethodDelete && action == "":
		ex.s.held.files.remove(id)
		if anthropic {
			ex.sendJSON(mustJSON(map[string]string{"id": id, "type": "file_deleted"}), 0)
		} else {
			ex.sendJSON(mustJSON(map[string]any{"id": id, "object": "file", "deleted": true}), 0)
		}
	default:
		ex.fail(http.StatusMethodNotAllowed, "Method Not Allowed")
	}
	return true
}

func uploadFile(ex *exchange, anthropic bool) {
	if err := ex.r.ParseMultipartForm(32 << 20); err != nil {
		ex.fail(http.StatusBadRequest, "expected a multipart/form-data body: "+err.Error())
		return
	}
	file, hdr, err := ex.r.FormFile("file")
	if err != nil {
		ex.fail(http.StatusBadRequest, "file: Field required")
		return
	}
	size, _ := io.Copy(io.Discard, file)
	_ = file.Close()
	var raw [12]byte
	_, _ = rand.Read(raw[:])
	f := &storedFile{id: "file-" + hex.EncodeToString(raw[:]), name: hdr.Filename, purpose: ex.r.FormValue("purpose"),
		mime: hdr.Header.Get("Content-Type"), size: size, created: now(), anthropic: anthropic}
	if anthropic {
		f.id = "file_" + hex.EncodeToString(raw[:])
	}
	ex.s.held.files.put(f)
	ex.sendJSON(f.object(), 0)
}

// fileNotFound is the provider's answer for a file it does not hold:
// OpenAI's invalid_request_error, Anthropic's not_found_error, each
// naming the id.
func fileNotFound(ex *exchange, id string) {
	if _, ok := ex.wire.(anthropicWire); ok {
		ex.fail(http.StatusNotFound, "File not found: "+id)
		return
	}
	ex.failWith(http.StatusNotFound, errorWith("No such File object: "+id, "invalid_request_error", "file_id", ""))
}

// resolveFiles answers 404 for a completion naming, where each API puts
// an uploaded file, a file_id this simulator does not hold: Anthropic's
// `source: {"type": "file", "file_id"}` and container_upload blocks,
// Chat's `{"type": "file", "file": {"file_id"}}` parts, Responses'
// input_file and input_image parts. A file_id anywhere else (a tool
// call's input, metadata) is the client's own data: no provider reads it.
func resolveFiles(ex *exchange, body []byte) bool {
	if !strings.Contains(string(body), `"file_id"`) {
		return true
	}
	var v any
	if json.Unmarshal(body, &v) != nil {
		return true
	}
	if id := missingFile(v, &ex.s.held.files); id != "" {
		fileNotFound(ex, id)
		return false
	}
	return true
}

// fileBlockTypes are the "type"s of the objects holding a file_id.
var fileBlockTypes = map[string]bool{"file": true, "container_upload": true, "input_file": true, "input_image": true}

// opaqueMembers hold the client's own data, never a content block (and
// so does a tool_use block's "input"; a Responses request's is its content).
var opaqueMembers = map[string]bool{"arguments": true, "metadata": true, "parameters": true, "input_schema": true, "args": true}

func missingFile(v any, fs *fileStore) string {
	switch v := v.(type) {
	case map[string]any:
		typ, _ := v["type"].(string)
		if fileBlockTypes[typ] {
			id, ok := v["file_id"].(string)
			if part, isPart := v["file"].(map[string]any); !ok && isPart { // Chat's file part
				id, ok = part["file_id"].(string)
			}
			if ok && fs.get(id) == nil {
				return id
			}
		}
		for k, c := range v {
			if opaqueMembers[k] || (k == "input" && strings.HasSuffix(typ, "tool_use")) {
				continue
			}
			if id := missingFile(c, fs); id != "" {
				return id
			}
		}
	case []any:
		for _, c := range v {
			if id := missingFile(c, fs); id != "" {
				return id
			}
		}
	}
	return ""
}
