package retentiontest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// D9, the Queen JS SDK's retentionTest with shorter times: retentionSeconds
// 2, completedRetentionSeconds 1, messages pushed and never consumed; past
// the limit the segments, their transaction ids and the messages are gone
// (a pop finds none), while a queue without retention keeps its unconsumed
// messages and nothing is dropped before its time.
func TestRetention_ExpiredSegmentsAreDropped(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, keep := e2e.Unique(t, "expired"), e2e.Unique(t, "kept")
	s.Configure(t, q, map[string]any{"retentionEnabled": true, "retentionSeconds": 2, "completedRetentionSeconds": 1})
	pushed := time.Now()
	pushEach(t, s, q, "", 30)
	pushEach(t, s, keep, "", 5)

	// Young: several runs pass and nothing goes.
	time.Sleep(700 * time.Millisecond)
	if c := e2e.QueueCounts(t, q); time.Since(pushed) < 2*time.Second && (c.Segments != 30 || c.Txids != 30) {
		t.Fatalf("young messages dropped: %+v", c)
	}
	waitFor(t, 15*time.Second, "expired segments dropped", func() error {
		if c := e2e.QueueCounts(t, q); c.Segments != 0 || c.Txids != 0 {
			return fmt.Errorf("%+v left", c)
		}
		return nil
	})
	if d := time.Since(pushed); d < 2*time.Second {
		t.Fatalf("dropped after %v, before retentionSeconds", d)
	}
	if p := s.Pop(t, e2e.PopQueue(q, "batch", "100", "wait", "false")); p != nil {
		t.Fatalf("pop after retention delivered %d messages", len(p.Messages))
	}
	if c := e2e.QueueCounts(t, keep); c.Segments != 5 || c.Txids != 5 {
		t.Fatalf("queue without retention lost messages: %+v", c)
	}
	if p := s.PopOK(t, e2e.PopQueue(keep, "batch", "10")); len(p.Messages) != 5 {
		t.Fatalf("queue without retention delivered %d of 5", len(p.Messages))
	}
}

// D9: completedRetentionSeconds drops a segment once every group with a
// cursor on the partition has committed past it and it is older than the
// limit; what the slowest group has not consumed stays, and a group behind
// a dropped segment never sees it again.
func TestRetention_CompletedSegmentsGoOnceEveryGroupIsPast(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "completed")
	s.Configure(t, q, map[string]any{"retentionEnabled": true, "completedRetentionSeconds": 1})
	pushEach(t, s, q, "", 4)
	consume := func(group string, n int) {
		t.Helper()
		p := s.PopOK(t, e2e.PopQueue(q, "batch", fmt.Sprint(n), "consumerGroup", group))
		if len(p.Messages) != n {
			t.Fatalf("group %s got %d of %d", group, len(p.Messages), n)
		}
		for _, m := range p.Messages {
			s.AckOK(t, m, "completed", group)
		}
	}
	consume("fast", 4)
	consume("slow", 2)
	waitFor(t, 10*time.Second, "the segments both groups passed dropped", func() error {
		if c := e2e.QueueCounts(t, q); c.Segments != 2 {
			return fmt.Errorf("%d segments", c.Segments)
		}
		return nil
	})
	time.Sleep(600 * time.Millisecond) // three more runs
	if c := e2e.QueueCounts(t, q); c.Segments != 2 || c.Txids != 2 {
		t.Fatalf("what the slow group has not consumed went: %+v", c)
	}
	consume("slow", 2)
	waitFor(t, 10*time.Second, "every segment dropped", func() error {
		if c := e2e.QueueCounts(t, q); c.Segments != 0 || c.Txids != 0 {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	// A group arriving now starts at the oldest retained offset: nothing.
	if p := s.Pop(t, e2e.PopQueue(q, "consumerGroup", "late", "subscriptionMode", "all")); p != nil {
		t.Fatalf("a new group got %d dropped messages", len(p.Messages))
	}
}

// D9, as the reference: retention touches only queues with
// retentionEnabled. A queue configured for Queen with
// completedRetentionSeconds 1 and retentionSeconds 1 but without the flag
// keeps its consumed history, and a group created later with
// subscriptionMode=all finds every message.
func TestD9_RetentionOnlyWithRetentionEnabled(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "noflag")
	s.Configure(t, q, map[string]any{"completedRetentionSeconds": 1, "retentionSeconds": 1})
	txs := pushEach(t, s, q, "", 4)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "4", "consumerGroup", "first"))
	for _, m := range p.Messages {
		s.AckOK(t, m, "completed", "first")
	}
	// Past both limits and several retention runs (every 200 ms).
	time.Sleep(2500 * time.Millisecond)
	if c := e2e.QueueCounts(t, q); c.Segments != 4 || c.Txids != 4 {
		t.Fatalf("retention dropped from a queue without retentionEnabled: %+v", c)
	}
	late := s.PopOK(t, e2e.PopQueue(q, "batch", "10", "consumerGroup", "late", "subscriptionMode", "all"))
	e2e.WantTxIDs(t, "a group created later", late, txs)
}

// A retention run racing pushes, pops and acks on the same queue: no
// request fails, every message is delivered (nothing young is lost), and
// the consumed segments are dropped meanwhile.
func TestRetention_RacesPushesAndPops(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "race")
	s.Configure(t, q, map[string]any{"retentionEnabled": true, "retentionSeconds": 30, "completedRetentionSeconds": 1})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var (
		mu        sync.Mutex
		pushed    = map[string]bool{}
		delivered = map[string]bool{}
		errs      []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	pushing := time.Now().Add(3 * time.Second)
	var pushers sync.WaitGroup
	for w := range 3 {
		pushers.Add(1)
		go func() {
			defer pushers.Done()
			for i := 0; time.Now().Before(pushing); i++ {
				tx := fmt.Sprintf("w%d-%d", w, i)
				status, res, err := s.PushCtx(ctx, e2e.PushItem{Queue: q, TransactionID: tx, Payload: map[string]any{"i": i}})
				if err != nil || status != 201 || res[0].Status != "queued" {
					fail("push %s: %d %v %v", tx, status, res, err)
					return
				}
				mu.Lock()
				pushed[tx] = true
				mu.Unlock()
			}
		}()
	}
	allIn := make(chan struct{})
	go func() { pushers.Wait(); close(allIn) }()
	var consumers sync.WaitGroup
	for range 2 {
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			for ctx.Err() == nil {
				r, err := s.PopCtx(ctx, e2e.PopQueue(q, "batch", "10", "wait", "true", "timeout", "500"))
				if err != nil || (r.Status != 200 && r.Status != 204) {
					fail("pop: %v %v", r, err)
					return
				}
				if r.Status == 204 {
					select {
					case <-allIn:
						mu.Lock()
						done := len(delivered) >= len(pushed)
						mu.Unlock()
						if done {
							return
						}
					default:
					}
					continue
				}
				items := make([]map[string]any, len(r.Pop.Messages))
				for i, m := range r.Pop.Messages {
					items[i] = e2e.AckItem(m, "completed")
				}
				acks, err := s.AckBatchCtx(ctx, nil, items)
				if err != nil {
					fail("ack: %v", err)
					return
				}
				for i, a := range acks {
					if !a.Success {
						fail("ack %s: %s", r.Pop.Messages[i].TransactionID, a.ErrText())
					}
				}
				mu.Lock()
				for _, m := range r.Pop.Messages {
					delivered[m.TransactionID] = true
				}
				mu.Unlock()
			}
		}()
	}
	consumers.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d failures, first: %s", len(errs), strings.Join(errs[:min(len(errs), 5)], "; "))
	}
	for tx := range pushed {
		if !delivered[tx] {
			t.Fatalf("message %s was pushed and never delivered (of %d)", tx, len(pushed))
		}
	}
	if len(pushed) < 20 {
		t.Fatalf("only %d messages pushed", len(pushed))
	}
	waitFor(t, 10*time.Second, "the consumed segments dropped", func() error {
		if c := e2e.QueueCounts(t, q); c.Segments != 0 || c.Txids != 0 {
			return fmt.Errorf("%+v of %d pushed", c, len(pushed))
		}
		return nil
	})
}

// Two broker processes on one database run retention every 100 ms: one
// leads each run, so every dropped segment is counted once across the two
// (nothing is done twice), and neither reports a failed run.
func TestRetention_TwoBrokersShareOneDatabase(t *testing.T) {
	t.Parallel()
	db := e2e.CreateDB(t, "retention2")
	env := []string{"RETENTION_INTERVAL=100", "EVICTION_INTERVAL=100", "LOG_LEVEL=info"}
	a := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: env})
	b := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: env})
	q := e2e.Unique(t, "two")
	a.Configure(t, q, map[string]any{"retentionEnabled": true, "retentionSeconds": 1, "maxWaitTimeSeconds": 1})
	const n = 40
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
		s.PushN(t, q, fmt.Sprint("p", i%4), 1)
	}
	const dropped = "queengo_retention_dropped_segments_total"
	waitFor(t, 20*time.Second, "every segment dropped", func() error {
		if got := metric(t, a, dropped) + metric(t, b, dropped); got != n {
			return fmt.Errorf("%v segments dropped", got)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // three more runs each
	if got := metric(t, a, dropped) + metric(t, b, dropped); got != n {
		t.Fatalf("%v segments counted as dropped, want %d: some were done twice", got, n)
	}
	for _, s := range []*e2e.Server{a, b} {
		if logs := s.Logs(); strings.Contains(logs, "run failed") || strings.Contains(logs, `"level":"ERROR"`) {
			t.Fatalf("broker log:\n%s", logs)
		}
	}
}
