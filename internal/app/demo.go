package app

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/mockllm"
)

// demoParts answer the demo provider (config.TypeDemo): internal/mockllm's
// server, which keeps nothing. The built-in edge calls it in process
// (edge.Options.InProcess), with no socket. Envoy needs an address: with a
// gRPC listener for Envoy and a demo provider in the configuration at
// start, the server also listens on a loopback port, and demo providers'
// base URL is that port's, which Envoy (on the same host) reaches.
type demoParts struct {
	mock *mockllm.Mock
	// baseURL is every demo provider's base_url: config.DemoBaseURL, or
	// the loopback listener's.
	baseURL string
	lis     net.Listener // nil without a listener
	server  *http.Server
}

// buildDemo makes the demo server for cfg, the configuration at start, and
// gives cfg's demo providers their base URL.
func (a *App) buildDemo(cfg *config.Config) error {
	a.demo.mock = mockllm.New(mockllm.Options{Formats: []mockllm.Format{mockllm.OpenAI}})
	a.onClose(a.demo.mock.Close)
	a.demo.baseURL = config.DemoBaseURL
	if a.opt.GRPC.Addr != "" && hasDemo(cfg) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("demo provider's loopback listener: %w", err)
		}
		a.demo.lis = lis
		a.demo.server = &http.Server{Handler: a.demo.mock, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}
		a.onClose(func() { _ = a.demo.server.Close() })
		a.demo.baseURL = "http://" + lis.Addr().String() + "/v1"
	}
	a.placeDemo(cfg)
	return nil
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
// URL, before the configuration is in use. One added by a reload behind
// Envoy, without the loopback listener, stays unreachable to Envoy until
// a restart, which the log says.
func (a *App) placeDemo(cfg *config.Config) {
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		if p.Type != config.TypeDemo {
			continue
		}
		p.BaseURL = a.demo.baseURL
		if a.opt.GRPC.Addr != "" && a.demo.lis == nil {
			a.log.Warn("demo provider added by a reload: Envoy cannot reach it until tollgate serve restarts", "provider", p.Name)
		}
	}
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
