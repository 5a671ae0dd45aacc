package translate

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// itemProjection is what an item-ordered target (Responses, or Anthropic
// from a Responses client) holds of r: the system joined into one block,
// text-only tool results joined into one text, turns of one role merged;
// lost names the losses that explain the rest.
func itemProjection(r *Request, model string, dropEmptyText bool) (*Request, []string) {
	var lost expectedLosses
	note := lost.note
	out := *r
	out.Model = model
	out.System = joinedSystem(r.System, note)
	out.Messages = nil
	for _, m := range r.Messages {
		var blocks []Block
		for _, b := range m.Blocks {
			b, kept := unmarkedBlock(b, note)
			if !kept {
				continue
			}
			switch b.Kind {
			case KindToolResult:
				if b.IsError {
					note("tool_result is_error flag")
					b.IsError = false
				}
				b.Result = projectResult(b.Result, dropEmptyText)
			}
			blocks = append(blocks, b)
		}
		out.Messages = appendTurn(out.Messages, m.Role, blocks)
	}
	if r.ToolChoice.DisableParallel && r.ToolChoice.Mode == ChoiceDefault {
		out.ToolChoice.Mode = ChoiceAuto
	}
	return &out, lost
}

// projectResult: text-only results travel as one string, their non-empty
// parts one per line; with an image they travel as parts.
func projectResult(result []Block, dropEmptyText bool) []Block {
	var texts []string
	for _, b := range result {
		if b.Kind != KindText {
			var out []Block
			for _, b := range result {
				b.Cache = false
				if !(dropEmptyText && b.Kind == KindText && b.Text == "") {
					out = append(out, b)
				}
			}
			return out
		}
		if b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	if dropEmptyText && len(texts) == 0 {
		return nil
	}
	return []Block{{Kind: KindText, Text: strings.Join(texts, "\n")}}
}

// eachAnthropicTranslation sends 500 random conversations (from seed), as
// an Anthropic client writes them, through p for model, and hands each
// translation to check.
func eachAnthropicTranslation(t *testing.T, p Pair, model string, seed uint64, check func(i int, conv *Request, client, out []byte, losses []Loss)) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 26))
	for i := range 500 {
		conv := randomConversation(rng)
		client, _, err := encodeAnthropicRequest(conv, conv.Model)
		if err != nil {
			t.Fatal(err)
		}
		out, losses, err := request(p, client, model)
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, client)
		}
		check(i, conv, client, out, losses)
	}
}

// checkRoundTrip compares a translated request read back with the
// projection, and the declared losses with the ones the changes need.
func checkRoundTrip(t *testing.T, i int, client []byte, got, want *Request, losses []Loss, lost []string) {
	t.Helper()
	normalize(got)
	normalize(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("case %d: the conversation changed beyond its losses\nclient: %s\n%s", i, client, firstDiff(got, want))
	}
	var declared []string
	for _, l := range losses {
		declared = append(declared, l.What)
	}
	slices.Sort(declared)
	slices.Sort(lost)
	if !slices.Equal(declared, lost) {
		t.Fatalf("case %d: declared losses %q, the changes need %q\nclient: %s", i, declared, lost, client)
	}
}

const (
	anthropicPrefill = "assistant prefill (the other formats answer anew, not from it)"
	responsesPrefill = "assistant message last (Anthropic would continue it, not answer anew)"
)

// prefillLost adds what, the loss of a conversation that ends in an
// assistant turn whose last block with content is text: Anthropic
// continues it, the other formats answer anew.
func prefillLost(r *Request, what string, lost []string) []string {
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == "assistant" {
		blocks := r.Messages[n-1].Blocks
		for i := len(blocks) - 1; i >= 0; i-- {
			if blocks[i].Kind == KindToolCall {
				break
			}
			if blocks[i].Kind == KindText && blocks[i].Text != "" {
				return append(lost, what)
			}
		}
	}
	return lost
}

func TestPropertyAnthropicToResponsesRoundTrip(t *testing.T) {
	p, _ := For(Anthropic, Responses)
	eachAnthropicTranslation(t, p, "gpt-5", 2, func(i int, conv *Request, client, out []byte, losses []Loss) {
		got, _, err := decodeResponsesRequest(out)
		if err != nil {
			t.Fatalf("case %d: the translated body does not read back: %v\n%s", i, err, out)
		}
		want, lost := itemProjection(conv, "gpt-5", false)
		checkRoundTrip(t, i, client, got, want, losses, prefillLost(conv, anthropicPrefill, lost))
	})
}

func TestPropertyResponsesToAnthropicRoundTrip(t *testing.T) {
	p, _ := For(Responses, Anthropic)
	rng := rand.New(rand.NewPCG(3, 26))
	for i := range 500 {
		conv := randomConversation(rng)
		// What a Responses client can say: no cache marks, no error
		// flags, no Anthropic reasoning.
		clean, _ := itemProjection(conv, conv.Model, false)
		client, clientLosses, err := encodeResponsesRequest(clean, conv.Model)
		if err != nil || len(clientLosses) > 0 {
			t.Fatalf("case %d: writing the client's request: %v %v", i, err, clientLosses)
		}
		out, losses, err := request(p, client, "claude-sonnet-4-5")
		if err != nil {
			t.Fatalf("case %d: %v\n%s", i, err, client)
		}
		got, _, err := decodeAnthropicRequest(out)
		if err != nil {
			t.Fatalf("case %d: the translated body does not read back: %v\n%s", i, err, out)
		}
		want, lost := itemProjection(clean, "claude-sonnet-4-5", true)
		checkRoundTrip(t, i, client, got, want, losses, prefillLost(clean, responsesPrefill, lost))
	}
}
