package responses

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan/jsontest"
)

// readFrame reads what json.Unmarshal reads, for the events providers
// send and for every mutation of them.
func TestReadFrameMatchesEncodingJSON(t *testing.T) {
	seeds := []string{
		`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","type":"message","status":"in_progress","content":[],"role":"assistant"}}`,
		`{"type":"response.content_part.added","sequence_number":3,"item_id":"msg_67ccd2bf17f0819081ff3bb2cf6508e6","output_index":0,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}`,
		`{"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hi there"}],"role":"assistant"}}`,
		`{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_1","name":"get_current_weather"}}`,
		`{"type":"response.content_part.added","item_id":"m","output_index":0,"content_index":0,"part":{"type":"output_text","text":"h\u00e9"}}`,
		`{"Item":{"id":"a","type":"message"},"output_index":1}`, `{"item":{"ID":"a","Type":"message","content":null}}`,
		`{"output_index":-3,"content_index":1.0,"item":null,"part":null}`, `{"output_index":"1"}`, `{"item":[],"part":{}}`,
		`{"item":{"id":"a"},"item":{"type":"b"}}`, `{"item_i\u0064":"x"}`, `{"output_index":99999999999999999999}`, `null`, `[1]`, `{}`,
	}
	rng := rand.New(rand.NewPCG(24, 4))
	const alphabet = "\"\\{}[],: 0123456789nultrex-.E"
	check := func(data []byte) {
		var st frameStore
		got, gotErr := readFrame(data, &st)
		var want responsesFrame
		wantErr := json.Unmarshal(data, &want)
		if (gotErr != nil) != (wantErr != nil) || gotErr == nil && !reflect.DeepEqual(frameSummary(got), frameSummary(want)) {
			t.Fatalf("%s: readFrame %+v (%v), encoding/json %+v (%v)", data, frameSummary(got), gotErr, frameSummary(want), wantErr)
		}
	}
	for _, s := range seeds {
		check([]byte(s))
		for range 300 {
			check(jsontest.Mutate(rng, []byte(s), alphabet))
		}
	}
}

// frameSummary is what the resumer reads of a frame (content only by its length).
func frameSummary(f responsesFrame) []any {
	out := []any{f.OutputIndex, f.ContentIndex, f.ItemID, f.Item == nil, f.Part == nil}
	if f.Item != nil {
		out = append(out, f.Item.ID, f.Item.Type, len(f.Item.Content))
	}
	if f.Part != nil {
		out = append(out, f.Part.Type, f.Part.Text)
	}
	return out
}
