package translate

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// numberCalls renames every call c0, c1... in order, and points each
// result at the call it answers with that call's name: by id, or (byName,
// as Gemini pairs calls without ids) the first unanswered call of its
// name. Two readings of one conversation then compare whatever ids each
// gave.
func numberCalls(r *Request, byName bool) {
	type call struct {
		id, name, num string
		answered      bool
	}
	var calls []*call
	for mi := range r.Messages {
		for bi := range r.Messages[mi].Blocks {
			b := &r.Messages[mi].Blocks[bi]
			switch b.Kind {
			case KindToolCall:
				c := &call{id: b.ToolID, name: b.ToolName, num: "c" + strconv.Itoa(len(calls))}
				calls = append(calls, c)
				b.ToolID = c.num
			case KindToolResult:
				for _, c := range calls {
					if !c.answered && (byName && c.name == b.ToolName || !byName && c.id == b.ToolID) {
						c.answered = true
						b.ToolID, b.ToolName = c.num, c.name
						break
					}
				}
			}
		}
	}
}

// eachGeminiClientConversation sends 500 random conversations, as a
// Gemini client writes them (calls without ids, results by name and
// order), through p, and hands check each translation with what the
// client's body says (read by the tests' own Gemini reader).
func eachGeminiClientConversation(t *testing.T, p Pair, seed uint64, check func(i int, said *Request, client, out []byte, losses []Loss)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 56))
	used := 0
	for i := range 500 {
		conv := randomConversation(rng)
		conv.ToolChoice.DisableParallel = false // a Gemini client cannot say it
		client, clientLosses, err := encodeGeminiRequest(conv)
		if err != nil {
			t.Fatal(err)
		}
		if Material(clientLosses) {
			continue // what a Gemini client cannot say (images in tool results)
		}
		used++
		if conv.Stream {
			client = WithGeminiStream(client)
		}
		said := decodeGeminiRequest(t, client)
		said.Stream = conv.Stream
		for mi := range said.Messages {
			for bi := range said.Messages[mi].Blocks {
				if b := &said.Messages[mi].Blocks[bi]; b.Kind == KindToolResult && b.Result[0].Text == "" {
					b.Result = nil // an empty result is no content
				}
			}
		}
		numberCalls(said, true)
		out, losses, err := request(p, client, "target-model")
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, client)
		}
		check(i, said, client, out, losses)
	}
	if used < 250 {
		t.Fatalf("only %d of 500 conversations could be written by a Gemini client", used)
	}
}

// geminiSaidLosses are the losses every reading of a Gemini client's
// conversation names: its calls carry thought signatures (the encoder
// writes Google's skip value).
func geminiSaidLosses(said *Request) []string {
	var lost []string
	for _, m := range said.Messages {
		for _, b := range m.Blocks {
			if b.Kind == KindToolCall && len(lost) == 0 {
				lost = append(lost, geminiThoughtSignatureLoss)
			}
		}
	}
	return lost
}

func TestPropertyGeminiToAnthropicRoundTrip(t *testing.T) {
	p, _ := For(Gemini, Anthropic)
	eachGeminiClientConversation(t, p, 7, func(i int, said *Request, client, out []byte, losses []Loss) {
		got, _, err := decodeAnthropicRequest(out)
		if err != nil {
			t.Fatalf("case %d: the translated body does not read back: %v\n%s", i, err, out)
		}
		numberCalls(got, false)
		want := *said
		want.Model = "target-model"
		// Anthropic's encoder names a model turn last in its own words too.
		checkRoundTrip(t, i, client, got, &want, losses, prefillLost(said, responsesPrefill, geminiSaidLosses(said)))
	})
}

func TestPropertyGeminiToChatRoundTrip(t *testing.T) {
	p, _ := For(Gemini, OpenAI)
	eachGeminiClientConversation(t, p, 8, func(i int, said *Request, client, out []byte, losses []Loss) {
		got := decodeChatRequest(t, out)
		numberCalls(got, false)
		want, lost := chatProjection(said)
		want.Model = got.Model
		numberCalls(want, false)
		checkRoundTrip(t, i, client, got, want, losses, append(lost, geminiSaidLosses(said)...))
	})
}

// eachResponsesClientConversation sends 500 random conversations, as a
// Responses client writes them, through p.
func eachResponsesClientConversation(t *testing.T, p Pair, seed uint64, check func(i int, clean *Request, client, out []byte, losses []Loss)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 56))
	for i := range 500 {
		conv := randomConversation(rng)
		clean, _ := itemProjection(conv, conv.Model, false)
		client, clientLosses, err := encodeResponsesRequest(clean, conv.Model)
		if err != nil || len(clientLosses) > 0 {
			t.Fatalf("case %d: writing the client's request: %v %v", i, err, clientLosses)
		}
		out, losses, err := request(p, client, "target-model")
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, client)
		}
		check(i, clean, client, out, losses)
	}
}

func TestPropertyResponsesToGeminiRoundTrip(t *testing.T) {
	p, _ := For(Responses, Gemini)
	eachResponsesClientConversation(t, p, 9, func(i int, clean *Request, client, out []byte, losses []Loss) {
		got := decodeGeminiRequest(t, out)
		numberCalls(got, true)
		want, lost := geminiProjection(clean)
		want.ToolChoice.Mode = clean.ToolChoice.Mode // a Responses client states no mode for parallel_tool_calls
		numberCalls(want, true)
		for j, l := range lost {
			if l == "disable_parallel_tool_use" {
				lost[j] = "parallel_tool_calls false (Gemini may answer with several calls)"
			}
		}
		checkRoundTrip(t, i, client, got, want, losses, lost) // an assistant message last means the same on Gemini
	})
}

func TestPropertyResponsesToChatRoundTrip(t *testing.T) {
	p, _ := For(Responses, OpenAI)
	eachResponsesClientConversation(t, p, 10, func(i int, clean *Request, client, out []byte, losses []Loss) {
		got := decodeChatRequest(t, out)
		numberCalls(got, false)
		want, lost := chatProjection(clean)
		want.Model = got.Model
		want.ToolChoice.Mode = clean.ToolChoice.Mode
		numberCalls(want, false)
		checkRoundTrip(t, i, client, got, want, losses, lost) // and on Chat
	})
}
