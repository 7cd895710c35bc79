package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/queengo/queengo/http/client"
)

// Message is one benchmark message on its way to a server.
type Message struct {
	Seq       int64  // unique within the run; also the transaction id suffix
	Partition int    // 0 .. Layout.Partitions-1
	Payload   []byte // JSON written by appendPayload
}

// Layout describes the queue (or stream, or exchange) a scenario run uses.
// Every run gets fresh names, so runs never see each other's messages.
type Layout struct {
	Name       string // unique per run, e.g. "bench-push-k3x9"
	Partitions int    // ordering units; see each target for its mapping
	Groups     int    // consumer groups that each receive every message; 0 for push-only runs
	Batch      int    // messages per request
	Consumers  int    // consumers per group, to size server-side windows

	// PopPartitions is queengo's "partitions" pop parameter: how many
	// partitions one pop may claim (0: no cap).
	PopPartitions int
	// Pin (Queen targets): consumer k of a group pops only partition
	// k mod Partitions, through the single-partition route.
	Pin bool
	// PopTimeout is how long one receive waits for a first message.
	PopTimeout time.Duration
	// Encrypt (queengo only) configures the queue with encryptionEnabled
	// before the run, so the broker seals its payloads (AES-256-GCM).
	Encrypt bool
}

// encryptLabelSuffix is appended to the target's label in runs with
// --encrypt, so plain and encrypted results sit side by side in a table.
const encryptLabelSuffix = "-enc"

// checkQueenOnly rejects a flag of the Queen protocol, set, for a target
// that does not speak it.
func checkQueenOnly(set bool, flag, target string) error {
	if !set {
		return nil
	}
	switch target {
	case "queengo", "queen", "http":
		return nil
	}
	return fmt.Errorf("%s applies to the queengo target only, not %q", flag, target)
}

// Target is one message system under test: queengo (or any Queen-compatible
// broker) over HTTP, RabbitMQ, or NATS JetStream. The push and consume
// scenarios drive all of them through this interface, so every server
// runs the same loop with the same payloads and batch sizes.
type Target interface {
	// Name is the label results carry, such as "queengo" or "rabbitmq".
	Name() string
	// Endpoint is the address the target talks to.
	Endpoint() string
	// Prepare creates the run's queue, stream or exchange and groups.
	Prepare(ctx context.Context, l Layout) error
	// NewPublisher opens one producer connection for worker.
	NewPublisher(ctx context.Context, worker int) (Publisher, error)
	// NewConsumer opens one consumer connection in consumer group group.
	NewConsumer(ctx context.Context, group, worker int) (Consumer, error)
	// Cleanup deletes what Prepare created.
	Cleanup(ctx context.Context) error
	// ServerPID is the server process for CPU and memory readings, 0 if
	// unknown.
	ServerPID() int
	// UsesPostgres reports whether PostgreSQL readings belong to this
	// target's cost.
	UsesPostgres() bool
	// Close releases shared connections.
	Close() error
}

// Publisher sends batches of messages on one connection.
type Publisher interface {
	// Publish sends msgs as one batch and returns once the server has
	// confirmed every one of them as stored.
	Publish(ctx context.Context, msgs []Message) error
	Close() error
}

// Consumer receives and acknowledges messages on one connection.
type Consumer interface {
	// Receive waits up to the layout's PopTimeout for messages, takes up to
	// max, calls fn with each payload, acknowledges them all, and returns
	// how many it took (0 after an empty wait).
	Receive(ctx context.Context, max int, fn func(payload []byte)) (int, error)
	Close() error
}

// groupName is the consumer group name of group g in a layout with groups
// groups. A single group runs in queue mode on queengo (no consumerGroup
// parameter, the reserved __QUEUE_MODE__ cursor), which is how most Queen
// consumers run.
func groupName(g, groups int) string {
	if groups <= 1 {
		return ""
	}
	return "g" + strconv.Itoa(g)
}

// popPartitions is client.PopQuery.Partitions for a --pop-partitions of n,
// whose 0 means no cap: 1, the broker's default, is left out of the query
// as the SDKs leave it out.
func popPartitions(n int) int {
	switch n {
	case 0:
		return client.NoPartitionCap
	case 1:
		return 0
	}
	return n
}

// partitionName is the name of partition p.
func partitionName(p int) string { return "p" + strconv.Itoa(p) }

// queenTarget drives a Queen-compatible broker over HTTP.
type queenTarget struct {
	label  string
	url    string
	client *QueenClient
	pid    int
	layout Layout

	// popLat and ackLat split a consumer's receive into its two requests.
	popLat, ackLat *Latency
}

// phaseLatencies is implemented by targets whose receive consists of
// separately timed requests; the consume scenario reports each phase.
type phaseLatencies interface {
	PhaseLatencies() map[string]*Latency
}

// PhaseLatencies returns the pop and ack latencies since Prepare.
func (t *queenTarget) PhaseLatencies() map[string]*Latency {
	return map[string]*Latency{"pop": t.popLat, "ack": t.ackLat}
}

// newQueenTarget returns the HTTP target. pid 0 means: find the process
// listening on the URL's port.
func newQueenTarget(label, url string, maxConns int, timeout time.Duration, pid int) (*queenTarget, error) {
	c, err := NewQueenClient(url, maxConns, timeout)
	if err != nil {
		return nil, err
	}
	if pid == 0 {
		pid, _ = pidListeningOn(c.Port())
	}
	return &queenTarget{label: label, url: url, client: c, pid: pid}, nil
}

func (t *queenTarget) Name() string       { return t.label }
func (t *queenTarget) Endpoint() string   { return t.url }
func (t *queenTarget) ServerPID() int     { return t.pid }
func (t *queenTarget) UsesPostgres() bool { return true }
func (t *queenTarget) Close() error       { return nil }

func (t *queenTarget) Prepare(ctx context.Context, l Layout) error {
	t.layout = l
	t.popLat, t.ackLat = NewLatency(l.Consumers*max(l.Groups, 1)), NewLatency(l.Consumers*max(l.Groups, 1))
	// Queues and partitions are created by the first push; a failed
	// health check here gives a clearer error than the first failed push.
	if err := t.client.Health(); err != nil {
		return fmt.Errorf("error reaching %s: %w", t.url, err)
	}
	if l.Encrypt {
		// Configure creates the queue with the option before the first
		// push; a broker without QUEEN_ENCRYPTION_KEY refuses it (400)
		// rather than store plaintext.
		err := t.client.Configure(l.Name, map[string]any{"encryptionEnabled": true})
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == 400 {
			return fmt.Errorf("--encrypt: the broker refused encryptionEnabled for %s (%v); "+
				"start it with QUEEN_ENCRYPTION_KEY=<64 hex characters>", l.Name, err)
		}
		if err != nil {
			return fmt.Errorf("--encrypt: error configuring %s with encryptionEnabled: %w", l.Name, err)
		}
	}
	return nil
}

func (t *queenTarget) Cleanup(ctx context.Context) error {
	return t.client.DeleteQueue(t.layout.Name)
}

func (t *queenTarget) NewPublisher(ctx context.Context, worker int) (Publisher, error) {
	return &queenPublisher{t: t, run: t.layout.Name}, nil
}

func (t *queenTarget) NewConsumer(ctx context.Context, group, worker int) (Consumer, error) {
	return &queenConsumer{t: t, group: groupName(group, t.layout.Groups), worker: worker}, nil
}

// queenPublisher builds push bodies in reused buffers.
type queenPublisher struct {
	t     *queenTarget
	run   string
	body  []byte
	ids   []byte
	ends  []int
	items []client.PushItem
}

func (p *queenPublisher) Publish(ctx context.Context, msgs []Message) error {
	// All transaction ids go into one reused buffer first; the items slice
	// into it only afterwards, because appending may move the buffer.
	p.ids = p.ids[:0]
	p.ends = p.ends[:0]
	for _, m := range msgs {
		p.ids = appendTxnID(p.ids, p.run, m.Seq)
		p.ends = append(p.ends, len(p.ids))
	}
	p.items = p.items[:0]
	start := 0
	for i, m := range msgs {
		p.items = append(p.items, client.PushItem{Partition: partitionName(m.Partition), Payload: m.Payload,
			TransactionID: p.ids[start:p.ends[i]]})
		start = p.ends[i]
	}
	p.body = client.AppendPushBody(p.body[:0], p.run, p.items)
	res, err := p.t.client.Push(p.body)
	if err != nil {
		return err
	}
	if res.Failed > 0 {
		return opErr("push", fmt.Errorf("%d of %d items failed: %s", res.Failed, len(msgs), res.FirstError))
	}
	if res.Queued+res.Duplicate != len(msgs) {
		return opErr("push", fmt.Errorf("answer has %d results for %d items", res.Queued+res.Duplicate, len(msgs)))
	}
	return nil
}

func (p *queenPublisher) Close() error { return nil }

// queenConsumer pops with a long poll and acknowledges each batch with one
// batch ack.
type queenConsumer struct {
	t      *queenTarget
	group  string
	worker int
	buf    []byte
}

func (c *queenConsumer) Receive(ctx context.Context, max int, fn func([]byte)) (int, error) {
	l := c.t.layout
	t0 := time.Now()
	q := client.PopQuery{Batch: max, Partitions: popPartitions(l.PopPartitions), Wait: true, Timeout: l.PopTimeout,
		ConsumerGroup: c.group}
	if l.Pin {
		q.Partition = partitionName(c.worker % l.Consumers % l.Partitions)
	}
	res, err := c.t.client.Pop(l.Name, q)
	if err != nil {
		return 0, err
	}
	if len(res.Acks) == 0 {
		return 0, nil
	}
	t1 := time.Now()
	c.t.popLat.Record(c.worker, t1.Sub(t0))
	for _, d := range res.Data {
		fn(d)
	}
	c.buf, err = c.t.client.AckBatch(c.buf, c.group, res.Acks)
	if err == nil {
		c.t.ackLat.Record(c.worker, time.Since(t1))
	}
	return len(res.Acks), err
}

func (c *queenConsumer) Close() error { return nil }

// closeAll closes publishers or consumers in parallel, since closing a few
// hundred AMQP connections one by one takes seconds.
func closeAll[T interface{ Close() error }](xs []T) {
	var wg sync.WaitGroup
	for _, x := range xs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = x.Close() }()
	}
	wg.Wait()
}
