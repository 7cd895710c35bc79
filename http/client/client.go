// Package client is a Go client of queengo's HTTP API (docs/api.md), which
// is the Queen MQ protocol, so it drives any Queen-compatible server. It
// imports no broker package: the operator's command line, the load
// generator in bench/ (a module of its own) and tests share it without
// sharing the broker's code or types.
//
// It runs on fasthttp's HostClient, because the load generator shares a
// small machine with the broker and PostgreSQL and net/http allocates far
// more per request. Do is the raw door: any method and path, the answer's
// status, header and body handed to a callback while the response buffer
// is valid, so a hot path decodes it without a copy. The helpers above it
// (GetJSON, SendJSON, Health, Configure, DeleteQueue, Push, Pop, AckBatch)
// judge the status for the caller and report failures as *APIError (the
// broker answered outside what was asked) or *UnreachableError (no usable
// answer), to be told apart with errors.As.
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpproxy"
)

// TimeoutDefault bounds each request of a client made without Timeout.
const TimeoutDefault = 30 * time.Second

// UserAgentDefault is the User-Agent of a client made without UserAgent.
const UserAgentDefault = "queengo-client"

// idleConnMax is how long an idle keep-alive connection is kept: below the
// broker's own idle timeout (2 minutes), so the client closes it first
// rather than send a request on a connection the broker is closing.
const idleConnMax = 90 * time.Second

// connWaitMax bounds the wait for a free connection when every one of
// MaxConns is busy. Each request's own timeout bounds it first; this only
// matters to a client without a timeout.
const connWaitMax = time.Hour

// proxyDialTimeout bounds the connection to a proxy and its tunnel, as
// fasthttp bounds a direct dial (3 s).
const proxyDialTimeout = 3 * time.Second

// Client sends requests to one broker over a pool of keep-alive
// connections. It is safe for concurrent use; WithTimeout and WithToken
// return clients that share its connections.
type Client struct {
	hc      *fasthttp.HostClient
	base    string        // scheme://host:port and the base URL's path, without a trailing '/'
	auth    string        // the Authorization header, "" for none
	timeout time.Duration // bound of each request; 0: none
}

type config struct {
	maxConns  int
	timeout   time.Duration
	token     string
	userAgent string
	envProxy  bool
}

// An Option configures a client made by New.
type Option func(*config)

// MaxConns sets how many connections the client opens at most, which is
// how many requests it has in flight at once; a request beyond them waits
// for a free connection within its timeout. 0 or less (the default):
// fasthttp's default, 512.
func MaxConns(n int) Option { return func(c *config) { c.maxConns = n } }

// Timeout bounds each request from its start to the end of the answer's
// body: waiting for a free connection, connecting and sending included. 0
// or less: no bound. The default is TimeoutDefault.
func Timeout(d time.Duration) Option { return func(c *config) { c.timeout = max(d, 0) } }

// Token sends token as a bearer token (Authorization: Bearer <token>) with
// every request, for a broker with JWT_ENABLED. "" (the default) sends no
// Authorization header.
func Token(token string) Option { return func(c *config) { c.token = token } }

// UserAgent sets the User-Agent header of every request; the default is
// UserAgentDefault.
func UserAgent(ua string) Option { return func(c *config) { c.userAgent = ua } }

// EnvProxy sends the requests through the proxy that HTTP_PROXY,
// HTTPS_PROXY and NO_PROXY name, as net/http's clients do (loopback hosts
// are never proxied); without them, or for a host NO_PROXY lists, it dials
// the broker. The proxy is a tunnel (HTTP CONNECT).
func EnvProxy() Option { return func(c *config) { c.envProxy = true } }

// New returns a client of the broker at baseURL: http:// or https://, a
// host, an optional port (80 or 443 when left out) and an optional path
// that every request's path is put under (a broker behind a proxy at
// /queen). It opens no connection yet.
func New(baseURL string, opts ...Option) (*Client, error) {
	cfg := config{timeout: TimeoutDefault, userAgent: UserAgentDefault}
	for _, o := range opts {
		o(&cfg)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, err
	}
	port := ""
	switch u.Scheme {
	case "http":
		port = "80"
	case "https":
		port = "443"
	default:
		return nil, fmt.Errorf("%q: the scheme must be http or https", baseURL)
	}
	switch {
	case u.Hostname() == "":
		return nil, fmt.Errorf("%q: no host", baseURL)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q: a base URL takes no user, query or fragment", baseURL)
	}
	if u.Port() != "" {
		port = u.Port()
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	c := &Client{
		hc: &fasthttp.HostClient{
			Addr:                addr,
			IsTLS:               u.Scheme == "https",
			Name:                cfg.userAgent,
			MaxConns:            cfg.maxConns,
			MaxConnWaitTimeout:  connWaitMax,
			MaxIdleConnDuration: idleConnMax,
			// A failed request is the caller's to see (the load generator
			// counts it), never retried behind its back.
			MaxIdemponentCallAttempts: 1,
			// Paths go out as the caller escaped them: a queue name's %2F
			// must not become a '/'.
			DisablePathNormalizing: true,
			DialDualStack:          true,
			ReadBufferSize:         64 << 10,
			WriteBufferSize:        64 << 10,
			MaxResponseBodySize:    256 << 20,
		},
		base:    u.Scheme + "://" + addr + strings.TrimRight(u.EscapedPath(), "/"),
		timeout: cfg.timeout,
	}
	if cfg.token != "" {
		c.auth = "Bearer " + cfg.token
	}
	if cfg.envProxy {
		c.hc.Dial = fasthttpproxy.FasthttpProxyHTTPDialerTimeout(proxyDialTimeout)
	}
	return c, nil
}

// Addr returns the host:port the client connects to.
func (c *Client) Addr() string { return c.hc.Addr }

// WithTimeout returns a client that shares c's connections and token and
// bounds each request by d instead (0 or less: no bound).
func (c *Client) WithTimeout(d time.Duration) *Client {
	cp := *c
	cp.timeout = max(d, 0)
	return &cp
}

// WithToken returns a client that shares c's connections and timeout and
// sends token as its bearer token instead ("": no Authorization header).
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.auth = ""
	if token != "" {
		cp.auth = "Bearer " + token
	}
	return &cp
}

// Header is the header of an answer. Like the body, it is the client's
// buffer: it may be read only while the ReadFunc it was handed to runs.
type Header struct{ h *fasthttp.ResponseHeader }

// Get returns the value of the header name (case-insensitive), "" when the
// answer has none.
func (h Header) Get(name string) string { return string(h.h.Peek(name)) }

// Clone returns a copy of every header, which outlives the ReadFunc.
func (h Header) Clone() http.Header {
	out := http.Header{}
	for k, v := range h.h.All() {
		out.Add(string(k), string(v))
	}
	return out
}

// ReadFunc reads an answer: its status, header and body. The header and
// the body are the client's buffers, valid only until the ReadFunc
// returns: it must copy what it keeps.
type ReadFunc func(status int, h Header, body []byte) error

// Do sends method to path with body and hands the answer to read, whatever
// its status; it returns read's error as it is (a nil read ignores the
// answer). path is the request's path and query, escaped, beginning with
// '/'; the base URL's path goes before it. A non-nil body is sent as it is,
// with Content-Type application/json.
//
// The request is bounded by the client's timeout and by ctx's deadline,
// whichever comes first. Without an answer Do returns *UnreachableError,
// or ctx's error (wrapped: errors.Is finds context.Canceled or
// context.DeadlineExceeded) when ctx ended first. A ctx that can be
// cancelled costs a goroutine per request and a copy of the body, and its
// cancel returns Do at once: the request itself runs on, on its
// connection, until answered or timed out. A ctx that cannot
// (context.Background) costs neither.
func (c *Client) Do(ctx context.Context, method, path string, body []byte, read ReadFunc) error {
	return c.do(ctx, method, path, body, c.timeout, read)
}

// do is Do with the request's own bound (0: none).
func (c *Client) do(ctx context.Context, method, path string, body []byte, timeout time.Duration, read ReadFunc) error {
	ctxBound := false // ctx's deadline comes first: its timeout is ctx's
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline); timeout <= 0 || left < timeout {
			timeout, ctxBound = left, true
		}
	}
	if ctxBound && timeout <= 0 {
		return fmt.Errorf("%s %s: %w", method, path, context.DeadlineExceeded)
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	// An answer without a Content-Type shows none, not fasthttp's default.
	resp.Header.SetNoDefaultContentType(true)
	var uri [256]byte
	req.SetRequestURIBytes(append(append(uri[:0], c.base...), path...))
	req.Header.SetMethod(method)
	if c.auth != "" {
		req.Header.Set(fasthttp.HeaderAuthorization, c.auth)
	}
	if body != nil {
		req.Header.SetContentType("application/json")
	}
	var err error
	if ctx.Done() == nil {
		req.SetBodyRaw(body)
		err = c.send(req, resp, timeout)
	} else {
		var abandoned bool
		if abandoned, err = c.sendCancellable(ctx, req, resp, body, timeout); abandoned {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	if err != nil {
		timedOut := errors.Is(err, fasthttp.ErrTimeout)
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		case timedOut && ctxBound:
			return fmt.Errorf("%s %s: %w", method, path, context.DeadlineExceeded)
		case timedOut:
			err = fmt.Errorf("no answer within %v: %w", timeout, err)
		}
		return &UnreachableError{Method: method, Path: path, Err: err}
	}
	if read == nil {
		return nil
	}
	return read(resp.StatusCode(), Header{&resp.Header}, resp.Body())
}

// send performs req within timeout (0 or less: no bound).
func (c *Client) send(req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) error {
	if timeout <= 0 {
		return c.hc.Do(req, resp)
	}
	return c.hc.DoTimeout(req, resp, timeout)
}

// sendCancellable performs req on a goroutine of its own so that ctx's
// end returns at once; the body is copied, since the request may outlive
// the call. When ctx ends first it returns abandoned and ctx's error: req
// and resp then belong to the goroutine and are left to the garbage
// collector, not given back to their pools.
func (c *Client) sendCancellable(ctx context.Context, req *fasthttp.Request, resp *fasthttp.Response, body []byte,
	timeout time.Duration) (abandoned bool, err error) {
	if err := ctx.Err(); err != nil {
		return true, err
	}
	req.SetBody(body)
	done := make(chan error, 1)
	go func() { done <- c.send(req, resp, timeout) }()
	select {
	case err := <-done:
		return false, err
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// APIError is an answer the caller did not ask for: a status outside 2xx
// (or outside what a helper accepts), with the broker's reason.
type APIError struct {
	Method, Path string
	Status       int
	// Message is the text of Queen's {"error": "..."} answer, or the body
	// itself, trimmed, when it is not that.
	Message string
	Body    []byte // the answer's body, a copy
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
}

// NewAPIError builds the *APIError of an answer with status and body, for
// a caller of Do that did not expect it. body is copied.
func NewAPIError(method, path string, status int, body []byte) *APIError {
	e := &APIError{Method: method, Path: path, Status: status, Body: append([]byte(nil), body...)}
	e.Message = strings.TrimSpace(string(body))
	if msg := errorText(body); msg != "" {
		e.Message = msg
	}
	return e
}

// UnreachableError is a request that got no usable answer: the connection
// was refused or reset, no answer came within the timeout, the answer was
// not HTTP, or (for the JSON helpers) a 2xx answer was not the JSON asked
// for. Err is the cause; the transport's are fasthttp's errors
// (fasthttp.ErrTimeout, fasthttp.ErrNoFreeConns,
// fasthttp.ErrConnectionClosed) or the dialler's.
type UnreachableError struct {
	Method, Path string
	Err          error
}

func (e *UnreachableError) Error() string {
	return "broker unreachable: " + e.Method + " " + e.Path + ": " + e.Err.Error()
}

func (e *UnreachableError) Unwrap() error { return e.Err }
