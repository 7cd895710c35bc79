package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// client speaks the broker's HTTP API. The standard library's client is
// enough here: one request at a time, no hot path.
type client struct {
	base  string
	token string
	http  *http.Client
}

func newClient(base, token string, timeout time.Duration) *client {
	return &client{base: strings.TrimRight(base, "/"), token: token, http: &http.Client{Timeout: timeout}}
}

// apiError is an answer outside 2xx: the status and the server's
// {"error": ...} text (the body itself when it is not that).
type apiError struct {
	Method, Path string
	Status       int
	Message      string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Message)
}

// unreachableError is a request that got no answer: refused, reset, timed
// out, or an answer that is not HTTP.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return "broker unreachable: " + e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// do sends a request with an optional JSON body and returns the headers and
// body of a 2xx answer; any other status is an *apiError.
func (c *client) do(ctx context.Context, method, path string, body any) (http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, nil, usageError{err} // a --url that is not a URL
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, errInterrupted
		}
		var ue *url.Error
		if errors.As(err, &ue) && ue.Err != nil {
			err = ue.Err
		}
		return nil, nil, &unreachableError{fmt.Errorf("%s %s: %w", method, path, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, &unreachableError{fmt.Errorf("%s %s: reading the answer: %w", method, path, err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := strings.TrimSpace(string(b))
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return nil, nil, &apiError{Method: method, Path: path, Status: resp.StatusCode, Message: msg}
	}
	return resp.Header, b, nil
}

// get decodes the answer of a GET into v.
func (c *client) get(ctx context.Context, path string, q url.Values, v any) error {
	_, err := c.getHeader(ctx, path, q, v)
	return err
}

// getHeader is get that also returns the answer's headers.
func (c *client) getHeader(ctx context.Context, path string, q url.Values, v any) (http.Header, error) {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	h, b, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return h, decode(http.MethodGet, path, b, v)
}

// send sends method with body and decodes the answer into v.
func (c *client) send(ctx context.Context, method, path string, body, v any) error {
	_, b, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	return decode(method, path, b, v)
}

func decode(method, path string, b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return &unreachableError{fmt.Errorf("%s %s: the answer is not the API's JSON: %w", method, path, err)}
	}
	return nil
}

// seg percent-encodes one path segment: names may hold '/', '?' and
// spaces (docs/api.md conventions).
func seg(s string) string { return url.PathEscape(s) }

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }
