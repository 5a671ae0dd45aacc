package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmhedge/caddy-llm-hedge/internal/engine"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// The fields inside an Anthropic block or tool are held to the rule of the
// request's own fields: what the translation does not carry is named. An
// image the client asked never to be scaled down (transformations
// oversized_image "error") and a document's context are material: a 400
// naming them, nothing sent to the translating provider. A strict tool
// schema is advisory: served, and named in the dropped header. (They were
// dropped unseen.)
func TestTranslateBlockAndToolFields(t *testing.T) {
	for _, target := range []string{"openai", "responses", "gemini"} {
		t.Run(target, func(t *testing.T) {
			other := newUpstream(t, sim.Config{Key: "sk-target"})
			p := startProxy(t, provider("other", other, "api "+target, "key sk-target", "translate anthropic"))
			c := anthropicClient(p, "sk-client")

			image := anthropic.NewImageBlockBase64("image/png", "iVBORw0KGgo=")
			image.OfImage.Transformations = anthropic.ImageTransformationsParam{OversizedImage: anthropic.ImageTransformationsParamOversizedImageError}
			doc := anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: "JVBERi0xLjQK"})
			doc.OfDocument.Context = anthropic.String("The contract is the 2019 version.")
			for name, block := range map[string]anthropic.ContentBlockParamUnion{
				"image block field transformations": image,
				"document block field context":      doc,
			} {
				params := anthropicParams("claude-sonnet-4-5")
				params.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(block, anthropic.NewTextBlock("Describe it."))}
				_, err := c.Messages.New(ctxTimeout(t, 10e9), params)
				var apiErr *anthropic.Error
				if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), name) {
					t.Fatalf("%s: err %v, want a 400 naming it", name, err)
				}
			}
			if n := len(other.Requests()); n != 0 {
				t.Fatalf("the translating provider received %d requests, want 0", n)
			}

			params := anthropicParams("claude-sonnet-4-5")
			tool := xlWeatherTool()
			tool.OfTool.Strict = anthropic.Bool(true)
			params.Tools = []anthropic.ToolUnionParam{tool}
			var resp *http.Response
			if _, err := c.Messages.New(ctxTimeout(t, 10e9), params, aoption.WithResponseInto(&resp)); err != nil {
				t.Fatalf("strict tool: %v", err)
			}
			if got := resp.Header.Get(engine.HeaderDropped); !strings.Contains(got, "strict tool schemas") {
				t.Fatalf("%s = %q, want it to name the strict tool schemas", engine.HeaderDropped, got)
			}
		})
	}
}

// A Responses client's inline PDF (input_file with file_data) is served by
// an Anthropic provider translating Responses, as a document; it was
// refused though docs/translation.md says documents are carried. A file
// stored at OpenAI (file_id) is still refused, naming it.
func TestTranslateResponsesInputFile(t *testing.T) {
	claude := newUpstream(t, sim.Config{Key: "sk-claude"})
	p := startProxy(t, provider("claude", claude, "api anthropic", "key sk-claude", "translate responses", "model * claude-sonnet-4-5"))
	c := openaiClient(p, "sk-client")
	file := func(f responses.ResponseInputFileParam) responses.ResponseNewParams {
		content := responses.ResponseInputMessageContentListParam{{OfInputFile: &f}, responses.ResponseInputContentParamOfInputText("Summarize.")}
		return responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser)}}}
	}
	resp, err := c.Responses.New(ctxTimeout(t, 10e9), file(responses.ResponseInputFileParam{FileData: openai.String("data:application/pdf;base64,JVBERi0xLjQK"), Filename: openai.String("spec.pdf")}))
	if err != nil || resp.OutputText() == "" {
		t.Fatalf("inline PDF: %v", err)
	}
	_, err = c.Responses.New(ctxTimeout(t, 10e9), file(responses.ResponseInputFileParam{FileID: openai.String("file-1")}))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "input_file") {
		t.Fatalf("file_id: err %v, want a 400 naming input_file", err)
	}
	if n := len(claude.Requests()); n != 1 {
		t.Fatalf("the Anthropic provider received %d requests, want 1", n)
	}
}

// A conversation that ends in an assistant turn means another thing in
// each format: Anthropic continues that text (a prefill), OpenAI and
// Gemini answer anew after it (the simulator's "restart", as their APIs
// do). Translated, the client would join a whole new answer to its
// prefill ("The quickThe quick brown fox..."); it is refused instead,
// naming the prefill, with nothing sent. A Responses client's assistant
// message last, which Anthropic would continue, is refused the same way.
func TestTranslatePrefillRefused(t *testing.T) {
	for _, target := range []string{"openai", "responses", "gemini"} {
		t.Run(target, func(t *testing.T) {
			other := newUpstream(t, sim.Config{Key: "sk-target", Prefill: "restart"})
			p := startProxy(t, provider("other", other, "api "+target, "key sk-target", "translate anthropic"))
			params := anthropicParams("claude-sonnet-4-5")
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(anthropic.NewTextBlock("The quick")))
			_, err := anthropicClient(p, "sk-client").Messages.New(ctxTimeout(t, 10e9), params)
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), "assistant prefill") {
				t.Fatalf("err %v, want a 400 naming the assistant prefill", err)
			}
			if n := len(other.Requests()); n != 0 {
				t.Fatalf("the translating provider received %d requests, want 0", n)
			}
		})
	}
	t.Run("responses client", func(t *testing.T) {
		claude := newUpstream(t, sim.Config{Key: "sk-claude"})
		p := startProxy(t, provider("claude", claude, "api anthropic", "key sk-claude", "translate responses", "model * claude-sonnet-4-5"))
		input := responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage("Say it.", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfMessage("The quick", responses.EasyInputMessageRoleAssistant)}
		_, err := openaiClient(p, "sk-client").Responses.New(ctxTimeout(t, 10e9), responses.ResponseNewParams{Model: "gpt-5",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: input}})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "assistant message last") {
			t.Fatalf("err %v, want a 400 naming the assistant message last", err)
		}
		if n := len(claude.Requests()); n != 0 {
			t.Fatalf("the Anthropic provider received %d requests, want 0", n)
		}
	})
}

// What a Responses client asks for that an Anthropic provider cannot give
// is refused with a 400 naming it, nothing sent: the logprobs of the
// answer's text (served, the client got "logprobs":[] in a 200), and a
// last user message of empty text (Anthropic refuses empty text, so the
// translation left the turn out and sent a conversation ending in the old
// answer, which Anthropic continued: the client got the rest of it).
func TestTranslateResponsesUnservable(t *testing.T) {
	claude := newUpstream(t, sim.Config{Key: "sk-claude"})
	p := startProxy(t, provider("claude", claude, "api anthropic", "key sk-claude", "translate responses", "model * claude-sonnet-4-5"))
	c := openaiClient(p, "sk-client")
	for _, tc := range []struct {
		name, want string
		params     responses.ResponseNewParams
	}{
		{"logprobs", "message.output_text.logprobs", responses.ResponseNewParams{Model: "gpt-5",
			Input:   responses.ResponseNewParamsInputUnion{OfString: openai.String("Say it.")},
			Include: []responses.ResponseIncludable{responses.ResponseIncludableMessageOutputTextLogprobs}}},
		{"empty last user message", "empty last user message", responses.ResponseNewParams{Model: "gpt-5",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("Say it.", responses.EasyInputMessageRoleUser),
				responses.ResponseInputItemParamOfMessage("The quick", responses.EasyInputMessageRoleAssistant),
				responses.ResponseInputItemParamOfMessage("", responses.EasyInputMessageRoleUser)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Responses.New(ctxTimeout(t, 10e9), tc.params)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, tc.want) {
				var text string
				if resp != nil {
					text = resp.OutputText()
				}
				t.Fatalf("err %v (answer %q), want a 400 naming %q", err, text, tc.want)
			}
		})
	}
	if n := len(claude.Requests()); n != 0 {
		t.Fatalf("the Anthropic provider received %d requests, want 0", n)
	}
}
