package cloud

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/openai"
	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/responses"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// azureProtocol is Azure OpenAI (SPEC 11): OpenAI's wire format under
// /openai. A base URL whose query carries `api-version` uses the
// deployments form, `{base}/openai/deployments/{model}/chat/completions`,
// where the deployment is the (rewritten) model: name deployments after
// models or map them with `model`; otherwise the v1 form,
// `{base}/openai/v1/chat/completions` or `/responses`. The key goes in
// `api-key`; the base URL's query is kept.
type azureProtocol struct {
	t           Target
	deployments bool
}

func NewAzure(t Target) (Protocol, error) {
	return &azureProtocol{t: t, deployments: t.BaseURL.Query().Get("api-version") != ""}, nil
}

func (*azureProtocol) String() string { return "azure" }

func (*azureProtocol) Serves(d wire.Dialect) bool {
	return isDialect[openai.Dialect](d) || isDialect[responses.Dialect](d)
}

func (*azureProtocol) SetKey(h http.Header, key string) { h.Set("Api-Key", key) }

func (az *azureProtocol) Prepare(_ context.Context, up *http.Request, req *wire.Request, model string, _ []byte, _ Bodies) error {
	op := "/chat/completions"
	if isDialect[responses.Dialect](req.Dialect) {
		op = "/responses"
	}
	base := strings.TrimSuffix(az.t.BasePath, "/v1")
	base = strings.TrimSuffix(base, "/openai")
	var path string
	switch {
	case az.deployments && op == "/chat/completions":
		seg, err := ModelSegment(model)
		if err != nil {
			return err
		}
		path = "/openai/deployments/" + seg + op
	case az.deployments:
		path = "/openai" + op // the preview Responses API: the deployment is the body's model
	default:
		path = "/openai/v1" + op
	}
	u, err := url.Parse(az.t.BaseURL.Scheme + "://" + az.t.BaseURL.Host + base + path)
	if err != nil {
		return err
	}
	u.RawQuery = az.t.BaseURL.RawQuery
	up.URL, up.Host = u, ""
	return nil
}

// response leaves Azure's answers as OpenAI's: a 401 or 403 is about the
// api-key, as its status says, except a 403 of the resource's network
// rules (its firewall, a private endpoint only): every key is refused
// alike until the operator fixes them, so it fails the provider, never a
// key. A 404 DeploymentNotFound says the deployment the (rewritten) model
// names does not exist on this resource: a missing model there, which
// another provider may serve.
func (*azureProtocol) Response(resp *http.Response) Verdict {
	switch resp.StatusCode {
	case http.StatusNotFound:
		if wire.ErrorField(peekErrorBody(resp), "code") == "deploymentnotfound" {
			return Verdict{Class: wire.ClassModelNotFound}
		}
	case http.StatusForbidden:
		msg := wire.ErrorField(peekErrorBody(resp), "message")
		for _, rule := range azureNetworkRefusals {
			if strings.Contains(msg, rule) {
				return Verdict{Class: wire.ClassAuth, NotKey: true}
			}
		}
	}
	return Verdict{}
}

// azureNetworkRefusals are Azure's words (lower case) for a request its
// network rules refuse, whatever its key.
var azureNetworkRefusals = []string{"virtual network/firewall rules", "private endpoint", "public access is disabled"}
