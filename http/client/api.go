package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// GetJSON sends GET path?query (no query when empty) and decodes a 2xx
// answer into v, as ReadJSON does.
func (c *Client) GetJSON(ctx context.Context, path string, query url.Values, v any) error {
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	return c.SendJSON(ctx, http.MethodGet, path, nil, v)
}

// SendJSON sends method to path with body encoded as JSON (nil: no body)
// and decodes a 2xx answer into v, as ReadJSON does.
func (c *Client) SendJSON(ctx context.Context, method, path string, body, v any) error {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return err
		}
	}
	return c.Do(ctx, method, path, b, func(status int, _ Header, answer []byte) error {
		return ReadJSON(method, path, status, answer, v)
	})
}

// ReadJSON is the JSON helpers' reading of an answer, for a caller of Do
// that wants the same: a status outside 2xx is an *APIError; else the body
// is decoded into v (nil: not decoded), and a body that does not decode is
// an *UnreachableError (whatever answered does not speak the API).
func ReadJSON(method, path string, status int, body []byte, v any) error {
	if status < 200 || status > 299 {
		return NewAPIError(method, path, status, body)
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &UnreachableError{Method: method, Path: path, Err: fmt.Errorf("the answer is not the API's JSON: %w", err)}
	}
	return nil
}

// errorText returns the text of Queen's error answer {"error": "..."}, ""
// when body is not one.
func errorText(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error
}

// Health checks GET /health: nil when it answers 2xx.
func (c *Client) Health(ctx context.Context) error {
	return c.SendJSON(ctx, http.MethodGet, "/health", nil, nil)
}

// Configure sets a queue's options with POST /api/v1/configure (docs/api.md
// "POST /api/v1/configure"), creating the queue if needed. It is a full replace: options left
// out take their defaults, so options must hold every option wanted.
func (c *Client) Configure(ctx context.Context, queue string, options map[string]any) error {
	return c.SendJSON(ctx, http.MethodPost, "/api/v1/configure", map[string]any{"queue": queue, "options": options}, nil)
}

// DeleteQueue removes a queue and all its data (docs/api-admin.md "Resources"). A queue that
// is not there (404) is no error: it is gone either way.
func (c *Client) DeleteQueue(ctx context.Context, queue string) error {
	path := "/api/v1/resources/queues/" + url.PathEscape(queue)
	return c.Do(ctx, http.MethodDelete, path, nil, func(status int, _ Header, body []byte) error {
		if status == http.StatusNotFound {
			return nil
		}
		return ReadJSON(http.MethodDelete, path, status, body, nil)
	})
}

// Push sends a push body (docs/api.md "POST /api/v1/push"), such as AppendPushBody builds, with
// POST /api/v1/push, and hands the answer's body (the per-item results) to
// read, which must not keep it (nil: not read). The broker answers 201; the
// reference server's 200 is accepted too. Any other status is an
// *APIError.
func (c *Client) Push(ctx context.Context, body []byte, read func(answer []byte) error) error {
	return c.post(ctx, "/api/v1/push", body, read)
}

// AckBatch sends a batch ack body (docs/api.md "POST /api/v1/ack/batch"), such as AppendAckBody
// builds, with POST /api/v1/ack/batch, and hands the answer's body (one
// result per ack) to read as Push does. 200 and 201 are accepted.
func (c *Client) AckBatch(ctx context.Context, body []byte, read func(answer []byte) error) error {
	return c.post(ctx, "/api/v1/ack/batch", body, read)
}

// post sends body to path and hands a 200 or 201 answer's body to read.
func (c *Client) post(ctx context.Context, path string, body []byte, read func(answer []byte) error) error {
	return c.Do(ctx, http.MethodPost, path, body, func(status int, _ Header, answer []byte) error {
		if status != http.StatusCreated && status != http.StatusOK {
			return NewAPIError(http.MethodPost, path, status, answer)
		}
		if read == nil {
			return nil
		}
		return read(answer)
	})
}

// PopMargin is added to a long poll's own timeout for its HTTP deadline,
// as the Queen SDKs do (timeout + 5000 ms): the broker answers an empty
// poll at its timeout, and the answer needs time to arrive.
const PopMargin = 5 * time.Second

// PopQuery holds the parameters of a pop (docs/api.md, docs/pop-routes.md). Its
// zero value leaves every parameter to the broker's defaults.
type PopQuery struct {
	// Partition, when not empty, pops from that partition only (the
	// partition route); else from any partition of the queue.
	Partition string
	// ConsumerGroup names the group; empty is queue mode (the parameter is
	// left out).
	ConsumerGroup string
	// Batch is the most messages to claim; 0 leaves it out.
	Batch int
	// Partitions is the queue route's cap on the partitions one pop claims
	// from: 0 leaves it out (the broker's default, one); NoPartitionCap (or
	// any negative value) claims from any number, sent as partitions=0.
	Partitions int
	// Wait asks for a long poll: the broker holds an empty pop until a
	// message arrives or Timeout passes.
	Wait bool
	// Timeout is the long poll's deadline, sent in milliseconds; 0 leaves
	// it out (the broker's default, which the client's own timeout must
	// then cover). With Wait and a Timeout, the request is bounded by
	// Timeout + PopMargin instead of the client's timeout.
	Timeout time.Duration
}

// NoPartitionCap is PopQuery.Partitions for a pop that may claim from any
// number of partitions.
const NoPartitionCap = -1

// Pop claims messages of queue with GET /api/v1/pop/queue/... and hands
// the body of an answer with messages to read, which must not keep it. An
// empty answer (204, or the reference server's empty 200) does not call
// read. Any other status is an *APIError.
func (c *Client) Pop(ctx context.Context, queue string, q PopQuery, read func(answer []byte) error) error {
	var buf [256]byte
	p := append(buf[:0], "/api/v1/pop/queue/"...)
	p = append(p, url.PathEscape(queue)...)
	if q.Partition != "" {
		p = append(p, "/partition/"...)
		p = append(p, url.PathEscape(q.Partition)...)
	}
	sep := byte('?')
	param := func(name string) {
		p = append(append(p, sep), name...)
		p = append(p, '=')
		sep = '&'
	}
	if q.Batch != 0 {
		param("batch")
		p = strconv.AppendInt(p, int64(q.Batch), 10)
	}
	if q.Partitions != 0 && q.Partition == "" {
		param("partitions")
		p = strconv.AppendInt(p, int64(max(q.Partitions, 0)), 10)
	}
	timeout := c.timeout
	if q.Wait {
		param("wait")
		p = append(p, "true"...)
		if q.Timeout > 0 {
			param("timeout")
			p = strconv.AppendInt(p, q.Timeout.Milliseconds(), 10)
			timeout = q.Timeout + PopMargin
		}
	}
	if q.ConsumerGroup != "" {
		param("consumerGroup")
		p = append(p, url.QueryEscape(q.ConsumerGroup)...)
	}
	path := string(p)
	return c.do(ctx, http.MethodGet, path, nil, timeout, func(status int, _ Header, answer []byte) error {
		switch {
		case status == http.StatusNoContent:
			return nil
		case status != http.StatusOK:
			return NewAPIError(http.MethodGet, path, status, answer)
		case len(bytes.TrimSpace(answer)) == 0 || read == nil:
			return nil
		}
		return read(answer)
	})
}
