package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// FuzzInspectSequence feeds a run of two to four consecutive events of a
// recorded stream, any of them mutated, through the relay's reading: the
// stream's choices and its memo of what the events repeat, kept from one
// event to the next as the gate hands them to the relay. A memo set by
// one event and met by an altered next one is a state no single event
// reaches. The reading must be the oracle's (compareEvents: class, name,
// text, error, choices, usage), and for the dialects with a memo it must
// be, field for field, a reading without one; the continuation's resumer,
// told either reading, must keep the same transcript.
func FuzzInspectSequence(f *testing.F) {
	streams := equivStreams(f)
	names := make([]string, 0, len(streams))
	for name := range streams {
		names = append(names, name)
	}
	slices.Sort(names) // the fuzzer's stream index must name the same stream every run
	events := make([][]sse.Event, len(names))
	for i, name := range names {
		events[i] = parseEvents(f, string(streams[name]))
	}
	reqs := map[wire.Dialect]*wire.Request{}
	for _, c := range relayCases(f, 1) {
		if !c.bedrock {
			reqs[c.d] = c.req
		}
	}
	for i := range names {
		n := len(events[i])
		for _, start := range []int{0, 1, 2, n / 2, n - 3} {
			f.Add(uint8(i), uint16(max(start, 0)), uint8(1), uint64(7), uint8(0))
			f.Add(uint8(i), uint16(max(start, 0)), uint8(2), uint64(start), uint8(0b0110))
		}
	}
	f.Fuzz(func(t *testing.T, stream uint8, start uint16, extra uint8, seed uint64, mutated uint8) {
		i := int(stream) % len(names)
		evs := events[i]
		from := int(start) % len(evs)
		seq := slices.Clone(evs[from:min(len(evs), from+2+int(extra)%3)])
		rng := rand.New(rand.NewPCG(seed, 24))
		for j := range seq {
			for k := 0; mutated>>j&1 != 0 && k <= int(mutated>>4)%3; k++ {
				if rng.IntN(2) == 0 {
					seq[j] = mutateEvent(rng, seq[j])
				} else {
					seq[j] = insertMember(rng, seq[j])
				}
			}
		}
		d := dialectOfStream(names[i])
		if err := compareEvents(d, seq); err != nil {
			t.Fatalf("%s from event %d: %v", names[i], from, err)
		}
		if err := compareMemoless(d, reqs[d], seq); err != nil {
			t.Fatalf("%s from event %d: %v", names[i], from, err)
		}
	})
}

// compareMemoless reads evs with the stream's choices and memo and without
// (a nil ChoiceSet), both with text as the relay reads them, and tells each
// reading to a resumer of req: the readings and the transcripts must match.
// Read without the text (a stream with no resumer: a translated one), the
// memo's readings must match the memoless ones too.
func compareMemoless(d wire.Dialect, req *wire.Request, evs []sse.Event) error {
	var cs, noText wire.ChoiceSet
	withMemo, without := wire.NewResumer(d, req), wire.NewResumer(d, req)
	for i, ev := range evs {
		a, b := d.Inspect(ev, true, &cs), d.Inspect(ev, true, nil)
		if !reflect.DeepEqual(a, b) {
			return fmt.Errorf("event %d %q: with the memo %+v, without %+v", i, ev.Raw, a, b)
		}
		if a, b := d.Inspect(ev, false, &noText), d.Inspect(ev, false, nil); !reflect.DeepEqual(a, b) {
			return fmt.Errorf("event %d %q, without the text: with the memo %+v, without %+v", i, ev.Raw, a, b)
		}
		if withMemo != nil {
			withMemo.Track(ev, a)
			without.Track(ev, b)
		}
	}
	if !reflect.DeepEqual(withMemo, without) {
		return fmt.Errorf("the resumer told the memo's readings %+v, the memoless ones %+v", withMemo, without)
	}
	return nil
}

// members are what a fast path must not read past: a second type, an
// error, the members usage and the continuation read, other values.
var members = []string{`"type":"error"`, `"type":"message_stop"`, `"error":{"message":"x"}`, `"error":null`, `"error":"x"`,
	`"delta":"z"`, `"delta":{"type":"text_delta","text":"z"}`, `"sequence_number":9`, `"sequence_number":"9"`,
	`"response":{"usage":{"input_tokens":3,"output_tokens":4}}`, `"usage":{"output_tokens":5}`, `"code":"c"`, `"message":"m"`,
	`"usageMetadata":{"promptTokenCount":7}`, `"candidates":[]`, `"modelVersion":"m"`, `"finishReason":"STOP"`,
	`"index":1`, `"index":0`, `"text":"t"`, `"stop_reason":"end_turn"`, `"choices":[]`, `"x":1e5`, `"x":[]`, `"x":{}`}

// insertMember is ev with one of members inserted after an object's '{'
// or a ',' of its data (a valid member wherever the data was valid).
func insertMember(rng *rand.Rand, ev sse.Event) sse.Event {
	var at []int
	for i, c := range ev.Data {
		if c == '{' || c == ',' {
			at = append(at, i+1)
		}
	}
	if len(at) == 0 {
		return ev
	}
	i, m := at[rng.IntN(len(at))], members[rng.IntN(len(members))]
	sep := ","
	if ev.Data[i-1] == '{' && i < len(ev.Data) && ev.Data[i] == '}' {
		sep = ""
	}
	data := slices.Concat(ev.Data[:i:i], []byte(m+sep), ev.Data[i:])
	return sse.Event{Raw: ev.Raw, Name: ev.Name, Data: data}
}
