// Package contract is the one routing contract between Tollgate's ext_authz
// and ext_proc servers, the built-in edge and the Envoy configuration (the
// bootstrap and the xDS snapshots): header names, cluster names, metadata
// keys and processing modes. Nothing else spells these strings.
package contract

import (
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Headers set by Tollgate's filters on the request as it travels through the
// proxy. A client's own headers with these names never survive: ext_authz
// overwrites the identity headers and removes the rest, and the upstream step
// removes all of them before the request reaches a provider.
const (
	// HeaderKeyID and HeaderAccountID carry the authenticated identity from
	// ext_authz to ext_proc.
	HeaderKeyID     = "x-tollgate-key-id"
	HeaderAccountID = "x-tollgate-account-id"
	// HeaderDecision carries ext_authz's signed decision (package
	// authz/decision): the key, account and request id it admitted, with
	// an expiry. The router step takes the identity from it, verified, not
	// from the two headers above, which are for logs and readers.
	HeaderDecision = "x-tollgate-decision"
	// HeaderCluster is set by the router step; the route table sends the
	// request to the cluster it names.
	HeaderCluster = "x-tollgate-cluster"
	// HeaderClientAddress is the caller's address as the edge determined
	// it (the TCP peer, or the X-Forwarded-For entry xff_num_trusted_hops
	// selects), set over whatever a client sent before ext_authz runs:
	// Envoy's ext_authz reports only the TCP peer as the source.
	HeaderClientAddress = "x-tollgate-client-address"
	// HeaderRequestID identifies a request across the filters (Envoy sets
	// it; the built-in edge does too).
	HeaderRequestID = "x-request-id"
	// HeaderAttemptCount numbers a request's upstream attempts from 1, on
	// the request each attempt sends (Envoy's include_request_attempt_count)
	// and on the final response (include_attempt_count_in_response).
	HeaderAttemptCount = "x-envoy-attempt-count"
)

// CheckHeaders are the request headers ext_authz reads: the key (as a
// bearer token or Anthropic's x-api-key), the caller's address and the
// request's id. Envoy sends only these in a CheckRequest (the
// listener's allowed_headers, with the pseudo-headers it always adds), so
// that a client's other headers cost no bytes in the check and in what
// Envoy keeps of it for the stream's life.
var CheckHeaders = []string{"authorization", "x-api-key", HeaderClientAddress, HeaderRequestID}

// InternalHeaders lists every header in the contract that must never come
// from a client nor reach a provider.
var InternalHeaders = []string{
	HeaderKeyID, HeaderAccountID, HeaderDecision, HeaderCluster, HeaderTranslated, HeaderAttemptCount, HeaderClientAddress,
	HeaderFailover,
}

// Endpoint metadata: every upstream endpoint carries the identity of the
// deployment behind it under this filter-metadata namespace and key. The
// upstream ext_proc step lists AttrDeployment in its request_attributes, and
// Envoy sends the value (a string) in ProcessingRequest.attributes under
// AttributesNamespace, keyed by the attribute expression itself.
const (
	MetadataNamespace     = "tollgate"
	MetadataDeploymentKey = "deployment"
	AttributesNamespace   = "envoy.filters.http.ext_proc"
	AttrDeployment        = "xds.upstream_host_metadata.filter_metadata['" + MetadataNamespace + "']['" + MetadataDeploymentKey + "']"
	// AttrUpstreamHostMetadata is the same attribute (kept for readers who
	// look for Envoy's attribute name).
	AttrUpstreamHostMetadata = AttrDeployment
	// AttrCodeDetails is the router step's response attribute (its
	// response_attributes): how Envoy came by the response. ViaUpstream
	// is a provider's answer; anything else Envoy made itself (no healthy
	// upstream, a timeout, a reset).
	AttrCodeDetails = "response.code_details"
	ViaUpstream     = "via_upstream"
)

// HeaderTranslated marks a response the upstream step has translated into
// OpenAI's shape; the router step removes it. A non-2xx response without it
// is a reply Envoy made itself (no healthy upstream, connect failure,
// timeout), which the router step replaces with an OpenAI-shaped 503.
const HeaderTranslated = "x-tollgate-translated"

// HeaderFailover marks a reply the upstream step made itself for a failure
// of the attempt's deployment alone (its provider's credential could not be
// had): the built-in edge tries the model's next deployment, as after a
// provider's 5xx. Envoy 1.40 cannot: an upstream filter's local reply goes
// to the downstream filters directly, never through the router's retry
// policy. The router step removes it.
const HeaderFailover = "x-tollgate-failover"

// ext_authz's dynamic metadata on every request it admits, which Envoy
// keeps under the filter's name: the error shape of the request's path
// (ShapeAnthropic on the Messages API, else ShapeOpenAI), for the
// local-reply mappers of the listener, which cannot go by :path once an
// attempt has rewritten it for its provider (a chat completion sent to
// Anthropic goes on as /v1/messages).
const (
	AuthzMetadataNamespace = "envoy.filters.http.ext_authz"
	AuthzMetaShape         = "shape"
	ShapeOpenAI            = "openai"
	ShapeAnthropic         = "anthropic"
)

// Dynamic metadata that ext_proc emits for the access log.
const (
	DynamicMetadataNamespace = "tollgate.usage"
)

// gRPC authorities by which Envoy reaches the two steps of ext_proc; one
// server answers both and tells them apart by this header.
const (
	// HeaderStep is set on the ext_proc gRPC call (initial_metadata in
	// Envoy's grpc_service) to say which step it is.
	HeaderStep   = "x-tollgate-step"
	StepRouter   = "router"
	StepUpstream = "upstream"
	// StepRouterDirect is the router step of a proxy that has the direct
	// clusters (Envoy configured by Tollgate's xDS): a request whose model
	// has one deployment goes to that deployment's direct cluster, the
	// router step rewriting it and translating and metering its answer
	// (RouterDirectMode), with no upstream step.
	StepRouterDirect = "router-direct"
	// StepRouterEdge is StepRouterDirect for the built-in edge, which has
	// no access log: on a request routed straight the step's answers
	// carry none of the dynamic metadata only an access log reads (the
	// request's and the usage). On the two-step route the request's
	// metadata still goes, for the edge to hand to the upstream step.
	StepRouterEdge = "router-edge"
)

// ClusterPrefix begins every model cluster's name.
const ClusterPrefix = "tollgate-model-"

// ClusterName is the name of the upstream cluster serving a public model.
// Model ids may contain characters Envoy names do not like, so anything but
// [A-Za-z0-9._-] is replaced by '_' and a length suffix keeps distinct ids apart.
func ClusterName(modelID string) string { return namesOf(modelID).cluster }

// clusterNames are a model's two cluster names.
type clusterNames struct{ cluster, direct string }

// modelNames keeps the cluster names of the models seen, by model id: a
// request's router step names its model's cluster without making the
// name again. Past maxModelNames (configurations reloaded with ever new
// models) a name is made each time.
var (
	modelNames  sync.Map // string → *clusterNames
	nModelNames atomic.Int64
)

const maxModelNames = 4096

func namesOf(modelID string) *clusterNames {
	if n, ok := modelNames.Load(modelID); ok {
		return n.(*clusterNames)
	}
	c := clusterName(modelID)
	n := &clusterNames{cluster: c, direct: DirectPrefix + strings.TrimPrefix(c, ClusterPrefix)}
	if nModelNames.Load() < maxModelNames {
		if _, loaded := modelNames.LoadOrStore(strings.Clone(modelID), n); !loaded {
			nModelNames.Add(1)
		}
	}
	return n
}

func clusterName(modelID string) string {
	var b strings.Builder
	b.Grow(len(ClusterPrefix) + len(modelID) + 4)
	b.WriteString(ClusterPrefix)
	changed := false
	for i := 0; i < len(modelID); i++ {
		c := modelID[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		changed = true
	}
	if changed {
		b.WriteString("-")
		h := fnv.New32a()
		h.Write([]byte(modelID))
		b.WriteString(strconv.FormatUint(uint64(h.Sum32()), 36))
	}
	return b.String()
}

// HeaderForwardedProto is the scheme the client used, which Envoy's
// connection manager sets; Envoy finds no route for a request without it.
const HeaderForwardedProto = "x-forwarded-proto"

// DirectRouteRemoves are the headers a direct route removes once it has
// matched: what the router step could not remove before routing (the
// cluster's name, which the route matches, and x-forwarded-proto, without
// which Envoy matches none), and what Envoy's router adds after the step
// (its attempt count). No upstream step runs there to remove them.
var DirectRouteRemoves = []string{HeaderCluster, HeaderForwardedProto, HeaderAttemptCount}

// DirectPrefix begins every direct cluster's name (never a model
// cluster's: those begin with ClusterPrefix).
const DirectPrefix = "tollgate-direct-"

// DirectClusterName is the cluster of a model served by one deployment,
// to which Envoy routes a request straight, with no upstream step: the
// router step rewrote it for that deployment and sees its answer
// (StepRouterDirect). Its own name, apart from the model's cluster, so
// that a request the router step did not rewrite can never reach it.
func DirectClusterName(modelID string) string { return namesOf(modelID).direct }

// Processing modes, as Envoy's ext_proc ProcessingMode enums spell them. The
// bootstrap, the xDS cluster filters and the built-in edge all use these.
type Mode struct {
	RequestHeader  string // SEND or SKIP
	RequestBody    string // NONE, BUFFERED or STREAMED
	ResponseHeader string
	ResponseBody   string
}

var (
	// RouterMode: the router step validates the buffered body, picks the
	// model's cluster, and sees the final response status to record failures.
	RouterMode = Mode{RequestHeader: "SEND", RequestBody: "BUFFERED", ResponseHeader: "SEND", ResponseBody: "NONE"}
	// UpstreamMode: the upstream step runs per attempt, rewrites the body and
	// credentials for the deployment Envoy picked, and translates and meters
	// the streamed response.
	UpstreamMode = Mode{RequestHeader: "SEND", RequestBody: "BUFFERED", ResponseHeader: "SEND", ResponseBody: "STREAMED"}
)

// DirectResponseBody is the response body mode the direct router step asks
// for in its answer to the response headers (mode_override): a whole
// answer BUFFERED, a streamed one STREAMED.
const (
	DirectWhole    = "BUFFERED"
	DirectStreamed = "STREAMED"
)

// Paths served by the edge.
const (
	PathChatCompletions = "/v1/chat/completions"
	PathModels          = "/v1/models"
	PathResponses       = "/v1/responses"
	// The Messages API (Anthropic's): its answers and errors are in
	// Anthropic's shape.
	PathMessages    = "/v1/messages"
	PathCountTokens = "/v1/messages/count_tokens"
	// The endpoint families besides chat, in OpenAI's shapes (rerank in
	// Cohere's v2 shape).
	PathEmbeddings  = "/v1/embeddings"
	PathCompletions = "/v1/completions"
	PathModerations = "/v1/moderations"
	PathRerank      = "/v1/rerank"
)

// EndpointOf names the endpoint family of a request path (without its
// query), as usage records and refusals name it: chat, responses,
// messages (count_tokens included), embeddings, completions, moderations
// or rerank; "" for any other path.
func EndpointOf(path string) string {
	switch {
	case path == PathChatCompletions:
		return "chat"
	case path == PathResponses || strings.HasPrefix(path, PathResponses+"/"):
		return "responses"
	case path == PathMessages || path == PathCountTokens:
		return "messages"
	case path == PathEmbeddings:
		return "embeddings"
	case path == PathCompletions:
		return "completions"
	case path == PathModerations:
		return "moderations"
	case path == PathRerank:
		return "rerank"
	}
	return ""
}

// The proxy's side of the gRPC servers. Envoy reaches Tollgate's ext_authz,
// ext_proc and xDS services through one cluster of this name; the bootstrap
// (envoy/envoy.yaml), the xDS clusters and the mesh examples name it.
const (
	ClusterGRPC = "tollgate_grpc"
	// DefaultGRPCPort is the port Tollgate's gRPC server listens on unless
	// told otherwise (127.0.0.1:9001 locally, 0.0.0.0:9001 in a container).
	DefaultGRPCPort = 9001
)

// UpstreamAttempts is how many deployments one request may try before the
// client gets an error: the bootstrap's route retry policy allows
// UpstreamAttempts-1 retries, each on a host (and, where there is one, a
// priority) not tried yet. Models with more enabled deployments than this
// still spread load over all of them; one request just stops sooner.
const UpstreamAttempts = 5

// MessageTimeout is how long Envoy waits for Tollgate's answer to each
// ext_proc message, of either step (message_timeout); past it Envoy
// answers the request itself (a 504, which the reply mappers make a 503
// the client retries).
const MessageTimeout = 5 * time.Second

// StepDeadline bounds what a step does for one message before it answers
// — the database and Redis calls of admission, a provider's count_tokens,
// storing a response — well inside MessageTimeout, so that a slow
// database gets the client a refusal it can retry, in its API's shape,
// and the step gives back what it held, rather than Envoy's timeout.
const StepDeadline = 4 * time.Second

// ConversationFactor bounds the chat completion the router step makes of
// a Responses request with its earlier turns: this many times
// max_body_bytes. Envoy's route for POST /v1/responses buffers that much.
const ConversationFactor = 4

// RequestMetadataNamespace is dynamic metadata the router step may set with
// the request's routing state (key, account, model, stream flags, start
// time). The bootstrap lets the router step write it and forwards it to the
// upstream step (ProcessingRequest.metadata_context), which needs it on a
// retry: upstream filters edit the downstream request's own header map, so
// the headers a first attempt removed are gone for the second.
const RequestMetadataNamespace = "tollgate.request"

// Fields of the RequestMetadataNamespace struct. Upstream filters share the
// downstream request's header map, so the upstream step cannot rely on
// headers an earlier attempt may have removed: it reads these instead.
const (
	MetaKeyID       = "key_id"
	MetaAccountID   = "account_id"
	MetaRequestID   = "request_id" // names the request's hold and its one usage record
	MetaModel       = "model"
	MetaStream      = "stream"       // bool
	MetaClientUsage = "client_usage" // bool: the client asked for include_usage
	MetaStarted     = "started_us"   // admission time, Unix microseconds (number)
	// MetaLease and MetaHeld name the lease the request's hold came from
	// and the hold (nanodollars, number), for the usage record (empty and
	// 0 when the hold is a reservation of the request's own, or none).
	MetaLease = "lease"
	MetaHeld  = "held_nanos"
	// MetaBudgets names the holds the request took under spend budgets,
	// each of MetaHeld: "<pot>#<lease>" joined by commas ("" for none).
	MetaBudgets = "budgets"
	// MetaExpires and MetaToken let the upstream step accept only attempts
	// the router step admitted: the token is an HMAC of the fields above
	// and the expiry (Unix seconds), under a key every replica shares.
	// MetaResponse marks a request of the Responses API, translated to
	// chat by the router step: what its answer needs (the response's id,
	// whether to store it, the parameters it repeats), as JSON.
	MetaResponse = "response"
	// MetaTokens is the tokens the request reserved against its key's
	// token limits (decimal), which its usage record settles; absent when
	// it reserved none.
	MetaTokens  = "tokens"
	MetaExpires = "expires_s"
	MetaToken   = "token"
)

// CredentialHeaders are the headers providers take credentials in. The
// upstream step removes all of them on every attempt before setting the one
// its provider wants, so that no credential meant for one provider can
// follow a retry to another.
var CredentialHeaders = []string{"authorization", "x-api-key", "api-key", "x-goog-api-key"}

// ForwardedHeaders are the client request headers every provider gets as
// the client sent them: the body's type, what the client accepts, and the
// W3C trace context. Every other client header stays at the edge unless the
// provider's forward_headers lists it; the provider adapter sets the
// provider's own credential and version headers. x-request-id passes too:
// under Envoy an attempt's filters edit the request's own header map, so
// removing it for the provider would take it from Envoy's access log and
// from the answer (always_set_request_id_in_response) as well.
var ForwardedHeaders = []string{"content-type", "accept", "traceparent", "tracestate", HeaderRequestID}

// AnswerHeaders are the provider's response headers a client gets: the
// body's type, and the date. Every other one stays at the proxy — cookies,
// the provider's organization and project, its rate limits (x-ratelimit-*,
// whose names Tollgate's own use), its server and request id — as the
// upstream step removes them from each answer. The framing is the proxy's
// (content-length goes: the translation changes it), and the request id,
// rate-limit and retry headers a client reads are Tollgate's own, added
// after the upstream step (see docs/architecture.md).
var AnswerHeaders = []string{"content-type", "date"}

// ProviderHeaders are other headers a provider adapter sets or that must
// not reach a provider: versions and betas meant for one provider, and the
// client's Accept-Encoding (a compressed answer could not be translated or
// metered), and the parts of a SigV4 signature (Bedrock) besides its
// authorization. Removed on every attempt, like the credentials.
var ProviderHeaders = []string{"anthropic-version", "anthropic-beta", "accept-encoding", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
