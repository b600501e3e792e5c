package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/sjson"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/tollgate/tollgate/config"
)

func init() {
	adapters[config.TypeVertex] = vertex{gemini: gemini{defaultEnv}, anthropic: anthropic{defaultEnv}, token: defaultTokens.token}
}

// Vertex AI's wire details.
const (
	// VertexAnthropicVersion is the anthropic_version a Claude request on
	// Vertex carries in its body (in place of the anthropic-version
	// header).
	VertexAnthropicVersion = "vertex-2023-10-16"
	// vertexScope is the OAuth2 scope of Vertex AI's API.
	vertexScope = "https://www.googleapis.com/auth/cloud-platform"
	// TokenTimeout bounds one fetch of an access token (a service
	// account's token endpoint, or the metadata server).
	TokenTimeout = 10 * time.Second
)

// ErrCredential is returned by Translate when the provider's credential
// could not be had (Vertex's access token could not be fetched; AWS
// credentials could not be loaded, retrieved or refreshed, or expired): the
// attempt fails as the provider failing would, and the message names no
// secret.
var ErrCredential = errors.New("provider: no credential for the provider")

// vertex serves Google Vertex AI. A deployment whose model begins with
// claude- is Anthropic's Claude, sent to
// {base_url}/v1/projects/{project}/locations/{region}/publishers/anthropic/models/{model}:rawPredict
// (:streamRawPredict streamed) as the anthropic adapter's Messages body
// without its model (which is in the path) and with anthropic_version
// vertex-2023-10-16 in the body; any other is a Gemini model, sent to
// …/publishers/google/models/{model}:generateContent
// (:streamGenerateContent?alt=sse) as the gemini adapter's body. Answers
// are the family's own wire format, translated by the family's adapter. A
// Messages client's request to Claude passes through instead (relay).
// The credential is an OAuth2 access token from Google's credentials
// (Authorization: Bearer), fetched per attempt from a cached, refreshing
// token source.
type vertex struct {
	gemini    gemini
	anthropic anthropic
	// token returns the provider's access token.
	token func(p *config.Provider) (string, error)
}

// Family is the provider type whose wire format a deployment speaks:
// the provider's own type, except on vertex, where it is anthropic for
// Claude models (a model name beginning with claude-) and gemini for the
// others.
func Family(p *config.Provider, d *config.Deployment) string {
	if p.Type != config.TypeVertex {
		return p.Type
	}
	if strings.HasPrefix(d.Model, "claude-") {
		return config.TypeAnthropic
	}
	return config.TypeGemini
}

// Translate builds the upstream request and the answer's translator.
func (v vertex) Translate(req *Request, t Target) (Upstream, Response, error) {
	var (
		up        Upstream
		resp      Response
		err       error
		publisher string
		method    string
		model     = t.Deployment.Model
	)
	if Family(t.Provider, t.Deployment) == config.TypeAnthropic {
		publisher, method = "anthropic", claudeMethod(req.Stream)
		if up, resp, err = v.anthropic.Translate(req, t); err != nil {
			return Upstream{}, nil, err
		}
		if up.Body, err = vertexClaudeBody(up.Body); err != nil {
			return Upstream{}, nil, err
		}
	} else {
		publisher, method = "google", ":generateContent"
		if req.Stream {
			method = ":streamGenerateContent?alt=sse"
		}
		model = strings.TrimPrefix(model, "models/")
		if up, resp, err = v.gemini.Translate(req, t); err != nil {
			return Upstream{}, nil, err
		}
	}
	if err := v.route(&up, t.Provider, publisher, model, method); err != nil {
		return Upstream{}, nil, err
	}
	return up, resp, nil
}

// claudeMethod is the method of a Claude request on Vertex.
func claudeMethod(stream bool) string {
	if stream {
		return ":streamRawPredict"
	}
	return ":rawPredict"
}

// vertexClaudeBody is a Messages body as Claude on Vertex takes it: without
// its model (which is in the path), with anthropic_version
// vertex-2023-10-16.
func vertexClaudeBody(body []byte) ([]byte, error) {
	body, err := sjson.DeleteBytes(body, "model")
	if err != nil {
		return nil, fmt.Errorf("vertex: remove model: %w", err)
	}
	if body, err = sjson.SetBytes(body, "anthropic_version", VertexAnthropicVersion); err != nil {
		return nil, fmt.Errorf("vertex: set anthropic_version: %w", err)
	}
	return body, nil
}

// route sets up's authority, its path to the publisher's model and method
// in the provider's project and region, and its headers: the content type
// and Google's access token. Token errors wrap ErrCredential.
func (v vertex) route(up *Upstream, p *config.Provider, publisher, model, method string) error {
	authority, path, err := upstreamURL(p)
	if err != nil {
		return err
	}
	token, err := v.token(p)
	if err != nil {
		return err
	}
	up.Authority = authority
	up.Path = path + "/v1/projects/" + url.PathEscape(p.Project) +
		"/locations/" + url.PathEscape(p.Region) +
		"/publishers/" + publisher + "/models/" + url.PathEscape(model) + method
	up.Headers = []Header{{"content-type", "application/json"}, {"authorization", "Bearer " + token}}
	return nil
}

// relay is AnthropicRelay for Claude on Vertex: body (the client's Messages
// body) goes to rawPredict (streamRawPredict streamed) as Vertex takes it,
// with the client's anthropic-beta; the anthropic-version header is not
// sent, the body carrying Vertex's. The answer is Anthropic's, metered by
// the Anthropic adapter's translator.
func (v vertex) relay(req *Request, t Target, body []byte, beta string) (Upstream, Response, error) {
	body, err := vertexClaudeBody(body)
	if err != nil {
		return Upstream{}, nil, err
	}
	up := Upstream{Body: body}
	if err := v.route(&up, t.Provider, "anthropic", t.Deployment.Model, claudeMethod(req.Stream)); err != nil {
		return Upstream{}, nil, err
	}
	if beta != "" {
		up.Headers = append(up.Headers, Header{"anthropic-beta", beta})
	}
	c := &anthropicCodec{tools: map[int]int{}, jsonBlock: -1}
	return up, newTranslated(req, c, v.anthropic.env.newID(), t.Model.ID, v.anthropic.env), nil
}

// defaultTokens are the process's token sources, one per provider.
var defaultTokens = &tokenSources{timeout: TokenTimeout, sources: map[tokenKey]oauth2.TokenSource{}}

// tokenSources keeps one refreshing token source per provider (by name
// and credentials file), made on its first use; a source that could not
// be made (an unreadable file) is tried again on the next attempt.
type tokenSources struct {
	timeout time.Duration
	mu      sync.Mutex
	sources map[tokenKey]oauth2.TokenSource
}

type tokenKey struct{ provider, file string }

// token is the provider's current access token, fetched (within the
// timeout) when the cached one has expired. Errors wrap ErrCredential.
func (s *tokenSources) token(p *config.Provider) (string, error) {
	key := tokenKey{p.Name, p.CredentialsFile}
	s.mu.Lock()
	src, ok := s.sources[key]
	if !ok {
		var err error
		if src, err = newTokenSource(p.CredentialsFile, s.timeout); err != nil {
			s.mu.Unlock()
			return "", fmt.Errorf("%w %s: %w", ErrCredential, p.Name, err)
		}
		s.sources[key] = src
	}
	s.mu.Unlock()
	tok, err := src.Token()
	if err != nil {
		return "", fmt.Errorf("%w %s: %w", ErrCredential, p.Name, err)
	}
	if tok.AccessToken == "" {
		return "", fmt.Errorf("%w %s: the token endpoint issued an empty token", ErrCredential, p.Name)
	}
	return tok.AccessToken, nil
}

// newTokenSource makes a refreshing token source from the credential file
// named, or from Application Default Credentials when it is empty. Every
// token fetch it makes is bounded by timeout.
func newTokenSource(file string, timeout time.Duration) (oauth2.TokenSource, error) {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: timeout})
	var creds *google.Credentials
	if file == "" {
		c, err := google.FindDefaultCredentials(ctx, vertexScope)
		if err != nil {
			return nil, fmt.Errorf("application default credentials: %w", err)
		}
		creds = c
	} else {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("credentials_file: %w", err)
		}
		var kind struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &kind); err != nil {
			return nil, fmt.Errorf("credentials_file %s: not a Google credential file: %w", file, err)
		}
		// The administrator named the file: whatever kind of Google
		// credential it holds is theirs to choose.
		if creds, err = google.CredentialsFromJSONWithType(ctx, b, google.CredentialsType(kind.Type), vertexScope); err != nil {
			return nil, fmt.Errorf("credentials_file %s: %w", file, err)
		}
	}
	return oauth2.ReuseTokenSource(nil, creds.TokenSource), nil
}
