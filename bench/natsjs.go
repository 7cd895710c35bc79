package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsTarget drives NATS JetStream with file storage and explicit acks.
//
// Mapping of the scenario's terms:
//   - a layout is one stream with file storage; partitions are subjects
//     <name>.p<k> in it (subjects are cheap in JetStream);
//   - G consumer groups are G durable pull consumers of the stream, each
//     delivering every message (AckExplicit, DeliverAll);
//   - a batch on publish is N asynchronous publishes, then waiting for all N
//     acks from the stream (a single message uses the synchronous Publish);
//   - a batch on consume is one pull Fetch of up to N messages; each message
//     is acked, the last one with a double ack that waits for the server's
//     confirmation, so one batch costs one server round trip as a Queen
//     batch ack does.
type natsTarget struct {
	url string
	pid int

	admin  *nats.Conn
	js     jetstream.JetStream
	layout Layout
}

// newNATSTarget connects the admin connection.
func newNATSTarget(url string) (*natsTarget, error) {
	nc, err := nats.Connect(url, nats.Name("queengo-bench"))
	if err != nil {
		return nil, fmt.Errorf("error connecting to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("error opening JetStream: %w", err)
	}
	t := &natsTarget{url: url, admin: nc, js: js}
	t.pid, _ = pidListeningOn(urlPort(url, 4222))
	return t, nil
}

func (t *natsTarget) Name() string       { return "nats" }
func (t *natsTarget) Endpoint() string   { return t.url }
func (t *natsTarget) ServerPID() int     { return t.pid }
func (t *natsTarget) UsesPostgres() bool { return false }
func (t *natsTarget) Close() error       { t.admin.Close(); return nil }

// stream is the stream name: JetStream names may not contain '.', '*', '>'.
func (t *natsTarget) stream() string {
	return strings.NewReplacer(".", "_", "*", "_", ">", "_", " ", "_").Replace(t.layout.Name)
}

func (t *natsTarget) subject(p int) string { return t.stream() + ".p" + strconv.Itoa(p) }

func (t *natsTarget) durable(g int) string { return "g" + strconv.Itoa(g) }

func (t *natsTarget) Prepare(ctx context.Context, l Layout) error {
	t.layout = l
	_, err := t.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:      t.stream(),
		Subjects:  []string{t.stream() + ".>"},
		Storage:   jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy,
		Replicas:  1,
	})
	if err != nil {
		return fmt.Errorf("error creating stream: %w", err)
	}
	// Enough outstanding acks for every consumer to hold two full batches;
	// the default of 1000 would throttle 50 consumers at batch 100.
	pending := max(2*l.Batch*max(l.Consumers, 1), 1000)
	for g := 0; g < l.Groups; g++ {
		_, err := t.js.CreateOrUpdateConsumer(ctx, t.stream(), jetstream.ConsumerConfig{
			Durable:       t.durable(g),
			AckPolicy:     jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckWait:       60 * time.Second,
			MaxAckPending: pending,
			MaxWaiting:    max(512, 2*l.Consumers),
		})
		if err != nil {
			return fmt.Errorf("error creating consumer: %w", err)
		}
	}
	return nil
}

func (t *natsTarget) Cleanup(ctx context.Context) error {
	err := t.js.DeleteStream(ctx, t.stream())
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	return err
}

// connect opens a worker's own connection, as each Queen worker has its
// own HTTP connection.
func (t *natsTarget) connect() (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(t.url, nats.Name("queengo-bench"))
	if err != nil {
		return nil, nil, fmt.Errorf("error connecting to NATS: %w", err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("error opening JetStream: %w", err)
	}
	return nc, js, nil
}

func (t *natsTarget) NewPublisher(ctx context.Context, worker int) (Publisher, error) {
	nc, js, err := t.connect()
	if err != nil {
		return nil, err
	}
	subjects := make([]string, max(t.layout.Partitions, 1))
	for p := range subjects {
		subjects[p] = t.subject(p)
	}
	return &natsPublisher{nc: nc, js: js, subjects: subjects}, nil
}

type natsPublisher struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	subjects []string
	futures  []jetstream.PubAckFuture
}

func (p *natsPublisher) subject(m Message) string { return p.subjects[m.Partition%len(p.subjects)] }

func (p *natsPublisher) Publish(ctx context.Context, msgs []Message) error {
	if len(msgs) == 1 {
		_, err := p.js.Publish(ctx, p.subject(msgs[0]), msgs[0].Payload)
		return opErr("publish", err)
	}
	p.futures = p.futures[:0]
	for _, m := range msgs {
		f, err := p.js.PublishAsync(p.subject(m), m.Payload)
		if err != nil {
			return opErr("publish", err)
		}
		p.futures = append(p.futures, f)
	}
	for _, f := range p.futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return opErr("publish", err)
		case <-ctx.Done():
			return opErr("publish", ctx.Err())
		}
	}
	return nil
}

func (p *natsPublisher) Close() error { p.nc.Close(); return nil }

func (t *natsTarget) NewConsumer(ctx context.Context, group, worker int) (Consumer, error) {
	nc, js, err := t.connect()
	if err != nil {
		return nil, err
	}
	cons, err := js.Consumer(ctx, t.stream(), t.durable(group))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("error binding consumer: %w", err)
	}
	return &natsConsumer{nc: nc, cons: cons, wait: t.layout.PopTimeout}, nil
}

type natsConsumer struct {
	nc   *nats.Conn
	cons jetstream.Consumer
	wait time.Duration
	msgs []jetstream.Msg
}

// Receive takes what is available at once (FetchNoWait); only when nothing
// is, it long-polls for one message, since a JetStream pull request with a
// wait otherwise holds back a partial batch until the wait expires.
func (c *natsConsumer) Receive(ctx context.Context, max int, fn func([]byte)) (int, error) {
	c.msgs = c.msgs[:0]
	batch, err := c.cons.FetchNoWait(max)
	if err != nil {
		return 0, opErr("fetch", err)
	}
	for m := range batch.Messages() {
		c.msgs = append(c.msgs, m)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		return 0, opErr("fetch", err)
	}
	if len(c.msgs) == 0 {
		batch, err = c.cons.Fetch(1, jetstream.FetchMaxWait(c.wait))
		if err != nil {
			return 0, opErr("fetch", err)
		}
		for m := range batch.Messages() {
			c.msgs = append(c.msgs, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
			return 0, opErr("fetch", err)
		}
	}
	for i, m := range c.msgs {
		fn(m.Data())
		if i < len(c.msgs)-1 {
			if err := m.Ack(); err != nil {
				return i, opErr("ack", err)
			}
			continue
		}
		if err := m.DoubleAck(ctx); err != nil {
			return i, opErr("ack", err)
		}
	}
	return len(c.msgs), nil
}

func (c *natsConsumer) Close() error { c.nc.Close(); return nil }
