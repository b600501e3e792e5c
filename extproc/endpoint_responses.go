package extproc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/extproc/responses"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The Responses API (/v1/responses): in the router step a request becomes
// the chat-completion request it stands for (with the conversation of
// previous_response_id before its input), which the rest of the path —
// validation, admission, the hold, every provider's adapter — serves as it
// serves chat; what the upstream step needs to answer in the Responses
// API's shape travels in the request metadata (contract.MetaResponse), from
// which its attempt wraps the chat answer (or relays the answer of a
// server that speaks the Responses API) and stores it when asked.

// responsesEndpoint is POST /v1/responses, and GET and DELETE
// /v1/responses/{id}.
var responsesEndpoint = &endpoint{
	name: "responses", path: contract.PathResponses, method: http.MethodPost,
	item:    (*routerStep).storedResponse,
	toChat:  (*routerStep).responsesChat,
	param:   responses.ChatParam,
	attempt: newResponsesAttempt,
}

// Responses stores the Responses API's responses (a store.Store).
type Responses interface {
	SaveResponse(ctx context.Context, r store.StoredResponse) error
	ResponseByID(ctx context.Context, accountID, id string, now time.Time) (store.StoredResponse, error)
	DeleteResponse(ctx context.Context, accountID, id string) error
}

// responseMeta is contract.MetaResponse's value (JSON).
type responseMeta struct {
	// Endpoint names the endpoint (see endpointState).
	Endpoint string `json:"endpoint,omitempty"`
	ID       string `json:"id"`
	Store    bool   `json:"store"`
	// Instructions says the chat body's first message is the request's
	// instructions, which a stored conversation leaves out (they are not
	// carried over to the next turn).
	Instructions bool            `json:"instructions,omitempty"`
	Created      int64           `json:"created"`
	Echo         json.RawMessage `json:"echo"`
}

var errNoResponseStore = oaierror.Invalid("invalid_request", "store",
	"This Tollgate keeps no responses; send store: false, without previous_response_id.")

// responsesChat turns a Responses request body into its chat body and the
// metadata its answer needs.
func (r *routerStep) responsesChat(ctx context.Context, body []byte) ([]byte, string, *oaierror.Error) {
	var history []json.RawMessage
	prev := responses.PreviousID(body)
	if prev != "" {
		if r.s.opt.Responses == nil {
			return nil, "", &errNoResponseStore
		}
		stored, err := r.s.opt.Responses.ResponseByID(ctx, r.accountID, prev, r.s.opt.Now())
		switch {
		case errors.Is(err, store.ErrNotFound):
			e := oaierror.Invalid("previous_response_not_found", "previous_response_id",
				"Previous response with id '"+truncate(prev)+"' not found (it may have expired, been deleted, or not been stored).")
			return nil, "", &e
		case err != nil:
			r.s.opt.Logger.ErrorContext(ctx, "router step: reading a stored response failed", "err", err)
			return nil, "", copyError(r.failed(err))
		}
		if err := json.Unmarshal(stored.Conversation, &history); err != nil {
			r.s.opt.Logger.ErrorContext(ctx, "router step: a stored conversation is not JSON", "response", prev, "err", err)
			e := oaierror.Internal
			return nil, "", &e
		}
	}
	req, chat, _, e := responses.ToChat(body, history, r.itemResolver(ctx))
	if e != nil {
		return nil, "", e
	}
	if limit := maxConversation(r.cfg.MaxBodyBytes); len(chat) > limit {
		// The stored turns before the input are not bounded by the body
		// limit: a conversation continued turn after turn is, here.
		e := oaierror.Invalid("conversation_too_long", "previous_response_id", fmt.Sprintf(
			"The conversation with its earlier turns is %d bytes, above Tollgate's limit of %d: start a new conversation, or send fewer turns.", len(chat), limit))
		return nil, "", &e
	}
	if req.Store && r.s.opt.Responses == nil {
		req.Store = false // nothing to keep it in: answered, not stored
	}
	meta, err := json.Marshal(responseMeta{Endpoint: "responses", ID: responses.IDPrefix + rand.Text(), Store: req.Store,
		Instructions: req.Instructions, Created: r.s.opt.Now().Unix(), Echo: req.Echo})
	if err != nil {
		e := oaierror.Internal
		return nil, "", &e
	}
	return chat, string(meta), nil
}

// maxConversation bounds a Responses request with its earlier turns
// included: four times the body limit.
func maxConversation(maxBody int) int { return contract.ConversationFactor * maxBody }

// storedResponse answers GET and DELETE /v1/responses/{id}: only the
// account that made a response may see or delete it; another's is not
// found, as one that does not exist.
func (r *routerStep) storedResponse(ctx context.Context, method, id string) (*extprocv3.ProcessingResponse, error) {
	notFound := oaierror.Error{Status: http.StatusNotFound, Type: oaierror.TypeInvalidRequest, Code: "not_found", Param: "response_id",
		Message: "No response with id '" + truncate(id) + "' was found."}
	st := r.s.opt.Responses
	if st == nil || strings.Contains(id, "/") {
		return immediate(notFound.ForRequest(r.clientRequestID), nil), nil
	}
	switch method {
	case http.MethodGet:
		got, err := st.ResponseByID(ctx, r.accountID, id, r.s.opt.Now())
		if errors.Is(err, store.ErrNotFound) {
			return immediate(notFound.ForRequest(r.clientRequestID), nil), nil
		}
		if err != nil {
			r.s.opt.Logger.ErrorContext(ctx, "router step: reading a stored response failed", "err", err)
			return immediate(r.failed(err).ForRequest(r.clientRequestID), r.refusal), nil
		}
		return jsonReply(json.RawMessage(got.Body))
	case http.MethodDelete:
		err := st.DeleteResponse(ctx, r.accountID, id)
		if errors.Is(err, store.ErrNotFound) {
			return immediate(notFound.ForRequest(r.clientRequestID), nil), nil
		}
		if err != nil {
			r.s.opt.Logger.ErrorContext(ctx, "router step: deleting a stored response failed", "err", err)
			return immediate(r.failed(err).ForRequest(r.clientRequestID), r.refusal), nil
		}
		return jsonReply(map[string]any{"id": id, "object": "response.deleted", "deleted": true})
	}
	return immediate(oaierror.MethodNotAllowed, nil), nil
}

// itemResolver reads the output items item_references name from the
// account's stored responses (each response read once per request).
func (r *routerStep) itemResolver(ctx context.Context) responses.Resolver {
	if r.s.opt.Responses == nil {
		return nil
	}
	read := map[string][]byte{}
	return func(itemID string) (json.RawMessage, *oaierror.Error) {
		notFound := oaierror.Invalid("invalid_request", "", "No stored response holds the item '"+truncate(itemID)+"' (it may have expired, been deleted, or not been stored).")
		respID, index, ok := responses.ItemOf(itemID)
		if !ok {
			return nil, &notFound
		}
		body, ok := read[respID]
		if !ok {
			stored, err := r.s.opt.Responses.ResponseByID(ctx, r.accountID, respID, r.s.opt.Now())
			switch {
			case errors.Is(err, store.ErrNotFound):
				return nil, &notFound
			case err != nil:
				r.s.opt.Logger.ErrorContext(ctx, "router step: reading a stored response failed", "err", err)
				return nil, copyError(r.failed(err))
			}
			body, read[respID] = stored.Body, stored.Body
		}
		item := gjson.GetBytes(body, "output."+strconv.Itoa(index))
		if !item.Exists() || item.Get("id").String() != itemID {
			return nil, &notFound
		}
		return json.RawMessage(item.Raw), nil
	}
}

// responsesAttempt answers an attempt of a Responses request in the
// Responses API's shape.
type responsesAttempt struct {
	meta   responseMeta
	answer responsesAnswer // set by translate
}

// responsesAnswer is a Responses request's answer: responses.Answer
// (translated from chat) or responses.Relay (from a Responses server).
type responsesAnswer interface {
	provider.Response
	Final() (response, reply json.RawMessage)
	ErrorEvent(message string) []byte
}

func newResponsesAttempt(_ *upstreamStep, state string) (endpointAttempt, error) {
	a := &responsesAttempt{}
	if err := json.Unmarshal([]byte(state), &a.meta); err != nil {
		return nil, fmt.Errorf("response metadata: %w", err)
	}
	return a, nil
}

// translate wraps the adapter's chat answer, or, for a server that speaks
// the Responses API, relays its answer to the chat request rebuilt as a
// Responses request.
func (a *responsesAttempt) translate(u *upstreamStep, adapter provider.Adapter) (provider.Upstream, provider.Response, error) {
	opt := responses.Options{ID: a.meta.ID, Model: u.model.ID, Created: time.Unix(a.meta.Created, 0),
		Stream: u.preq.Stream, Echo: a.meta.Echo}
	if u.target.Provider.ResponsesAPI {
		up, err := relayUpstream(u.preq.Body, u.target)
		if err != nil {
			return provider.Upstream{}, nil, fmt.Errorf("building the Responses request: %w", err)
		}
		relay := responses.NewRelay(opt)
		a.answer = relay
		return up, relay, nil
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
	a.answer = responses.Wrap(resp, opt)
	return up, a.answer, nil
}

// relayUpstream is the request to a server that speaks the Responses API:
// the chat request rebuilt as one (the deployment's model, the whole
// conversation, nothing stored there, the held output limit as
// max_output_tokens).
func relayUpstream(chat []byte, t provider.Target) (provider.Upstream, error) {
	chat, err := provider.UnsignToolCallIDs(chat)
	if err != nil {
		return provider.Upstream{}, err
	}
	if chat, err = provider.LimitToHeld(chat, "max_completion_tokens", int64(t.Model.MaxTokens)); err != nil {
		return provider.Upstream{}, err
	}
	body, err := responses.FromChat(chat, t.Deployment.Model)
	if err != nil {
		return provider.Upstream{}, err
	}
	return provider.ResponsesUpstream(t, body)
}

func (a *responsesAttempt) errorEvent(e oaierror.Error) []byte {
	if a.answer == nil {
		return streamErrorEvent(e)
	}
	return a.answer.ErrorEvent(e.Message)
}

// storeTimeout bounds the write of a stored response, within the
// upstream step's answer to the message that ends the response.
const storeTimeout = contract.StepDeadline

// completed stores a completed response that asked to be stored: its
// object, and its conversation (the chat request's messages without the
// instructions, then the answer) for previous_response_id. A failure to
// store is logged; the answer has been given.
func (a *responsesAttempt) completed(ctx context.Context, u *upstreamStep) {
	r := &a.meta
	if !r.Store || a.answer == nil || u.s.opt.Responses == nil {
		return
	}
	body, reply := a.answer.Final()
	if body == nil {
		return
	}
	r.Store = false // once
	var msgs []json.RawMessage
	if err := json.Unmarshal([]byte(gjson.GetBytes(u.preq.Body, "messages").Raw), &msgs); err != nil {
		u.s.opt.Logger.ErrorContext(ctx, "upstream step: the chat request has no messages to store", "err", err)
		return
	}
	if r.Instructions && len(msgs) > 0 {
		msgs = msgs[1:]
	}
	conversation, err := json.Marshal(append(msgs, reply))
	if err != nil {
		return
	}
	now := u.s.opt.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	err = u.s.opt.Responses.SaveResponse(ctx, store.StoredResponse{ID: r.ID, AccountID: u.accountID, Body: body,
		Conversation: conversation, CreatedAt: now, ExpiresAt: now.Add(u.cfg.ResponseRetention.D())})
	if err != nil {
		u.s.opt.Logger.ErrorContext(ctx, "upstream step: storing a response failed", "response", r.ID, "err", err)
	}
}
