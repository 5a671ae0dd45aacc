package genai

import "strings"

// Operation is gen_ai.operation.name for a request of dialect: Gemini's
// generateContent is the registry's generate_content; Messages, Chat
// Completions and Responses are chat.
func Operation(dialect string) string {
	if dialect == "gemini" {
		return "generate_content"
	}
	return "chat"
}

// ProviderName is gen_ai.provider.name, a value of the semantic
// conventions' registry: the cloud an attempt goes through (bedrock,
// vertex, azure; "" for none), else a vendor named with a registry value,
// else a well-known API host, else the API spoken (api: anthropic, gemini,
// openai or responses), so a self-hosted OpenAI-compatible server is
// "openai".
func ProviderName(cloud, vendor, host, api string) string {
	switch cloud {
	case "bedrock":
		return "aws.bedrock"
	case "vertex":
		return "gcp.vertex_ai"
	case "azure":
		return "azure.ai.openai"
	}
	for _, known := range providers {
		if vendor == known.name {
			return vendor
		}
	}
	for _, known := range providers {
		if host == known.host || strings.HasSuffix(host, "."+known.host) {
			return known.name
		}
	}
	switch api {
	case "anthropic":
		return "anthropic"
	case "gemini":
		return "gcp.gemini"
	}
	return "openai"
}

// providers are the registry's provider names and the API host each is
// recognised by.
var providers = []struct{ name, host string }{
	{"anthropic", "anthropic.com"},
	{"openai", "openai.com"},
	{"gcp.gemini", "generativelanguage.googleapis.com"},
	{"gcp.vertex_ai", "aiplatform.googleapis.com"},
	{"aws.bedrock", "amazonaws.com"},
	{"azure.ai.openai", "openai.azure.com"},
	{"azure.ai.inference", "models.ai.azure.com"},
	{"deepseek", "deepseek.com"},
	{"groq", "groq.com"},
	{"mistral_ai", "mistral.ai"},
	{"x_ai", "x.ai"},
	{"perplexity", "perplexity.ai"},
	{"cohere", "cohere.com"},
	{"ibm.watsonx.ai", "watsonx.ai"},
}
