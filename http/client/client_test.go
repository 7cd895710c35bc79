package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// seen is one request as the fake broker received it.
type seen struct {
	method, uri, contentType, auth, userAgent string
	body                                      string
}

// fake is a broker stand-in: it records each request and answers with
// handle.
type fake struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newFake(t *testing.T, handle http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{method: r.Method, uri: r.RequestURI, contentType: r.Header.Get("Content-Type"),
			auth: r.Header.Get("Authorization"), userAgent: r.UserAgent(), body: string(b)})
		f.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// last returns the last request received.
func (f *fake) last(t *testing.T) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("no request received")
	}
	return f.reqs[len(f.reqs)-1]
}

func newClient(t *testing.T, base string, opts ...Option) *Client {
	t.Helper()
	c, err := New(base, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestDo_SendsAndHandsTheAnswer: the request goes out as given (method,
// escaped path under the base path, body, JSON content type, token, user
// agent), and read gets the answer's status, headers and body.
func TestDo_SendsAndHandsTheAnswer(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Queen", "yes")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"got":"it"}`))
	})
	c := newClient(t, f.URL+"/queen/", Token("tok"), UserAgent("tester"))
	const path = "/api/v1/resources/queues/a%2Fb%3Fc%20d?x=%2F"
	var status int
	var body, ct, custom, date string
	var all http.Header
	err := c.Do(context.Background(), http.MethodPut, path, []byte(`{"a":1}`), func(st int, h Header, b []byte) error {
		status, body, ct, custom, date, all = st, string(b), h.Get("content-type"), h.Get("X-Queen"), h.Get("Date"), h.Clone()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusAccepted || body != `{"got":"it"}` || ct != "application/json" || custom != "yes" || date == "" {
		t.Errorf("answer: %d %q content-type %q X-Queen %q Date %q", status, body, ct, custom, date)
	}
	if all.Get("X-Queen") != "yes" || all.Get("Content-Type") != "application/json" || all.Get("Content-Length") != "12" {
		t.Errorf("cloned header: %v", all)
	}
	r := f.last(t)
	want := seen{method: http.MethodPut, uri: "/queen" + path, contentType: "application/json", auth: "Bearer tok",
		userAgent: "tester", body: `{"a":1}`}
	if r != want {
		t.Errorf("request:\n got %+v\nwant %+v", r, want)
	}

	// No body: no Content-Type; WithToken("") sends no Authorization.
	if err := c.WithToken("").Do(context.Background(), http.MethodGet, "/health", nil, nil); err != nil {
		t.Fatal(err)
	}
	if r := f.last(t); r.contentType != "" || r.auth != "" || r.uri != "/queen/health" || r.userAgent != "tester" {
		t.Errorf("request without body or token: %+v", r)
	}
}

// TestDo_ReadErrorIsReturned: Do returns read's error as it is, and a 4xx
// is an answer like any other.
func TestDo_ReadErrorIsReturned(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	c := newClient(t, f.URL)
	mine := errors.New("mine")
	err := c.Do(context.Background(), http.MethodGet, "/x", nil, func(st int, _ Header, _ []byte) error {
		if st != http.StatusTeapot {
			t.Errorf("status %d", st)
		}
		return mine
	})
	if err != mine {
		t.Fatalf("err = %v, want read's", err)
	}
}

// TestDo_AnswerWithoutContentType shows no Content-Type (not fasthttp's
// default text/plain).
func TestDo_AnswerWithoutContentType(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // net/http would sniff one
		w.WriteHeader(http.StatusNoContent)
	})
	c := newClient(t, f.URL)
	err := c.Do(context.Background(), http.MethodGet, "/x", nil, func(st int, h Header, b []byte) error {
		if st != http.StatusNoContent || h.Get("Content-Type") != "" || len(b) != 0 {
			t.Errorf("%d content-type %q body %q", st, h.Get("Content-Type"), b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDo_BodyIsTheAnswer: each concurrent caller's read gets its own
// answer's body, whole, on a client with fewer connections than callers.
func TestDo_BodyIsTheAnswer(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		_, _ = w.Write([]byte(strings.Repeat(r.URL.Query().Get("n")+",", n*10)))
	})
	c := newClient(t, f.URL, MaxConns(3))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				n := strconv.Itoa(g*100 + i)
				want := strings.Repeat(n+",", (g*100+i)*10)
				err := c.Do(context.Background(), http.MethodGet, "/b?n="+n, nil, func(_ int, _ Header, b []byte) error {
					if string(b) != want {
						t.Errorf("n=%s: body of %d bytes, want %d", n, len(b), len(want))
					}
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// TestJSON_StatusAndErrorMapping: a 2xx decodes; a status outside 2xx is an
// *APIError with Queen's error text (or the body); a 2xx that is not JSON,
// and a broker that is not there, are *UnreachableError.
func TestJSON_StatusAndErrorMapping(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte(`{"name":"q","n":3}`))
		case "/queen-error":
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"error":"queue is full"}`))
		case "/plain-error":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("  upstream down\n"))
		case "/not-json":
			_, _ = w.Write([]byte("<html>"))
		}
	})
	c := newClient(t, f.URL)
	ctx := context.Background()
	var v struct {
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	if err := c.GetJSON(ctx, "/ok", map[string][]string{"a b": {"c/d"}}, &v); err != nil || v.Name != "q" || v.N != 3 {
		t.Fatalf("GetJSON: %v %+v", err, v)
	}
	if r := f.last(t); r.uri != "/ok?a+b=c%2Fd" || r.method != http.MethodGet {
		t.Errorf("GetJSON sent %+v", r)
	}
	if err := c.SendJSON(ctx, http.MethodPost, "/ok", map[string]int{"x": 1}, nil); err != nil {
		t.Fatal(err)
	}
	if r := f.last(t); r.body != `{"x":1}` || r.contentType != "application/json" {
		t.Errorf("SendJSON sent %+v", r)
	}

	var ae *APIError
	err := c.SendJSON(ctx, http.MethodPost, "/queen-error", nil, &v)
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Message != "queue is full" ||
		string(ae.Body) != `{"error":"queue is full"}` || ae.Method != http.MethodPost || ae.Path != "/queen-error" {
		t.Fatalf("409: %v %+v", err, ae)
	}
	if err.Error() != "POST /queen-error: 409 queue is full" {
		t.Errorf("409 reads %q", err)
	}
	if err := c.GetJSON(ctx, "/plain-error", nil, &v); !errors.As(err, &ae) || ae.Status != 502 || ae.Message != "upstream down" {
		t.Fatalf("502: %v %+v", err, ae)
	}
	var ue *UnreachableError
	if err := c.GetJSON(ctx, "/not-json", nil, &v); !errors.As(err, &ue) || !strings.Contains(err.Error(), "not the API's JSON") {
		t.Fatalf("not JSON: %v", err)
	}

	gone := newClient(t, "http://127.0.0.1:"+strconv.Itoa(freePort(t)))
	err = gone.Health(ctx)
	if !errors.As(err, &ue) || errors.As(err, &ae) || !strings.HasPrefix(err.Error(), "broker unreachable: GET /health: ") {
		t.Fatalf("refused: %v", err)
	}
}

// TestTimeouts: the client's timeout, WithTimeout and ctx's deadline each
// bound a request (an *UnreachableError wrapping fasthttp.ErrTimeout, or
// ctx's error); a cancelled ctx returns at once; a long poll gets its own
// timeout plus PopMargin.
func TestTimeouts(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		d, _ := time.ParseDuration(r.URL.Query().Get("sleep"))
		if strings.HasPrefix(r.URL.Path, "/api/v1/pop/") {
			d = 500 * time.Millisecond
		}
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	})
	ctx := context.Background()
	c := newClient(t, f.URL, Timeout(100*time.Millisecond))
	var ue *UnreachableError

	start := time.Now()
	err := c.Do(ctx, http.MethodGet, "/?sleep=1s", nil, nil)
	if !errors.As(err, &ue) || !errors.Is(err, fasthttp.ErrTimeout) || time.Since(start) > time.Second {
		t.Fatalf("client timeout: %v after %v", err, time.Since(start))
	}
	if err := c.WithTimeout(2*time.Second).Do(ctx, http.MethodGet, "/?sleep=200ms", nil, nil); err != nil {
		t.Fatalf("WithTimeout(2s): %v", err)
	}
	if err := c.WithTimeout(0).Do(ctx, http.MethodGet, "/?sleep=200ms", nil, nil); err != nil {
		t.Fatalf("WithTimeout(0), no bound: %v", err)
	}

	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	err = c.WithTimeout(5*time.Second).Do(dctx, http.MethodGet, "/?sleep=1s", nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ue) || time.Since(start) > time.Second {
		t.Fatalf("ctx deadline: %v after %v", err, time.Since(start))
	}

	past, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if err := c.WithTimeout(0).Do(past, http.MethodGet, "/", nil, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a deadline already past: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	err = c.WithTimeout(5*time.Second).Do(cctx, http.MethodPost, "/?sleep=1s", []byte(`{}`), func(int, Header, []byte) error {
		t.Error("read called after a cancel")
		return nil
	})
	if !errors.Is(err, context.Canceled) || errors.As(err, &ue) || time.Since(start) > time.Second {
		t.Fatalf("cancel: %v after %v", err, time.Since(start))
	}

	// The fake answers a pop after 500 ms: past the client's 100 ms, within
	// the long poll's 300 ms + PopMargin.
	if err := c.Pop(ctx, "q", PopQuery{Wait: true, Timeout: 300 * time.Millisecond}, nil); err != nil {
		t.Fatalf("long poll: %v", err)
	}
	if err := c.Pop(ctx, "q", PopQuery{Timeout: 300 * time.Millisecond}, nil); !errors.Is(err, fasthttp.ErrTimeout) {
		t.Fatalf("a pop without wait is bounded by the client's timeout: %v", err)
	}
}

// TestPop_QueryAndAnswers: the query carries what PopQuery says and no
// more; 204 and an empty 200 do not call read; a 200 hands its body.
func TestPop_QueryAndAnswers(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("consumerGroup") {
		case "none":
			w.WriteHeader(http.StatusNoContent)
		case "empty":
			_, _ = w.Write([]byte(" \n"))
		case "bad":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"batch must be 1..10000"}`))
		default:
			_, _ = w.Write([]byte(`{"messages":[]}`))
		}
	})
	c := newClient(t, f.URL)
	ctx := context.Background()
	for _, tc := range []struct {
		q    PopQuery
		want string
	}{
		{PopQuery{}, "/api/v1/pop/queue/a%2Fb"},
		{PopQuery{Batch: 5, Partitions: 3, Wait: true, Timeout: 1500 * time.Millisecond, ConsumerGroup: "g 1&"},
			"/api/v1/pop/queue/a%2Fb?batch=5&partitions=3&wait=true&timeout=1500&consumerGroup=g+1%26"},
		{PopQuery{Partitions: NoPartitionCap, Wait: true}, "/api/v1/pop/queue/a%2Fb?partitions=0&wait=true"},
		{PopQuery{Partition: "p/0", Partitions: 4, Batch: 1}, "/api/v1/pop/queue/a%2Fb/partition/p%2F0?batch=1"},
	} {
		var got string
		if err := c.Pop(ctx, "a/b", tc.q, func(b []byte) error { got = string(b); return nil }); err != nil {
			t.Fatal(err)
		}
		if r := f.last(t); r.uri != tc.want || r.method != http.MethodGet || got != `{"messages":[]}` {
			t.Errorf("%+v: sent %s, read %q; want %s", tc.q, r.uri, got, tc.want)
		}
	}
	for _, g := range []string{"none", "empty"} {
		if err := c.Pop(ctx, "q", PopQuery{ConsumerGroup: g}, func([]byte) error {
			t.Errorf("%s: read called", g)
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
	}
	var ae *APIError
	if err := c.Pop(ctx, "q", PopQuery{ConsumerGroup: "bad"}, nil); !errors.As(err, &ae) || ae.Status != 400 ||
		ae.Message != "batch must be 1..10000" || ae.Path != "/api/v1/pop/queue/q?consumerGroup=bad" {
		t.Fatalf("400: %v", err)
	}
}

// TestPushAckConfigureDelete: the routes, what each accepts, and that
// Push and AckBatch hand the answer's body to read.
func TestPushAckConfigureDelete(t *testing.T) {
	t.Parallel()
	status := map[string]int{"/api/v1/push": 201, "/api/v1/ack/batch": 200, "/api/v1/configure": 201,
		"/api/v1/resources/queues/gone": 404, "/api/v1/resources/queues/here": 200, "/api/v1/resources/queues/locked": 409}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status[r.URL.EscapedPath()])
		_, _ = w.Write([]byte(`[{"status":"queued"}]`))
	})
	c := newClient(t, f.URL)
	ctx := context.Background()
	var got string
	read := func(b []byte) error { got = string(b); return nil }
	if err := c.Push(ctx, []byte(`{"items":[]}`), read); err != nil || got != `[{"status":"queued"}]` {
		t.Fatalf("push: %v %q", err, got)
	}
	if r := f.last(t); r.method != http.MethodPost || r.body != `{"items":[]}` {
		t.Errorf("push sent %+v", r)
	}
	got = ""
	if err := c.AckBatch(ctx, []byte(`{}`), read); err != nil || got == "" {
		t.Fatalf("ack: %v %q", err, got)
	}
	status["/api/v1/push"] = 200 // the reference server's
	if err := c.Push(ctx, []byte(`{}`), nil); err != nil {
		t.Fatalf("push answered 200: %v", err)
	}
	status["/api/v1/push"] = 202
	var ae *APIError
	if err := c.Push(ctx, []byte(`{}`), read); !errors.As(err, &ae) || ae.Status != 202 {
		t.Fatalf("push answered 202: %v", err)
	}
	if err := c.Configure(ctx, "q", map[string]any{"leaseTime": 30}); err != nil {
		t.Fatal(err)
	}
	if r := f.last(t); r.body != `{"options":{"leaseTime":30},"queue":"q"}` {
		t.Errorf("configure sent %s", r.body)
	}
	for q, ok := range map[string]bool{"gone": true, "here": true, "locked": false} {
		if err := c.DeleteQueue(ctx, q); (err == nil) != ok {
			t.Errorf("delete %s (%d): %v", q, status["/api/v1/resources/queues/"+q], err)
		}
	}
	if r := f.last(t); r.method != http.MethodDelete {
		t.Errorf("delete sent %+v", r)
	}
}

// TestNew: the base URL's forms, and what it refuses.
func TestNew(t *testing.T) {
	t.Parallel()
	for base, addr := range map[string]string{"http://h": "h:80", "https://h/x/": "h:443", "http://h:6632": "h:6632",
		"http://[::1]:6632": "[::1]:6632"} {
		c, err := New(base)
		if err != nil || c.Addr() != addr {
			t.Errorf("%s: %v, addr %v", base, err, c.Addr())
		}
	}
	for _, base := range []string{"localhost:6632", "ftp://h", "http://", "http://u:p@h", "http://h?x=1", "http://h#f", "http://[::1"} {
		if _, err := New(base); err == nil {
			t.Errorf("%s: no error", base)
		}
	}
}

// TestHTTPS: an https base URL speaks TLS (the test server's certificate
// is not trusted, so the handshake is what fails).
func TestHTTPS(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	err := newClient(t, srv.URL).Health(context.Background())
	var ue *UnreachableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("https: %v", err)
	}
}

// TestBodies: the push and ack bodies are the JSON they mean, names
// escaped, and fields left out as documented.
func TestBodies(t *testing.T) {
	t.Parallel()
	items := []PushItem{{Partition: "p0", TransactionID: []byte("r-1"), Payload: []byte(`{"a":1}`)},
		{Partition: "we\"ird\\\n\x01é", Payload: []byte(`[1,"x"]`)}, {}}
	var push struct {
		Items []map[string]any `json:"items"`
	}
	b := AppendPushBody([]byte("keep:"), "q.x", items)
	if !strings.HasPrefix(string(b), "keep:") {
		t.Fatalf("dst not appended to: %s", b)
	}
	if err := json.Unmarshal(b[len("keep:"):], &push); err != nil || len(push.Items) != 3 {
		t.Fatalf("push body %s: %v", b, err)
	}
	want := []map[string]any{{"queue": "q.x", "partition": "p0", "transactionId": "r-1", "payload": map[string]any{"a": 1.0}},
		{"queue": "q.x", "partition": "we\"ird\\\n\x01é", "payload": []any{1.0, "x"}}, {"queue": "q.x", "payload": nil}}
	for i := range want {
		if g, w := mustJSON(t, push.Items[i]), mustJSON(t, want[i]); g != w {
			t.Errorf("item %d: %s, want %s", i, g, w)
		}
	}
	var ack struct {
		Acks  []map[string]string `json:"acknowledgments"`
		Group *string             `json:"consumerGroup"`
	}
	acks := []Ack{{TransactionID: "t", PartitionID: "p", LeaseID: "l"}, {TransactionID: "u\"", PartitionID: "p"}}
	if err := json.Unmarshal(AppendAckBody(nil, "", "failed", acks), &ack); err != nil || ack.Group != nil || len(ack.Acks) != 2 ||
		ack.Acks[0]["status"] != "failed" || ack.Acks[0]["leaseId"] != "l" || ack.Acks[1]["transactionId"] != "u\"" {
		t.Fatalf("ack body: %v %+v", err, ack)
	}
	if _, ok := ack.Acks[1]["leaseId"]; ok {
		t.Errorf("empty lease id sent: %+v", ack.Acks[1])
	}
	if err := json.Unmarshal(AppendAckBody(nil, "g", "completed", nil), &ack); err != nil || ack.Group == nil || *ack.Group != "g" ||
		len(ack.Acks) != 0 {
		t.Fatalf("ack body for group g: %v %+v", err, ack)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// EnvProxy: with HTTPS_PROXY and HTTP_PROXY naming a proxy, the request
// goes through its tunnel (CONNECT to the broker's host and port), as
// net/http's clients do; the broker's name is the proxy's to resolve.
func TestEnvProxy_TunnelsThroughTheProxyTheEnvironmentNames(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	connects := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		connects <- req.Method + " " + req.Host
		// The tunnel is open; the proxy then plays the broker.
		_, _ = io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		if _, err := http.ReadRequest(r); err != nil {
			return
		}
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n"+`{"status":"healthy"}`)
	}()
	t.Setenv("HTTP_PROXY", "http://"+ln.Addr().String())
	t.Setenv("HTTPS_PROXY", "http://"+ln.Addr().String())
	t.Setenv("NO_PROXY", "")
	c, err := New("http://broker.example:6632", EnvProxy(), Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Health(context.Background()); err != nil {
		t.Fatalf("health through the proxy: %v", err)
	}
	select {
	case got := <-connects:
		if got != "CONNECT broker.example:6632" {
			t.Fatalf("the proxy got %q, want CONNECT broker.example:6632", got)
		}
	default:
		t.Fatal("the request did not go through the proxy")
	}
}
