package poptest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/apitest"
)

// sleepUntil sleeps until t.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// TestPop_DelayedProcessingOnEveryRoute: with delayedProcessing D only
// segments at least D seconds old are delivered, on the single-partition,
// wildcard and discovery routes alike, and to a parked long poll.
func TestPop_DelayedProcessingOnEveryRoute(t *testing.T) {
	t.Parallel()
	s := shared(t)
	const delay = 3 * time.Second
	ns := apitest.Unique(t, "delayed")
	q := ns + ".t.q"
	s.Configure(t, q, map[string]any{"delayedProcessing": 3})
	routes := map[string]string{
		"single":    apitest.PopPartition(q, "p", "consumerGroup", "single", "batch", "10"),
		"wildcard":  apitest.PopQueue(q, "consumerGroup", "wildcard", "batch", "10"),
		"discovery": apitest.PopDiscovery("namespace", ns, "consumerGroup", "discovery", "batch", "10"),
	}
	txs := s.PushN(t, q, "p", 1).TxIDs()
	written := lastWrite(t, q, "p")
	parked := async(context.Background(), s, apitest.PopQueue(q, "consumerGroup", "parked", "wait", "true", "timeout", "10000"))
	for _, path := range routes {
		s.PopEmpty(t, path)
	}
	sleepUntil(written.Add(1500 * time.Millisecond))
	for name, path := range routes {
		sent := time.Now()
		if r := s.TryPop(t, path); sent.Before(written.Add(delay)) || r.Status != 200 {
			if err := r.Bare204(); err != nil {
				t.Fatalf("%s, %v after the write: %v", name, sent.Sub(written), err)
			}
		}
	}
	for name, path := range routes {
		p := s.PopUntil(t, path, 8*time.Second, 20*time.Millisecond)
		at := time.Now()
		apitest.WantTxIDs(t, name, p, txs)
		if d := at.Sub(written); d < delay {
			t.Fatalf("%s delivered %v after the write, before the %v delay", name, d, delay)
		}
	}
	o := await(t, parked, 12*time.Second)
	if o.r.Status != 200 {
		t.Fatalf("parked pop: %d %q", o.r.Status, o.r.Body)
	}
	apitest.WantTxIDs(t, "parked", o.r.Pop, txs)
	if d := o.at.Sub(written); d < delay {
		t.Fatalf("parked pop delivered %v after the write, before the %v delay", d, delay)
	}
}

// lastWrite returns when queue/partition was last written, as PostgreSQL
// recorded it.
func lastWrite(t *testing.T, queue, partition string) time.Time {
	t.Helper()
	var epoch float64
	if err := apitest.DB.QueryRow(`SELECT extract(epoch FROM p.last_write_at)::float8 FROM queen.partitions p
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1 AND p.name = $2`, []any{queue, partition}, &epoch); err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, int64(epoch*1e9))
}

// TestPop_WindowBufferOnEveryRoute: with windowBuffer W a partition written
// within the last W seconds delivers nothing, on every route; once it has been
// quiet for W its whole backlog is eligible. Other partitions are not held.
func TestPop_WindowBufferOnEveryRoute(t *testing.T) {
	t.Parallel()
	s := shared(t)
	const window = 4 * time.Second
	ns := apitest.Unique(t, "window")
	q := ns + ".t.q"
	s.Configure(t, q, map[string]any{"windowBuffer": 4})
	routes := map[string]string{
		"single":    apitest.PopPartition(q, "p", "consumerGroup", "single", "batch", "10"),
		"wildcard":  apitest.PopQueue(q, "consumerGroup", "wildcard", "batch", "10", "partitions", "0"),
		"discovery": apitest.PopDiscovery("namespace", ns, "consumerGroup", "discovery", "batch", "10", "partitions", "0"),
	}
	m1 := s.PushN(t, q, "p", 1).TxIDs()
	quiet := s.PushN(t, q, "quiet", 1).TxIDs()
	for _, path := range routes {
		s.PopEmpty(t, path)
	}
	s.PopEmpty(t, apitest.PopPartition(q, "quiet", "consumerGroup", "single"))
	sleepUntil(lastWrite(t, q, "quiet").Add(1500 * time.Millisecond))
	m2 := s.PushN(t, q, "p", 1).TxIDs() // p's window starts again
	pWrite := lastWrite(t, q, "p")
	sleepUntil(lastWrite(t, q, "quiet").Add(window + 150*time.Millisecond))
	// quiet's window has passed, p's has not.
	s.PopEmpty(t, routes["single"])
	apitest.WantTxIDs(t, "single quiet", s.PopOK(t, apitest.PopPartition(q, "quiet", "consumerGroup", "single")), quiet)
	apitest.WantTxIDs(t, "wildcard", s.PopOK(t, routes["wildcard"]), quiet)
	apitest.WantTxIDs(t, "discovery", s.PopOK(t, routes["discovery"]), quiet)
	if left := time.Until(pWrite.Add(window)); left < 100*time.Millisecond {
		t.Fatalf("the box was too slow: p's window ran out before the checks inside it finished (%v left)", left)
	}
	for name, path := range routes {
		p := s.PopUntil(t, path, 8*time.Second, 20*time.Millisecond)
		at := time.Now()
		apitest.WantTxIDs(t, name+": p after its window", p, slices.Concat(m1, m2))
		if d := at.Sub(pWrite); d < window {
			t.Fatalf("%s delivered p %v after its last write, inside the %v window", name, d, window)
		}
	}
}

// minPopQueue configures a queue with minPopWaitTime ms and returns it.
func minPopQueue(t *testing.T, s *apitest.Server, ms int) string {
	t.Helper()
	ns := apitest.Unique(t, "minpop")
	q := ns + ".t.q"
	s.Configure(t, q, map[string]any{"minPopWaitTime": ms})
	return q
}

// TestPop_MinPopWaitTimeHoldsUnderFullBatch: on the wildcard route with
// wait=true and batch > 1 a non-empty, under-full batch is held up to
// minPopWaitTime, then delivered.
func TestPop_MinPopWaitTimeHoldsUnderFullBatch(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := minPopQueue(t, s, 1500)
	txs := s.PushN(t, q, "Default", 2).TxIDs()
	r := s.TryPop(t, apitest.PopQueue(q, "wait", "true", "batch", "10", "timeout", "10000"))
	t.Logf("under-full batch answered after %v (minPopWaitTime 1500ms)", r.Elapsed)
	if r.Status != 200 {
		t.Fatalf("%d %q", r.Status, r.Body)
	}
	apitest.WantTxIDs(t, "held batch", r.Pop, txs)
	if r.Elapsed < 1400*time.Millisecond || r.Elapsed > 1500*time.Millisecond+atOnce {
		t.Fatalf("answered after %v, want held about 1500ms", r.Elapsed)
	}
}

// TestPop_MinPopWaitTimeEndsWhenBatchFills: the hold ends as soon as the batch
// fills.
func TestPop_MinPopWaitTimeEndsWhenBatchFills(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := minPopQueue(t, s, 5000)
	first := s.PushN(t, q, "Default", 2).TxIDs()
	ch := async(context.Background(), s, apitest.PopQueue(q, "wait", "true", "batch", "5", "timeout", "10000"))
	if o, held := pending(ch, 500*time.Millisecond); !held {
		t.Fatalf("an under-full batch was not held: %d %q after %v", o.r.Status, o.r.Body, o.r.Elapsed)
	}
	rest := s.PushN(t, q, "Default", 3).TxIDs()
	filled := time.Now()
	o := await(t, ch, 10*time.Second)
	if o.r.Status != 200 {
		t.Fatalf("%d %q", o.r.Status, o.r.Body)
	}
	apitest.WantTxIDs(t, "filled batch", o.r.Pop, slices.Concat(first, rest))
	t.Logf("answered %v after the batch filled (pop took %v, minPopWaitTime 5000ms)", o.at.Sub(filled), o.r.Elapsed)
	if o.at.Sub(filled) > atOnce || o.r.Elapsed > 4*time.Second {
		t.Fatalf("answered %v after the batch filled (pop took %v): the hold did not end when it filled", o.at.Sub(filled), o.r.Elapsed)
	}
}

// TestPop_MinPopWaitTimeNeverOutlivesTimeout: a hold longer than the caller's
// timeout ends at the timeout.
func TestPop_MinPopWaitTimeNeverOutlivesTimeout(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := minPopQueue(t, s, 5000)
	txs := s.PushN(t, q, "Default", 2).TxIDs()
	r := s.TryPop(t, apitest.PopQueue(q, "wait", "true", "batch", "10", "timeout", "800"))
	t.Logf("answered after %v (timeout 800ms, minPopWaitTime 5000ms)", r.Elapsed)
	if r.Elapsed > 800*time.Millisecond+1500*time.Millisecond {
		t.Fatalf("answered after %v: the hold outlived the 800ms timeout", r.Elapsed)
	}
	if r.Status != 200 {
		t.Fatalf("%d %q: the held messages were not delivered at the timeout", r.Status, r.Body)
	}
	apitest.WantTxIDs(t, "held batch", r.Pop, txs)
}

// TestPop_MinPopWaitTimeNeverDelaysEmptyQueue: a pop that finds the queue
// empty is a long poll, not a hold: a push wakes it and it answers at once.
func TestPop_MinPopWaitTimeNeverDelaysEmptyQueue(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := minPopQueue(t, s, 5000)
	var txs []string
	o, pushed := parkThenPush(t, s, apitest.PopQueue(q, "wait", "true", "batch", "10", "timeout", "10000"),
		func() { txs = s.PushN(t, q, "Default", 1).TxIDs() })
	if o.r.Status != 200 {
		t.Fatalf("%d %q", o.r.Status, o.r.Body)
	}
	apitest.WantTxIDs(t, "woken pop", o.r.Pop, txs)
	t.Logf("answered %v after the push (minPopWaitTime 5000ms)", o.at.Sub(pushed))
	if o.at.Sub(pushed) > atOnce {
		t.Fatalf("answered %v after the push: minPopWaitTime delayed an empty queue's long poll", o.at.Sub(pushed))
	}
}

// TestPop_MinPopWaitTimeOnlyWildcardWaitBatch: minPopWaitTime does not apply
// with wait=false, with batch=1, on the single-partition route or on the
// discovery route.
func TestPop_MinPopWaitTimeOnlyWildcardWaitBatch(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, tc := range []struct {
		name string
		path func(q string) string
		want int
	}{
		{"wait=false", func(q string) string { return apitest.PopQueue(q, "wait", "false", "batch", "10") }, 2},
		{"batch=1", func(q string) string { return apitest.PopQueue(q, "wait", "true", "batch", "1", "timeout", "10000") }, 1},
		{"single-partition route", func(q string) string {
			return apitest.PopPartition(q, "Default", "wait", "true", "batch", "10", "timeout", "10000")
		}, 2},
		{"discovery route", func(q string) string {
			ns, _, _ := strings.Cut(q, ".")
			return apitest.PopDiscovery("namespace", ns, "wait", "true", "batch", "10", "timeout", "10000")
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := minPopQueue(t, s, 5000)
			txs := s.PushN(t, q, "Default", 2).TxIDs()
			r := s.TryPop(t, tc.path(q))
			if r.Status != 200 {
				t.Fatalf("%d %q", r.Status, r.Body)
			}
			apitest.WantTxIDs(t, tc.name, r.Pop, txs[:tc.want])
			if r.Elapsed > atOnce {
				t.Fatalf("answered after %v: held by minPopWaitTime (5000ms)", r.Elapsed)
			}
		})
	}
}
