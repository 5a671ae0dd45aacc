package fleettest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// chatsAnswered counts the chat completions a provider answered 200.
func (f *fleet) chatsAnswered(name string) int {
	n := 0
	for _, rec := range f.sims[name].Requests() {
		if rec.Path == "/v1/chat/completions" && rec.Status == http.StatusOK {
			n++
		}
	}
	return n
}

// filesAcrossInstances: files uploaded through one instance (openai-go,
// through the forward allow-list) are named in chat completions sent
// through the two others, which never saw them, and through the
// balancer: every completion is answered by the provider holding its file.
func (f *fleet) filesAcrossInstances(t *testing.T) {
	uploader := client(f.instances[0].URL())
	var ids []string
	for range 4 {
		file, err := uploader.Files.New(ctxTimeout(t, 30*time.Second), openai.FileNewParams{
			File:    openai.File(strings.NewReader("a document"), "notes.txt", "text/plain"),
			Purpose: openai.FilePurposeUserData,
		})
		if err != nil {
			t.Fatalf("upload through %s: %v", f.instances[0].name, err)
		}
		ids = append(ids, file.ID)
	}
	holder := ""
	for _, name := range []string{"a", "b"} {
		if status, _ := get(t, f.simURL[name], "/v1/files/"+ids[0]); status == http.StatusOK {
			holder = name
		}
	}
	if holder == "" {
		t.Fatal("the upload reached no provider")
	}
	other := map[string]string{"a": "b", "b": "a"}[holder]
	heldBefore, otherBefore := f.chatsAnswered(holder), f.chatsAnswered(other)
	sent := 0
	for _, id := range ids {
		for _, base := range []string{f.instances[1].URL(), f.instances[2].URL(), f.balancer.URL()} {
			c := client(base)
			got, err := c.Chat.Completions.New(ctxTimeout(t, 30*time.Second), openai.ChatCompletionNewParams{
				Model: "gpt-test",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
					openai.FileContentPart(openai.ChatCompletionContentPartFileFileParam{FileID: openai.String(id)}),
					openai.TextContentPart("summarize"),
				})},
			})
			if err != nil || got.Choices[0].Message.Content != wantText {
				t.Fatalf("completion naming %s through %s: %v", id, base, err)
			}
			sent++
		}
	}
	if got := f.chatsAnswered(holder) - heldBefore; got != sent {
		t.Fatalf("the holder %s answered %d of %d completions naming its files", holder, got, sent)
	}
	if f.chatsAnswered(other) != otherBefore {
		t.Fatalf("%s, which holds none of the files, answered a completion naming one", other)
	}
}
