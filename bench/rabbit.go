package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// rabbitTarget drives RabbitMQ over AMQP 0-9-1 with the settings that make
// it comparable to a broker that commits to PostgreSQL before answering:
// durable queues, persistent messages (delivery mode 2), publisher confirms,
// and manual acknowledgements.
//
// Mapping of the scenario's terms:
//   - a layout is one durable fanout exchange plus one durable queue per
//     consumer group (one queue for push-only runs), so G groups each get
//     every message, like G Queen consumer groups;
//   - partitions are not mapped: a RabbitMQ queue is a single ordered log;
//   - a batch on publish is N basic.publish frames, then waiting for all N
//     confirms; a batch on consume is a prefetch window of N deliveries,
//     acknowledged with one basic.ack(multiple=true) on the last.
type rabbitTarget struct {
	url       string
	queueType string // classic or quorum
	prefetch  int    // 0: the batch size
	pid       int

	admin  *amqp.Connection
	layout Layout
}

// newRabbitTarget connects the admin connection used for declarations.
func newRabbitTarget(rawURL, queueType string, prefetch int) (*rabbitTarget, error) {
	conn, err := amqp.Dial(rawURL)
	if err != nil {
		return nil, fmt.Errorf("error connecting to RabbitMQ at %s: %w", redactURL(rawURL), err)
	}
	t := &rabbitTarget{url: rawURL, queueType: queueType, prefetch: prefetch, admin: conn}
	t.pid, _ = pidListeningOn(urlPort(rawURL, 5672))
	return t, nil
}

func (t *rabbitTarget) Name() string       { return "rabbitmq" }
func (t *rabbitTarget) Endpoint() string   { return redactURL(t.url) }
func (t *rabbitTarget) ServerPID() int     { return t.pid }
func (t *rabbitTarget) UsesPostgres() bool { return false }
func (t *rabbitTarget) Close() error       { return t.admin.Close() }

func (t *rabbitTarget) exchange() string { return t.layout.Name }

func (t *rabbitTarget) queue(g int) string { return t.layout.Name + ".g" + strconv.Itoa(g) }

func (t *rabbitTarget) groups() int { return max(t.layout.Groups, 1) }

func (t *rabbitTarget) Prepare(ctx context.Context, l Layout) error {
	t.layout = l
	ch, err := t.admin.Channel()
	if err != nil {
		return fmt.Errorf("error opening channel: %w", err)
	}
	defer ch.Close()
	if err := ch.ExchangeDeclare(t.exchange(), "fanout", true, false, false, false, nil); err != nil {
		return fmt.Errorf("error declaring exchange: %w", err)
	}
	for g := 0; g < t.groups(); g++ {
		args := amqp.Table{"x-queue-type": t.queueType}
		if _, err := ch.QueueDeclare(t.queue(g), true, false, false, false, args); err != nil {
			return fmt.Errorf("error declaring queue: %w", err)
		}
		if err := ch.QueueBind(t.queue(g), "", t.exchange(), false, nil); err != nil {
			return fmt.Errorf("error binding queue: %w", err)
		}
	}
	return nil
}

func (t *rabbitTarget) Cleanup(ctx context.Context) error {
	ch, err := t.admin.Channel()
	if err != nil {
		return fmt.Errorf("error opening channel: %w", err)
	}
	defer ch.Close()
	var errs []error
	for g := 0; g < t.groups(); g++ {
		if _, err := ch.QueueDelete(t.queue(g), false, false, false); err != nil {
			errs = append(errs, err)
		}
	}
	if err := ch.ExchangeDelete(t.exchange(), false, false); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// open dials a connection with one channel.
func (t *rabbitTarget) open() (*amqp.Connection, *amqp.Channel, error) {
	conn, err := amqp.Dial(t.url)
	if err != nil {
		return nil, nil, fmt.Errorf("error connecting to RabbitMQ: %w", err)
	}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("error opening channel: %w", err)
	}
	return conn, ch, nil
}

func (t *rabbitTarget) NewPublisher(ctx context.Context, worker int) (Publisher, error) {
	conn, ch, err := t.open()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("error enabling publisher confirms: %w", err)
	}
	return &rabbitPublisher{conn: conn, ch: ch, exchange: t.exchange()}, nil
}

type rabbitPublisher struct {
	conn     *amqp.Connection
	ch       *amqp.Channel
	exchange string
	pending  []*amqp.DeferredConfirmation
}

func (p *rabbitPublisher) Publish(ctx context.Context, msgs []Message) error {
	p.pending = p.pending[:0]
	for _, m := range msgs {
		dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, "", false, false, amqp.Publishing{
			ContentType:  "application/json",
			DeliveryMode: amqp.Persistent,
			Body:         m.Payload,
		})
		if err != nil {
			return opErr("publish", err)
		}
		p.pending = append(p.pending, dc)
	}
	nacks := 0
	for _, dc := range p.pending {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return opErr("confirm", err)
		}
		if !ok {
			nacks++
		}
	}
	if nacks > 0 {
		return opErr("confirm", fmt.Errorf("%d of %d messages nacked", nacks, len(msgs)))
	}
	return nil
}

func (p *rabbitPublisher) Close() error { return p.conn.Close() }

func (t *rabbitTarget) NewConsumer(ctx context.Context, group, worker int) (Consumer, error) {
	conn, ch, err := t.open()
	if err != nil {
		return nil, err
	}
	prefetch := t.prefetch
	if prefetch <= 0 {
		prefetch = max(t.layout.Batch, 1)
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		conn.Close()
		return nil, fmt.Errorf("error setting prefetch: %w", err)
	}
	deliveries, err := ch.Consume(t.queue(group), "", false, false, false, false, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("error starting consumer: %w", err)
	}
	return &rabbitConsumer{conn: conn, ch: ch, deliveries: deliveries, wait: t.layout.PopTimeout}, nil
}

// rabbitBatchGap is how long a consumer waits for the next delivery of a
// batch before acknowledging what it has. Deliveries of a full prefetch
// window arrive back to back, so only the tail of a queue waits this long.
const rabbitBatchGap = 2 * time.Millisecond

type rabbitConsumer struct {
	conn       *amqp.Connection
	ch         *amqp.Channel
	deliveries <-chan amqp.Delivery
	wait       time.Duration
}

func (c *rabbitConsumer) Receive(ctx context.Context, max int, fn func([]byte)) (int, error) {
	first := time.NewTimer(c.wait)
	defer first.Stop()
	var last amqp.Delivery
	n := 0
	select {
	case d, ok := <-c.deliveries:
		if !ok {
			return 0, opErr("consume", errors.New("delivery channel closed"))
		}
		fn(d.Body)
		last, n = d, 1
	case <-first.C:
		return 0, nil
	case <-ctx.Done():
		return 0, nil
	}
	gap := time.NewTimer(rabbitBatchGap)
	defer gap.Stop()
collect:
	for n < max {
		select {
		case d, ok := <-c.deliveries:
			if !ok {
				break collect
			}
			fn(d.Body)
			last = d
			n++
			gap.Reset(rabbitBatchGap) // Go >= 1.23: Reset drops a pending expiry
		case <-gap.C:
			break collect
		}
	}
	if err := last.Ack(true); err != nil {
		return n, opErr("ack", err)
	}
	return n, nil
}

func (c *rabbitConsumer) Close() error { return c.conn.Close() }

// urlPort returns the port of rawURL, or def.
func urlPort(rawURL string, def int) int {
	u, err := url.Parse(rawURL)
	if err != nil {
		return def
	}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	if _, p, err := net.SplitHostPort(u.Host); err == nil {
		if n, err := strconv.Atoi(p); err == nil {
			return n
		}
	}
	return def
}

// redactURL hides the password of a URL for reports.
func redactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	return u.Redacted()
}
