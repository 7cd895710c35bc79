package main

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// smokeBroker is a queengo broker on a scratch database.
type smokeBroker struct {
	url   string // http://127.0.0.1:<port>
	dbURL string
}

// startSmokeBroker starts a broker in the test process (the broker
// module's black-box harness, package e2e) on a database of the test's own;
// both go when the test ends.
func startSmokeBroker(t *testing.T) *smokeBroker {
	t.Helper()
	db := e2e.CreateDB(t, "bench_smoke")
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: []string{"DB_POOL_SIZE=8"}})
	return &smokeBroker{url: s.URL, dbURL: db.URL}
}

// smokeEnv is the environment the CLI would build for the broker b.
func smokeEnv(t *testing.T, b *smokeBroker) *Env {
	t.Helper()
	c := &Common{URL: b.url, Label: "queengo", PGURL: b.dbURL, Schema: "queen", Target: "queengo",
		Interval: 500 * time.Millisecond, Timeout: 10 * time.Second}
	var out io.Writer = io.Discard
	if testing.Verbose() {
		out = os.Stdout
	}
	env := newEnv(context.Background(), c, out)
	if env.PG == nil {
		t.Fatalf("no PostgreSQL readings for %s", b.dbURL)
	}
	return env
}

// TestSmoke runs the push and consume scenarios for a second or two against
// a broker in the test process through the same code the CLI runs, and
// checks only that they ran and counted messages.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL")
	}
	b := startSmokeBroker(t)
	env := smokeEnv(t, b)
	ctx := context.Background()

	t.Run("push", func(t *testing.T) {
		tgt, err := env.newTarget("queengo", 4)
		if err != nil {
			t.Fatal(err)
		}
		res, err := runPush(ctx, env, tgt, PushParams{Connections: 4, Batch: 10, Partitions: 4,
			PayloadBytes: 100, Duration: 1500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if res.Messages <= 0 || res.Requests <= 0 {
			t.Errorf("push counted %d messages in %d requests", res.Messages, res.Requests)
		}
		if res.Errors > 0 {
			t.Errorf("push had %d errors: %v", res.Errors, res.ErrorSamples)
		}
		if res.Resources.WALBytes == nil || *res.Resources.WALBytes <= 0 {
			t.Errorf("push: no WAL reading")
		}
		if res.Resources.BrokerCPUSeconds == nil {
			t.Errorf("push: no broker CPU reading (pid %d)", res.Resources.BrokerPID)
		}
	})

	t.Run("consume", func(t *testing.T) {
		tgt, err := env.newTarget("queengo", 12)
		if err != nil {
			t.Fatal(err)
		}
		res, err := runConsume(ctx, env, tgt, ConsumeParams{Messages: 2000, Consumers: 4, Batch: 10,
			Partitions: 8, PopPartitions: 1, Groups: 1, PayloadBytes: 100, PopTimeout: 500 * time.Millisecond,
			MaxDuration: 5 * time.Second, StallTimeout: 3 * time.Second, PrefillConns: 4, PrefillBatch: 100})
		if err != nil {
			t.Fatal(err)
		}
		if res.Messages <= 0 || res.Metrics["unique"] <= 0 {
			t.Errorf("consume counted %d messages (%v distinct)", res.Messages, res.Metrics["unique"])
		}
		if res.Errors > 0 {
			t.Errorf("consume had %d errors: %v", res.Errors, res.ErrorSamples)
		}
	})

	t.Run("idle pinned with a trickle", func(t *testing.T) {
		tgt, err := newQueenTarget(env.C.Label, env.C.URL, 24, env.C.Timeout, env.C.BrokerPID)
		if err != nil {
			t.Fatal(err)
		}
		res, err := runIdle(ctx, env, tgt, IdleParams{Polls: 20, Partitions: 10, PushRate: 200,
			Duration: 2 * time.Second, PollTimeout: time.Second, Ramp: 2000, Queues: 1})
		if err != nil {
			t.Fatal(err)
		}
		if res.Metrics["parked_max"] <= 0 || res.Metrics["pushed"] <= 0 || res.Metrics["delivered"] <= 0 {
			t.Errorf("idle: parked max %v, pushed %v, delivered %v", res.Metrics["parked_max"],
				res.Metrics["pushed"], res.Metrics["delivered"])
		}
		if res.Errors > 0 {
			t.Errorf("idle had %d errors: %v", res.Errors, res.ErrorSamples)
		}
	})
}
