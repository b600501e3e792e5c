package e2e

// Azure OpenAI: OpenAI's chat-completions format at
// /openai/deployments/{deployment}/chat/completions?api-version=…, with an
// api-key header and content-filter annotations: prompt_filter_results (in
// a stream, alone in a first chunk with an empty id, model and object),
// content_filter_results on each choice, and asynchronous filter chunks.
// The mock's answers are written by serveChat (mockprovider_test.go).

const (
	// azureDeployment is the deployment name; its space must arrive escaped.
	azureDeployment = "gpt-4o prod"
	azurePath       = "/openai/deployments/gpt-4o%20prod/chat/completions"
	azureVersion    = "2024-10-21"
)

var azureFilterResults = map[string]any{
	"hate":      map[string]any{"filtered": false, "severity": "safe"},
	"self_harm": map[string]any{"filtered": false, "severity": "safe"},
	"sexual":    map[string]any{"filtered": false, "severity": "safe"},
	"violence":  map[string]any{"filtered": false, "severity": "safe"},
}
