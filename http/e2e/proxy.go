package e2e

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP proxy a fault test puts between a broker and PostgreSQL,
// and controls:
//
//   - Freeze stops forwarding bytes in both directions without closing
//     anything, and holds new connections without opening their backend
//     side: what the broker sees of a server stopped with SIGSTOP (its kernel
//     still accepts connections and buffers what is sent). Thaw resumes:
//     what was held is delivered, in order.
//   - FreezeReplies stops only what the server sends: the server runs and
//     commits what it is sent, and its answers are held until Thaw (a
//     network that drops the answers, as far as the broker can tell).
//   - Cut closes every connection (with a reset) and resets new ones until
//     Restore: what the broker sees of a server that is down.
type Proxy struct {
	ln      net.Listener
	backend string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	frozen bool
	thawed chan struct{} // closed on Thaw; replaced on Freeze
	// replies and repliesThawed are frozen and thawed for what the server
	// sends only (FreezeReplies).
	replies       bool
	repliesThawed chan struct{}
	cut           bool
	closed        bool
	// accepted counts the connections the proxy accepted, cut or not.
	accepted atomic.Int64
}

// NewProxy listens on listenAddr ("127.0.0.1:0": any free port) and forwards
// every connection to backend (host:port) until Close.
func NewProxy(listenAddr, backend string) (*Proxy, error) {
	ln, err := net.Listen("tcp", listenAddr)
	if err != nil {
		return nil, err
	}
	thawed := make(chan struct{})
	close(thawed)
	p := &Proxy{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}, thawed: thawed, repliesThawed: thawed}
	go p.serve()
	return p, nil
}

// StartDBProxy starts a proxy in front of the server of the database URL
// dbURL and returns it with the same URL pointed at the proxy. The proxy is
// closed when the test ends.
func StartDBProxy(t testing.TB, dbURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	backend := u.Host
	if u.Port() == "" {
		backend = net.JoinHostPort(u.Hostname(), "5432")
	}
	p, err := NewProxy("127.0.0.1:0", backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	u.Host = p.Addr()
	return p, u.String()
}

// Accepted is how many connections the proxy accepted so far, reset (Cut)
// or forwarded: the connection attempts of its clients.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Freeze stops forwarding bytes, both ways, on every connection, open or
// new, without closing any.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.frozen {
		p.frozen = true
		p.thawed = make(chan struct{})
	}
}

// FreezeReplies stops forwarding what the server sends, on every
// connection, open or new, without closing any; the server still gets
// everything the broker sends.
func (p *Proxy) FreezeReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.replies {
		p.replies = true
		p.repliesThawed = make(chan struct{})
	}
}

// Thaw resumes forwarding after Freeze or FreezeReplies.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.thawLocked()
}

func (p *Proxy) thawLocked() {
	if p.frozen {
		p.frozen = false
		close(p.thawed)
	}
	if p.replies {
		p.replies = false
		close(p.repliesThawed)
	}
}

// Cut closes every connection and resets new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.closeConnsLocked()
}

// Restore accepts and forwards connections again after Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.ln.Close()
	p.closeConnsLocked()
	p.thawLocked()
}

func (p *Proxy) closeConnsLocked() {
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as from a server that went away
		}
		c.Close()
	}
	clear(p.conns)
}

// admit registers c unless the proxy is cut or closed, in which case it
// resets c.
func (p *Proxy) admit(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut || p.closed {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

// gate returns a channel that is closed once the proxy is not frozen, and,
// for what the server sends (reply), once replies are not frozen either.
func (p *Proxy) gate(reply bool) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if reply && !p.frozen && p.replies {
		return p.repliesThawed
	}
	return p.thawed
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		if !p.admit(c) {
			continue
		}
		go p.handle(c)
	}
}

func (p *Proxy) handle(c net.Conn) {
	defer p.forget(c)
	defer c.Close()
	// A frozen server's kernel accepts the connection, but nothing answers.
	<-p.gate(false)
	b, err := net.Dial("tcp", p.backend)
	if err != nil {
		return
	}
	if !p.admit(b) {
		return
	}
	defer p.forget(b)
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(b, c, false); done <- struct{}{} }()
	go func() { p.pipe(c, b, true); done <- struct{}{} }()
	<-done
	// One side ended: end the other (the closes above run on return).
}

// pipe copies src to dst chunk by chunk, holding each chunk while the proxy
// is frozen (so TCP flow control backs the sender up, as with a stopped
// process), or, for what the server sends (reply), while replies are.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate(reply)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err == io.EOF {
				// Hold the end of stream too while frozen.
				<-p.gate(reply)
			}
			return
		}
	}
}
