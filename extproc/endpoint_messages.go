package extproc

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/messages"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

// Anthropic's Messages API (/v1/messages): in the router step a request is
// read as the chat-completion request it stands for, which validation,
// admission and the holds serve as they serve chat. What goes on to the
// upstream step is not that chat request but the client's own Messages
// body, with max_tokens set to the output limit held (forward): under
// Envoy the upstream step sees only the body the router step hands on and
// the signed request metadata, and an Anthropic deployment must get the
// request as the client wrote it (thinking, cache_control, server tools,
// documents by URL — what chat cannot carry). The upstream step then
// passes it through to an Anthropic deployment (an anthropic provider's,
// with the client's anthropic-version and anthropic-beta headers, or
// Claude on Vertex, in Vertex's body with the client's anthropic-beta)
// and relays the answer; for
// every other provider type it turns the body into the chat request again
// (the same function, the same bytes as the router step read) and wraps
// the adapter's answer. Errors a Messages client gets are in Anthropic's
// shape (oaierror.ShapeOf).

// messagesEndpoint is POST /v1/messages.
var messagesEndpoint = &endpoint{
	name: "messages", path: contract.PathMessages, method: http.MethodPost,
	toChat:  (*routerStep).messagesChat,
	forward: messagesForward,
	param:   messages.ChatParam,
	attempt: newMessagesAttempt,
}

// countTokensEndpoint is POST /v1/messages/count_tokens: the prompt's
// tokens, free (nothing held, charged or recorded).
var countTokensEndpoint = &endpoint{
	name: "count_tokens", path: contract.PathCountTokens, method: http.MethodPost,
	free: (*routerStep).countTokens,
}

// messagesMeta is a Messages request's state for its attempts
// (contract.MetaResponse, JSON).
type messagesMeta struct {
	Endpoint string `json:"endpoint"`
	// ID is the message id when the provider gives none of Anthropic's.
	ID string `json:"id"`
	// Model is the model the client asked for.
	Model string `json:"model"`
}

// messagesChat reads a Messages request as its chat request. A request
// that only an Anthropic deployment can serve (PassOnly) is refused here
// unless every deployment of its model is one.
func (r *routerStep) messagesChat(_ context.Context, body []byte) ([]byte, string, *oaierror.Error) {
	chat, req, e := messages.ToChat(body)
	if e != nil {
		return nil, "", e
	}
	if len(req.PassOnly) > 0 {
		if m, ok := r.cfg.Model(req.Model); ok && !onlyAnthropic(r.cfg, m) {
			e := oaierror.Invalid("unsupported_parameter", "", fmt.Sprintf(
				"The model %q is not served by Anthropic here, and these parts of the request have no counterpart on its provider: %s.",
				truncate(req.Model), truncate(strings.Join(req.PassOnly, ", "))))
			return nil, "", &e
		}
	}
	meta, err := json.Marshal(messagesMeta{Endpoint: "messages", ID: messages.IDPrefix + rand.Text(), Model: req.Model})
	if err != nil {
		e := oaierror.Internal
		return nil, "", &e
	}
	return chat, string(meta), nil
}

// onlyAnthropic reports that every deployment of m passes a Messages
// request through: an Anthropic provider's, or Claude on Vertex.
func onlyAnthropic(cfg *config.Config, m *config.Model) bool {
	for i := range m.Deployments {
		p, ok := cfg.Provider(m.Deployments[i].Provider)
		if !ok || provider.Family(p, &m.Deployments[i]) != config.TypeAnthropic {
			return false
		}
	}
	return len(m.Deployments) > 0
}

// messagesForward is the body the upstream step gets: the client's, with
// the output limit held.
func messagesForward(client []byte, cr validChat) ([]byte, error) {
	return messages.PassThrough(client, cr.Asked, cr.MaxTokens)
}

// messagesAttempt answers an attempt of a Messages request.
type messagesAttempt struct {
	meta   messagesMeta
	answer interface {
		provider.Response
		ErrorEvent(e oaierror.Error) []byte
	}
}

func newMessagesAttempt(_ *upstreamStep, state string) (endpointAttempt, error) {
	a := &messagesAttempt{}
	if err := json.Unmarshal([]byte(state), &a.meta); err != nil {
		return nil, fmt.Errorf("messages metadata: %w", err)
	}
	return a, nil
}

// translate passes the request through to an Anthropic deployment, or
// sends its chat request through the provider's adapter. Either way the
// attempt's chat request (u.preq.Body) is the one the router step read,
// for the estimate of an answer cut short.
func (a *messagesAttempt) translate(u *upstreamStep, adapter provider.Adapter) (provider.Upstream, provider.Response, error) {
	client := u.preq.Body
	fam := provider.Family(u.target.Provider, u.target.Deployment)
	toChat := messages.ToChat
	if fam == config.TypeBedrock {
		// Bedrock caches by marks as Anthropic does (cachePoint blocks).
		toChat = messages.ToChatCaching
	}
	chat, req, e := toChat(client)
	if e != nil {
		return provider.Upstream{}, nil, fmt.Errorf("the Messages body the router step forwarded: %s", e.Message)
	}
	u.preq.Body = chat
	if fam == config.TypeGemini || fam == config.TypeBedrock {
		// metadata.user_id, which Claude Code always sends, is an
		// opaque id for the provider's abuse checks: Gemini and Bedrock
		// have no place for it (and refuse chat's user), so it is left
		// out.
		if without, err := sjson.DeleteBytes(chat, "user"); err == nil {
			u.preq.Body = without
		}
	}
	opt := messages.Options{ID: a.meta.ID, Model: a.meta.Model, Stream: u.preq.Stream}
	if provider.Family(u.target.Provider, u.target.Deployment) == config.TypeAnthropic {
		body, err := messages.PassThrough(client, u.target.Deployment.Model, messages.MaxTokens(client))
		if err != nil {
			return provider.Upstream{}, nil, err
		}
		up, meter, err := provider.AnthropicRelay(&u.preq, u.target, body, u.anthropicVersion, u.anthropicBeta)
		if err != nil {
			return up, nil, err
		}
		relay := messages.NewRelay(meter, opt)
		a.answer = relay
		return up, relay, nil
	}
	if len(req.PassOnly) > 0 {
		return provider.Upstream{}, nil, fmt.Errorf("%w: these parts of the request have no counterpart on the provider %s: %s",
			provider.ErrUnsupportedRequest, u.target.Provider.Name, strings.Join(req.PassOnly, ", "))
	}
	body, err := provider.ReasoningBack(u.target, u.preq.Body)
	if err != nil {
		return provider.Upstream{}, nil, err
	}
	u.preq.Body = body
	up, resp, err := adapter.Translate(&u.preq, u.target)
	if err != nil {
		return up, nil, err
	}
	wrapped := messages.Wrap(resp, opt)
	a.answer = wrapped
	return up, wrapped, nil
}

func (a *messagesAttempt) errorEvent(e oaierror.Error) []byte {
	if a.answer == nil {
		return []byte("event: error\ndata: " + string(e.AnthropicBody()) + "\n\n")
	}
	return a.answer.ErrorEvent(e)
}

func (a *messagesAttempt) completed(context.Context, *upstreamStep) {}

// countTokens answers POST /v1/messages/count_tokens at once, for a model
// the key may use: Anthropic's own count when the model has an available
// Anthropic deployment, else (or when that call fails) the estimate the
// holds make of a prompt (provider.EstimatePromptTokens). Nothing is held
// or recorded.
func (r *routerStep) countTokens(ctx context.Context, body []byte) (*extprocv3.ProcessingResponse, error) {
	// count_tokens takes no max_tokens; the chat request needs one.
	withLimit, err := messages.PassThrough(body, askedModel(body), 1)
	if err != nil {
		return r.refuse(oaierror.Invalid("invalid_request", "", "The request body is not a valid Messages request."), ""), nil
	}
	chat, req, e := messages.ToChat(withLimit)
	if e != nil {
		return r.refuse(*e, askedModel(body)), nil
	}
	m, ok := r.cfg.Model(req.Model)
	if !ok {
		return r.refuse(oaierror.ModelNotFound.With("The model \""+truncate(req.Model)+"\" does not exist or you do not have access to it.", "model"), req.Model), nil
	}
	if e := r.access(ctx, m); e != nil {
		return r.refuse(*e, req.Model), nil
	}
	if resp, ok := r.anthropicCount(ctx, m, body); ok {
		return resp, nil
	}
	n := provider.EstimatePromptTokens(&provider.Request{Body: chat}, m)
	return jsonReply(map[string]int64{"input_tokens": n})
}

// countTimeout bounds a count_tokens call to Anthropic, well within the
// step's deadline (contract.StepDeadline), so that the estimate answers
// in time when Anthropic is slow.
const countTimeout = contract.StepDeadline * 2 / 3

// maxCountAnswer bounds the answer of a count_tokens call read.
const maxCountAnswer = 64 << 10

// anthropicCount asks the first available Anthropic deployment of m to
// count the prompt of body (the client's count_tokens request) and answers
// with its count, or its refusal of the request (a 4xx) in Anthropic's
// shape; ok is false when m has no such deployment or the call failed
// otherwise, logged: the estimate answers then.
func (r *routerStep) anthropicCount(ctx context.Context, m *config.Model, body []byte) (*extprocv3.ProcessingResponse, bool) {
	for i := range m.Deployments {
		d := &m.Deployments[i]
		p, ok := r.cfg.Provider(d.Provider)
		if !ok || p.Type != config.TypeAnthropic || !p.IsEnabled() || (r.s.opt.Health != nil && !r.s.opt.Health.Available(d.ID)) {
			continue
		}
		status, answer, err := r.callCount(ctx, provider.Target{Model: m, Deployment: d, Provider: p}, body)
		switch {
		case err != nil:
			r.s.opt.Logger.WarnContext(ctx, "router step: counting tokens at Anthropic failed; answering the estimate",
				"provider", p.Name, "err", err)
			return nil, false
		case status == http.StatusOK && gjson.GetBytes(answer, "input_tokens").Type == gjson.Number:
			resp, _ := jsonReply(map[string]int64{"input_tokens": gjson.GetBytes(answer, "input_tokens").Int()})
			return resp, true
		case status >= 400 && status < 500 && status != http.StatusTooManyRequests:
			st, e := provider.UpstreamError(status, answer)
			if st >= 500 {
				// Tollgate's own credential refused: the estimate serves.
				r.s.opt.Logger.WarnContext(ctx, "router step: Anthropic refused Tollgate's credential counting tokens", "provider", p.Name, "status", status)
				return nil, false
			}
			return immediateJSON(st, messages.ErrorBody(st, e), nil), true
		default:
			r.s.opt.Logger.WarnContext(ctx, "router step: counting tokens at Anthropic failed; answering the estimate",
				"provider", p.Name, "status", status)
			return nil, false
		}
	}
	return nil, false
}

// callCount makes the count_tokens call.
func (r *routerStep) callCount(ctx context.Context, t provider.Target, body []byte) (int, []byte, error) {
	body, err := sjson.SetBytes(body, "model", t.Deployment.Model)
	if err != nil {
		return 0, nil, err
	}
	up, err := provider.AnthropicCountTokens(t, body, r.anthropicVersion, r.anthropicBeta)
	if err != nil {
		return 0, nil, err
	}
	base, err := url.Parse(t.Provider.BaseURL)
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, countTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base.Scheme+"://"+up.Authority+up.Path, bytes.NewReader(up.Body))
	if err != nil {
		return 0, nil, err
	}
	for _, h := range up.Headers {
		req.Header.Set(h.Name, h.Value)
	}
	resp, err := r.s.opt.ProviderClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxCountAnswer))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, answer, nil
}
