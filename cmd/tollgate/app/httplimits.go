package app

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/guard"
)

// HTTPLimits bound what a client can hold of the HTTP listener (the API
// and the dashboard): slow headers, slow bodies, idle connections, large
// headers, and many connections from one address (the --http-* flags).
type HTTPLimits struct {
	ReadHeader     time.Duration
	ReadBody       time.Duration
	Idle           time.Duration
	MaxHeaderBytes int
	ConnsPerIP     int // 0: no limit
}

// server applies the limits to an HTTP server for h.
func (l *HTTPLimits) server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeader,
		ReadTimeout:       l.ReadBody,
		IdleTimeout:       l.Idle,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// listener caps the connections each client address holds.
func (l *HTTPLimits) listener(inner net.Listener) net.Listener {
	if l.ConnsPerIP <= 0 {
		return inner
	}
	return &perIPListener{Listener: inner, max: l.ConnsPerIP, open: map[string]int{}}
}

// perIPListener closes a new connection at once when its address already
// holds max open ones; the client sees the connection closed.
type perIPListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (p *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := p.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		p.mu.Lock()
		if p.open[ip] >= p.max {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.open[ip]++
		p.mu.Unlock()
		return &countedConn{Conn: c, release: func() { p.release(ip) }}, nil
	}
}

func (p *perIPListener) release(ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open[ip]--; p.open[ip] <= 0 {
		delete(p.open, ip)
	}
}

func remoteIP(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// countedConn gives its slot back once, when closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// routes is the HTTP listener's mux, as Envoy's bootstrap routes it: the
// API to the edge (which recovers its own panics, mid-stream too), the
// management API (/api/v1/, which checks its own tokens) and every other
// path to the dashboard, each under guard: a panic answers its request 500
// internal_error and never ends the process.
func routes(api, management, dashboard http.Handler, log *slog.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/api/v1/", guard.Handler("manage", log, management))
	mux.Handle("/", guard.Handler("dashboard", log, dashboard))
	return mux
}
