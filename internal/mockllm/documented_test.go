package mockllm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// documented is a request and its answer (or, streamed, one chunk of it)
// copied from a provider's API documentation (testdata/documented).
type documented struct {
	Source  string          `json:"source"`
	Path    string          `json:"path"`
	Request json.RawMessage `json:"request"`
	Answer  json.RawMessage `json:"answer"`
	Chunk   json.RawMessage `json:"chunk"`
	// ExtraKeys are keys the mock's answer has that the documented one
	// lacks, each with the reason (another provider's field, where one
	// answer serves several).
	ExtraKeys map[string]string `json:"extra_keys"`
}

// jsonType is the JSON type of a decoded value.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// shapeDiff lists where got differs from want in keys or in value types,
// not values: a key want has that got lacks, a key got has that want lacks
// and extra does not list, a value of another type. Every element of an
// array is compared with want's first. Paths read like data[].embedding.
func shapeDiff(path string, want, got any, extra map[string]string) []string {
	if jsonType(want) != jsonType(got) {
		return []string{fmt.Sprintf("%s: documented %s, mock %s", path, jsonType(want), jsonType(got))}
	}
	var out []string
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		key := func(k string) string { return strings.TrimPrefix(path+"."+k, ".") }
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				out = append(out, key(k)+": documented, missing from the mock's answer")
				continue
			}
			out = append(out, shapeDiff(key(k), wv, gv, extra)...)
		}
		for k := range g {
			if _, ok := w[k]; !ok && extra[key(k)] == "" {
				out = append(out, key(k)+": in the mock's answer, not documented")
			}
		}
	case []any:
		g := got.([]any)
		if len(w) > 0 && len(g) == 0 {
			return []string{path + ": documented with elements, empty in the mock's answer"}
		}
		for _, gv := range g {
			if len(w) > 0 {
				out = append(out, shapeDiff(path+"[]", w[0], gv, extra)...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// firstChunk is a stream's first data event that carries a choice.
func firstChunk(t *testing.T, stream string) string {
	t.Helper()
	for _, doc := range dataEvents(stream) {
		if strings.Contains(doc, `"text"`) {
			return doc
		}
	}
	t.Fatalf("no chunk with a choice in %s", stream)
	return ""
}

func TestTheMockAnswersEachDocumentedRequestWithTheDocumentedKeysAndTypes(t *testing.T) {
	files, err := filepath.Glob("testdata/documented/*.json")
	require.NoError(t, err)
	require.Len(t, files, 10)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			var d documented
			require.NoError(t, json.Unmarshal(raw, &d))
			require.NotEmpty(t, d.Source)
			m := New(Options{Record: true})
			resp, body := post(t, m, d.Path, string(d.Request))
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			want := d.Answer
			if d.Chunk != nil {
				want, body = d.Chunk, firstChunk(t, body)
			}
			var w, g any
			require.NoError(t, json.Unmarshal(want, &w))
			require.NoError(t, json.Unmarshal([]byte(body), &g), body)
			assert.Empty(t, shapeDiff("", w, g, d.ExtraKeys), body)
			assert.Empty(t, m.Problems(), "a documented request is no problem")
		})
	}
}

func TestShapeDiffSeesMissingExtraAndRetypedKeys(t *testing.T) {
	var w, g any
	require.NoError(t, json.Unmarshal([]byte(`{"a":1,"b":{"c":"x"},"d":[{"e":null}],"f":true}`), &w))
	require.NoError(t, json.Unmarshal([]byte(`{"a":"1","b":{},"d":[{"e":null,"z":1}],"f":true,"y":2,"ok":3}`), &g))
	assert.Equal(t, []string{
		"a: documented number, mock string",
		"b.c: documented, missing from the mock's answer",
		"d[].z: in the mock's answer, not documented",
		"y: in the mock's answer, not documented",
	}, shapeDiff("", w, g, map[string]string{"ok": "listed"}))
}
