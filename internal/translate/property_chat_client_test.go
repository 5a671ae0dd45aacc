package translate

import (
	"math/rand/v2"
	"testing"
)

// Property: a random conversation, written as a Chat client's request
// (encodeChatRequest, skipping what a Chat client cannot say), read by the
// Chat client decoder, translated to Anthropic and Responses and read back,
// is the conversation the decoder read, except for what the translation
// declared lost.
func TestPropertyChatClientRoundTrip(t *testing.T) {
	for _, c := range []struct {
		target string
		read   func([]byte) (*Request, []Loss, error)
	}{{Anthropic, decodeAnthropicRequest}, {Responses, decodeResponsesRequest}} {
		p, _ := For(OpenAI, c.target)
		rng := rand.New(rand.NewPCG(56, 1))
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
			if Material(losses) {
				continue // a conversation that ends in an assistant text (Anthropic)
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
			checked++
		}
		if checked < 200 {
			t.Errorf("%s: only %d of 500 cases checked", c.target, checked)
		}
	}
}
