package provider

import (
	"net/url"

	"github.com/tollgate/tollgate/config"
)

func init() { adapters[config.TypeAzure] = azure{} }

// azure serves Azure OpenAI: OpenAI's body (the model field is set to the
// deployment name, which Azure ignores) sent to
// {base_url}/openai/deployments/{deployment}/chat/completions?api-version=…
// with an api-key header. The answer is OpenAI's, except that Azure's
// content-filter annotations are normalized away: stream chunks with an
// empty object (the first one, carrying only prompt_filter_results, and
// asynchronous filter results) are dropped; the prompt_filter_results and
// content_filter_results fields of real chunks and completions pass
// through (OpenAI's schema allows extra fields, and they tell the client
// why content was filtered).
type azure struct{}

// Translate builds the upstream request and the answer's translator.
func (azure) Translate(req *Request, t Target) (Upstream, Response, error) {
	body, asked, err := openAIBody(req, t)
	if err != nil {
		return Upstream{}, nil, err
	}
	authority, path, err := upstreamURL(t.Provider)
	if err != nil {
		return Upstream{}, nil, err
	}
	version := t.Provider.APIVersion
	if version == "" {
		version = config.DefaultAzureVersion
	}
	up := Upstream{
		Path: path + "/openai/deployments/" + url.PathEscape(t.Deployment.Model) +
			"/chat/completions?api-version=" + url.QueryEscape(version),
		Authority: authority,
		Body:      body,
		Headers:   []Header{{"content-type", "application/json"}},
	}
	if k := t.Provider.APIKey.Reveal(); k != "" {
		up.Headers = append(up.Headers, Header{"api-key", k})
	}
	r := newOpenAIResponse(req, t.Model.ID)
	r.clientUsage = !asked
	r.azure = true
	return up, r, nil
}
