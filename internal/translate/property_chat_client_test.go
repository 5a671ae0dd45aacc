package translate

import (
	"math/rand/v2"
	"testing"
)

// eachChatClientConversation sends 500 random conversations (from seed),
// as a Chat client writes them (encodeChatRequest, skipping what a Chat
// client cannot say), through p, and hands check each translation with
// what the Chat client decoder read. check says whether it checked the
// case; at least 200 must be.
func eachChatClientConversation(t *testing.T, p Pair, seed uint64, check func(i int, read *Request, client, out []byte, losses []Loss) bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	checked := 0
	for i := range 500 {
		conv := randomConversation(rng)
		client, clientLosses, err := encodeChatRequest(conv, conv.Model)
		if err != nil {
			t.Fatal(err)
		}
		if Material(clientLosses) {
			continue // an image in a tool result: no Chat client sends one
		}
		read, _, _, err := decodeChatClientRequest(client)
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, client)
		}
		out, losses, err := request(p, client, "target-model")
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, client)
		}
		if check(i, read, client, out, losses) {
			checked++
		}
	}
	if checked < 200 {
		t.Errorf("%s: only %d of 500 cases checked", p.Target(), checked)
	}
}

// Property: a random conversation, written as a Chat client's request,
// read by the Chat client decoder, translated to Anthropic and Responses
// and read back, is the conversation the decoder read, except for what
// the translation declared lost.
func TestPropertyChatClientRoundTrip(t *testing.T) {
	for _, c := range []struct {
		target string
		read   func([]byte) (*Request, []Loss, error)
	}{{Anthropic, decodeAnthropicRequest}, {Responses, decodeResponsesRequest}} {
		p, _ := For(OpenAI, c.target)
		eachChatClientConversation(t, p, 56, func(i int, read *Request, client, out []byte, losses []Loss) bool {
			if Material(losses) {
				return false // a conversation that ends in an assistant text (Anthropic)
			}
			got, _, err := c.read(out)
			if err != nil {
				t.Fatalf("case %d: the translated body does not read back: %v\n%s", i, err, out)
			}
			want, lost := itemProjection(read, "target-model", c.target == Anthropic)
			if c.target == Responses {
				want.ToolChoice = read.ToolChoice // parallel_tool_calls false, no tool_choice
			}
			want.Stream, got.Stream = read.Stream, read.Stream
			checkRoundTrip(t, i, client, got, want, losses, lost)
			return true
		})
	}
}

// Property: the same for a Gemini target, read back by the tests' Gemini
// reader. Gemini has no call ids: calls are compared by what answers
// them (numberCalls by name and order on both sides). Every case is
// checked, those with a material loss (parallel_tool_calls false)
// included.
func TestPropertyChatToGeminiRoundTrip(t *testing.T) {
	p, _ := For(OpenAI, Gemini)
	eachChatClientConversation(t, p, 57, func(i int, read *Request, client, out []byte, losses []Loss) bool {
		got := decodeGeminiRequest(t, out)
		numberCalls(got, true)
		want, lost := geminiProjection(read)
		want.ToolChoice.Mode = read.ToolChoice.Mode // parallel_tool_calls false, no tool_choice: no mode
		numberCalls(want, true)
		checkRoundTrip(t, i, client, got, want, losses, lost) // an assistant message last means the same on Gemini
		return true
	})
}
