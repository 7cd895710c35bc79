package faulttest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 41, defect 3: while the database is down, a stream of requests does
// not open a connection each and does not log a line each. Connection
// attempts back off (one in flight, a jittered exponential wait up to a
// second), and a failing error code is logged at most about once a second
// with the count it stands for. Once the database is back the broker finds
// it within the backoff's ceiling.
func TestCutDatabase_ConnectionAttemptsBackOffAndLogsAreSpaced(t *testing.T) {
	s, p := startProxied(t, nil)
	q := e2e.Unique(t, "backoff")
	s.Push(t, e2e.PushItem{Queue: q, Partition: "P", TransactionID: e2e.TxID("before"), Payload: 1})

	p.Cut()
	before := p.Accepted()
	const outage = 3 * time.Second
	var requests atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), outage)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				var err error
				if w%2 == 0 {
					_, _, err = s.PushCtx(ctx, e2e.PushItem{Queue: q, Partition: "P", TransactionID: e2e.TxID("cut"), Payload: 2})
				} else {
					_, err = s.PopCtx(ctx, e2e.PopQueue(q, "consumerGroup", "g"))
				}
				if err == nil {
					requests.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	attempts := p.Accepted() - before
	failedLines := strings.Count(s.Logs(), `"msg":"request failed"`)
	t.Logf("%v of outage: %d requests answered, %d connection attempts, %d 'request failed' lines",
		outage, requests.Load(), attempts, failedLines)
	if requests.Load() < 100 {
		t.Fatalf("only %d requests answered in %v: the broker did not fail fast", requests.Load(), outage)
	}
	// The pool's probes (about 8 in 3 s), the listener's reconnects (100 ms
	// doubling), the leader connection's, and the attempts in flight when
	// the cut came.
	if attempts > 40 {
		t.Errorf("%d connection attempts in %v of outage for %d requests, want at most 40", attempts, outage, requests.Load())
	}
	// One line a second per error code (push and pop answer different ones).
	if failedLines > 12 {
		t.Errorf("%d 'request failed' lines in %v, want at most 12", failedLines, outage)
	}

	p.Restore()
	restored := time.Now()
	if err := e2e.Eventually(10*time.Second, 20*time.Millisecond, func() error {
		st, _, err := s.PushCtx(context.Background(), e2e.PushItem{Queue: q, Partition: "P", TransactionID: e2e.TxID("after"), Payload: 3})
		if err == nil && st != 201 {
			return fmt.Errorf("status %d", st)
		}
		return err
	}); err != nil {
		t.Fatalf("push after the database came back: %v", err)
	}
	t.Logf("first push stored %v after the restore", time.Since(restored).Round(time.Millisecond))
}
