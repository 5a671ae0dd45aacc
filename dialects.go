package llmhedge

// The dialects and clouds the module speaks, in one place and in order: the
// order is the one the path sniff tries (the highest match wins, ties go to
// the first listed) and error messages name them in. Adding a dialect is its
// file(s) and one entry here; adding a cloud, its protocol file and one
// entry in protocols.

// dialects are the wire formats clients speak.
var dialects = []dialect{dialectAnthropic, dialectGemini, dialectOpenAI, dialectResponses}

// alsoServedBy lists, for a client dialect, the provider `api` values
// besides its own that serve it: OpenAI and the compatible servers serve
// the Responses API under the same base URL and key as Chat Completions.
var alsoServedBy = map[dialect][]dialect{
	dialectResponses: {dialectOpenAI},
}

// protocols are the clouds a provider reaches a model through (`api
// azure|bedrock|vertex`), each with the dialect a provider of it reports as
// its own (for apiServes) and its constructor. Vertex serves two dialects
// (Anthropic and Gemini), which its serves method says: dialectNone here.
var protocols = []protocolInfo{
	{"azure", dialectOpenAI, newAzureProtocol},
	{"bedrock", dialectAnthropic, newBedrockProtocol},
	{"vertex", dialectNone, newVertexProtocol},
}
