package cloud

import "github.com/aws/aws-sdk-go-v2/aws"

func newSigV4Bedrock(t Target, creds aws.CredentialsProvider) *BedrockProtocol {
	return &BedrockProtocol{t: t, creds: creds, signer: newSigV4("bedrock", t.Opts.Region)}
}
