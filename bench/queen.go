package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// QueenClient speaks the Queen MQ HTTP protocol (api.md, pop-routes.md) to
// one broker. It uses fasthttp's HostClient because the load generator
// shares a small machine with the broker and PostgreSQL: fasthttp allocates
// far less per request than net/http, so more of the CPU goes to the server
// being measured.
type QueenClient struct {
	hc      *fasthttp.HostClient
	base    string // scheme://host:port
	timeout time.Duration
}

// NewQueenClient returns a client for the broker at rawURL with room for
// maxConns concurrent requests. timeout bounds every request except long
// polls, which get their own poll timeout plus a margin.
func NewQueenClient(rawURL string, maxConns int, timeout time.Duration) (*QueenClient, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("error parsing --url: %w", err)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("error parsing --url: only http:// is supported, got %q", u.Scheme)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	return &QueenClient{
		hc: &fasthttp.HostClient{
			Addr:                      host,
			Name:                      "queengo-bench",
			MaxConns:                  maxConns + 8,
			MaxConnWaitTimeout:        timeout,
			MaxIdleConnDuration:       90 * time.Second,
			MaxIdemponentCallAttempts: 1, // a failed GET is an error to count, not to hide
			ReadBufferSize:            64 << 10,
			WriteBufferSize:           64 << 10,
			MaxResponseBodySize:       256 << 20,
		},
		base:    u.Scheme + "://" + host,
		timeout: timeout,
	}, nil
}

// Port returns the TCP port of the broker.
func (c *QueenClient) Port() int {
	_, p, _ := net.SplitHostPort(c.hc.Addr)
	n, _ := strconv.Atoi(p)
	return n
}

// do performs one request and calls read with the status and body while the
// response buffer is still valid.
func (c *QueenClient) do(op, method, path string, body []byte, timeout time.Duration,
	read func(status int, body []byte) error) error {
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.base + path)
	req.Header.SetMethod(method)
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(body)
	}
	if err := c.hc.DoTimeout(req, resp, timeout); err != nil {
		return opErr(op, err)
	}
	return read(resp.StatusCode(), resp.Body())
}

// statusErr builds the error for an unexpected status.
func statusErr(op string, status int, body []byte) error {
	if len(body) > 200 {
		body = body[:200]
	}
	return &StatusError{Op: op, Status: status, Body: strings.TrimSpace(string(body))}
}

// Health checks GET /health and returns nil on 200.
func (c *QueenClient) Health() error {
	return c.do("health", "GET", "/health", nil, c.timeout, func(status int, body []byte) error {
		if status != 200 {
			return statusErr("health", status, body)
		}
		return nil
	})
}

// WaitHealthy polls /health until it answers 200 or d passes.
func (c *QueenClient) WaitHealthy(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := c.Health()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("error waiting for broker health: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PushResult counts the per-item statuses of one push answer.
type PushResult struct {
	Queued, Duplicate, Failed int
	FirstError                string
}

// Push posts a body built by appendPushBody and checks that every item was
// queued. A 200 answer is accepted as well as the intended 201, because the
// reference server answers 200.
func (c *QueenClient) Push(body []byte) (PushResult, error) {
	var res PushResult
	err := c.do("push", "POST", "/api/v1/push", body, c.timeout, func(status int, b []byte) error {
		if status != 201 && status != 200 {
			return statusErr("push", status, b)
		}
		if err := decodePush(b, &res); err != nil {
			return opErr("push", fmt.Errorf("error decoding answer: %w", err))
		}
		return nil
	})
	return res, err
}

// PushItem is one message of a push request.
type PushItem struct {
	Partition     string
	TransactionID []byte
	Payload       []byte // JSON
}

// appendPushBody appends {"items":[...]} for items on queue to dst.
func appendPushBody(dst []byte, queue string, items []PushItem) []byte {
	dst = append(dst, `{"items":[`...)
	for i, it := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"queue":`...)
		dst = appendJSONString(dst, queue)
		dst = append(dst, `,"partition":`...)
		dst = appendJSONString(dst, it.Partition)
		dst = append(dst, `,"transactionId":`...)
		dst = appendJSONString(dst, string(it.TransactionID))
		dst = append(dst, `,"payload":`...)
		dst = append(dst, it.Payload...)
		dst = append(dst, '}')
	}
	return append(dst, `]}`...)
}

// PopQuery holds the parameters of a pop (pop-routes.md).
type PopQuery struct {
	Batch         int
	Partitions    int           // wildcard route: cap on partitions claimed; 0 or less: no cap
	Wait          bool          // long poll
	Timeout       time.Duration // long-poll deadline
	ConsumerGroup string        // empty: queue mode
	Partition     string        // non-empty: the single-partition route
}

// PopMessage is the part of a popped message the harness uses.
type PopMessage struct {
	TransactionID string
	PartitionID   string
	LeaseID       string
	Data          []byte // the message's JSON data
}

// PopResponse is the part of a pop's 200 answer the harness uses.
type PopResponse struct {
	Messages []PopMessage
}

// popMargin is added to a long poll's own timeout for the HTTP deadline, as
// the SDKs do (timeout + 5000 ms).
const popMargin = 5 * time.Second

// Pop claims a batch from queue. An empty answer (204) returns a response
// with no messages.
func (c *QueenClient) Pop(queue string, q PopQuery) (*PopResponse, error) {
	path := make([]byte, 0, 160)
	path = append(path, "/api/v1/pop/queue/"...)
	path = append(path, url.PathEscape(queue)...)
	if q.Partition != "" {
		path = append(path, "/partition/"...)
		path = append(path, url.PathEscape(q.Partition)...)
	}
	path = append(path, "?batch="...)
	path = strconv.AppendInt(path, int64(max(q.Batch, 1)), 10)
	if q.Partitions != 1 && q.Partition == "" {
		path = append(path, "&partitions="...)
		path = strconv.AppendInt(path, int64(q.Partitions), 10)
	}
	timeout := c.timeout
	if q.Wait {
		path = append(path, "&wait=true&timeout="...)
		path = strconv.AppendInt(path, q.Timeout.Milliseconds(), 10)
		timeout = q.Timeout + popMargin
	}
	if q.ConsumerGroup != "" {
		path = append(path, "&consumerGroup="...)
		path = append(path, url.QueryEscape(q.ConsumerGroup)...)
	}
	res := &PopResponse{}
	err := c.do("pop", "GET", string(path), nil, timeout, func(status int, b []byte) error {
		switch status {
		case 204:
			return nil
		case 200:
			if len(bytes.TrimSpace(b)) == 0 {
				return nil // the reference server's empty 200
			}
			if err := decodePop(b, res); err != nil {
				return opErr("pop", fmt.Errorf("error decoding answer: %w", err))
			}
			return nil
		default:
			return statusErr("pop", status, b)
		}
	})
	return res, err
}

// AckBatch acknowledges msgs as completed for group (empty: queue mode) with
// one POST /api/v1/ack/batch. It returns an error if the request failed or
// any item reports success:false.
func (c *QueenClient) AckBatch(buf []byte, group string, msgs []PopMessage) ([]byte, error) {
	if len(msgs) == 0 {
		return buf, nil
	}
	buf = appendAckBody(buf[:0], group, msgs)
	err := c.do("ack", "POST", "/api/v1/ack/batch", buf, c.timeout, func(status int, b []byte) error {
		if status != 200 && status != 201 {
			return statusErr("ack", status, b)
		}
		if err := decodeAck(b); err != nil {
			return opErr("ack", err)
		}
		return nil
	})
	return buf, err
}

// appendAckBody appends the batch-ack body of api.md 4.4.
func appendAckBody(dst []byte, group string, msgs []PopMessage) []byte {
	dst = append(dst, `{"acknowledgments":[`...)
	for i, m := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"transactionId":`...)
		dst = appendJSONString(dst, m.TransactionID)
		dst = append(dst, `,"partitionId":`...)
		dst = appendJSONString(dst, m.PartitionID)
		dst = append(dst, `,"status":"completed"`...)
		if m.LeaseID != "" {
			dst = append(dst, `,"leaseId":`...)
			dst = appendJSONString(dst, m.LeaseID)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `],"consumerGroup":`...)
	if group == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, group)
	}
	return append(dst, '}')
}

// Configure sets a queue's options with POST /api/v1/configure (api.md
// 3.1), creating the queue if needed. Configure is a full replace: options
// left out take their defaults, so options must hold every option the
// caller wants set. Any answer but 200/201 is a *StatusError.
func (c *QueenClient) Configure(queue string, options map[string]any) error {
	body, err := json.Marshal(map[string]any{"queue": queue, "options": options})
	if err != nil {
		return opErr("configure", err)
	}
	return c.do("configure", "POST", "/api/v1/configure", body, c.timeout, func(status int, b []byte) error {
		if status != 200 && status != 201 {
			return statusErr("configure", status, b)
		}
		return nil
	})
}

// DeleteQueue removes a queue and all its data (api.md 7.4). A 404 counts as
// success.
func (c *QueenClient) DeleteQueue(queue string) error {
	return c.do("delete", "DELETE", "/api/v1/resources/queues/"+url.PathEscape(queue), nil, c.timeout,
		func(status int, b []byte) error {
			if status >= 300 && status != 404 {
				return statusErr("delete", status, b)
			}
			return nil
		})
}

// Goroutines reads go_goroutines from /metrics/prometheus, if the broker
// exposes it.
func (c *QueenClient) Goroutines() (int, bool) {
	n, ok := 0, false
	_ = c.do("metrics", "GET", "/metrics/prometheus", nil, c.timeout, func(status int, b []byte) error {
		if status != 200 {
			return nil
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if bytes.HasPrefix(line, []byte("go_goroutines ")) {
				f, err := strconv.ParseFloat(string(bytes.TrimSpace(line[len("go_goroutines "):])), 64)
				if err == nil {
					n, ok = int(f), true
				}
			}
		}
		return nil
	})
	return n, ok
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '"' || ch == '\\':
			dst = append(dst, '\\', ch)
		case ch < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[ch>>4], hex[ch&15])
		default:
			dst = append(dst, ch)
		}
	}
	return append(dst, '"')
}
