package extproc

import (
	"context"
	"net/http"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

// An endpoint is one API path and how each step serves it. The router step
// picks the row of the request's path from endpoints; a request that goes
// to a provider travels as the chat-completion request it stands for
// (validated, admitted, held and recorded as one), and its endpoint's
// attempt translates the chat answer back for the client. A new endpoint
// (embeddings, completions) is one file that makes its row, and the row.
//
// The Envoy routes (envoy/xds) and the built-in edge send every /v1/ path
// to the router step; a path no row serves is answered 404 here.
type endpoint struct {
	// name is the endpoint's name in the request metadata (see
	// endpointState).
	name string
	// path is the request path (no query); method the one it takes, 405
	// for others.
	path, method string
	// reply, when set, answers the path at once without a provider (GET
	// /v1/models): nothing is held, charged or recorded. Otherwise the
	// request is charged: validated, held, routed and recorded.
	reply func(r *routerStep, ctx context.Context) (*extprocv3.ProcessingResponse, error)
	// item, when set, serves path/{id} at once, whatever the method (it
	// answers 405 itself): GET /v1/models/{id}, GET and DELETE
	// /v1/responses/{id}.
	item func(r *routerStep, ctx context.Context, method, id string) (*extprocv3.ProcessingResponse, error)
	// toChat, when set, turns the client's body into the chat-completion
	// request the path stands for, and the state its answer needs (the
	// upstream step's, carried in the signed request metadata). Nil: the
	// body is a chat-completion request, and goes on as it is.
	toChat func(r *routerStep, ctx context.Context, body []byte) (chat []byte, state string, e *oaierror.Error)
	// forward, when set, is the body the upstream step gets in place of
	// the chat request (client is the client's own body; cr the chat
	// request's validation, with the output limit held): the upstream
	// step's attempt then reads it (the Messages API's passthrough).
	forward func(client []byte, cr validChat) ([]byte, error)
	// check, when set, validates the body as the endpoint's own request
	// (not a chat completion) and says what it may cost; the body goes on
	// as it is, with state for the upstream step.
	check func(body []byte, cfg *config.Config) (validChat, *oaierror.Error)
	state string
	// limitField is the body's output limit the router step writes (see
	// limitBody); "" means max_completion_tokens.
	limitField string
	// free, when set, answers the path at once from its body, without a
	// provider: nothing is held, charged or recorded (POST
	// /v1/messages/count_tokens).
	free func(r *routerStep, ctx context.Context, body []byte) (*extprocv3.ProcessingResponse, error)
	// param names a chat parameter as this path's clients know it, in a
	// refusal of the chat request; nil: as it is.
	param func(chatParam string) string
	// attempt is the endpoint's part of an upstream attempt, made from the
	// state toChat left ("" for none).
	attempt func(u *upstreamStep, state string) (endpointAttempt, error)
}

// endpoints are the paths Tollgate serves.
var endpoints = []*endpoint{chatEndpoint, responsesEndpoint, modelsEndpoint, messagesEndpoint, countTokensEndpoint,
	embeddingsEndpoint, completionsEndpoint, moderationsEndpoint, rerankEndpoint}

// endpointAttempt is an endpoint's part of one upstream attempt.
type endpointAttempt interface {
	// translate builds the attempt's upstream request for u.target and
	// the translator of its answer (adapter is the provider type's).
	translate(u *upstreamStep, adapter provider.Adapter) (provider.Upstream, provider.Response, error)
	// errorEvent ends a stream broken after its 200 with e, in the
	// endpoint's shape.
	errorEvent(e oaierror.Error) []byte
	// completed is told that the answer is whole and handed back (the
	// Responses API stores it here).
	completed(ctx context.Context, u *upstreamStep)
}

// route finds the endpoint of a path: the row whose path it is, or whose
// item it names (id is then set).
func route(path string) (ep *endpoint, id string, ok bool) {
	for _, ep := range endpoints {
		if path == ep.path {
			return ep, "", true
		}
		if rest, found := strings.CutPrefix(path, ep.path+"/"); found && rest != "" && ep.item != nil {
			return ep, rest, true
		}
	}
	return nil, "", false
}

// endpointState is the endpoint an attempt's state names: the chat
// endpoint for none; an earlier router step wrote no name (only the
// Responses API had a state then).
func endpointState(state string) (*endpoint, bool) {
	if state == "" {
		return chatEndpoint, true
	}
	name := gjson.Get(state, "endpoint").Str
	if name == "" {
		name = responsesEndpoint.name
	}
	for _, ep := range endpoints {
		if ep.name == name && ep.attempt != nil {
			return ep, true
		}
	}
	return nil, false
}

// chatEndpoint is POST /v1/chat/completions: OpenAI's chat completions,
// which every other charged endpoint is served as.
var chatEndpoint = &endpoint{
	name: "chat", path: contract.PathChatCompletions, method: http.MethodPost,
	attempt: func(*upstreamStep, string) (endpointAttempt, error) { return &chatAttempt{}, nil },
}

// chatAttempt sends the chat request through the provider's adapter and
// hands its answer back as it translates it.
type chatAttempt struct{}

func (*chatAttempt) translate(u *upstreamStep, adapter provider.Adapter) (provider.Upstream, provider.Response, error) {
	return adapter.Translate(&u.preq, u.target)
}

func (*chatAttempt) errorEvent(e oaierror.Error) []byte { return streamErrorEvent(e) }

func (*chatAttempt) completed(context.Context, *upstreamStep) {}

// modelsEndpoint is GET /v1/models and GET /v1/models/{id} (models.go).
var modelsEndpoint = &endpoint{
	name: "models", path: contract.PathModels, method: http.MethodGet,
	reply: (*routerStep).models,
	item: func(r *routerStep, ctx context.Context, method, id string) (*extprocv3.ProcessingResponse, error) {
		if method != http.MethodGet {
			return immediateIn(r.shape, oaierror.MethodNotAllowed, nil), nil
		}
		return r.oneModel(ctx, id)
	},
}
