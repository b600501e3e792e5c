package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/envoy/edge"
	"github.com/tollgate/tollgate/internal/mockllm"
)

// demoParts answer the demo provider (config.TypeDemo): internal/mockllm's
// server, which keeps nothing. The built-in edge calls it in process
// (edge.Options.InProcess), with no socket. Envoy needs an address: with a
// gRPC listener for Envoy and a demo provider in the configuration at
// start, the server also listens on a loopback port, and demo providers'
// base URL is that port's, which Envoy (on the same host) reaches.
//
// The server answers only requests that carry its credential, as a real
// provider does: a secret no one but Tollgate knows, which demo providers
// get as their api_key and the upstream step sends like any provider's.
// Behind Envoy, every replica on one database shares it (Envoy may send a
// request a replica's router step prepared to another's port); without a
// listener it is the process's own.
type demoParts struct {
	mock *mockllm.Mock
	// apiKey is every demo provider's api_key.
	apiKey config.Secret
	// baseURL is every demo provider's base_url: config.DemoBaseURL, or
	// the loopback listener's.
	baseURL string
	lis     net.Listener // nil without a listener
	server  *http.Server
}

// The demo listener's bounds: the time to read a request's headers, then
// all of it, to write an answer, and the room above the largest body the
// upstream step sends (contract.ConversationFactor × max_body_bytes) for
// the router step's rewriting.
const (
	demoReadHeaderTimeout = 10 * time.Second
	demoReadTimeout       = time.Minute
	demoWriteTimeout      = 2 * time.Minute
	demoBodySlack         = 64 << 10
)

// buildDemo makes the demo server for the configuration at start, gives
// its demo providers their base URL and credential, and makes the routing
// table.
func (a *App) buildDemo(ctx context.Context) error {
	cfg := a.cfg.Load()
	listen := a.opt.GRPC.Addr != "" && hasDemo(cfg)
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("demo provider's credential: %w", err)
	}
	if listen {
		var err error
		if secret, err = a.st.SharedSecret(ctx, "demo provider credential", secret); err != nil {
			return err
		}
	}
	a.demo.apiKey = config.Secret("demo-" + hex.EncodeToString(secret))
	a.demo.mock = mockllm.New(mockllm.Options{Formats: []mockllm.Format{mockllm.OpenAI},
		Credentials: map[mockllm.Format]string{mockllm.OpenAI: "Bearer " + a.demo.apiKey.Reveal()}, Log: a.log})
	a.onClose(a.demo.mock.Close)
	a.demo.baseURL = config.DemoBaseURL
	if listen {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("demo provider's loopback listener: %w", err)
		}
		a.demo.lis = lis
		a.demo.server = &http.Server{Handler: a.demoHandler(), ReadHeaderTimeout: demoReadHeaderTimeout,
			ReadTimeout: demoReadTimeout, WriteTimeout: demoWriteTimeout, IdleTimeout: 90 * time.Second, MaxHeaderBytes: 64 << 10}
		a.onClose(func() { _ = a.demo.server.Close() })
		a.demo.baseURL = "http://" + lis.Addr().String() + "/v1"
	}
	a.placeDemo(cfg)
	table := edge.Clusters(cfg)
	a.clusters.Store(&table)
	return nil
}

// demoHandler is the loopback listener's handler: the demo server, each
// request's body bounded by the configuration in force. A request without
// the credential is refused (401, and a log line) before its body is read.
func (a *App) demoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit := int64(contract.ConversationFactor*a.cfg.Load().MaxBodyBytes) + demoBodySlack
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		a.demo.mock.ServeHTTP(w, r)
	})
}

// serveDemo serves the loopback listener, if there is one, until
// closeAll closes its server.
func (a *App) serveDemo() {
	if a.demo.server != nil {
		go func() { _ = a.demo.server.Serve(a.demo.lis) }()
	}
}

func hasDemo(cfg *config.Config) bool {
	for i := range cfg.Providers {
		if cfg.Providers[i].Type == config.TypeDemo {
			return true
		}
	}
	return false
}

// placeDemo gives a configuration's demo providers the demo server's base
// URL and credential, before the configuration is in use. One added by a
// reload behind Envoy, without the loopback listener, stays unreachable to
// Envoy until a restart, which the log says.
func (a *App) placeDemo(cfg *config.Config) {
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		if p.Type != config.TypeDemo {
			continue
		}
		p.BaseURL, p.APIKey = a.demo.baseURL, a.demo.apiKey
		if a.opt.GRPC.Addr != "" && a.demo.lis == nil {
			a.log.Warn("demo provider added by a reload: Envoy cannot reach it until tollgate serve restarts", "provider", p.Name)
		}
	}
}

// demoAddr is the loopback listener's address, or "" without one.
func (a *App) demoAddr() string {
	if a.demo.lis == nil {
		return ""
	}
	return a.demo.lis.Addr().String()
}

// demoTransports are the built-in edge's in-process transports: the demo
// server's host, whichever its base URL.
func (a *App) demoTransports() map[string]http.RoundTripper {
	rt := mockllm.Transport(a.demo.mock)
	return map[string]http.RoundTripper{hostOf(config.DemoBaseURL): rt, hostOf(a.demo.baseURL): rt}
}

// hostOf is an http base URL's host:port, as the edge's endpoints name
// it (port 80 by default).
func hostOf(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}
