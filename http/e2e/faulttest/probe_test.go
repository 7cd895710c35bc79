package faulttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 43, probes: GET /health/live answers 200 whatever the database
// does (an outage must not get the broker restarted); GET /health/ready
// answers 200 while the database answers, 503 when it does not and no push
// buffer takes the pushes, and 200 again, database down, on a broker with a
// push buffer.
func TestProbes_LiveAlwaysReadyWhenTheDatabaseOrTheBufferTakesTraffic(t *testing.T) {
	plain, p1 := startProxied(t, nil)
	buffered, p2 := startProxied(t, nil, "FILE_BUFFER_DIR="+t.TempDir())
	probe := func(s *e2e.Server, path string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), healthTimeout+slack)
		defer cancel()
		r, err := s.DoCtx(ctx, "GET", path, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return r.Status
	}
	want := func(what string, s *e2e.Server, live, ready int) {
		t.Helper()
		if err := e2e.Eventually(5*time.Second, 100*time.Millisecond, func() error {
			if l, r := probe(s, "/health/live"), probe(s, "/health/ready"); l != live || r != ready {
				return fmt.Errorf("live %d ready %d, want %d and %d", l, r, live, ready)
			}
			return nil
		}); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	want("database up", plain, 200, 200)
	want("database up, buffer", buffered, 200, 200)
	p1.Cut()
	p2.Cut()
	want("database down, no buffer", plain, 200, 503)
	want("database down, buffer", buffered, 200, 200)
	p1.Restore()
	p2.Restore()
	want("database back", plain, 200, 200)
}

// Issue 43, graceful shutdown: on SIGTERM the parked long polls answer 204
// at once (not when their 30 s wait ends), and the broker exits 0.
func TestSIGTERM_ParkedPopsAnswer204AtOnceAndTheBrokerExits(t *testing.T) {
	s := e2e.StartWith(t, e2e.StartOpts{Process: true, Env: []string{"METRICS_SAMPLE_INTERVAL_MS=100"}})
	q := e2e.Unique(t, "term")
	s.Configure(t, q, nil)
	const parked = 4
	type answer struct {
		status  int
		err     error
		elapsed time.Duration
	}
	answers := make(chan answer, parked)
	for i := range parked {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r, err := s.DoCtx(ctx, "GET", e2e.PopQueue(q, "consumerGroup", fmt.Sprintf("g%d", i), "wait", "true", "timeout", "30000"), nil)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			answers <- answer{status: r.Status}
		}()
	}
	s.WaitParked(t, q, parked)
	start := time.Now()
	go s.Stop()
	for range parked {
		a := <-answers
		el := time.Since(start)
		if a.err != nil || a.status != 204 {
			t.Errorf("parked pop at SIGTERM: %d %v", a.status, a.err)
		}
		if el > 5*time.Second {
			t.Errorf("parked pop answered %v after SIGTERM, want at once", el)
		}
	}
	if err := e2e.Eventually(20*time.Second, 50*time.Millisecond, func() error {
		if exited, _ := s.Exited(); !exited {
			return fmt.Errorf("still running")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, code := s.Exited(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}
