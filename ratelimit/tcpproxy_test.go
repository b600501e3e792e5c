package ratelimit

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// proxyMode is how a tcpProxy treats connections.
type proxyMode int32

const (
	proxyForward proxyMode = iota // pass bytes both ways
	proxyRefuse                   // close every connection at once
	proxyStall                    // accept, never answer
)

// tcpProxy stands between a client and a server so a test can cut the
// server off and bring it back without touching it.
type tcpProxy struct {
	ln       net.Listener
	upstream string
	mode     atomic.Int32
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// startProxy listens on a free local port and forwards to upstream until the
// test ends.
func startProxy(t testing.TB, upstream string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return p.ln.Addr().String() }

// setMode changes how connections are treated; leaving proxyForward drops
// every open connection.
func (p *tcpProxy) setMode(m proxyMode) {
	p.mode.Store(int32(m))
	if m != proxyForward {
		p.dropConns()
	}
}

func (p *tcpProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.handle(c)
	}
}

func (p *tcpProxy) handle(c net.Conn) {
	switch proxyMode(p.mode.Load()) {
	case proxyRefuse:
		_ = c.Close()
		return
	case proxyStall:
		p.track(c)
		return
	}
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		_ = c.Close()
		return
	}
	p.track(c)
	p.track(up)
	pipe := func(dst, src net.Conn) {
		defer p.wg.Done()
		_, _ = io.Copy(dst, src) // ends when either side closes
		_ = dst.Close()
		_ = src.Close()
	}
	p.wg.Add(2)
	go pipe(up, c)
	go pipe(c, up)
}

func (p *tcpProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns[c] = struct{}{}
}

func (p *tcpProxy) dropConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *tcpProxy) close() {
	_ = p.ln.Close()
	p.dropConns()
	p.wg.Wait()
}
