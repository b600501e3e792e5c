// Package schematest checks JSON values against components of OpenAI's
// published API schema (testdata/openai-openapi.yaml at the repository's
// root; its source and version are in testdata/README.md), so that tests can
// prove Tollgate's answers are what OpenAI's SDKs expect.
package schematest

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"
)

// Components Tollgate's answers must conform to.
const (
	Completion = "CreateChatCompletionResponse"
	Chunk      = "CreateChatCompletionStreamResponse"
	Error      = "ErrorResponse"
	ModelList  = "ListModelsResponse"
	// The Responses API: a response object, and any event of its stream.
	Response      = "Response"
	ResponseEvent = "ResponseStreamEvent"
	// The other endpoint families: embeddings (the spec knows float
	// vectors only), legacy completions (an answer, and each chunk of a
	// stream) and moderations.
	Embeddings     = "CreateEmbeddingResponse"
	TextCompletion = "CreateCompletionResponse"
	Moderation     = "CreateModerationResponse"
)

// specEnv overrides where the spec is read from.
const specEnv = "TOLLGATE_OPENAI_SCHEMA"

// specPath finds testdata/openai-openapi.yaml at the repository's root: the
// first directory up from the working directory that holds go.mod.
func specPath() (string, error) {
	if p := os.Getenv(specEnv); p != "" {
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "openai-openapi.yaml"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("schematest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Schemas loads the spec once (about a second; several under -race). Only
// the components are used: the whole document is not validated.
var Schemas = sync.OnceValues(func() (map[string]*openapi3.Schema, error) {
	path, err := specPath()
	if err != nil {
		return nil, err
	}
	doc, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]*openapi3.Schema{}
	for _, name := range []string{Completion, Chunk, Error, ModelList, Response, ResponseEvent, Embeddings, TextCompletion, Moderation} {
		ref, ok := doc.Components.Schemas[name]
		if !ok || ref.Value == nil {
			return nil, errors.New("schematest: OpenAI's spec has no component " + name)
		}
		out[name] = ref.Value
	}
	return out, nil
})

// Require checks a JSON body against a component.
//
// It uses kin-openapi's OpenAPI validator, not its JSON Schema 2020 mode:
// OpenAI's spec says 3.1 but marks nullable fields the 3.0 way (nullable:
// true, as on a chunk's finish_reason), which the 2020 mode would reject,
// while the 3.0 validator also honours 3.1's {type: "null"} alternatives.
func Require(t testing.TB, component string, body []byte) {
	t.Helper()
	schemas, err := Schemas()
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(body, &v), "not JSON: %s", body)
	require.NoError(t, schemas[component].VisitJSON(v), "%s does not conform to %s", body, component)
}
