package sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The Gemini API's provider-held objects: files (POST /v1beta/files or
// /upload/v1beta/files, answered {"file": {...}}; GET and DELETE
// /v1beta/files/{id}) and context caches (POST /v1beta/cachedContents,
// answered with the cache itself; GET, PATCH and DELETE by id). An object
// lives here only: one this simulator does not hold is answered 403
// PERMISSION_DENIED, as Gemini answers an object of another project, and
// so is a generateContent naming one (fileData.fileUri in the Files API's
// form, cachedContent).

// geminiFileURI is the prefix of the uri of a file of the Files API.
const geminiFileURI = "https://generativelanguage.googleapis.com/v1beta/files/"

// nameStore keeps objects by id, bounded; the oldest are forgotten first.
type nameStore struct {
	mu    sync.Mutex
	byID  map[string]map[string]any
	order []string
}

func (ns *nameStore) put(id string, obj map[string]any) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.byID == nil {
		ns.byID = map[string]map[string]any{}
	}
	ns.byID[id] = obj
	ns.order = append(ns.order, id)
	for len(ns.byID) > maxStoredFiles && len(ns.order) > 0 {
		delete(ns.byID, ns.order[0])
		ns.order = ns.order[1:]
	}
}

func (ns *nameStore) get(id string) map[string]any {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.byID[id]
}

func (ns *nameStore) remove(id string) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	delete(ns.byID, id)
}

// geminiObjectPath splits the Gemini files and cachedContents paths:
// the store, the id ("" for the collection); ok false for any other path.
func (s *Simulator) geminiObjectPath(p string) (store *nameStore, kind, id string, ok bool) {
	p = strings.TrimSuffix(p, "/")
	for _, c := range [...]struct{ prefix, kind string }{
		{"/upload/v1beta/files", "File"}, {"/v1beta/files", "File"}, {"/v1beta/cachedContents", "CachedContent"},
	} {
		i := strings.Index(p, c.prefix)
		if i < 0 {
			continue
		}
		rest := p[i+len(c.prefix):]
		if rest != "" && (rest[0] != '/' || strings.Contains(rest[1:], "/")) {
			return nil, "", "", false
		}
		store = &s.held.geminiFiles
		if c.kind == "CachedContent" {
			store = &s.held.caches
		}
		return store, c.kind, strings.TrimPrefix(rest, "/"), true
	}
	return nil, "", "", false
}

// serveGeminiObjects answers the Gemini files and caches paths; false for
// any other path.
func serveGeminiObjects(ex *exchange) bool {
	store, kind, id, ok := ex.s.geminiObjectPath(ex.r.URL.Path)
	if !ok {
		return false
	}
	gw := &geminiWire{}
	ex.wire = gw
	gw.bind(ex)
	switch {
	case id == "" && ex.r.Method == http.MethodPost:
		createGeminiObject(ex, store, kind)
	case id == "":
		ex.fail(http.StatusMethodNotAllowed, "Method Not Allowed: use POST")
	case store.get(id) == nil:
		geminiObjectMissing(ex, kind, id)
	case ex.r.Method == http.MethodGet || ex.r.Method == http.MethodPatch:
		ex.sendJSON(mustJSON(store.get(id)), 0)
	case ex.r.Method == http.MethodDelete:
		store.remove(id)
		ex.sendJSON([]byte(`{}`), 0)
	default:
		ex.fail(http.StatusMethodNotAllowed, "Method Not Allowed")
	}
	return true
}

// createGeminiObject stores a new file (its metadata from a JSON body's
// "file", or the body as its media) or cache, and answers it in the
// create's shape: a file inside {"file": ...}, a cache as itself.
func createGeminiObject(ex *exchange, store *nameStore, kind string) {
	body, err := io.ReadAll(http.MaxBytesReader(ex.w, ex.r.Body, maxBody))
	if err != nil {
		ex.fail(http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	var raw [6]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	ts := now().UTC().Format(time.RFC3339Nano)
	if kind == "CachedContent" {
		var req struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(body, &req) != nil || req.Model == "" {
			ex.fail(http.StatusBadRequest, "model: required")
			return
		}
		obj := map[string]any{"name": "cachedContents/" + id, "model": req.Model, "createTime": ts, "updateTime": ts,
			"expireTime": now().Add(time.Hour).UTC().Format(time.RFC3339Nano), "usageMetadata": map[string]any{"totalTokenCount": 1}}
		store.put(id, obj)
		ex.sendJSON(mustJSON(obj), 0)
		return
	}
	var meta struct {
		File struct {
			DisplayName string `json:"displayName"`
			MimeType    string `json:"mimeType"`
		} `json:"file"`
	}
	size := len(body)
	if strings.HasPrefix(ex.r.Header.Get("Content-Type"), "application/json") && json.Unmarshal(body, &meta) == nil {
		size = 0
	}
	if meta.File.MimeType == "" {
		meta.File.MimeType = "text/plain"
	}
	obj := map[string]any{"name": "files/" + id, "displayName": meta.File.DisplayName, "mimeType": meta.File.MimeType,
		"sizeBytes": strconv.Itoa(size), "createTime": ts, "updateTime": ts, "uri": geminiFileURI + id,
		"state": "ACTIVE", "source": "UPLOADED"}
	store.put(id, obj)
	ex.sendJSON(mustJSON(map[string]any{"file": obj}), 0)
}

// geminiObjectMissing is Gemini's answer for an object of another
// project, or none: 403 PERMISSION_DENIED.
func geminiObjectMissing(ex *exchange, kind, id string) {
	msg := "You do not have permission to access the File " + id + " or it may not exist."
	if kind == "CachedContent" {
		msg = "CachedContent not found (or permission denied)"
	}
	ex.writeHeader(http.StatusForbidden, "application/json; charset=UTF-8")
	ex.w.Write(geminiErrorBody(http.StatusForbidden, msg, nil))
}

// resolveGeminiObjects answers 403 for a generateContent naming a cache
// or a file of the Files API this simulator does not hold.
func resolveGeminiObjects(ex *exchange, body []byte) bool {
	if _, gemini := ex.wire.(*geminiWire); !gemini ||
		(!strings.Contains(string(body), `"cachedContent"`) && !strings.Contains(string(body), `"fileUri"`)) {
		return true
	}
	var req struct {
		CachedContent string `json:"cachedContent"`
		Contents      []struct {
			Parts []struct {
				FileData *struct {
					FileURI string `json:"fileUri"`
				} `json:"fileData"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if json.Unmarshal(body, &req) != nil {
		return true
	}
	if id, ok := strings.CutPrefix(req.CachedContent, "cachedContents/"); ok && ex.s.held.caches.get(id) == nil {
		geminiObjectMissing(ex, "CachedContent", id)
		return false
	}
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if p.FileData == nil {
				continue
			}
			id, ok := strings.CutPrefix(p.FileData.FileURI, geminiFileURI)
			if !ok {
				id, ok = strings.CutPrefix(p.FileData.FileURI, "files/")
			}
			if ok && ex.s.held.geminiFiles.get(id) == nil {
				geminiObjectMissing(ex, "File", id)
				return false
			}
		}
	}
	return true
}
