package dashboard

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// endpointKey is a key with a chat, an embeddings and a Messages API
// record in the last hours, and three refused embeddings requests.
func endpointKey(t *testing.T) (*testEnv, *browser, store.Key) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 100*money.PerDollar)
	k := e.createKey(a, "ci")
	rec := func(id, endpoint string, status int, at time.Duration, cost money.Nanos) store.UsageRecord {
		return store.UsageRecord{ID: id, KeyID: k.ID, AccountID: a.ID, Model: "gpt-4o-mini", Provider: "openai", PromptTokens: 10,
			CompletionTokens: 5, Cost: cost, Status: status, Latency: time.Second, CreatedAt: start.Add(-at), Endpoint: endpoint}
	}
	require.NoError(t, e.st.RecordUsage(t.Context(), []store.UsageRecord{
		rec("use_chat", "", 200, time.Hour, money.PerDollar),
		rec("use_emb1", store.EndpointEmbeddings, 200, 2*time.Hour, money.PerDollar/10),
		rec("use_emb2", store.EndpointEmbeddings, 500, 3*time.Hour, 0),
		rec("use_msg", store.EndpointMessages, 200, 4*time.Hour, 2*money.PerDollar),
	}))
	e.refuse(k, store.RefusalCount{Hour: start.Truncate(time.Hour), Status: 429, Code: "rate_limit_exceeded", Count: 3, Endpoint: store.EndpointEmbeddings})
	return e, e.signedIn(a), k
}

func TestTheUsagePagesBreakUsageDownByEndpointAndFilterByIt(t *testing.T) {
	e, b, k := endpointKey(t)
	all := b.get("/keys/" + k.ID)
	require.Equal(t, http.StatusOK, all.Code, e.logs.String())
	body := all.Body.String()
	assert.Contains(t, body, `id="total-requests">7<`, "four records and three refusals")
	assert.Contains(t, body, `<table id="by-endpoint"`)
	assert.Contains(t, body, `<code>chat</code></th><td>1</td><td>0</td><td>10</td><td>5</td><td>$1.00</td>`, "a record without an endpoint is chat's")
	assert.Contains(t, body, `<code>messages</code></th><td>1</td><td>0</td><td>10</td><td>5</td><td>$2.00</td>`)
	assert.Contains(t, body, `<code>embeddings</code></th><td>2</td><td>1</td><td>20</td><td>10</td><td>$0.10</td>`)
	assert.Less(t, strings.Index(body, "<code>messages</code></th>"), strings.Index(body, "<code>embeddings</code></th>"), "in the order of store.Endpoints")
	assert.Contains(t, body, `<option value="" selected>All</option>`)
	assert.NotContains(t, body, `id="endpoint-note"`)

	emb := b.get("/keys/" + k.ID + "?window=7d&endpoint=embeddings")
	require.Equal(t, http.StatusOK, emb.Code)
	body = emb.Body.String()
	assert.Contains(t, body, `id="total-requests">5<`, "the embeddings records and refusals")
	assert.Contains(t, body, `id="total-cost">$0.10<`)
	assert.Contains(t, body, `id="endpoint-note"`)
	assert.Contains(t, body, `<option value="embeddings" selected>embeddings</option>`)
	assert.Contains(t, body, `<a href="?endpoint=embeddings&amp;window=24h">`, "the window links keep the endpoint")
	assert.Contains(t, body, `<input type="hidden" name="endpoint" value="embeddings">`, "and so does the custom window's form")
	assert.Contains(t, body, `<input type="hidden" name="window" value="7d">`, "the endpoint's form keeps the window")
	assert.Contains(t, body, `href="/keys/`+k.ID+`/requests?endpoint=embeddings" id="request-log"`)
	assert.NotContains(t, body, `<code>chat</code></th>`)

	custom := b.get("/keys/" + k.ID + "?window=custom&from=2025-06-15&to=2025-06-15&endpoint=messages").Body.String()
	assert.Contains(t, custom, `id="total-cost">$2.00<`)
	for _, kept := range []string{`name="window" value="custom"`, `name="from" value="2025-06-15"`, `name="to" value="2025-06-15"`} {
		assert.Contains(t, custom, `<input type="hidden" `+kept+`>`, "the endpoint's form keeps the custom days")
	}

	unknown := b.get("/keys/" + k.ID + "?endpoint=images")
	require.Equal(t, http.StatusOK, unknown.Code)
	assert.Contains(t, unknown.Body.String(), `id="total-requests">7<`, "an unknown endpoint is every endpoint")
}

func TestTheRequestLogShowsAndFiltersTheEndpoint(t *testing.T) {
	e, b, k := endpointKey(t)
	body := b.get("/keys/" + k.ID + "/requests").Body.String()
	assert.Contains(t, body, `<th scope="col">Endpoint</th>`)
	assert.Contains(t, body, `<td data-field="endpoint">chat</td>`)
	assert.Contains(t, body, `<td data-field="endpoint">messages</td>`)
	assert.Equal(t, 2, strings.Count(body, `<td data-field="endpoint">embeddings</td>`))
	assert.Contains(t, body, `id="refusals"`)

	emb := b.get("/keys/" + k.ID + "/requests?endpoint=embeddings&status=5xx").Body.String()
	ids := regexp.MustCompile(`data-record-id="([^"]+)"`).FindAllStringSubmatch(emb, -1)
	require.Len(t, ids, 1, "the failed embeddings record")
	assert.Equal(t, "use_emb2", ids[0][1])
	assert.Contains(t, emb, `<option value="embeddings" selected>embeddings</option>`)
	assert.NotContains(t, emb, `id="refusals"`, "the refusals are 4xx")
	assert.Contains(t, b.get("/keys/"+k.ID+"/requests?endpoint=embeddings").Body.String(), `id="refusals"`, "the embeddings requests' refusals")
	assert.NotContains(t, b.get("/keys/"+k.ID+"/requests?endpoint=messages").Body.String(), `id="refusals"`, "no Messages API request was refused")
	assert.Contains(t, emb, `href="/keys/`+k.ID+`/requests.csv?endpoint=embeddings&amp;status=5xx"`, "the CSV link keeps every filter")

	csv := b.get("/keys/" + k.ID + "/requests.csv?endpoint=messages")
	require.Equal(t, http.StatusOK, csv.Code, e.logs.String())
	lines := strings.Split(strings.TrimSpace(csv.Body.String()), "\n")
	require.Len(t, lines, 2, "the header and the Messages API's record")
	assert.True(t, strings.HasSuffix(lines[0], ",endpoint"), lines[0])
	assert.True(t, strings.HasSuffix(lines[1], ",messages"), lines[1])

	detail := b.get("/keys/" + k.ID + "/requests/use_emb1").Body.String()
	assert.Contains(t, detail, `<dd data-field="endpoint">embeddings</dd>`)
}

func TestTheAccountUsagePageFiltersByEndpointAndItsCSVFollows(t *testing.T) {
	e, b, k := endpointKey(t)
	body := b.get("/usage?endpoint=embeddings").Body.String()
	assert.Contains(t, body, `id="total-requests">5<`, "the embeddings records and refusals: %s", e.logs.String())
	assert.Contains(t, body, `href="/usage.csv?endpoint=embeddings&amp;window=30d" id="csv"`)
	assert.Contains(t, body, `<tr data-key-id="`+k.ID+`"><th scope="row"><a href="/keys/`+k.ID+`">ci</a></th><td>2</td><td>$0.10</td>`, "top keys by the endpoint's usage")
	csv := b.get("/usage.csv?endpoint=embeddings&window=30d")
	require.Equal(t, http.StatusOK, csv.Code)
	lines := strings.Split(strings.TrimSpace(csv.Body.String()), "\n")
	assert.Len(t, lines, 3, "the header and the two embeddings records")
}
