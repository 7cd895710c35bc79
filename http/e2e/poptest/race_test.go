package poptest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// fill pushes per messages to each of parts partitions, in rounds of chunk
// per partition (so a partition holds several segments), and returns each
// partition's transaction ids in push order.
func fill(t *testing.T, s *e2e.Server, q string, parts, per, chunk int) map[string][]string {
	t.Helper()
	want := map[string][]string{}
	for done := 0; done < per; done += chunk {
		for i := 0; i < parts; i++ {
			p := fmt.Sprintf("p%02d", i)
			want[p] = append(want[p], s.PushN(t, q, p, chunk).TxIDs()...)
		}
	}
	return want
}

// delivery is one 200 a popper got.
type delivery struct {
	popper int
	pop    *e2e.PopResponse
}

// poppers runs n goroutines popping path until stop says so or d passes, and
// returns every delivery. A popper stops after idle consecutive empty pops.
func poppers(t *testing.T, s *e2e.Server, path string, n, idle int, d time.Duration, stop func(delivered int64) bool) []delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var (
		mu        sync.Mutex
		all       []delivery
		delivered atomic.Int64
		failure   atomic.Value
		wg        sync.WaitGroup
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(id int) {
			defer wg.Done()
			empties := 0
			for ctx.Err() == nil && !stop(delivered.Load()) && empties < idle {
				r, err := s.PopCtx(ctx, path)
				if err != nil {
					if ctx.Err() == nil {
						failure.Store(err.Error())
					}
					return
				}
				switch r.Status {
				case 200:
					empties = 0
					mu.Lock()
					all = append(all, delivery{popper: id, pop: r.Pop})
					mu.Unlock()
					delivered.Add(int64(len(r.Pop.Messages)))
				case 204:
					empties++
					time.Sleep(10 * time.Millisecond)
				default:
					failure.Store(fmt.Sprintf("%d %q", r.Status, r.Body))
					return
				}
			}
		}(i)
	}
	wg.Wait()
	if f := failure.Load(); f != nil {
		t.Fatalf("a popper failed: %v", f)
	}
	return all
}

// TestPop_RaceAutoAckExactlyOnceInOrder: 20 concurrent poppers of one group on
// 10 partitions (wildcard, batch 10, partitions 2, autoAck) receive every one
// of 1000 messages exactly once, and each partition's messages in push
// (offset) order: every stretch of a delivery continues its partition exactly
// where the previous one ended.
func TestPop_RaceAutoAckExactlyOnceInOrder(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "race-autoack")
	want := fill(t, s, q, 10, 100, 20)
	all := poppers(t, s, e2e.PopQueue(q, "consumerGroup", "g", "batch", "10", "partitions", "2", "autoAck", "true"),
		20, 20, 60*time.Second, func(n int64) bool { return n >= 1000 })

	seen := map[string]int{}
	// next[p] is the push index each partition's next stretch must start at;
	// stretches of different deliveries are matched to it by their start.
	starts := map[string]map[int]int{} // partition -> start index -> length
	index := map[string]int{}
	for p, txs := range want {
		starts[p] = map[int]int{}
		for i, tx := range txs {
			index[tx] = i
		}
	}
	total := 0
	for _, d := range all {
		if d.pop.LeaseID != "" {
			t.Fatalf("autoAck delivery with leaseId %q", d.pop.LeaseID)
		}
		for _, r := range runs(d.pop) {
			first := index[r.txs[0]]
			for k, tx := range r.txs {
				seen[tx]++
				total++
				if idx, ok := index[tx]; !ok || idx != first+k || want[r.partition][idx] != tx {
					t.Fatalf("popper %d: partition %s stretch %v is not consecutive in push order", d.popper, r.partition, r.txs)
				}
			}
			if _, dup := starts[r.partition][first]; dup {
				t.Fatalf("partition %s: two stretches start at message %d", r.partition, first)
			}
			starts[r.partition][first] = len(r.txs)
		}
	}
	for tx, n := range seen {
		if n != 1 {
			t.Fatalf("message %s delivered %d times", tx, n)
		}
	}
	if total != 1000 || len(seen) != 1000 {
		t.Fatalf("%d deliveries of %d distinct messages, want 1000 exactly once", total, len(seen))
	}
	for p, st := range starts {
		at := 0
		for at < len(want[p]) {
			n, ok := st[at]
			if !ok {
				t.Fatalf("partition %s: no stretch starts at message %d", p, at)
			}
			at += n
		}
		if c := cursorOf(t, q, p, "g"); c.Committed != int64(len(want[p])) || c.LeaseID != "" {
			t.Fatalf("partition %s: cursor %+v, want committed %d", p, c, len(want[p]))
		}
	}
	t.Logf("%d deliveries to 20 poppers", len(all))
}

// TestPop_RaceLeasedSpansNeverOverlap: 20 concurrent poppers of one group on
// 10 partitions without autoAck: within the lease time no two live leases
// cover the same partition, so the sets of messages returned to different
// pops never overlap; each partition is leased exactly once, under the lease
// id its delivery carried.
func TestPop_RaceLeasedSpansNeverOverlap(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "race-leased")
	want := fill(t, s, q, 10, 20, 10)
	start := time.Now()
	all := poppers(t, s, e2e.PopQueue(q, "consumerGroup", "g", "batch", "10", "partitions", "2", "leaseSeconds", "60"),
		20, 5, 40*time.Second, func(int64) bool { return false })
	if time.Since(start) > 50*time.Second {
		t.Fatal("the poppers outlived the 60s lease; overlap would be redelivery")
	}
	owner := map[string]string{}   // message -> lease id
	leaseOf := map[string]string{} // partition -> lease id
	leases := map[string]bool{}
	total := 0
	for _, d := range all {
		if leases[d.pop.LeaseID] {
			t.Fatalf("lease id %s answered twice", d.pop.LeaseID)
		}
		leases[d.pop.LeaseID] = true
		for _, r := range runs(d.pop) {
			if l, dup := leaseOf[r.partition]; dup {
				t.Fatalf("partition %s leased twice at once: %s and %s", r.partition, l, d.pop.LeaseID)
			}
			leaseOf[r.partition] = d.pop.LeaseID
			if !slices.Equal(r.txs, want[r.partition][:len(r.txs)]) {
				t.Fatalf("partition %s: delivered %v, want the first of %v", r.partition, r.txs, want[r.partition])
			}
		}
		for _, m := range d.pop.Messages {
			if l, dup := owner[m.TransactionID]; dup {
				t.Fatalf("message %s returned under leases %s and %s", m.TransactionID, l, d.pop.LeaseID)
			}
			owner[m.TransactionID] = d.pop.LeaseID
			total++
		}
	}
	if len(leaseOf) != 10 || total != 100 {
		t.Fatalf("%d partitions leased, %d messages delivered; want all 10 partitions, 10 messages each", len(leaseOf), total)
	}
	for p, l := range leaseOf {
		if c := cursorOf(t, q, p, "g"); c.LeaseID != l || c.Committed != 0 {
			t.Fatalf("partition %s: cursor %+v, want lease %s", p, c, l)
		}
	}
	t.Logf("%d leased deliveries to 20 poppers", len(all))
}
