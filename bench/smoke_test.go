package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// smokeBroker is a queengo process on a scratch database.
type smokeBroker struct {
	url   string // http://127.0.0.1:<port>
	dbURL string
	cmd   *exec.Cmd
	log   *bytes.Buffer
}

// startSmokeBroker builds the broker (../cmd/queengo), creates a scratch
// database, starts the broker on a free port and waits for /health. Cleanup
// stops it with SIGTERM and drops the database.
func startSmokeBroker(t *testing.T) *smokeBroker {
	t.Helper()
	if _, err := exec.LookPath("psql"); err != nil {
		t.Fatalf("the smoke test needs psql: %v", err)
	}
	// The test runs in bench/, a module of its own; the broker is built in
	// the parent directory, its module, with the broker's own go.mod.
	bin := filepath.Join(t.TempDir(), "queengo")
	build := exec.Command("go", "build", "-o", bin, "./cmd/queengo")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("error building ../cmd/queengo: %v\n%s", err, out)
	}

	admin := os.Getenv("QUEENGO_TEST_DATABASE_URL")
	if admin == "" {
		admin = "postgres://postgres@127.0.0.1:5432/postgres"
	}
	adminPG := &PG{URL: admin}
	db := "bench_smoke_" + runID()
	ctx := context.Background()
	if _, err := adminPG.Query(ctx, "CREATE DATABASE "+quoteIdent(db)); err != nil {
		t.Fatalf("error creating scratch database (QUEENGO_TEST_DATABASE_URL=%s): %v", admin, err)
	}
	t.Cleanup(func() {
		if _, err := adminPG.Query(context.Background(), "DROP DATABASE IF EXISTS "+quoteIdent(db)+" WITH (FORCE)"); err != nil {
			t.Errorf("error dropping scratch database %s: %v", db, err)
		}
	})
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("error parsing %s: %v", admin, err)
	}
	u.Path = "/" + db
	port := freePort(t)
	b := &smokeBroker{url: fmt.Sprintf("http://127.0.0.1:%d", port), dbURL: u.String(), log: &bytes.Buffer{}}
	b.cmd = exec.Command(bin)
	b.cmd.Env = append(os.Environ(), "DATABASE_URL="+b.dbURL, fmt.Sprintf("PORT=%d", port),
		"DB_POOL_SIZE=8", "LOG_LEVEL=warn", "FILE_BUFFER_DIR=off")
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("error starting the broker: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	t.Cleanup(func() {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-exited
			t.Errorf("broker did not stop within 10s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("broker output:\n%s", b.log.String())
		}
	})
	c, err := NewQueenClient(b.url, 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.Health() != nil {
		select {
		case err := <-exited:
			t.Fatalf("broker exited before it was healthy: %v\n%s", err, b.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker not healthy after 30s\n%s", b.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return b
}

// freePort asks the kernel for a free loopback port.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
// a freshly built broker through the same code the CLI runs, and checks
// only that they ran and counted messages.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL and builds the broker")
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
