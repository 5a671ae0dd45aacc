package llmhedge

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmhedge/caddy-llm-hedge/internal/cloud"
)

func TestCaddyfileCloudOptions(t *testing.T) {
	h, err := parseHandler(`llm_hedge {
		provider br https://bedrock-runtime.us-east-1.amazonaws.com {
			api bedrock
			region us-east-1
			aws_profile prod
		}
		provider vx https://us-east5-aiplatform.googleapis.com {
			api vertex
			region us-east5
			project my-project
		}
		provider az https://r.openai.azure.com?api-version=2024-10-21 {
			api azure
			key {env.AZURE_KEY}
		}
	}`)
	if err != nil {
		t.Fatal(err)
	}
	br, vx, az := h.Providers[0], h.Providers[1], h.Providers[2]
	if br.API != "bedrock" || br.Region != "us-east-1" || br.AWSProfile != "prod" ||
		vx.API != "vertex" || vx.Region != "us-east5" || vx.Project != "my-project" ||
		az.API != "azure" || az.Key != "{env.AZURE_KEY}" {
		t.Fatalf("parsed %+v %+v %+v", br, vx, az)
	}
	for _, tc := range []struct{ block, want string }{
		{"api bedrock", "api bedrock needs region, at Testfile:"},
		{"api vertex\n region us-east5", "api vertex needs project, at Testfile:"},
		{"api azure", "api azure needs key"},
		{"api anthropic\n region us-east-1", "region is read by api bedrock and vertex only"},
		{"api bedrock\n region x\n project p", "project is read by api vertex only"},
		{"api vertex\n region x\n project p\n aws_profile a", "aws_profile is read by api bedrock only"},
		{"api gcp", `api: "gcp" is not one of anthropic, gemini, openai, responses, chat, azure, bedrock, vertex`},
	} {
		_, err := parseHandler("llm_hedge {\n provider p https://x {\n " + tc.block + "\n }\n}")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.block, err, tc.want)
		}
	}
}

// Provision names the provider and the credential chain it searched when a
// cloud has no credentials, and the option a cloud needs.
func TestCloudProvisionErrors(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(dir, "missing.json"))
	for _, tc := range []struct {
		name string
		p    Provider
		want string
	}{
		{"bedrock no credentials", Provider{API: "bedrock", Options: cloud.Options{Region: "us-east-1"}}, "no AWS credentials found in the AWS default chain (environment, shared config"},
		{"bedrock missing profile", Provider{API: "bedrock", Options: cloud.Options{Region: "us-east-1", AWSProfile: "nope"}}, `the AWS shared config profile "nope"`},
		{"bedrock no region", Provider{API: "bedrock"}, "api bedrock needs region"},
		{"vertex no credentials", Provider{API: "vertex", Options: cloud.Options{Region: "us-east5", Project: "p"}}, "no Google credentials found in the Application Default Credentials chain (GOOGLE_APPLICATION_CREDENTIALS"},
		{"vertex no project", Provider{API: "vertex", Options: cloud.Options{Region: "us-east5"}}, "api vertex needs project"},
		{"azure no key", Provider{API: "azure"}, "api azure needs key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := tc.p
			pc.Name, pc.BaseURL = "cloud", "https://cloud.invalid"
			h := &Handler{Providers: []*Provider{&pc}}
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			err := h.Provision(ctx)
			if err == nil {
				_ = h.Cleanup()
				t.Fatalf("provisioned; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), `provider "cloud"`) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want the provider and %q", err, tc.want)
			}
		})
	}
	// A Bedrock API key needs no AWS credentials; the JSON fields parse.
	var pc Provider
	if err := json.Unmarshal([]byte(`{"name":"cloud","base_url":"https://cloud.invalid","api":"bedrock","region":"eu-west-1","aws_profile":"x","key":"bedrock-api-key"}`), &pc); err != nil {
		t.Fatal(err)
	}
	if pc.Region != "eu-west-1" || pc.AWSProfile != "x" {
		t.Fatalf("JSON fields: %+v", pc)
	}
	pc.AWSProfile = ""
	h := &Handler{Providers: []*Provider{&pc}}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := h.Provision(ctx); err != nil {
		t.Fatalf("bedrock with an API key: %v", err)
	}
	_ = h.Cleanup()
}
