package poptest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// TestFirstContactNeverDeadlocksWithWrites (issue 8): a consumer group's
// first contact with partitions (queen.claim creating its cursors) and
// segment writes (queen.append_segments) lock partition rows; they must do
// so in modes or an order that cannot form a cycle, so neither side ever
// fails with "deadlock detected". Six pushers write to ten partitions of one
// queue, every request touching all ten, while new consumer groups keep
// popping that queue (each new group's first pop first-contacts all ten
// partitions: partitions=0, batch=10; every other group with a
// subscription mode; the popped messages acked, every fourth batch as
// failed) and new queues keep arriving by push and pop. No push item may
// fail and no request may answer 5xx.
//
// Each group has one pop in flight at a time: two pipelined claim rounds
// that both first-contact the same two new groups, in opposite orders, are
// a different cycle (cursor insert against cursor insert), removed by the
// order of the claims in a round, not by the functions.
func TestFirstContactNeverDeadlocksWithWrites(t *testing.T) {
	// Not parallel: the load would disturb the timing of the other tests,
	// and their load would thin out this one's.
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: e2e.CreateDB(t, "deadlock").URL, Env: []string{"DB_POOL_SIZE=16"}})
	queue := e2e.Unique(t, "deadlock")
	const (
		pushers    = 6
		partitions = 10
		groupLoops = 4 // goroutines creating new groups
		queueLoops = 2 // goroutines creating new queues
		runFor     = 10 * time.Second
	)
	ctx, cancel := context.WithTimeout(context.Background(), runFor+30*time.Second)
	defer cancel()
	deadline := time.Now().Add(runFor)

	var (
		mu       sync.Mutex
		failures []string
		nFail    atomic.Int64
		pushed   atomic.Int64
		pops     atomic.Int64
		popped   atomic.Int64
		groups   atomic.Int64
		queues   atomic.Int64
		seq      atomic.Int64
	)
	fail := func(format string, args ...any) {
		nFail.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	// do sends a request and records a transport error or a 5xx; it
	// returns nil for either.
	do := func(method, path string, body any) *e2e.Response {
		r, err := s.DoCtx(ctx, method, path, body)
		switch {
		case err != nil:
			fail("%s %s: %v", method, path, err)
			return nil
		case r.Status >= 500:
			fail("%s %s: %d %s", method, path, r.Status, r.Body)
			return nil
		}
		return r
	}
	push := func(items []e2e.PushItem) {
		r := do("POST", "/api/v1/push", map[string]any{"items": items})
		if r == nil {
			return
		}
		var res []e2e.PushResult
		if r.Status != 201 || json.Unmarshal(r.Body, &res) != nil || len(res) != len(items) {
			fail("push: %d %s", r.Status, r.Body)
			return
		}
		for _, it := range res {
			if it.Status == "failed" || it.Error != "" {
				fail("push item %s: status %q error %q", it.TransactionID, it.Status, it.Error)
				continue
			}
			pushed.Add(1)
		}
	}
	// pop pops for group and acks what it got (failed every fourth time).
	pop := func(q, group string, extra ...string) {
		r := do("GET", e2e.PopQueue(q, append([]string{"consumerGroup", group, "batch", "10", "partitions", "0"}, extra...)...), nil)
		if r == nil {
			return
		}
		pops.Add(1)
		if r.Status == 204 {
			return
		}
		var p e2e.PopResponse
		if r.Status != 200 || json.Unmarshal(r.Body, &p) != nil {
			fail("pop %s@%s: %d %s", q, group, r.Status, r.Body)
			return
		}
		popped.Add(int64(len(p.Messages)))
		if len(p.Messages) == 0 {
			return
		}
		status := "completed"
		if seq.Add(1)%4 == 0 {
			status = "failed"
		}
		acks := make([]map[string]any, len(p.Messages))
		for i, m := range p.Messages {
			acks[i] = map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID,
				"leaseId": m.LeaseID, "status": status}
		}
		do("POST", "/api/v1/ack/batch", map[string]any{"consumerGroup": group, "acknowledgments": acks})
	}

	var wg sync.WaitGroup
	for w := range pushers {
		wg.Go(func() {
			for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
				items := make([]e2e.PushItem, partitions)
				for k := range items {
					items[k] = e2e.PushItem{Queue: queue, Partition: "p" + strconv.Itoa(k),
						TransactionID: fmt.Sprintf("w%d-%d-%d", w, n, k), Payload: map[string]any{"w": w, "n": n}}
				}
				push(items)
			}
		})
	}
	for range groupLoops {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				n := groups.Add(1)
				group := fmt.Sprintf("g%d", n)
				var extra []string
				if n%2 == 0 {
					extra = []string{"subscriptionMode", "all"}
				}
				pop(queue, group, extra...)
			}
		})
	}
	for range queueLoops {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				q := e2e.Unique(t, "deadlock-new")
				queues.Add(1)
				var qw sync.WaitGroup
				qw.Go(func() {
					items := make([]e2e.PushItem, 3)
					for k := range items {
						items[k] = e2e.PushItem{Queue: q, Partition: "n" + strconv.Itoa(k), Payload: map[string]any{"k": k}}
					}
					push(items)
				})
				for g := range 2 {
					qw.Go(func() { pop(q, "ng"+strconv.Itoa(g)) })
				}
				qw.Wait()
				pop(q, "late")
			}
		})
	}
	wg.Wait()

	t.Logf("%d push items written, %d pops (%d messages), %d new groups, %d new queues, %d failures",
		pushed.Load(), pops.Load(), popped.Load(), groups.Load(), queues.Load(), nFail.Load())
	if n := nFail.Load(); n > 0 {
		t.Fatalf("%d failed push items or 5xx answers; first ones:\n  %s", n, strings.Join(failures, "\n  "))
	}
	if pushed.Load() < 500 || groups.Load() < 20 || queues.Load() < 5 {
		t.Fatalf("too little load to show anything: %d items, %d groups, %d queues", pushed.Load(), groups.Load(), queues.Load())
	}
}
