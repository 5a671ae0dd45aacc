package llmhedge

import (
	"encoding/json"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// Bedrock's errors (protocol_bedrock.go): the stream's exception frames and
// their classes.

// bedrockExceptionClasses map Bedrock's stream exceptions to the class the
// same failure has as an HTTP status (SPEC 11).
var bedrockExceptionClasses = map[string]failClass{
	"throttlingException":           classRateLimited, // 429
	"serviceUnavailableException":   classOverloaded,  // 503
	"modelNotReadyException":        classOverloaded,  // 429/503: not ready yet
	"internalServerException":       classStatus5xx,   // 500
	"modelStreamErrorException":     classStatus5xx,   // 424: the model failed mid-answer
	"modelTimeoutException":         classStatus5xx,   // 408
	"validationException":           classRequest,     // 400
	"accessDeniedException":         classAuth,        // 403
	"resourceNotFoundException":     classModelNotFound,
	"serviceQuotaExceededException": classRateLimited,
}

// bedrockException is the stream fault of an exception frame.
func bedrockException(kind string, payload []byte) error {
	c, ok := bedrockExceptionClasses[kind]
	if !ok {
		// Lower-camel in the stream, Upper-camel as an HTTP error type.
		if kind != "" {
			c, ok = bedrockExceptionClasses[strings.ToLower(kind[:1])+kind[1:]]
		}
		if !ok {
			c = classStatus5xx
		}
	}
	msg := upstreamMessage(payload)
	if m, ok := jsonscan.Lookup(payload, "message"); ok {
		var s string
		if json.Unmarshal(m, &s) == nil {
			msg = s
		}
	}
	if kind == "" {
		kind = "exception"
	}
	return &streamFault{c, "bedrock " + kind + ": " + msg}
}
