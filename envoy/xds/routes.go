package xds

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gopkg.in/yaml.v3"

	// The typed configs the listener and routes name, for protojson.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/common/matching/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/matcher/action/v3"
	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
)

// The public listener and the route template, written as Envoy YAML (the
// form operators read) and served over LDS and RDS.
var (
	//go:embed listener.yaml
	listenerYAML []byte
	//go:embed routes.yaml
	routesYAML []byte
)

// RouteConfigName is the route configuration the listener asks RDS for.
const RouteConfigName = "tollgate"

// templateRoute names the route in routes.yaml that every model's route is
// copied from.
const templateRoute = "chat-completions"

// ListenerOptions are what `tollgate serve` decides about the public
// listener beyond the configuration file. The zero value keeps
// listener.yaml's own: 0.0.0.0:8080, no trusted X-Forwarded-For hop.
type ListenerOptions struct {
	// Address is where Envoy binds the listener, host:port (serve
	// --envoy-listen); empty keeps listener.yaml's.
	Address string
	// XFFTrustedHops is the connection manager's xff_num_trusted_hops:
	// the proxies in front of Envoy trusted to append X-Forwarded-For
	// (serve --xff-trusted-hops, which the built-in edge honours too).
	XFFTrustedHops uint32
}

// Listener is the public listener (listener.yaml) at opt's address, its
// body cap (the buffer filter's max_request_bytes) set to cfg's
// max_body_bytes: the one place a body's size is checked under Envoy,
// before it is read whole.
func Listener(cfg *config.Config, opt ListenerOptions) (*listenerv3.Listener, error) {
	var l listenerv3.Listener
	if err := decodeYAML(listenerYAML, &l); err != nil {
		return nil, fmt.Errorf("xds: listener.yaml: %w", err)
	}
	if err := setAddress(&l, opt.Address); err != nil {
		return nil, fmt.Errorf("xds: listener address: %w", err)
	}
	// The connection's buffer limit is the stream's while ext_authz runs,
	// before the buffer filter sets max_body_bytes: see
	// connectionBufferLimit.
	l.PerConnectionBufferLimitBytes = wrapperspb.UInt32(connectionBufferLimit(cfg.MaxBodyBytes))
	if err := editHCM(&l, func(hcm *hcmv3.HttpConnectionManager) error {
		hcm.XffNumTrustedHops = opt.XFFTrustedHops
		return setBodyCap(hcm, cfg.MaxBodyBytes)
	}); err != nil {
		return nil, fmt.Errorf("xds: listener.yaml: %w", err)
	}
	if err := l.ValidateAll(); err != nil {
		return nil, fmt.Errorf("xds: listener.yaml: %w", err)
	}
	return &l, nil
}

// connectionBufferLimit is the listener's per-connection buffer limit for
// a body cap of maxBody bytes: an eighth of it.
//
// While ext_authz runs, Envoy buffers the body under the connection's
// limit and, past it, stops reading the client (the watermark's "above
// high" fires once). The buffer filter then sets the stream's limit to
// max_body_bytes, and Envoy's watermark buffer re-checks only the low
// mark: reading resumes if what is buffered is at most half of
// max_body_bytes, and the buffer filter answers 413 when a body then
// crosses max_body_bytes. Anything more buffered by then is neither read
// on nor refused (the "above" already fired, and the buffer filter holds
// it all), and the stream hangs until stream_idle_timeout; a whole
// oversize body read in that time would even pass the buffer filter (it
// lets a body through that ends in the data it is handed). Envoy may
// hold up to about twice the limit by then (the connection's read buffer
// and the stream's), so an eighth of max_body_bytes keeps it under half,
// and under max_body_bytes whole.
func connectionBufferLimit(maxBody int) uint32 {
	return uint32(maxBody / 8)
}

// setAddress binds the listener to addr (host:port), when given.
func setAddress(l *listenerv3.Listener, addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("port %q: %w", port, err)
	}
	if net.ParseIP(host) == nil {
		return fmt.Errorf("%q: Envoy binds an IP address, not a name", host)
	}
	sa := l.GetAddress().GetSocketAddress()
	if sa == nil {
		return errors.New("listener.yaml has no socket address")
	}
	sa.Address = host
	sa.PortSpecifier = &corev3.SocketAddress_PortValue{PortValue: uint32(n)}
	return nil
}

// editHCM lets edit change the listener's HTTP connection manager.
func editHCM(l *listenerv3.Listener, edit func(*hcmv3.HttpConnectionManager) error) error {
	for _, fc := range l.GetFilterChains() {
		for _, nf := range fc.GetFilters() {
			var hcm hcmv3.HttpConnectionManager
			if !nf.GetTypedConfig().MessageIs(&hcm) {
				continue
			}
			if err := nf.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
				return err
			}
			if err := edit(&hcm); err != nil {
				return err
			}
			a, err := pack(&hcm)
			if err != nil {
				return err
			}
			nf.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
			return nil
		}
	}
	return errors.New("no HTTP connection manager")
}

// setBodyCap sets the buffer filter's limit in the HTTP connection
// manager.
func setBodyCap(hcm *hcmv3.HttpConnectionManager, limit int) error {
	for _, hf := range hcm.GetHttpFilters() {
		if hf.GetName() != "envoy.filters.http.buffer" {
			continue
		}
		var buf bufferv3.Buffer
		if err := hf.GetTypedConfig().UnmarshalTo(&buf); err != nil {
			return err
		}
		buf.MaxRequestBytes = wrapperspb.UInt32(uint32(limit))
		a, err := pack(&buf)
		if err != nil {
			return err
		}
		hf.ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}
		return nil
	}
	return errors.New("no buffer filter to cap the body with")
}

// Routes is the route configuration for cfg: routes.yaml with one route per
// model put before the template, matched by the model's cluster name (which
// the router step sets in x-tollgate-cluster), with the model's request
// timeout, its providers' longest first-byte and idle timeouts per attempt,
// and one retry per further enabled deployment (at most
// contract.UpstreamAttempts attempts).
func Routes(cfg *config.Config) (*routev3.RouteConfiguration, error) {
	var rc routev3.RouteConfiguration
	if err := decodeYAML(routesYAML, &rc); err != nil {
		return nil, fmt.Errorf("xds: routes.yaml: %w", err)
	}
	if len(rc.GetVirtualHosts()) != 1 {
		return nil, fmt.Errorf("xds: routes.yaml: want one virtual host, got %d", len(rc.GetVirtualHosts()))
	}
	vh := rc.GetVirtualHosts()[0]
	at := -1
	for i, r := range vh.GetRoutes() {
		if r.GetName() == templateRoute {
			at = i
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("xds: routes.yaml has no route %q", templateRoute)
	}
	if err := setConversationBodyCap(vh, cfg.MaxBodyBytes); err != nil {
		return nil, fmt.Errorf("xds: routes.yaml: %w", err)
	}
	tmpl := vh.GetRoutes()[at]
	perModel := make([]*routev3.Route, 0, len(cfg.Models))
	for i := range cfg.Models {
		m := &cfg.Models[i]
		perModel = append(perModel, modelRoute(cfg, m, tmpl))
		if _, _, ok := cfg.OnlyDeployment(m); ok {
			perModel = append(perModel, directRoute(cfg, m, tmpl))
		}
	}
	vh.Routes = append(append(append([]*routev3.Route{}, vh.GetRoutes()[:at]...), perModel...), vh.GetRoutes()[at:]...)
	if err := rc.ValidateAll(); err != nil {
		return nil, fmt.Errorf("xds: routes: %w", err)
	}
	return &rc, nil
}

// The routes of routes.yaml whose request the router step hands back as
// another (the chat request of a Responses request with its earlier
// turns, or of a message), which Envoy's buffer must hold.
const (
	responsesRoute = "responses"
	messagesRoute  = "messages"
)

// setConversationBodyCap sizes the buffer of the Responses and Messages
// routes for the request the router step hands back.
func setConversationBodyCap(vh *routev3.VirtualHost, maxBody int) error {
	for _, name := range []string{responsesRoute, messagesRoute} {
		i := slices.IndexFunc(vh.GetRoutes(), func(r *routev3.Route) bool { return r.GetName() == name })
		if i < 0 {
			return fmt.Errorf("no route %q", name)
		}
		a, err := pack(&bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Buffer{Buffer: &bufferv3.Buffer{
			MaxRequestBytes: wrapperspb.UInt32(uint32(contract.ConversationFactor * maxBody)),
		}}})
		if err != nil {
			return err
		}
		vh.GetRoutes()[i].TypedPerFilterConfig["envoy.filters.http.buffer"] = a
	}
	return nil
}

// modelPaths are the paths a model's route serves (Envoy matches the path
// without its query): a chat completion, a message and a response, which
// the router step sends to the model's cluster alike, so that each gets
// the model's timeouts and failover.
var modelPaths = "(" + strings.Join([]string{
	regexp.QuoteMeta(contract.PathChatCompletions), regexp.QuoteMeta(contract.PathMessages), regexp.QuoteMeta(contract.PathResponses),
	regexp.QuoteMeta(contract.PathEmbeddings), regexp.QuoteMeta(contract.PathCompletions), regexp.QuoteMeta(contract.PathModerations),
	regexp.QuoteMeta(contract.PathRerank),
}, "|") + ")"

// modelRoute is the template sized for one model.
func modelRoute(cfg *config.Config, m *config.Model, tmpl *routev3.Route) *routev3.Route {
	name := contract.ClusterName(m.ID)
	r := proto.Clone(tmpl).(*routev3.Route)
	r.Name = name
	r.Match.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: modelPaths}}
	r.Match.Headers = append(r.Match.Headers, &routev3.HeaderMatcher{
		Name: contract.HeaderCluster,
		HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Exact{Exact: name},
		}},
	})
	ra := r.GetRoute()
	ra.ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: name}
	ra.Timeout = durationpb.New(m.RequestTimeout.D())

	var firstByte, idle time.Duration
	enabled := 0
	for j := range m.Deployments {
		p, ok := cfg.Provider(m.Deployments[j].Provider)
		if !ok || !p.IsEnabled() {
			continue
		}
		enabled++
		firstByte = max(firstByte, p.FirstByteTimeout.D())
		idle = max(idle, p.StreamIdleTimeout.D())
	}
	rp := ra.GetRetryPolicy()
	rp.NumRetries = wrapperspb.UInt32(uint32(max(min(enabled, contract.UpstreamAttempts)-1, 0)))
	if firstByte > 0 {
		rp.PerTryTimeout = durationpb.New(firstByte)
	}
	if idle > 0 {
		rp.PerTryIdleTimeout = durationpb.New(idle)
	}
	return r
}

// directRoute is the route of a model's direct cluster: the model's
// route, matched by the direct cluster's name alone (the router step has
// set the path the deployment serves); it removes what the router step
// could not (contract.DirectRouteRemoves) before the request leaves.
func directRoute(cfg *config.Config, m *config.Model, tmpl *routev3.Route) *routev3.Route {
	name := contract.DirectClusterName(m.ID)
	r := modelRoute(cfg, m, tmpl)
	r.Name = name
	r.Match.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
	r.Match.Headers = []*routev3.HeaderMatcher{{
		Name: contract.HeaderCluster,
		HeaderMatchSpecifier: &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{
			MatchPattern: &matcherv3.StringMatcher_Exact{Exact: name},
		}},
	}}
	r.GetRoute().ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: name}
	r.RequestHeadersToRemove = append(r.RequestHeadersToRemove, contract.DirectRouteRemoves...)
	// Nothing to retry on: the retry policy keeps only the per-try
	// timeouts (the provider's first-byte and idle timeouts). With a
	// retry_on, even at no retries, Envoy's router keeps each request's
	// body for a retry that never comes (a 4 KiB buffer a stream, and a
	// copy of the body).
	rp := r.GetRoute().GetRetryPolicy()
	rp.RetryOn, rp.RetriableStatusCodes, rp.RetryHostPredicate, rp.RetryPriority = "", nil, nil, nil
	rp.HostSelectionRetryMaxAttempts, rp.RetryBackOff = 0, nil
	return r
}

// decodeYAML reads Envoy YAML into m, as Envoy reads it (protojson field
// names, typed configs by their @type).
func decodeYAML(data []byte, m proto.Message) error {
	var v any
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&v); err != nil {
		return err
	}
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return protojson.Unmarshal(j, m)
}
