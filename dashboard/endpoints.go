package dashboard

import (
	"maps"
	"net/url"
	"slices"

	"github.com/tollgate/tollgate/store"
)

// The usage pages and the request log filter by endpoint (the API a
// request called: chat, responses, messages…) with ?endpoint=, which
// every link and form of the page keeps; a value that is not one of
// store.Endpoints is every endpoint.

// endpointOf is the endpoint q asks for; "" for every one (or an unknown
// one).
func endpointOf(q url.Values) string {
	if e := q.Get("endpoint"); store.KnownEndpoint(e) {
		return e
	}
	return ""
}

// byEndpoint makes c the choice of a page that filters by endpoint: the
// endpoint q asks for, kept by the window links.
func (c *windowChoice) byEndpoint(q url.Values) {
	c.Endpoint, c.Endpoints = endpointOf(q), store.Endpoints
	if c.Endpoint == "" {
		return
	}
	for i := range c.Windows {
		c.Windows[i].Href = "?" + url.Values{"window": {c.Windows[i].Name}, "endpoint": {c.Endpoint}}.Encode()
	}
}

// hiddenField is a name and value a filter form sends again.
type hiddenField struct{ Name, Value string }

// KeptWindow are the fields that ask for c's window again, for the
// endpoint form to send with the endpoint chosen.
func (c windowChoice) KeptWindow() []hiddenField {
	v := windowQuery(c)
	v.Del("endpoint")
	var out []hiddenField
	for _, name := range slices.Sorted(maps.Keys(v)) {
		out = append(out, hiddenField{name, v.Get(name)})
	}
	return out
}

// endpointUsageRow is one endpoint's line of the usage table.
type endpointUsageRow struct {
	Endpoint, Requests, Failed, PromptTokens, CompletionTokens, Cost string
}

// endpointRows are the records' endpoints, in the order of
// store.Endpoints (refusals have none).
func endpointRows(es []store.EndpointUsage) []endpointUsageRow {
	out := make([]endpointUsageRow, 0, len(es))
	for _, e := range es {
		out = append(out, endpointUsageRow{Endpoint: e.Endpoint, Requests: count(e.Requests), Failed: count(e.ErrorRequests),
			PromptTokens: count(e.PromptTokens), CompletionTokens: count(e.CompletionTokens), Cost: usd(e.Cost)})
	}
	return out
}
