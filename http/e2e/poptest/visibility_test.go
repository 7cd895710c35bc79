package poptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// sleepUntil sleeps until t.
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// errTooSlow marks an attempt of a window test that proves nothing: an
// answer came after the window its check is about had ended.
var errTooSlow = errors.New("the box was too slow")

// windowAttempts is how many times a window test runs its scenario, each on
// a fresh queue, before a box too slow for every attempt fails it: in one
// CI run a stall of the whole box held the first checks of both window
// tests past their 8 s windows.
const windowAttempts = 3

// inside returns errTooSlow when the answer that just came arrived after end:
// the check it is about holds only while a window ending at end lasts, so an
// answer that late may have been decided after it and proves nothing either
// way. Call it after the request and before the assertion it protects.
func inside(end time.Time, what string) error {
	if late := time.Since(end); late > 0 {
		return fmt.Errorf("%w: %s answered %v after the window it checks ran out", errTooSlow, what, late.Round(time.Millisecond))
	}
	return nil
}

// retryTooSlow runs attempt until one ends inside its windows, at most
// windowAttempts times. A violated rule fails the test in the attempt
// itself (t.Fatal), whichever attempt it is.
func retryTooSlow(t *testing.T, attempt func() error) {
	t.Helper()
	for i := 1; ; i++ {
		err := attempt()
		if err == nil {
			return
		}
		if i == windowAttempts {
			t.Fatalf("%v (attempt %d of %d)", err, i, windowAttempts)
		}
		t.Logf("%v: attempt %d of %d, again on a fresh queue", err, i, windowAttempts)
	}
}

// TestPop_DelayedProcessingOnEveryRoute: with delayedProcessing D only
// segments at least D seconds old are delivered, on the single-partition,
// wildcard and discovery routes alike, and to a parked long poll.
func TestPop_DelayedProcessingOnEveryRoute(t *testing.T) {
	t.Parallel()
	s := shared(t)
	// Long enough that the checks inside the delay finish well within it on
	// a loaded box; the tests run in parallel, so it costs little.
	const delay = 8 * time.Second
	retryTooSlow(t, func() error { return delayedOnEveryRoute(t, s, delay) })
}

// delayedOnEveryRoute is one attempt of TestPop_DelayedProcessingOnEveryRoute.
func delayedOnEveryRoute(t *testing.T, s *e2e.Server, delay time.Duration) error {
	ns := e2e.Unique(t, "delayed")
	q := ns + ".t.q"
	s.Configure(t, q, map[string]any{"delayedProcessing": int(delay / time.Second)})
	routes := map[string]string{
		"single":    e2e.PopPartition(q, "p", "consumerGroup", "single", "batch", "10"),
		"wildcard":  e2e.PopQueue(q, "consumerGroup", "wildcard", "batch", "10"),
		"discovery": e2e.PopDiscovery("namespace", ns, "consumerGroup", "discovery", "batch", "10"),
	}
	txs := s.PushN(t, q, "p", 1).TxIDs()
	written := lastWrite(t, q, "p")
	due := written.Add(delay)
	ctx, cancel := context.WithCancel(context.Background()) // an attempt given up leaves no pop parked
	defer cancel()
	parked := async(ctx, s, e2e.PopQueue(q, "consumerGroup", "parked", "wait", "true", "timeout", "25000"))
	// Right after the write and again halfway through the delay, every
	// route answers empty.
	for _, after := range []time.Duration{0, delay / 2} {
		sleepUntil(written.Add(after))
		for name, path := range routes {
			r := s.TryPop(t, path)
			what := fmt.Sprintf("%s (the check at write+%v)", name, after)
			if err := inside(due, what); err != nil {
				return err
			}
			if err := r.Bare204(); err != nil {
				t.Fatalf("%s answered inside the %v delay: %v", what, delay, err)
			}
		}
	}
	for name, path := range routes {
		p := s.PopUntil(t, path, delay+15*time.Second, 100*time.Millisecond)
		at := time.Now()
		e2e.WantTxIDs(t, name, p, txs)
		if d := at.Sub(written); d < delay {
			t.Fatalf("%s delivered %v after the write, before the %v delay", name, d, delay)
		}
	}
	o := await(t, parked, 30*time.Second)
	if o.r.Status != 200 {
		t.Fatalf("parked pop: %d %q", o.r.Status, o.r.Body)
	}
	e2e.WantTxIDs(t, "parked", o.r.Pop, txs)
	if d := o.at.Sub(written); d < delay {
		t.Fatalf("parked pop delivered %v after the write, before the %v delay", d, delay)
	}
	return nil
}

// lastWrite returns when queue/partition was last written, as PostgreSQL
// recorded it.
func lastWrite(t *testing.T, queue, partition string) time.Time {
	t.Helper()
	var epoch float64
	if err := e2e.DB.QueryRow(`SELECT extract(epoch FROM p.last_write_at)::float8 FROM queen.partitions p
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
	// Long enough that the checks inside p's window finish well within it
	// on a loaded box; the tests run in parallel, so it costs little.
	const window = 8 * time.Second
	retryTooSlow(t, func() error { return windowOnEveryRoute(t, s, window) })
}

// windowOnEveryRoute is one attempt of TestPop_WindowBufferOnEveryRoute.
func windowOnEveryRoute(t *testing.T, s *e2e.Server, window time.Duration) error {
	ns := e2e.Unique(t, "window")
	q := ns + ".t.q"
	s.Configure(t, q, map[string]any{"windowBuffer": int(window / time.Second)})
	routes := map[string]string{
		"single":    e2e.PopPartition(q, "p", "consumerGroup", "single", "batch", "10"),
		"wildcard":  e2e.PopQueue(q, "consumerGroup", "wildcard", "batch", "10", "partitions", "0"),
		"discovery": e2e.PopDiscovery("namespace", ns, "consumerGroup", "discovery", "batch", "10", "partitions", "0"),
	}
	m1 := s.PushN(t, q, "p", 1).TxIDs()
	pFirst := lastWrite(t, q, "p")
	quiet := s.PushN(t, q, "quiet", 1).TxIDs()
	quietWrite := lastWrite(t, q, "quiet")
	// Both partitions were just written: nothing anywhere.
	for name, path := range routes {
		r := s.TryPop(t, path)
		if err := inside(pFirst.Add(window), name+" right after the writes"); err != nil {
			return err
		}
		if err := r.Bare204(); err != nil {
			t.Fatalf("%s right after the writes: %v", name, err)
		}
	}
	r := s.TryPop(t, e2e.PopPartition(q, "quiet", "consumerGroup", "single"))
	if err := inside(quietWrite.Add(window), "quiet right after its write"); err != nil {
		return err
	}
	if err := r.Bare204(); err != nil {
		t.Fatalf("quiet right after its write: %v", err)
	}

	sleepUntil(quietWrite.Add(window / 2))
	m2 := s.PushN(t, q, "p", 1).TxIDs() // p's window starts again
	pWrite := lastWrite(t, q, "p")
	sleepUntil(quietWrite.Add(window + 150*time.Millisecond))
	// quiet's window has passed, p's has not: every route serves quiet only.
	r = s.TryPop(t, routes["single"])
	if err := inside(pWrite.Add(window), "single p inside its window"); err != nil {
		return err
	}
	if err := r.Bare204(); err != nil {
		t.Fatalf("single p inside its window: %v", err)
	}
	e2e.WantTxIDs(t, "single quiet", s.PopOK(t, e2e.PopPartition(q, "quiet", "consumerGroup", "single")), quiet)
	for _, name := range []string{"wildcard", "discovery"} {
		r := s.TryPop(t, routes[name])
		if err := inside(pWrite.Add(window), name+" inside p's window"); err != nil {
			return err
		}
		p, err := r.Delivered()
		if err != nil {
			t.Fatalf("%s inside p's window: %v", name, err)
		}
		e2e.WantTxIDs(t, name+" inside p's window", p, quiet)
	}
	for name, path := range routes {
		p := s.PopUntil(t, path, window+15*time.Second, 100*time.Millisecond)
		at := time.Now()
		e2e.WantTxIDs(t, name+": p after its window", p, slices.Concat(m1, m2))
		if d := at.Sub(pWrite); d < window {
			t.Fatalf("%s delivered p %v after its last write, inside the %v window", name, d, window)
		}
	}
	return nil
}

// minPopQueue configures a queue with minPopWaitTime ms and returns it.
func minPopQueue(t *testing.T, s *e2e.Server, ms int) string {
	t.Helper()
	ns := e2e.Unique(t, "minpop")
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
	r := s.TryPop(t, e2e.PopQueue(q, "wait", "true", "batch", "10", "timeout", "10000"))
	t.Logf("under-full batch answered after %v (minPopWaitTime 1500ms)", r.Elapsed)
	if r.Status != 200 {
		t.Fatalf("%d %q", r.Status, r.Body)
	}
	e2e.WantTxIDs(t, "held batch", r.Pop, txs)
	if r.Elapsed < 1400*time.Millisecond || r.Elapsed > 1500*time.Millisecond+atOnce {
		t.Fatalf("answered after %v, want held about 1500ms", r.Elapsed)
	}
}

// TestPop_MinPopWaitTimeEndsWhenBatchFills: the hold ends as soon as the batch
// fills.
func TestPop_MinPopWaitTimeEndsWhenBatchFills(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := minPopQueue(t, s, 10000)
	first := s.PushN(t, q, "Default", 2).TxIDs()
	ch := async(context.Background(), s, e2e.PopQueue(q, "wait", "true", "batch", "5", "timeout", "20000"))
	if o, held := pending(ch, 500*time.Millisecond); !held {
		t.Fatalf("an under-full batch was not held: %d %q after %v", o.r.Status, o.r.Body, o.r.Elapsed)
	}
	rest := s.PushN(t, q, "Default", 3).TxIDs()
	filled := time.Now()
	o := await(t, ch, 25*time.Second)
	if o.r.Status != 200 {
		t.Fatalf("%d %q", o.r.Status, o.r.Body)
	}
	e2e.WantTxIDs(t, "filled batch", o.r.Pop, slices.Concat(first, rest))
	t.Logf("answered %v after the batch filled (pop took %v, minPopWaitTime 10000ms)", o.at.Sub(filled), o.r.Elapsed)
	if o.at.Sub(filled) > atOnce || o.r.Elapsed > 8*time.Second {
		t.Fatalf("answered %v after the batch filled (pop took %v): the hold did not end when it filled", o.at.Sub(filled), o.r.Elapsed)
	}
}

// TestPop_MinPopWaitTimeNeverOutlivesTimeout: a hold longer than the caller's
// timeout ends at the timeout.
func TestPop_MinPopWaitTimeNeverOutlivesTimeout(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := minPopQueue(t, s, 10000)
	txs := s.PushN(t, q, "Default", 2).TxIDs()
	r := s.TryPop(t, e2e.PopQueue(q, "wait", "true", "batch", "10", "timeout", "800"))
	t.Logf("answered after %v (timeout 800ms, minPopWaitTime 10000ms)", r.Elapsed)
	if r.Elapsed > 800*time.Millisecond+atOnce {
		t.Fatalf("answered after %v: the hold outlived the 800ms timeout", r.Elapsed)
	}
	if r.Status != 200 {
		t.Fatalf("%d %q: the held messages were not delivered at the timeout", r.Status, r.Body)
	}
	e2e.WantTxIDs(t, "held batch", r.Pop, txs)
}

// TestPop_MinPopWaitTimeNeverDelaysEmptyQueue: a pop that finds the queue
// empty is a long poll, not a hold: a push wakes it and it answers at once.
// The push waits until the pop is parked (so it found the queue empty: a
// push before its first look would make it a hold, rightly), on a broker of
// its own that samples parked pops every 100 ms.
func TestPop_MinPopWaitTimeNeverDelaysEmptyQueue(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t, "METRICS_SAMPLE_INTERVAL_MS=100")
	q := minPopQueue(t, s, 10000)
	ch := async(context.Background(), s, e2e.PopQueue(q, "wait", "true", "batch", "10", "timeout", "20000"))
	s.WaitParked(t, q, 1)
	txs := s.PushN(t, q, "Default", 1).TxIDs()
	pushed := time.Now()
	o := await(t, ch, 15*time.Second)
	if o.r.Status != 200 {
		t.Fatalf("%d %q", o.r.Status, o.r.Body)
	}
	e2e.WantTxIDs(t, "woken pop", o.r.Pop, txs)
	t.Logf("answered %v after the push (minPopWaitTime 10000ms)", o.at.Sub(pushed))
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
		{"wait=false", func(q string) string { return e2e.PopQueue(q, "wait", "false", "batch", "10") }, 2},
		{"batch=1", func(q string) string { return e2e.PopQueue(q, "wait", "true", "batch", "1", "timeout", "20000") }, 1},
		{"single-partition route", func(q string) string {
			return e2e.PopPartition(q, "Default", "wait", "true", "batch", "10", "timeout", "20000")
		}, 2},
		{"discovery route", func(q string) string {
			ns, _, _ := strings.Cut(q, ".")
			return e2e.PopDiscovery("namespace", ns, "wait", "true", "batch", "10", "timeout", "20000")
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := minPopQueue(t, s, 10000)
			txs := s.PushN(t, q, "Default", 2).TxIDs()
			r := s.TryPop(t, tc.path(q))
			if r.Status != 200 {
				t.Fatalf("%d %q", r.Status, r.Body)
			}
			e2e.WantTxIDs(t, tc.name, r.Pop, txs[:tc.want])
			if r.Elapsed > atOnce {
				t.Fatalf("answered after %v: held by minPopWaitTime (10000ms)", r.Elapsed)
			}
		})
	}
}
