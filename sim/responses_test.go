package sim

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

const (
	responsesStreamBody = `{"model":"gpt-test","stream":true,"input":"hi"}`
	responsesBody       = `{"model":"gpt-test","input":"hi"}`
)

var responsesParams = responses.ResponseNewParams{
	Model: "gpt-test",
	Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say something.")},
}

// wantResponsesEvents is the event sequence of a complete stream with n deltas.
func wantResponsesEvents(n int) []string {
	out := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	for range n {
		out = append(out, "response.output_text.delta")
	}
	return append(out, "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed")
}

// sdkStream is what the openai-go SDK made of a Responses stream.
type sdkStream struct {
	types     []string
	deltas    string              // the output_text deltas joined
	completed *responses.Response // from response.completed, or nil
	snapshot  responses.ResponseAccumulatorSnapshot
	accErr    error // the first error of the SDK's accumulator
	err       error // stream.Err()
}

// streamResponses runs Responses.NewStreaming to its end, checking the
// sequence numbers count up from 0 and feeding the SDK's accumulator.
func streamResponses(t *testing.T, ctx context.Context, client openai.Client, params responses.ResponseNewParams) sdkStream {
	t.Helper()
	var got sdkStream
	var acc responses.ResponseAccumulator
	stream := client.Responses.NewStreaming(ctx, params)
	defer stream.Close()
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(got.types)) {
			t.Errorf("event %d (%s) has sequence_number %d", len(got.types), ev.Type, ev.SequenceNumber)
		}
		got.types = append(got.types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			got.deltas += ev.Delta
		case "response.completed":
			r := ev.AsResponseCompleted().Response
			got.completed = &r
		}
		var server responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &server); err != nil {
			t.Fatalf("event %s as a server event: %v", ev.Type, err)
		}
		if err := acc.AddEvent(server); err != nil && got.accErr == nil {
			got.accErr = err
		}
	}
	got.err = stream.Err()
	got.snapshot = acc.Snapshot()
	return got
}

func TestResponsesSDK(t *testing.T) {
	tests := []struct {
		name      string
		cfg       Config
		stream    bool
		wantText  string
		wantModel string
	}{
		{"default", Config{}, false, "The quick brown fox jumps over the lazy dog. The quick brown", "gpt-test"},
		{"default stream", Config{}, true, "The quick brown fox jumps over the lazy dog. The quick brown", "gpt-test"},
		{"configured", Config{Text: "One two three four", Tokens: 3, CacheRead: 7, Model: "gpt-sim"}, false, "One two three four", "gpt-sim"},
		{"configured stream", Config{Text: "One two three four", Tokens: 3, CacheRead: 7, Model: "gpt-sim"}, true, "One two three four", "gpt-sim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := serve(t, tt.cfg)
			client := openaiClient(srv, "test")
			var resp *responses.Response
			if tt.stream {
				got := streamResponses(t, t.Context(), client, responsesParams)
				if got.err != nil || got.accErr != nil {
					t.Fatalf("stream: %v; accumulator: %v", got.err, got.accErr)
				}
				if want := wantResponsesEvents(s.Config().Tokens); !slices.Equal(got.types, want) {
					t.Errorf("events = %q, want %q", got.types, want)
				}
				if got.deltas != tt.wantText || got.snapshot.OutputText() != tt.wantText || got.snapshot.TerminalEvent != "response.completed" {
					t.Errorf("deltas %q, accumulated %q (%s), want %q", got.deltas, got.snapshot.OutputText(), got.snapshot.TerminalEvent, tt.wantText)
				}
				if got.completed == nil {
					t.Fatal("no response.completed")
				}
				resp = got.completed
			} else {
				r, err := client.Responses.New(t.Context(), responsesParams)
				if err != nil {
					t.Fatalf("Responses.New: %v", err)
				}
				resp = r
			}

			cfg := s.Config()
			if resp.OutputText() != tt.wantText || resp.Status != responses.ResponseStatusCompleted || len(resp.Output) != 1 ||
				resp.Output[0].Type != "message" || resp.Output[0].Role != "assistant" || resp.Output[0].Status != "completed" {
				t.Errorf("response = %s, want %q completed", resp.RawJSON(), tt.wantText)
			}
			if resp.Model != tt.wantModel || resp.Object != "response" || !strings.HasPrefix(resp.ID, "resp_sim_") || resp.CreatedAt == 0 {
				t.Errorf("model, object, id, created = %q, %q, %q, %v", resp.Model, resp.Object, resp.ID, resp.CreatedAt)
			}
			u := resp.Usage
			rec := lastRecord(t, s)
			wantInput := int64(max(1, int(rec.BodySize)/4) + cfg.CacheRead)
			if u.OutputTokens != int64(cfg.Tokens) || u.InputTokens != wantInput || u.InputTokensDetails.CachedTokens != int64(cfg.CacheRead) ||
				u.OutputTokensDetails.ReasoningTokens != 0 || u.TotalTokens != u.InputTokens+u.OutputTokens {
				t.Errorf("usage = %s, want input %d, output %d", u.RawJSON(), wantInput, cfg.Tokens)
			}
			if rec.ID != resp.ID || rec.Path != "/v1/responses" || rec.Stream != tt.stream || rec.Status != http.StatusOK ||
				rec.Deltas != cfg.Tokens || rec.Authorization != "Bearer test" || rec.Canceled {
				t.Errorf("record = %+v", rec)
			}

			// The response is stored: GET returns it, its input items list
			// the input, DELETE forgets it.
			again, err := client.Responses.Get(t.Context(), resp.ID, responses.ResponseGetParams{})
			if err != nil || again.ID != resp.ID || again.OutputText() != tt.wantText || again.Status != "completed" || again.Usage.TotalTokens != u.TotalTokens {
				t.Fatalf("Get = %v, %v", again, err)
			}
			items, err := client.Responses.InputItems.List(t.Context(), resp.ID, responses.InputItemListParams{})
			if err != nil || len(items.Data) != 1 || items.HasMore || itemOf(items.Data[0]) != (plainItem{"message", "user", "input_text", "Say something."}) {
				t.Errorf("input items = %+v, %v", items, err)
			}
			if err := client.Responses.Delete(t.Context(), resp.ID); err != nil {
				t.Errorf("Delete: %v", err)
			}
			_, err = client.Responses.Get(t.Context(), resp.ID, responses.ResponseGetParams{})
			var oerr *openai.Error
			if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusNotFound || oerr.Type != "invalid_request_error" ||
				!strings.Contains(oerr.Message, resp.ID) {
				t.Errorf("Get after Delete: %v", err)
			}
			if st := s.Stats(); st.Requests != 5 || st.InFlight != 0 || st.Faulted != 0 || st.PreviousNotFound != 0 {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

// TestResponsesStoredEndpoints covers the paths of a stored response,
// store: false, and the 404s of unknown ids.
func TestResponsesStoredEndpoints(t *testing.T) {
	s, srv := serve(t, Config{Tokens: 2})
	client := openaiClient(srv, "k")

	unknown := []func() error{
		func() error {
			_, err := client.Responses.Get(t.Context(), "resp_nope", responses.ResponseGetParams{})
			return err
		},
		func() error { return client.Responses.Delete(t.Context(), "resp_nope") },
		func() error { _, err := client.Responses.Cancel(t.Context(), "resp_nope"); return err },
		func() error {
			_, err := client.Responses.InputItems.List(t.Context(), "resp_nope", responses.InputItemListParams{})
			return err
		},
	}
	for i, call := range unknown {
		var oerr *openai.Error
		if err := call(); !errors.As(err, &oerr) || oerr.StatusCode != http.StatusNotFound ||
			oerr.Message != "Response with id 'resp_nope' not found." {
			t.Errorf("call %d on an unknown id: %v", i, err)
		}
	}

	// A list input: the items keep their order, get ids, and page.
	params := responsesParams
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("first", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfMessage("second", responses.EasyInputMessageRoleAssistant),
		responses.ResponseInputItemParamOfMessage("third", responses.EasyInputMessageRoleUser),
	}}
	params.Instructions = openai.String("Be brief.")
	params.Metadata = map[string]string{"k": "v"}
	resp, err := client.Responses.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Instructions.OfString != "Be brief." || resp.Metadata["k"] != "v" || !strings.Contains(resp.RawJSON(), `"store":true`) {
		t.Errorf("echoed fields = %s", resp.RawJSON())
	}
	page, err := client.Responses.InputItems.List(t.Context(), resp.ID, responses.InputItemListParams{Limit: openai.Int(2)})
	if err != nil || len(page.Data) != 2 || !page.HasMore || itemOf(page.Data[0]) != (plainItem{"message", "user", "input_text", "third"}) ||
		itemOf(page.Data[1]) != (plainItem{"message", "assistant", "output_text", "second"}) || page.Data[0].ID == "" {
		t.Fatalf("input items page 1 = %+v, %v", page, err)
	}
	page, err = client.Responses.InputItems.List(t.Context(), resp.ID, responses.InputItemListParams{
		After: openai.String(page.Data[1].ID), Order: responses.InputItemListParamsOrderDesc,
	})
	if err != nil || len(page.Data) != 1 || page.HasMore || itemOf(page.Data[0]).text != "first" {
		t.Errorf("input items page 2 = %+v, %v", page, err)
	}
	page, err = client.Responses.InputItems.List(t.Context(), resp.ID, responses.InputItemListParams{Order: responses.InputItemListParamsOrderAsc})
	if err != nil || len(page.Data) != 3 || itemOf(page.Data[0]).text != "first" {
		t.Errorf("input items ascending = %+v, %v", page, err)
	}

	// Cancel leaves a finished response as it is.
	if got, err := client.Responses.Cancel(t.Context(), resp.ID); err != nil || got.Status != "completed" || got.OutputText() != resp.OutputText() {
		t.Errorf("Cancel = %v, %v", got, err)
	}

	// store: false: not retrievable, and no previous_response_id for it.
	params = responsesParams
	params.Store = openai.Bool(false)
	unstored, err := client.Responses.New(t.Context(), params)
	if err != nil || !strings.Contains(unstored.RawJSON(), `"store":false`) {
		t.Fatalf("store false: %v, %v", unstored, err)
	}
	if _, err := client.Responses.Get(t.Context(), unstored.ID, responses.ResponseGetParams{}); err == nil {
		t.Error("a store: false response was stored")
	}

	// A response cut by a fault is stored as cancelled.
	s.SetFaults([]Fault{{Kind: FaultCut, After: 1}})
	cut := streamResponses(t, t.Context(), client, responsesParams)
	s.SetFaults(nil)
	id := lastRecord(t, s).ID
	if cut.completed != nil || id == "" {
		t.Fatalf("cut stream: %+v", cut)
	}
	if got, err := client.Responses.Get(t.Context(), id, responses.ResponseGetParams{}); err != nil || got.Status != "cancelled" || len(got.Output) != 0 {
		t.Errorf("Get of the cut response = %v, %v", got, err)
	}
}

// plainItem is a message input item with one text part.
type plainItem struct{ typ, role, partType, text string }

func itemOf(u responses.ResponseItemUnion) plainItem {
	var item struct {
		Type, Role string
		Content    []struct{ Type, Text string }
	}
	json.Unmarshal([]byte(u.RawJSON()), &item)
	if len(item.Content) != 1 {
		return plainItem{typ: "?" + u.RawJSON()}
	}
	return plainItem{item.Type, item.Role, item.Content[0].Type, item.Content[0].Text}
}

// TestResponsesPrevious checks previous_response_id: known ids work and are
// echoed; unknown ones are 404 previous_response_not_found and counted.
func TestResponsesPrevious(t *testing.T) {
	s, srv := serve(t, Config{Tokens: 1, Faults: []Fault{{Kind: FaultStatus, Status: 503, Count: 1}}})
	client := openaiClient(srv, "k")

	params := responsesParams
	params.PreviousResponseID = openai.String("resp_elsewhere")
	for _, stream := range []bool{false, true} {
		var err error
		if stream {
			got := streamResponses(t, t.Context(), client, params)
			if len(got.types) != 0 {
				t.Errorf("events = %q", got.types)
			}
			err = got.err
		} else {
			_, err = client.Responses.New(t.Context(), params)
		}
		var oerr *openai.Error
		if !errors.As(err, &oerr) || oerr.StatusCode != statusPreviousNotFound || oerr.Code != "previous_response_not_found" ||
			oerr.Param != "previous_response_id" || oerr.Message != "Previous response with id 'resp_elsewhere' not found." {
			t.Errorf("stream %v: %v", stream, err)
		}
	}
	if st := s.Stats(); st.PreviousNotFound != 2 || st.Faulted != 0 {
		t.Errorf("stats = %+v; the 404s must not spend the fault", st)
	}
	if rec := lastRecord(t, s); rec.PreviousResponseID != "resp_elsewhere" || rec.Status != statusPreviousNotFound {
		t.Errorf("record = %+v", rec)
	}

	if _, err := client.Responses.New(t.Context(), responsesParams); err == nil {
		t.Fatal("the 503 fault did not strike")
	}
	first, err := client.Responses.New(t.Context(), responsesParams)
	if err != nil {
		t.Fatal(err)
	}
	params.PreviousResponseID = openai.String(first.ID)
	got := streamResponses(t, t.Context(), client, params)
	if got.err != nil || got.completed == nil || got.completed.PreviousResponseID != first.ID {
		t.Fatalf("follow-up: %+v", got)
	}
	if st := s.Stats(); st.PreviousNotFound != 2 || st.Requests != 5 || st.Faulted != 1 {
		t.Errorf("stats = %+v", st)
	}
}

func TestResponsesCompactAndInputTokens(t *testing.T) {
	s, srv := serve(t, Config{Text: "summary", Tokens: 1})
	client := openaiClient(srv, "k")
	compacted, err := client.Responses.Compact(t.Context(), responses.ResponseCompactParams{
		Model: "gpt-test",
		Input: responses.ResponseCompactParamsInputUnion{OfResponseInputItemArray: []responses.ResponseInputItemUnionParam{
			responses.ResponseInputItemParamOfMessage("question", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfMessage("answer", responses.EasyInputMessageRoleAssistant),
		}},
	})
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	out := compacted.Output
	if compacted.Object != "response.compaction" || len(out) != 2 || out[0].Role != "user" || out[1].Type != "compaction" ||
		out[1].EncryptedContent != base64.StdEncoding.EncodeToString([]byte("summary")) || compacted.Usage.OutputTokens != 1 {
		t.Errorf("compacted = %s", compacted.RawJSON())
	}
	if rec := lastRecord(t, s); rec.Path != "/v1/responses/compact" || rec.Deltas != 1 || rec.ID != compacted.ID {
		t.Errorf("record = %+v", rec)
	}
	if _, err := client.Responses.Get(t.Context(), compacted.ID, responses.ResponseGetParams{}); err == nil {
		t.Error("a compaction is retrievable as a response")
	}

	count, err := client.Responses.InputTokens.Count(t.Context(), responses.InputTokenCountParams{
		Model: openai.String("gpt-test"),
		Input: responses.InputTokenCountParamsInputUnion{OfString: openai.String("hello")},
	})
	if err != nil || count.Object != "response.input_tokens" || count.InputTokens < 1 {
		t.Errorf("input tokens = %+v, %v", count, err)
	}
}

// TestResponsesEventSequences checks the raw events: names, the type in
// each data, consecutive sequence numbers, and where faults cut in.
func TestResponsesEventSequences(t *testing.T) {
	created := []string{"response.created", "response.in_progress"}
	start := append(created, "response.output_item.added", "response.content_part.added")
	delta := "response.output_text.delta"
	tests := []struct {
		name  string
		fault *Fault
		want  []string
	}{
		{"healthy", nil, wantResponsesEvents(3)},
		{"cut after 2", &Fault{Kind: FaultCut, After: 2}, append(slices.Clone(start), delta, delta)},
		{"cut after 0", &Fault{Kind: FaultCut}, start},
		{"malformed after 1", &Fault{Kind: FaultMalformed, After: 1}, slices.Insert(wantResponsesEvents(3), 5, delta)},
		{"fake200 overloaded", &Fault{Kind: FaultFake200}, append(slices.Clone(created), "response.failed")},
		{"fake200 rate limit", &Fault{Kind: FaultFake200, Status: 429}, []string{"error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Tokens: 3}
			if tt.fault != nil {
				cfg.Faults = []Fault{*tt.fault}
			}
			s, srv := serve(t, cfg)
			resp := mustPost(t, srv, "/v1/responses", responsesStreamBody)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			events, err := readEvents(resp.Body)
			if !errors.Is(err, io.EOF) || !slices.Equal(names(events), tt.want) {
				t.Fatalf("events = %q (%v), want %q", names(events), err, tt.want)
			}
			seq, malformed := 0, 0
			for _, ev := range events {
				var data struct {
					Type           string `json:"type"`
					SequenceNumber *int   `json:"sequence_number"`
					Code           string `json:"code"`
					Response       struct {
						ID     string `json:"id"`
						Status string `json:"status"`
						Error  *struct {
							Code, Message string
						} `json:"error"`
					} `json:"response"`
				}
				if err := json.Unmarshal([]byte(ev.data), &data); err != nil {
					malformed++
					continue
				}
				if data.Type != ev.name || data.SequenceNumber == nil || *data.SequenceNumber != seq {
					t.Errorf("event %q: type %q, sequence_number %v, want %d", ev.name, data.Type, data.SequenceNumber, seq)
				}
				seq++
				switch ev.name {
				case "response.failed":
					if data.Response.Status != "failed" || data.Response.Error == nil || data.Response.Error.Code != "server_error" ||
						data.Response.Error.Message != "The engine is currently overloaded, please try again later" {
						t.Errorf("response.failed = %s", ev.data)
					}
				case "error":
					if data.Code != "rate_limit_exceeded" || !strings.Contains(ev.data, `"message":"Rate limit reached for requests"`) {
						t.Errorf("error event = %s", ev.data)
					}
				case "response.created", "response.in_progress":
					if data.Response.Status != "in_progress" || data.Response.ID == "" {
						t.Errorf("%s = %s", ev.name, ev.data)
					}
				}
			}
			if want := bool2int(tt.fault != nil && tt.fault.Kind == FaultMalformed); malformed != want {
				t.Errorf("%d events are not JSON, want %d", malformed, want)
			}
			if rec := lastRecord(t, s); rec.Canceled || (tt.fault == nil) != (rec.Fault == nil) {
				t.Errorf("record = %+v", rec)
			}
		})
	}
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestResponsesSDKFaults checks how the openai-go SDK sees each fault.
func TestResponsesSDKFaults(t *testing.T) {
	t.Run("status with retry-after", func(t *testing.T) {
		s, srv := serve(t, Config{Faults: []Fault{{Kind: FaultStatus, Status: 503, RetryAfter: "3", NoRetry: true}}})
		client := openaiClient(srv, "k")
		_, err := client.Responses.New(t.Context(), responsesParams)
		var oerr *openai.Error
		if !errors.As(err, &oerr) || oerr.StatusCode != 503 || oerr.Type != "server_error" || oerr.Code != "overloaded" ||
			oerr.Response.Header.Get("Retry-After") != "3" || oerr.Response.Header.Get("X-Should-Retry") != "false" {
			t.Errorf("New: %v", err)
		}
		got := streamResponses(t, t.Context(), client, responsesParams)
		if !errors.As(got.err, &oerr) || oerr.StatusCode != 503 || len(got.types) != 0 {
			t.Errorf("stream: %v, events %q", got.err, got.types)
		}
		if st := s.Stats(); st.Requests != 2 || st.Faulted != 2 {
			t.Errorf("stats = %+v", st)
		}
	})

	// The SDK reports neither fake-200 shape as an error: the stream ends
	// cleanly, with response.failed or an error event as its last event.
	t.Run("fake200 overloaded", func(t *testing.T) {
		// Faults apply to GET by id too: this one is spent by then.
		_, srv := serve(t, Config{Faults: []Fault{{Kind: FaultFake200, Count: 2}}})
		client := openaiClient(srv, "k")
		got := streamResponses(t, t.Context(), client, responsesParams)
		if got.err != nil || !slices.Equal(got.types, []string{"response.created", "response.in_progress", "response.failed"}) ||
			got.snapshot.TerminalEvent != "response.failed" || got.deltas != "" {
			t.Errorf("stream: %+v", got)
		}
		resp, err := client.Responses.New(t.Context(), responsesParams)
		if err != nil || resp.Status != responses.ResponseStatusFailed || resp.Error.Code != "server_error" || len(resp.Output) != 0 {
			t.Errorf("New = %v, %v", resp, err)
		}
		if again, err := client.Responses.Get(t.Context(), resp.ID, responses.ResponseGetParams{}); err != nil || again.Status != "failed" {
			t.Errorf("Get of the failed response = %v, %v", again, err)
		}
	})
	t.Run("fake200 rate limit", func(t *testing.T) {
		_, srv := serve(t, Config{Faults: []Fault{{Kind: FaultFake200, Status: 429}}})
		client := openaiClient(srv, "k")
		got := streamResponses(t, t.Context(), client, responsesParams)
		var perr *responses.ResponseProtocolError
		if got.err != nil || !slices.Equal(got.types, []string{"error"}) || !errors.As(got.accErr, &perr) {
			t.Errorf("stream: %+v", got)
		}
		// Not streaming, the body is an error object with status 200: the
		// SDK decodes it as a response with no id and no status.
		resp, err := client.Responses.New(t.Context(), responsesParams)
		if err != nil || resp.ID != "" || resp.Status != "" || !strings.Contains(resp.RawJSON(), `"code":"rate_limit_exceeded"`) {
			t.Errorf("New = %v, %v", resp, err)
		}
	})

	// A cut stream ends cleanly for the SDK's iterator (no error) but
	// without response.completed: only the missing terminal event tells.
	t.Run("cut", func(t *testing.T) {
		s, srv := serve(t, Config{Tokens: 4, Faults: []Fault{{Kind: FaultCut, After: 2}}})
		client := openaiClient(srv, "k")
		got := streamResponses(t, t.Context(), client, responsesParams)
		if got.err != nil || got.completed != nil || got.snapshot.TerminalEvent != "" ||
			got.deltas != strings.Join(splitText(DefaultText, 4)[:2], "") || got.types[len(got.types)-1] != "response.output_text.delta" {
			t.Errorf("stream: %+v", got)
		}
		if rec := lastRecord(t, s); rec.Deltas != 2 || rec.Fault == nil {
			t.Errorf("record = %+v", rec)
		}
		// Not streaming, the body is cut and the connection dropped.
		if _, err := client.Responses.New(t.Context(), responsesParams); err == nil {
			t.Error("New of a cut body: no error")
		}
	})
	t.Run("malformed", func(t *testing.T) {
		_, srv := serve(t, Config{Tokens: 3, Faults: []Fault{{Kind: FaultMalformed, After: 1}}})
		client := openaiClient(srv, "k")
		got := streamResponses(t, t.Context(), client, responsesParams)
		var syntax *json.SyntaxError
		if !errors.As(got.err, &syntax) || got.completed != nil || len(got.types) != 5 {
			t.Errorf("stream: %v, events %q", got.err, got.types)
		}
		if _, err := client.Responses.New(t.Context(), responsesParams); err == nil {
			t.Error("New of a truncated body: no error")
		}
	})
	t.Run("reset", func(t *testing.T) {
		_, srv := serve(t, Config{Faults: []Fault{{Kind: FaultReset}}})
		client := openaiClient(srv, "k")
		if got := streamResponses(t, t.Context(), client, responsesParams); got.err == nil {
			t.Error("stream of a reset: no error")
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		_, srv := serve(t, Config{Key: "right"})
		wrong, right := openaiClient(srv, "wrong"), openaiClient(srv, "right")
		_, err := wrong.Responses.New(t.Context(), responsesParams)
		var oerr *openai.Error
		if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusUnauthorized || oerr.Code != "invalid_api_key" {
			t.Errorf("wrong key: %v", err)
		}
		if _, err := right.Responses.New(t.Context(), responsesParams); err != nil {
			t.Errorf("right key: %v", err)
		}
	})
}

// TestResponsesStallAndDelays checks the events before the first delta
// arrive at once, a stall or a delay sends nothing more, and the client
// going away ends the request and leaves the stored response cancelled.
func TestResponsesStallAndDelays(t *testing.T) {
	tests := []struct {
		name       string
		cfg        Config
		readEvents int
		wantDeltas int
	}{
		{"slow first token", Config{FirstToken: hour}, 4, 0},
		{"slow share", Config{SlowPercent: 100, SlowFirstToken: hour}, 4, 0},
		{"token delay", Config{TokenDelay: hour}, 5, 1},
		{"stall after 2", Config{Faults: []Fault{{Kind: FaultStall, After: 2}}}, 6, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, srv := serve(t, tt.cfg)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp, err := post(t, ctx, srv, "/v1/responses", responsesStreamBody)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			var id string
			for i := range tt.readEvents {
				ev, err := nextEvent(br)
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if i == 0 {
					var created struct{ Response struct{ ID string } }
					json.Unmarshal([]byte(ev.data), &created)
					id = created.Response.ID
				}
			}
			// The response exists while it is generated.
			if got := s.store.get(id); got == nil {
				t.Fatalf("response %q is not stored while in progress", id)
			}
			cancel()
			rec := lastRecordFor(t, s, "/v1/responses")
			if !rec.Canceled || rec.Deltas != tt.wantDeltas || rec.ID != id {
				t.Fatalf("record = %+v, want canceled after %d deltas", rec, tt.wantDeltas)
			}
			var o responsesObject
			if err := json.Unmarshal(s.store.render(s.store.get(id)), &o); err != nil || o.Status != "cancelled" {
				t.Errorf("stored response = %+v, %v", o, err)
			}
		})
	}
}

func TestResponsesRouting(t *testing.T) {
	tests := []struct {
		method, path string
		want         endpoint
		wantMethod   string
	}{
		{"POST", "/v1/responses", endpointResponses, "POST"},
		{"POST", "/openai/v1/responses/", endpointResponses, "POST"},
		{"POST", "/v1/responses/compact", endpointCompact, "POST"},
		{"POST", "/v1/responses/input_tokens", endpointInputTokens, "POST"},
		{"GET", "/v1/responses/resp_1", endpointGetResponse, "GET"},
		{"DELETE", "/v1/responses/resp_1", endpointDeleteResponse, "DELETE"},
		{"POST", "/v1/responses/resp_1", endpointGetResponse, "GET"},
		{"POST", "/v1/responses/resp_1/cancel", endpointCancelResponse, "POST"},
		{"GET", "/v1/responses/resp_1/input_items", endpointResponseInputItems, "GET"},
		{"GET", "/v1/responses/resp_1/other", endpointUnknown, ""},
		{"GET", "/v1/responses/resp_1/input_items/x", endpointUnknown, ""},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(tt.method, "http://x"+tt.path, nil)
		ep, method, w := route(r)
		if ep != tt.want || method != tt.wantMethod || w.name() == "anthropic" {
			t.Errorf("%s %s = %v %s %s, want %v %s", tt.method, tt.path, ep, method, w.name(), tt.want, tt.wantMethod)
		}
	}
}

// TestResponseStoreBounds checks the store forgets the oldest responses.
func TestResponseStoreBounds(t *testing.T) {
	var st responseStore
	for i := range maxStoredResponses + 10 {
		st.put(&storedResponse{id: "r" + strconv.Itoa(i)})
	}
	if st.get("r0") != nil || st.get("r9") != nil || st.get("r10") == nil || len(st.byID) != maxStoredResponses {
		t.Errorf("%d stored; r0 %v, r10 %v", len(st.byID), st.get("r0"), st.get("r10"))
	}
	big := make([]json.RawMessage, 1)
	big[0] = make(json.RawMessage, maxStoredBytes/2)
	st.put(&storedResponse{id: "big1", input: big})
	st.put(&storedResponse{id: "big2", input: big})
	if st.get("big1") != nil || st.get("big2") == nil || st.bytes > maxStoredBytes {
		t.Errorf("bytes %d; big1 %v", st.bytes, st.get("big1"))
	}
}

// TestResponsesDeltasDoNotAllocate checks a text delta event allocates
// nothing. (Whole requests are not compared as in TestDeltasDoNotAllocate:
// their JSON events go through sync.Pool, which the race detector makes
// drop items at random.)
func TestResponsesDeltasDoNotAllocate(t *testing.T) {
	s := New(Config{Tokens: 3})
	w := &discard{h: http.Header{}}
	ex := &exchange{s: s, p: s.plan.Load(), w: w, rc: http.NewResponseController(w), stored: &storedResponse{msgID: "msg_sim_1"}}
	ex.buf = make([]byte, 0, 512)
	if allocs := testing.AllocsPerRun(100, func() { responsesWire{}.streamDelta(ex, 1) }); allocs != 0 {
		t.Errorf("a delta event costs %v allocations", allocs)
	}
}

func BenchmarkResponsesStream(b *testing.B) {
	for _, bc := range []struct{ name, body string }{
		{"stream", responsesStreamBody},
		{"non-stream", responsesBody},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := New(Config{})
			b.ReportAllocs()
			for b.Loop() {
				serveOnce(s, "/v1/responses", bc.body)
			}
		})
	}
}
