package dashboard

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modelCell returns the text of a model row's field.
func modelCell(t *testing.T, body, modelID, field string) string {
	t.Helper()
	row := regexp.MustCompile(`(?s)<tr data-model-id="` + regexp.QuoteMeta(modelID) + `">(.*?)</tr>`).FindStringSubmatch(body)
	require.NotNil(t, row, "no row for model %s", modelID)
	m := regexp.MustCompile(`<td data-field="` + field + `">(.*?)</td>`).FindStringSubmatch(row[1])
	require.NotNil(t, m, "no %s in the row of %s", field, modelID)
	return regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], "")
}

func TestModelsListsThePlansModelsWithPricesAndStatus(t *testing.T) {
	tests := []struct {
		name string
		plan string
		down []string
		want map[string]string // model id → status; models absent are not listed
	}{
		{"every model of an all-models plan", "pro", nil,
			map[string]string{"gpt-4o-mini": "Available", "gpt-4o": "Available", "o3": "Available"}},
		{"only the plan's models", "basic", nil, map[string]string{"gpt-4o-mini": "Available"}},
		{"a model whose deployments are all down is unavailable", "pro", []string{"gpt-4o#openai/gpt-4o"},
			map[string]string{"gpt-4o-mini": "Available", "gpt-4o": "Unavailable", "o3": "Available"}},
		{"an unknown plan lists nothing", "gone", nil, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.setDown(tt.down...)
			w := e.signedIn(e.account("me@example.com", tt.plan, 0)).get("/models")
			require.Equal(t, http.StatusOK, w.Code)
			body := w.Body.String()
			for _, id := range []string{"gpt-4o-mini", "gpt-4o", "o3"} {
				status, listed := tt.want[id]
				if !listed {
					assert.NotContains(t, body, `data-model-id="`+id+`"`)
					continue
				}
				assert.Equal(t, status, modelCell(t, body, id, "status"), id)
			}
			if len(tt.want) == 0 {
				assert.Contains(t, body, `id="no-models"`)
			}
		})
	}
}

func TestModelsShowsMaxTokensAndPricesPerMillion(t *testing.T) {
	e := newEnv(t)
	body := e.signedIn(e.account("me@example.com", "basic", 0)).get("/models").Body.String()
	assert.Equal(t, "16,384", modelCell(t, body, "gpt-4o-mini", "max-tokens"))
	assert.Equal(t, "$0.15", modelCell(t, body, "gpt-4o-mini", "input-price"))
	assert.Equal(t, "$0.60", modelCell(t, body, "gpt-4o-mini", "output-price"))
}

func TestModelsNeedsASignIn(t *testing.T) {
	e := newEnv(t)
	w := e.anonymous().get("/models")
	assert.Equal(t, http.StatusSeeOther, w.Code)
	assert.Equal(t, "/login?next=%2Fmodels", w.Header().Get("Location"))
}
