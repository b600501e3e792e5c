package mockllm

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// Vertex AI's paths: POST
// /v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent
// (:streamGenerateContent?alt=sse), Gemini's wire format, and
// …/publishers/anthropic/models/{model}:rawPredict (:streamRawPredict),
// Anthropic's Messages body without its model and with anthropic_version
// vertex-2023-10-16 in the body; and …/publishers/google/models/{model}
// :predict, the text embedding models' (vertexEmbeddings). A Request on
// them has the family's Format (Gemini, Anthropic; Gemini for predict,
// whose errors are Google's) and Vertex set.
//
// With Options.VertexAccounts, the mock is also Google's OAuth2 token
// endpoint (VertexTokenPath): it exchanges a JWT signed by one of the
// accounts (the service-account flow of Google's client libraries) for an
// access token, and a request on a Vertex path must carry one of the
// tokens it issued (Authorization: Bearer); without one it gets 401.

// VertexTokenPath is the mock's OAuth2 token endpoint: the token_uri of
// the service-account files the tests write.
const VertexTokenPath = "/oauth2/token"

// VertexAnthropicVersion is the anthropic_version a Claude request on
// Vertex must carry in its body.
const VertexAnthropicVersion = "vertex-2023-10-16"

// maxVertexTokens bounds the tokens the mock remembers.
const maxVertexTokens = 1024

// vertexRoute tells a Vertex path's format and family, or "".
func vertexRoute(path string) (Format, family) {
	rest, ok := strings.CutPrefix(path, "/v1/projects/")
	if !ok {
		return "", ""
	}
	parts := strings.Split(rest, "/")
	// {project} locations {location} publishers {publisher} models {model:method}
	if len(parts) != 7 || parts[0] == "" || parts[1] != "locations" || parts[2] == "" || parts[3] != "publishers" || parts[5] != "models" {
		return "", ""
	}
	model, method, _ := strings.Cut(parts[6], ":")
	if model == "" {
		return "", ""
	}
	switch {
	case parts[4] == "google" && (method == "generateContent" || method == "streamGenerateContent"):
		return Gemini, chatFamily
	case parts[4] == "anthropic" && (method == "rawPredict" || method == "streamRawPredict"):
		return Anthropic, chatFamily
	case parts[4] == "google" && method == "predict":
		return Gemini, embeddingsFamily
	}
	return "", ""
}

// pathModel is the model a Gemini or Vertex path names ({model} before
// its method).
func pathModel(path string) string {
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return ""
	}
	model, _, _ := strings.Cut(path[i+len("/models/"):], ":")
	return model
}

// vertexRefusal is the status and message of a Vertex request Vertex
// would refuse, or 0.
func (m *Mock) vertexRefusal(req *Request) (int, string) {
	if req.Format != Anthropic {
		return 0, ""
	}
	if _, ok := req.Body["model"]; ok {
		m.problem("vertex: a Claude body with a model field")
		return http.StatusBadRequest, "model: Extra inputs are not permitted"
	}
	if v, _ := req.Body["anthropic_version"].(string); v != VertexAnthropicVersion {
		m.problem("vertex: anthropic_version is %q", v)
		return http.StatusBadRequest, "anthropic_version: Input should be '" + VertexAnthropicVersion + "'"
	}
	return 0, ""
}

// vertexAuthorized reports whether r carries a token the mock issued; a
// refusal is a problem.
func (m *Mock) vertexAuthorized(r *http.Request) bool {
	if len(m.opt.VertexAccounts) == 0 {
		return true
	}
	got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	m.mu.Lock()
	_, ok := m.vertexTokens[got]
	m.mu.Unlock()
	if !ok {
		m.problem("vertex: no access token the mock issued")
	}
	return ok
}

// issueToken answers the token endpoint: an access token for a JWT
// (grant_type urn:ietf:params:oauth:grant-type:jwt-bearer) signed RS256
// by one of Options.VertexAccounts, unexpired; else 400 invalid_grant as
// Google answers.
func (m *Mock) issueToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost ||
		r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		m.problem("vertex token: not a JWT bearer grant")
		writeGrantError(w, "unsupported_grant_type", "Invalid grant_type.")
		return
	}
	if !m.validAssertion(r.PostForm.Get("assertion")) {
		writeGrantError(w, "invalid_grant", "Invalid JWT Signature.")
		return
	}
	token := "ya29.mock-" + rand.Text()
	m.mu.Lock()
	if m.vertexTokens == nil || len(m.vertexTokens) >= maxVertexTokens {
		m.vertexTokens = map[string]bool{}
	}
	m.vertexTokens[token] = true
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(mustJSON(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3599}))
}

// validAssertion verifies the JWT: RS256, signed by the account its iss
// names, for the cloud-platform scope, not expired.
func (m *Mock) validAssertion(jwt string) bool {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		m.problem("vertex token: the assertion is not a JWT")
		return false
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss   string `json:"iss"`
		Scope string `json:"scope"`
		Exp   int64  `json:"exp"`
	}
	h, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	c, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(h, &header) != nil || json.Unmarshal(c, &claims) != nil {
		m.problem("vertex token: an undecodable JWT")
		return false
	}
	key, ok := m.opt.VertexAccounts[claims.Iss]
	if !ok || header.Alg != "RS256" {
		m.problem("vertex token: unknown account %q or alg %q", claims.Iss, header.Alg)
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(key, crypto.SHA256, sum[:], sig) != nil {
		m.problem("vertex token: a JWT not signed by %s", claims.Iss)
		return false
	}
	if !strings.Contains(" "+claims.Scope+" ", " https://www.googleapis.com/auth/cloud-platform ") ||
		time.Now().Unix() > claims.Exp {
		m.problem("vertex token: scope %q, exp %d", claims.Scope, claims.Exp)
		return false
	}
	return true
}

func writeGrantError(w http.ResponseWriter, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(mustJSON(map[string]any{"error": code, "error_description": desc}))
}

// ServiceAccountFile is a Google service-account key file (JSON) for
// email, holding key, whose token_uri is tokenURI (the mock's
// VertexTokenPath): what Google's client libraries read to sign the JWT
// the token endpoint exchanges.
func ServiceAccountFile(email, tokenURI string, key *rsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("service account key: %w", err)
	}
	return json.Marshal(map[string]string{
		"type": "service_account", "project_id": "mock-project", "private_key_id": "mock-key",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": email, "client_id": "1", "token_uri": tokenURI,
	})
}

// Vertex's text embedding limits: 250 instances a request (one for the
// gemini-embedding models).
const (
	maxVertexInstances       = 250
	maxVertexGeminiInstances = 1
)

// vertexTaskTypes are the task types Vertex's embedding models know.
var vertexTaskTypes = map[string]bool{
	"RETRIEVAL_QUERY": true, "RETRIEVAL_DOCUMENT": true, "SEMANTIC_SIMILARITY": true, "CLASSIFICATION": true,
	"CLUSTERING": true, "QUESTION_ANSWERING": true, "FACT_VERIFICATION": true, "CODE_RETRIEVAL_QUERY": true,
}

// vertexEmbeddings answers Vertex's predict for a text embedding model:
// {"instances": [{"content", "task_type"?, "title"?}], "parameters":
// {"outputDimensionality"?, "autoTruncate"?}} gets {"predictions":
// [{"embeddings": {"values", "statistics": {"token_count",
// "truncated"}}}], "metadata": {"billableCharacterCount"}}. It refuses,
// as Vertex does, no or too many instances (250; one for gemini-embedding
// models), an instance without text content or with a field Vertex does
// not know, an unknown task type, and parameters out of range. The token
// counts are the texts' as the mock counts them (Options.Usage's prompt,
// when set, spread over the instances).
func (m *Mock) vertexEmbeddings(w http.ResponseWriter, req *Request, p Play) {
	model := modelOf(req)
	limit := maxVertexInstances
	if strings.HasPrefix(model, "gemini-embedding") {
		limit = maxVertexGeminiInstances
	}
	instances := list(req.Body["instances"])
	switch {
	case len(instances) == 0:
		m.refuse(w, Gemini, "instances", "instances must not be empty")
		return
	case len(instances) > limit:
		m.refuse(w, Gemini, "instances", fmt.Sprintf("Unable to submit request because the model %s supports at most %d instances a request, and %d were sent.", model, limit, len(instances)))
		return
	}
	params := object(req.Body["parameters"])
	dims, ok := intField(params, "outputDimensionality", DefaultDimensions, 1, maxDimensions)
	if !ok {
		m.refuse(w, Gemini, "parameters", fmt.Sprintf("outputDimensionality must be an integer from 1 to %d", maxDimensions))
		return
	}
	if v, ok := params["autoTruncate"]; ok {
		if _, isBool := v.(bool); !isBool {
			m.refuse(w, Gemini, "parameters", "autoTruncate must be a boolean")
			return
		}
	}
	counts := make([]int, len(instances))
	chars := 0
	for i, in := range instances {
		for k := range in {
			if k != "content" && k != "task_type" && k != "title" {
				m.refuse(w, Gemini, "instances", fmt.Sprintf("instances[%d]: unknown field %q", i, k))
				return
			}
		}
		text, _ := in["content"].(string)
		if text == "" {
			m.refuse(w, Gemini, "instances", fmt.Sprintf("instances[%d].content must be a non-empty string", i))
			return
		}
		if tt, ok := in["task_type"]; ok && !vertexTaskTypes[fmt.Sprint(tt)] {
			m.refuse(w, Gemini, "instances", fmt.Sprintf("instances[%d].task_type %v is not a task type", i, tt))
			return
		}
		counts[i] = req.tokensOf(text)
		chars += utf8.RuneCountInString(text)
	}
	if m.opt.Usage != nil {
		n := len(counts)
		for i := range counts {
			counts[i] = m.opt.Usage.Prompt / n
		}
		counts[0] += m.opt.Usage.Prompt % n
	}
	preds := make([]any, len(instances))
	for i, in := range instances {
		preds[i] = map[string]any{"embeddings": map[string]any{
			"values":     Embedding(in["content"].(string), dims),
			"statistics": map[string]any{"token_count": counts[i], "truncated": false},
		}}
	}
	writeWhole(w, map[string]any{"predictions": preds, "metadata": map[string]any{"billableCharacterCount": chars}}, p)
}
