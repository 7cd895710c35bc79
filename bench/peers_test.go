package main

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"
)

// TestPeers runs a short push and a short two-group consume against the
// local RabbitMQ and NATS JetStream, when they are running.
func TestPeers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs RabbitMQ and NATS")
	}
	t.Parallel()
	for _, c := range []struct{ name, addr string }{{"rabbitmq", "127.0.0.1:5672"}, {"nats", "127.0.0.1:4222"}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.DialTimeout("tcp", c.addr, time.Second)
			if err != nil {
				t.Skipf("%s is not running at %s: %v", c.name, c.addr, err)
			}
			conn.Close()
			env := &Env{C: &Common{RabbitURL: RabbitURLDefault, RabbitQueueType: "classic", NATSURL: NATSURLDefault,
				Interval: time.Second, Quiet: true}, Out: &bytes.Buffer{}, Run: runID(), Report: &Report{}}
			tgt, err := env.newTarget(c.name, 8)
			if err != nil {
				t.Fatal(err)
			}
			defer tgt.Close()
			ctx := context.Background()
			push, err := runPush(ctx, env, tgt, PushParams{Connections: 4, Batch: 10, Partitions: 4, PayloadBytes: 100,
				Duration: 700 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if push.Messages <= 0 || push.Errors > 0 {
				t.Errorf("push: %d messages, errors %v", push.Messages, push.ErrorSamples)
			}
			cons, err := runConsume(ctx, env, tgt, ConsumeParams{Messages: 500, Consumers: 2, Batch: 10, Partitions: 4,
				Groups: 2, PayloadBytes: 100, PopTimeout: 300 * time.Millisecond, MaxDuration: 10 * time.Second,
				StallTimeout: 3 * time.Second, PrefillConns: 2, PrefillBatch: 50})
			if err != nil {
				t.Fatal(err)
			}
			if cons.Metrics["drained"] != 1 || cons.Metrics["unique"] != 1000 || cons.Errors > 0 {
				t.Errorf("consume: %+v, notes %v, errors %v", cons.Metrics, cons.Notes, cons.ErrorSamples)
			}
		})
	}
}
