package cli

import (
	"flag"
	"net"
	"net/http"
	"sync"
	"time"
)

// httpLimits bound what a client can hold of the HTTP listener (the API
// and the dashboard): slow headers, slow bodies, idle connections, large
// headers, and many connections from one address.
type httpLimits struct {
	readHeader     time.Duration
	readBody       time.Duration
	idle           time.Duration
	maxHeaderBytes int
	connsPerIP     int
}

func (l *httpLimits) flags(fs *flag.FlagSet) {
	fs.DurationVar(&l.readHeader, "http-header-timeout", 10*time.Second, "how long a client may take to send a request's headers")
	fs.DurationVar(&l.readBody, "http-body-timeout", 60*time.Second, "how long a client may take to send a whole request (headers and body); a body that stops arriving is dropped. Answers, streamed or not, are not bounded by it")
	fs.DurationVar(&l.idle, "http-idle-timeout", 2*time.Minute, "how long an idle keep-alive connection is kept")
	fs.IntVar(&l.maxHeaderBytes, "http-max-header-bytes", 64<<10, "the largest request header block accepted")
	fs.IntVar(&l.connsPerIP, "http-max-conns-per-ip", 256, "the most connections one client address may hold open at once (0: no limit)")
}

// server applies the limits to an HTTP server for h.
func (l *httpLimits) server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.readHeader,
		ReadTimeout:       l.readBody,
		IdleTimeout:       l.idle,
		MaxHeaderBytes:    l.maxHeaderBytes,
	}
}

// listener caps the connections each client address holds.
func (l *httpLimits) listener(inner net.Listener) net.Listener {
	if l.connsPerIP <= 0 {
		return inner
	}
	return &perIPListener{Listener: inner, max: l.connsPerIP, open: map[string]int{}}
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
