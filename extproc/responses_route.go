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
	"github.com/tollgate/tollgate/extproc/responses"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The Responses API (/v1/responses) in the router step: a request becomes
// the chat-completion request it stands for (with the conversation of
// previous_response_id before its input), which the rest of the path —
// validation, admission, the hold, every provider's adapter — serves as it
// serves chat; what the upstream step needs to answer in the Responses
// API's shape travels in the request metadata (contract.MetaResponse).

// Responses stores the Responses API's responses (a store.Store).
type Responses interface {
	SaveResponse(ctx context.Context, r store.StoredResponse) error
	ResponseByID(ctx context.Context, accountID, id string, now time.Time) (store.StoredResponse, error)
	DeleteResponse(ctx context.Context, accountID, id string) error
}

// responseMeta is contract.MetaResponse's value (JSON).
type responseMeta struct {
	ID    string `json:"id"`
	Store bool   `json:"store"`
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
			e := oaierror.Internal
			return nil, "", &e
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
	meta, err := json.Marshal(responseMeta{ID: responses.IDPrefix + rand.Text(), Store: req.Store,
		Instructions: responses.HasInstructions(body), Created: r.s.opt.Now().Unix(), Echo: req.Echo})
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
			return immediate(oaierror.Internal.ForRequest(r.clientRequestID), nil), nil
		}
		return jsonReply(json.RawMessage(got.Body))
	case http.MethodDelete:
		err := st.DeleteResponse(ctx, r.accountID, id)
		if errors.Is(err, store.ErrNotFound) {
			return immediate(notFound.ForRequest(r.clientRequestID), nil), nil
		}
		if err != nil {
			r.s.opt.Logger.ErrorContext(ctx, "router step: deleting a stored response failed", "err", err)
			return immediate(oaierror.Internal.ForRequest(r.clientRequestID), nil), nil
		}
		return jsonReply(map[string]any{"id": id, "object": "response.deleted", "deleted": true})
	}
	return immediate(oaierror.MethodNotAllowed, nil), nil
}

// isResponsesPath reports a path of the Responses API.
func isResponsesPath(path string) bool {
	return path == contract.PathResponses || strings.HasPrefix(path, contract.PathResponses+"/")
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
				e := oaierror.Internal
				return nil, &e
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
