package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/queengo/queengo/http/client"
)

// QueenClient speaks the Queen MQ HTTP protocol (docs/api.md, docs/pop-routes.md) to
// one broker through queengo's HTTP client (http/client, fasthttp
// underneath: it allocates far less per request than net/http, so more of
// the shared machine's CPU goes to the server being measured). What it
// adds is the harness's own: the answers of push, pop and ack decoded with
// fastjson (decode.go), and every error tagged with its operation for the
// error counts (errors.go).
//
// Requests run under context.Background: each is bounded by its timeout,
// and an interrupted run lets those in flight finish and be counted, with
// no goroutine per request for a cancellable context.
type QueenClient struct {
	c *client.Client
}

// NewQueenClient returns a client for the broker at rawURL with room for
// maxConns concurrent requests. timeout bounds every request except long
// polls, which get their own poll timeout plus client.PopMargin.
func NewQueenClient(rawURL string, maxConns int, timeout time.Duration) (*QueenClient, error) {
	c, err := client.New(rawURL, client.MaxConns(maxConns+8), client.Timeout(timeout), client.UserAgent("queengo-bench"))
	if err != nil {
		return nil, fmt.Errorf("error parsing --url: %w", err)
	}
	return &QueenClient{c: c}, nil
}

// Port returns the TCP port of the broker.
func (c *QueenClient) Port() int {
	_, p, _ := net.SplitHostPort(c.c.Addr())
	n, _ := strconv.Atoi(p)
	return n
}

// Do sends one request and hands the answer to read while its buffer is
// valid, tagging a failure to get an answer with op.
func (c *QueenClient) Do(op, method, path string, body []byte, read client.ReadFunc) error {
	return opErr(op, c.c.Do(context.Background(), method, path, body, read))
}

// Health checks GET /health and returns nil on a 2xx answer.
func (c *QueenClient) Health() error {
	return opErr("health", c.c.Health(context.Background()))
}

// PushResult counts the per-item statuses of one push answer.
type PushResult struct {
	Queued, Duplicate, Failed int
	FirstError                string
}

// Push posts a body built by client.AppendPushBody and counts the items'
// statuses. A 200 answer is accepted as well as the intended 201, because
// the reference server answers 200.
func (c *QueenClient) Push(body []byte) (PushResult, error) {
	var res PushResult
	err := c.c.Push(context.Background(), body, func(b []byte) error {
		if err := decodePush(b, &res); err != nil {
			return fmt.Errorf("error decoding answer: %w", err)
		}
		return nil
	})
	return res, opErr("push", err)
}

// PopResponse is the part of a pop's 200 answer the harness uses: for
// each message, the ids to acknowledge it by and its data.
type PopResponse struct {
	Acks []client.Ack
	Data [][]byte // Data[i] is message i's JSON data
}

// Pop claims a batch from queue. An empty answer (204) returns a response
// with no messages.
func (c *QueenClient) Pop(queue string, q client.PopQuery) (*PopResponse, error) {
	res := &PopResponse{}
	err := c.c.Pop(context.Background(), queue, q, func(b []byte) error {
		if err := decodePop(b, res); err != nil {
			return fmt.Errorf("error decoding answer: %w", err)
		}
		return nil
	})
	return res, opErr("pop", err)
}

// AckBatch acknowledges acks as completed for group (empty: queue mode)
// with one POST /api/v1/ack/batch, building the body in buf, which it
// returns for reuse. It returns an error if the request failed or any item
// reports success:false.
func (c *QueenClient) AckBatch(buf []byte, group string, acks []client.Ack) ([]byte, error) {
	if len(acks) == 0 {
		return buf, nil
	}
	buf = client.AppendAckBody(buf[:0], group, "completed", acks)
	return buf, opErr("ack", c.c.AckBatch(context.Background(), buf, decodeAck))
}

// Configure sets a queue's options with POST /api/v1/configure (docs/api.md
// "POST /api/v1/configure"), creating the queue if needed. Configure is a full replace: options
// left out take their defaults, so options must hold every option the
// caller wants set. Any answer outside 2xx is a *client.APIError.
func (c *QueenClient) Configure(queue string, options map[string]any) error {
	return opErr("configure", c.c.Configure(context.Background(), queue, options))
}

// DeleteQueue removes a queue and all its data (docs/api-admin.md "Resources"). A 404 counts as
// success.
func (c *QueenClient) DeleteQueue(queue string) error {
	return opErr("delete", c.c.DeleteQueue(context.Background(), queue))
}

// Goroutines reads go_goroutines from /metrics/prometheus, if the broker
// exposes it.
func (c *QueenClient) Goroutines() (int, bool) {
	n, ok := 0, false
	_ = c.Do("metrics", "GET", "/metrics/prometheus", nil, func(status int, _ client.Header, b []byte) error {
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
