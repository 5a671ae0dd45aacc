package llmhedge_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"

	llmhedge "github.com/llmhedge/caddy-llm-hedge"
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
			if got := resp.Header.Get(llmhedge.HeaderDropped); !strings.Contains(got, "strict tool schemas") {
				t.Fatalf("%s = %q, want it to name the strict tool schemas", llmhedge.HeaderDropped, got)
			}
		})
	}
}
