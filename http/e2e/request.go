package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Client is shared by the tests; long polls set their own deadlines.
var Client = &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0}}

// Response is a finished HTTP exchange.
type Response struct {
	Status  int
	Header  http.Header
	Body    []byte
	Elapsed time.Duration // from sending the request to the end of the body
}

// JSON decodes the body into v, failing the test when it is not JSON.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("response %d is not JSON (%v): %q", r.Status, err, r.Body)
	}
}

// WithTimeout returns the server with every request, raw exchanges
// included, bounded by d: a request not answered within d fails (Do) or
// returns an error (DoCtx).
func (s *Server) WithTimeout(d time.Duration) *Server {
	c := *s
	c.timeout = d
	return &c
}

// WithClient returns the server with its requests sent by c rather than
// Client.
func (s *Server) WithClient(c *http.Client) *Server {
	cp := *s
	cp.client = c
	return &cp
}

// Do sends a request; body is marshalled unless it is a string or []byte. A
// request that gets no answer fails the test.
func (s *Server) Do(t testing.TB, method, path string, body any) *Response {
	t.Helper()
	start := time.Now()
	r, err := s.DoCtx(context.Background(), method, path, body)
	if err != nil {
		t.Fatalf("%s %s: no answer after %v: %v", method, path, time.Since(start).Round(time.Millisecond), err)
	}
	return r
}

// DoCtx is Do without a test, for goroutines; it returns the error.
func (s *Server) DoCtx(ctx context.Context, method, path string, body any) (*Response, error) {
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := s.client
	if c == nil {
		c = Client
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: data, Elapsed: time.Since(start)}, nil
}

// Get sends a GET.
func (s *Server) Get(t testing.TB, path string) *Response {
	t.Helper()
	return s.Do(t, "GET", path, nil)
}

// Post sends a JSON body.
func (s *Server) Post(t testing.TB, path string, body any) *Response {
	t.Helper()
	return s.Do(t, "POST", path, body)
}

// RefreshStats drops the broker's shared broker-wide figures (POST
// /api/v1/stats/refresh), so the next overview, namespace, task, /status or
// consumer-group list read computes them anew and shows everything the test
// did before: otherwise a read within 5 s of another answers what that one
// computed.
func (s *Server) RefreshStats(t testing.TB) {
	t.Helper()
	if err := s.API().SendJSON(context.Background(), "POST", "/api/v1/stats/refresh", nil, nil); err != nil {
		t.Fatalf("POST /api/v1/stats/refresh: %v", err)
	}
}

// Delete sends a DELETE.
func (s *Server) Delete(t testing.TB, path string) *Response {
	t.Helper()
	return s.Do(t, "DELETE", path, nil)
}

// Dial opens a TCP connection to the broker, closed at the end of the test.
func (s *Server) Dial(t testing.TB) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Raw sends req as it is on a connection of its own and reads one answer:
// for what net/http will not send (oversized headers, bad framing, a path
// beginning with //). The writer runs beside the reader, so an answer sent
// before the server read the whole request is still seen. The exchange is
// bounded as the server's requests are (WithTimeout, else Client's timeout).
func (s *Server) Raw(t testing.TB, req []byte) *Response {
	t.Helper()
	c := s.Dial(t)
	defer c.Close()
	d := s.timeout
	if d == 0 {
		d = Client.Timeout
	}
	_ = c.SetDeadline(time.Now().Add(d))
	start := time.Now()
	go func() { _, _ = c.Write(req) }()
	method, _, _ := strings.Cut(string(req[:min(len(req), 16)]), " ")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", clip(req), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body of a %d: %v", resp.StatusCode, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body, Elapsed: time.Since(start)}
}

// Query builds "?k1=v1&k2=v2" from key/value pairs, escaped; no pairs is "".
func Query(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(pairs[i]))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(pairs[i+1]))
	}
	return b.String()
}

var uniq atomic.Int64

// Unique returns a queue-safe name unique within the test run.
func Unique(t testing.TB, prefix string) string {
	t.Helper()
	return unique(prefix)
}

// TxID returns a transaction id unique within the test run.
func TxID(prefix string) string { return unique(prefix) }

func unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), uniq.Add(1))
}

// CheckError reports what is wrong with r as an error answer: the status,
// Content-Type application/json and a body that is a JSON object whose
// "error" is a non-empty string. When contains is not empty the text must
// contain it, compared case-insensitively (the text may begin a sentence
// with the field it names). It returns the error text.
func CheckError(r *Response, status int, contains string) (string, error) {
	if r.Status != status {
		return "", fmt.Errorf("status %d, want %d: %q", r.Status, status, clip(r.Body))
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return "", fmt.Errorf("%d with Content-Type %q, want application/json: %q", r.Status, ct, clip(r.Body))
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return "", fmt.Errorf("%d body is not a JSON object (%v): %q", r.Status, err, clip(r.Body))
	}
	var msg string
	if raw, ok := body["error"]; !ok || json.Unmarshal(raw, &msg) != nil || msg == "" {
		return "", fmt.Errorf(`%d body has no non-empty string field "error": %s`, r.Status, clip(r.Body))
	}
	if contains != "" && !strings.Contains(strings.ToLower(msg), strings.ToLower(contains)) {
		return msg, fmt.Errorf("%d error %q does not name %q", r.Status, msg, contains)
	}
	return msg, nil
}

// WantError is CheckError failing the test.
func WantError(t testing.TB, r *Response, status int, contains string) string {
	t.Helper()
	msg, err := CheckError(r, status, contains)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// WantErrorBody is WantError for the plain error answer, whose body is
// exactly {"error": text}; it returns the text.
func WantErrorBody(t testing.TB, r *Response, status int) string {
	t.Helper()
	msg := WantError(t, r, status, "")
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil || len(body) != 1 {
		t.Fatalf(`%d body %s, want exactly {"error":"..."}`, r.Status, r.Body)
	}
	return msg
}

// Eventually calls cond every interval until it returns nil or d has passed,
// and returns cond's last error.
func Eventually(d, interval time.Duration, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}

// clip shortens a body for a failure message.
func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
