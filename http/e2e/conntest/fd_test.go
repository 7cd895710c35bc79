package conntest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// TestConn_SurvivesRunningOutOfFileDescriptors: with 256 file descriptors and
// 300 idle connections the broker cannot accept them all (accept4 fails
// with EMFILE); it keeps running, logs a warning and retries, and once the
// connections are gone it serves requests again. Before the fix the accept
// loop took EMFILE as fatal and the process exited 1.
func TestConn_SurvivesRunningOutOfFileDescriptors(t *testing.T) {
	t.Parallel()
	const (
		noFile = 256
		conns  = 300 // more than noFile; fewer than the listen backlog (somaxconn)
	)
	// A read timeout longer than the test, so the broker cannot free the
	// descriptors by closing the idle connections itself.
	s := e2e.StartWith(t, e2e.StartOpts{NoFile: noFile, Env: []string{"HTTP_READ_TIMEOUT_MS=120000"}})
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := 0; i < conns; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), 5*time.Second)
		if err != nil {
			if exited, code := s.Exited(); exited {
				t.Fatalf("the broker exited (code %d) at connection %d under ulimit -n %d (dial: %v)", code, i, noFile, err)
			}
			t.Fatalf("connection %d: %v", i, err)
		}
		open = append(open, c)
	}

	// The broker notices at its next accept; wait for its warning or its
	// exit.
	const warning = "accepting a connection failed"
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.Logs(), warning) {
		if exited, code := s.Exited(); exited {
			t.Fatalf("the broker exited (code %d) with %d connections open under ulimit -n %d", code, conns, noFile)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q warning within 30s with %d connections open under ulimit -n %d", warning, conns, noFile)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(s.Logs(), "too many open files") {
		t.Fatalf("the warning does not name the error:\n%s", s.Logs())
	}
	// Still alive through a few retries at the longest backoff.
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if exited, code := s.Exited(); exited {
			t.Fatalf("the broker exited (code %d) while out of file descriptors", code)
		}
	}

	for _, c := range open {
		c.Close()
	}
	open = nil
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := s.DoCtx(ctx, "GET", "/health", nil)
	if err != nil || r.Status != 200 {
		t.Fatalf("GET /health after the connections closed: %v %+v", err, r)
	}
	q := e2e.Unique(t, "fd")
	res := s.Push(t, e2e.PushItem{Queue: q, Payload: map[string]any{"n": 1}, TransactionID: "fd-1"})
	if res[0].Status != "queued" {
		t.Fatalf("push after recovery: %+v", res[0])
	}
	if p := s.Pop(t, e2e.PopQueue(q, "consumerGroup", "g")); p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop after recovery: %+v", p)
	}
	if !strings.Contains(s.Logs(), "accepting connections again") {
		t.Fatalf("no recovery line in the log:\n%s", s.Logs())
	}
	if exited, code := s.Exited(); exited {
		t.Fatalf("the broker exited (code %d)", code)
	}
}
