package fleettest

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caddyserver/caddy/v2"
)

const wantText = "The quick brown fox jumps over the lazy dog."

func simDuration(ms int) caddy.Duration { return caddy.Duration(time.Duration(ms) * time.Millisecond) }

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// client is an openai-go client of base (the balancer or one instance),
// with the SDK's own retries off so that every failure shows.
func client(base string) openai.Client {
	return openai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey("sk-fleet"), option.WithMaxRetries(0))
}

// conversation is what ResponsesAcrossInstances created.
type conversation struct {
	ids     []string // the responses of the turns, in order
	holder  string   // the provider holding them
	creator int      // the instance that served turn 1
}

// turn sends one turn through c and returns the response and the
// instance that served it.
func turn(t *testing.T, c openai.Client, prev string) (*responses.Response, string) {
	t.Helper()
	params := responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
	}
	if prev != "" {
		params.PreviousResponseID = openai.String(prev)
	}
	var httpResp *http.Response
	resp, err := c.Responses.New(ctxTimeout(t, 30*time.Second), params, option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatalf("turn after %q: %v", prev, err)
	}
	if resp.OutputText() != wantText {
		t.Fatalf("turn after %q: text %q", prev, resp.OutputText())
	}
	return resp, httpResp.Header.Get("X-Fleet-Instance")
}

// holderOf names the provider that holds response id (asked directly).
func (f *fleet) holderOf(t *testing.T, id string) string {
	t.Helper()
	holder := ""
	for _, name := range []string{"a", "b"} {
		if status, _ := get(t, f.simURL[name], "/v1/responses/"+id); status == http.StatusOK {
			if holder != "" {
				t.Fatalf("%s held by both providers", id)
			}
			holder = name
		}
	}
	if holder == "" {
		t.Fatalf("%s held by no provider", id)
	}
	return holder
}

// answersAtHolder counts the turns continuing prev that the holder
// answered 200.
func (f *fleet) answersAtHolder(holder, prev string) int {
	n := 0
	for _, rec := range f.sims[holder].Requests() {
		if rec.PreviousResponseID == prev && rec.Status == http.StatusOK {
			n++
		}
	}
	return n
}

// turnAtHolder sends a turn continuing prev through c and checks that the
// holder of prev answered it.
func (f *fleet) turnAtHolder(t *testing.T, c openai.Client, holder, prev string) (*responses.Response, string) {
	t.Helper()
	before := f.answersAtHolder(holder, prev)
	resp, instance := turn(t, c, prev)
	if f.answersAtHolder(holder, prev) != before+1 {
		t.Fatalf("the turn after %s (through %s) did not reach its holder %s", prev, instance, holder)
	}
	return resp, instance
}

func do(t *testing.T, method, base, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxTimeout(t, 30*time.Second), method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer sk-fleet")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, base, path string) (int, string) { return do(t, http.MethodGet, base, path) }

// callsAnswerAsHolder: GET and input_items of id through every instance
// answer what the holder answers.
func (f *fleet) callsAnswerAsHolder(t *testing.T, holder, id string) {
	t.Helper()
	for _, path := range []string{"/v1/responses/" + id, "/v1/responses/" + id + "/input_items"} {
		wantStatus, want := get(t, f.simURL[holder], path)
		if wantStatus != http.StatusOK {
			t.Fatalf("the holder answers %s with %d", path, wantStatus)
		}
		for _, in := range f.instances {
			if status, got := get(t, in.URL(), path); status != wantStatus || got != want {
				t.Fatalf("GET %s through %s: %d %s\nthe holder answers: %s", path, in.name, status, got, want)
			}
		}
	}
}

// deleteThroughEveryInstance: a response created through instance i is
// deleted through instance i+1, which never saw it; a second DELETE (any
// instance) answers 404, as the holder then does.
func (f *fleet) deleteThroughEveryInstance(t *testing.T, lb openai.Client) {
	t.Helper()
	for i := range f.instances {
		resp, _ := turn(t, client(f.instances[i].URL()), "")
		holder := f.holderOf(t, resp.ID)
		other := f.instances[(i+1)%len(f.instances)]
		status, body := do(t, http.MethodDelete, other.URL(), "/v1/responses/"+resp.ID)
		if status != http.StatusOK {
			t.Fatalf("DELETE through %s: %d %s", other.name, status, body)
		}
		if s, _ := get(t, f.simURL[holder], "/v1/responses/"+resp.ID); s != http.StatusNotFound {
			t.Fatalf("after the DELETE the holder still has it (%d)", s)
		}
		third := f.instances[(i+2)%len(f.instances)]
		wantStatus, _ := do(t, http.MethodDelete, f.simURL[holder], "/v1/responses/"+resp.ID)
		if status, body := do(t, http.MethodDelete, third.URL(), "/v1/responses/"+resp.ID); status != wantStatus {
			t.Fatalf("second DELETE through %s: %d %s, the holder answers %d", third.name, status, body, wantStatus)
		}
	}
}

// responsesAcrossInstances: six turns through the balancer, each on
// another instance than the last, all 200 and all at the creator.
func (f *fleet) responsesAcrossInstances(t *testing.T) *conversation {
	lb := client(f.balancer.URL())
	conv := &conversation{creator: -1}
	prev, prevInstance := "", ""
	for n := 1; n <= 6; n++ {
		var resp *responses.Response
		var instance string
		if n == 1 {
			resp, instance = turn(t, lb, prev)
		} else {
			resp, instance = f.turnAtHolder(t, lb, conv.holder, prev)
		}
		if instance == "" || instance == prevInstance {
			t.Fatalf("turn %d served by %q after %q: the balancer did not move it", n, instance, prevInstance)
		}
		if n == 1 {
			conv.holder = f.holderOf(t, resp.ID)
			for i, in := range f.instances {
				if in.name == instance {
					conv.creator = i
				}
			}
		} else {
			if h := f.holderOf(t, resp.ID); h != conv.holder {
				t.Fatalf("turn %d created at %s, the conversation is at %s", n, h, conv.holder)
			}
		}
		conv.ids = append(conv.ids, resp.ID)
		prev, prevInstance = resp.ID, instance
	}
	f.callsAnswerAsHolder(t, conv.holder, conv.ids[0])
	f.deleteThroughEveryInstance(t, lb)
	return conv
}

// afterRestartOfCreator: the instance that created the first response is
// restarted (it forgets its table); the calls on it and the next turns
// through every instance still reach the holder.
func (f *fleet) afterRestartOfCreator(t *testing.T, conv *conversation) {
	creator := f.instances[conv.creator]
	creator.terminate(t)
	creator.start(t)
	f.callsAnswerAsHolder(t, conv.holder, conv.ids[0])
	prev := conv.ids[len(conv.ids)-1]
	for _, in := range append([]*process{creator}, f.instances...) {
		resp, _ := f.turnAtHolder(t, client(in.URL()), conv.holder, prev)
		prev = resp.ID
	}
	// A turn continuing the first response, through the restarted instance.
	f.turnAtHolder(t, client(creator.URL()), conv.holder, conv.ids[0])
	f.deleteThroughEveryInstance(t, client(f.balancer.URL()))
}
