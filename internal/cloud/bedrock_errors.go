package cloud

import (
	"encoding/json"
	"strings"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// Bedrock's errors (protocol_bedrock.go): the stream's exception frames and
// their classes.

// bedrockExceptionClasses map Bedrock's stream exceptions to the class the
// same failure has as an HTTP status (SPEC 11).
var bedrockExceptionClasses = map[string]wire.FailClass{
	"throttlingException":           wire.ClassRateLimited, // 429
	"serviceUnavailableException":   wire.ClassOverloaded,  // 503
	"modelNotReadyException":        wire.ClassOverloaded,  // 429/503: not ready yet
	"internalServerException":       wire.ClassStatus5xx,   // 500
	"modelStreamErrorException":     wire.ClassStatus5xx,   // 424: the model failed mid-answer
	"modelErrorException":           wire.ClassStatus5xx,   // 424: the model failed (InvokeModel)
	"modelTimeoutException":         wire.ClassStatus5xx,   // 408
	"validationException":           wire.ClassRequest,     // 400
	"accessDeniedException":         wire.ClassAuth,        // 403
	"resourceNotFoundException":     wire.ClassModelNotFound,
	"serviceQuotaExceededException": wire.ClassRateLimited, // 400: the account's quota
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
			c = wire.ClassStatus5xx
		}
	}
	msg := wire.UpstreamMessage(payload)
	if m, ok := jsonscan.Lookup(payload, "message"); ok {
		var s string
		if json.Unmarshal(m, &s) == nil {
			msg = s
		}
	}
	if kind == "" {
		kind = "exception"
	}
	return &StreamFault{c, "bedrock " + kind + ": " + msg}
}
