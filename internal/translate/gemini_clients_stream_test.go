package translate

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"
)

// The phase-2 pairs of this package's Gemini and Responses clients, each
// with the directory of its target's hand-made streams.
var clientPairs = []struct{ client, target, dir string }{
	{Gemini, Anthropic, "anthropic"},
	{Gemini, OpenAI, "chat"},
	{Responses, Gemini, "gemini"},
	{Responses, OpenAI, "chat"},
}

// geminiAnswer is what a genai client reads of an answer, stream or not:
// text parts run together (a stream's pieces are one text), calls with
// their ids, names and arguments, the finish reason and usage.
type geminiRead struct {
	Parts  []string // "text:..." or "call:id name args"
	Finish genai.FinishReason
	Usage  string
	Model  string
	ID     string
}

func (g *geminiRead) add(t testing.TB, r *genai.GenerateContentResponse) error {
	if len(r.Candidates) != 1 {
		return fmt.Errorf("%d candidates", len(r.Candidates))
	}
	c := r.Candidates[0]
	if g.Finish != "" {
		return fmt.Errorf("a chunk after the finishReason")
	}
	g.Finish = c.FinishReason
	if c.Content == nil || c.Content.Role != "model" {
		return fmt.Errorf("candidate without model content")
	}
	for _, p := range c.Content.Parts {
		switch {
		case p.FunctionCall != nil:
			args, _ := json.Marshal(p.FunctionCall.Args)
			if p.FunctionCall.ID == "" || p.FunctionCall.Name == "" {
				return fmt.Errorf("call without id or name")
			}
			g.Parts = append(g.Parts, "call:"+p.FunctionCall.ID+" "+p.FunctionCall.Name+" "+string(args))
		case p.Text != "":
			if n := len(g.Parts); n > 0 && strings.HasPrefix(g.Parts[n-1], "text:") {
				g.Parts[n-1] += p.Text
			} else {
				g.Parts = append(g.Parts, "text:"+p.Text)
			}
		default:
			return fmt.Errorf("a part that is neither text nor a call")
		}
	}
	if r.UsageMetadata != nil {
		u, _ := json.Marshal(r.UsageMetadata)
		g.Usage = string(u)
	}
	g.Model, g.ID = r.ModelVersion, r.ResponseID
	return nil
}

// checkGeminiStream holds a client stream to what genai reads: `data:`
// chunks without event names, each a GenerateContentResponse with one
// candidate; the finishReason only in the last, with usage; or an error
// object last. It returns what the client read when the stream ended
// cleanly.
func checkGeminiStream(t testing.TB, out []byte) (*geminiRead, error) {
	var g geminiRead
	evs := sseEvents(t, out)
	for i, ev := range evs {
		if len(ev.Name) != 0 {
			return nil, fmt.Errorf("event %d has a name %q", i, ev.Name)
		}
		var probe struct {
			Error *genai.APIError `json:"error"`
		}
		if err := json.Unmarshal(ev.Data, &probe); err != nil {
			return nil, fmt.Errorf("chunk %d is not JSON: %v", i, err)
		}
		if probe.Error != nil {
			if i != len(evs)-1 || probe.Error.Message == "" || probe.Error.Code == 0 || probe.Error.Status == "" {
				return nil, fmt.Errorf("error chunk not last, or incomplete: %s", ev.Data)
			}
			return nil, nil
		}
		var r genai.GenerateContentResponse
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			return nil, fmt.Errorf("chunk %d: %v", i, err)
		}
		if err := g.add(t, &r); err != nil {
			return nil, fmt.Errorf("chunk %d: %v: %s", i, err, ev.Data)
		}
	}
	if g.Finish == "" {
		return nil, nil
	}
	return &g, nil
}

func checkGeminiClean(t testing.TB, out []byte) (bool, error) {
	g, err := checkGeminiStream(t, out)
	return g != nil, err
}

// TestClientPairStreams runs every stream of each pair's target directory:
// the client's bytes are golden, follow the client's grammar, and end
// cleanly exactly when the non-stream twin translates, with the same
// answer.
func TestClientPairStreams(t *testing.T) {
	for _, cp := range clientPairs {
		p, _ := For(cp.client, cp.target)
		files, _ := filepath.Glob(filepath.Join("testdata", cp.dir, "*.sse"))
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".sse")
			t.Run(cp.client+"<-"+cp.target+"/"+name, func(t *testing.T) {
				out, err := runStream(p, readFile(t, f), nil)
				golden(t, cp.client+"_from_"+cp.dir+"_"+name+".sse", out)
				twin := filepath.Join("testdata", cp.dir, name+".json")
				var body []byte
				var nerr error = fmt.Errorf("no twin")
				if fileExists(twin) {
					body, nerr = minimal(p).Response(readFile(t, twin))
				}
				switch cp.client {
				case Gemini:
					got, gerr := checkGeminiStream(t, out)
					if gerr != nil {
						t.Fatalf("grammar: %v\n%s", gerr, out)
					}
					if (err == nil) != (got != nil) {
						t.Fatalf("err %v, clean %v\n%s", err, got != nil, out)
					}
					if err != nil {
						if nerr == nil {
							t.Fatalf("the stream fails (%v), its non-stream twin translates", err)
						}
						return
					}
					if nerr != nil {
						t.Fatalf("the stream ends cleanly, its non-stream twin does not translate: %v", nerr)
					}
					var whole genai.GenerateContentResponse
					if err := json.Unmarshal(body, &whole); err != nil {
						t.Fatal(err)
					}
					var want geminiRead
					if err := want.add(t, &whole); err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(*got) != fmt.Sprint(want) {
						t.Fatalf("stream reads\n %+v\nnon-stream\n %+v", *got, want)
					}
				case Responses:
					final, gerr := checkResponsesStream(t, out)
					if gerr != nil {
						t.Fatalf("grammar: %v\n%s", gerr, out)
					}
					if (err == nil) != (final != nil) {
						t.Fatalf("err %v, clean %v\n%s", err, final != nil, out)
					}
					if err != nil {
						if nerr == nil {
							t.Fatalf("the stream fails (%v), its non-stream twin translates", err)
						}
						return
					}
					if nerr != nil {
						t.Fatalf("the stream ends cleanly, its non-stream twin does not translate: %v", nerr)
					}
					var want responses.Response
					if err := json.Unmarshal(body, &want); err != nil {
						t.Fatal(err)
					}
					sameResponse(t, final, &want)
				}
			})
		}
	}
}

func TestClientPairStreamsRechunked(t *testing.T) {
	for _, cp := range clientPairs {
		t.Run(cp.client+"<-"+cp.target, func(t *testing.T) {
			p, _ := For(cp.client, cp.target)
			checkRechunked(t, p, cp.dir)
		})
	}
}
