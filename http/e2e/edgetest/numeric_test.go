package edgetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// popRoutes are the three pop routes for a queue (the discovery route scoped
// by the queue's namespace), each with a query to add pairs to.
func popRoutes(queue, namespace string) map[string]func(pairs ...string) string {
	return map[string]func(pairs ...string) string{
		"queue":     func(pairs ...string) string { return e2e.PopQueue(queue, pairs...) },
		"partition": func(pairs ...string) string { return e2e.PopPartition(queue, "Default", pairs...) },
		"discovery": func(pairs ...string) string {
			return e2e.PopDiscovery(append([]string{"namespace", namespace}, pairs...)...)
		},
	}
}

// badNumbers are values of each pop parameter that must answer 400 naming
// it: not a base-10 integer, or outside its range.
var badNumbers = map[string][]string{
	"batch": {"abc", "1.5", "1e3", "0x10", "0", "-1", "10001", "2147483648", "9223372036854775807",
		"99999999999999999999", "1 ", " 1", "1a"},
	"partitions":   {"abc", "1.5", "10001", "2147483648", "9223372036854775807", "99999999999999999999", "x1"},
	"timeout":      {"abc", "1.5", "-1", "3600001", "2147483648", "9223372036854775807", "99999999999999999999"},
	"leaseSeconds": {"abc", "1.5", "2592001", "2147483648", "9223372036854775807", "99999999999999999999"},
}

// Contract A: on every pop route a numeric parameter that is not a base-10
// integer or lies outside its range (batch 1..10000, partitions <= 10000,
// timeout 0..3600000, leaseSeconds <= 2592000) answers 400 naming the
// parameter, at once (a long poll with wait=true must not park, a huge
// timeout must not turn into an instant 204) and before the queue-scoped
// route creates the queue row of an unknown queue.
func TestPopNumericParamNotANumberOrOutOfRangeIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for route, path := range popRoutes(e2e.Unique(t, "edge-num"), e2e.Unique(t, "edge-num-ns")) {
		for param, values := range badNumbers {
			for _, v := range values {
				t.Run(fmt.Sprintf("%s/%s=%q", route, param, v), func(t *testing.T) {
					t.Parallel()
					// wait=true: a parameter that is read as its default or
					// clamped parks (or answers an instant 204) instead.
					p := path(param, v, "wait", "true", "timeout", "2000")
					if param == "timeout" {
						p = path(param, v, "wait", "true")
					}
					start := time.Now()
					r := s.Get(t, p)
					if _, err := e2e.CheckError(r, 400, param); err != nil {
						t.Fatalf("GET %s after %v: %v", p, time.Since(start).Round(time.Millisecond), err)
					}
				})
			}
		}
	}
}

// Contract A: a rejected pop on an unknown queue creates nothing (the
// queue-scoped routes create the queue row of an unknown queue only for a
// pop that runs).
func TestPopBadNumberCreatesNoQueue(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-num-nocreate")
	for _, p := range []string{
		e2e.PopQueue(q, "batch", "abc"),
		e2e.PopQueue(q, "leaseSeconds", "2147483648"),
		e2e.PopPartition(q, "Default", "timeout", "-1"),
		e2e.PopPartition(q, "Default", "partitions", "2147483648"),
	} {
		e2e.WantError(t, s.Get(t, p), 400, "")
	}
	if n := e2e.QueueCounts(t, q).Queues; n != 0 {
		t.Fatalf("rejected pops created the queue (%d rows)", n)
	}
}

// The examples the issue names, each on its own.
func TestPopBatchNotANumberIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-batch-nan")
	s.PushN(t, q, "", 1)
	for _, v := range []string{"abc", "1.5"} {
		e2e.WantError(t, s.Get(t, e2e.PopQueue(q, "batch", v)), 400, "batch")
	}
	// The message is still there for a correct pop.
	s.PopOK(t, e2e.PopQueue(q, "batch", "1"))
}

func TestLeaseSeconds2147483648Is400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-lease-big")
	s.PushN(t, q, "", 1)
	e2e.WantError(t, s.Get(t, e2e.PopQueue(q, "leaseSeconds", "2147483648")), 400, "leaseSeconds")
	s.PopOK(t, e2e.PopQueue(q))
}

func TestPartitions2147483648Is400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-parts-big")
	s.PushN(t, q, "", 1)
	e2e.WantError(t, s.Get(t, e2e.PopQueue(q, "partitions", "2147483648")), 400, "partitions")
	s.PopOK(t, e2e.PopQueue(q))
}

// Contract A: timeout=9223372036854775807 is 400, neither an instant answer
// nor an endless park, with or without messages waiting.
func TestTimeoutMaxInt64Is400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-timeout-huge")
	for _, wait := range []string{"true", "false"} {
		e2e.WantError(t, s.Get(t, e2e.PopQueue(q, "wait", wait, "timeout", "9223372036854775807")), 400, "timeout")
	}
	s.PushN(t, q, "", 1)
	e2e.WantError(t, s.Get(t, e2e.PopQueue(q, "wait", "true", "timeout", "9223372036854775807")), 400, "timeout")
	s.PopOK(t, e2e.PopQueue(q))
}

func TestTimeoutNegativeIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-timeout-neg")
	e2e.WantError(t, s.Get(t, e2e.PopQueue(q, "wait", "true", "timeout", "-1")), 400, "timeout")
	e2e.WantError(t, s.Get(t, e2e.PopQueue(q, "wait", "false", "timeout", "-5000")), 400, "timeout")
}

// Contract A: the ends of every range are accepted and an empty value is
// absent (the default applies).
func TestPopNumericBoundsAndEmptyAreAccepted(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-num-bounds")
	for _, pairs := range [][]string{
		{"batch", "1"}, {"batch", "10000"}, {"batch", ""},
		{"partitions", "10000"}, {"partitions", "1"}, {"partitions", ""},
		{"timeout", "0"}, {"timeout", "3600000"}, {"timeout", ""},
		{"leaseSeconds", "2592000"}, {"leaseSeconds", "1"}, {"leaseSeconds", ""},
	} {
		path := e2e.PopQueue(q, pairs...)
		r := s.Get(t, path)
		if r.Status != 204 {
			t.Errorf("GET %s on an empty queue: %d %s, want 204", path, r.Status, r.Body)
		}
	}
	// A long poll with the longest timeout answers at once when a message is
	// waiting, and batch= reads as 1.
	s.PushN(t, q, "", 2)
	p := s.PopOK(t, e2e.PopQueue(q, "wait", "true", "timeout", "3600000", "batch", "", "consumerGroup", "g1"))
	if len(p.Messages) != 1 {
		t.Fatalf("batch= delivered %d messages, want the default 1", len(p.Messages))
	}
}

// Contract A: leaseSeconds=2592000 (30 days) is accepted and leases for
// 30 days; 0 and negative values are absent, so the queue's lease (60 s for
// a queue created by a push) applies.
func TestLeaseSecondsBoundsAndNonPositiveMeanQueueLease(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-lease-bounds")
	s.PushN(t, q, "", 1)
	for _, c := range []struct {
		group, lease string
		min, max     float64
	}{
		{"g-max", "2592000", 2592000 - 120, 2592000 + 1},
		{"g-zero", "0", 50, 61},
		{"g-neg", "-1", 50, 61},
		{"g-neg-big", "-2147483649", 50, 61},
	} {
		p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", c.group, "leaseSeconds", c.lease))
		cur := e2e.ReadCursor(t, p.Messages[0].PartitionID, c.group)
		if cur.LeaseID != p.LeaseID || cur.ExpiresIn < c.min || cur.ExpiresIn > c.max {
			t.Errorf("leaseSeconds=%s: lease %+v, want %q expiring in [%v, %v] s", c.lease, cur, p.LeaseID, c.min, c.max)
		}
	}
}

// Contract A: partitions=0 and partitions=-1 mean no cap: one pop still
// claims every partition.
func TestPartitionsZeroOrNegativeStillPopAcrossPartitions(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-parts-nocap")
	for _, part := range []string{"p1", "p2", "p3"} {
		s.PushN(t, q, part, 1)
	}
	for _, v := range []string{"0", "-1"} {
		p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g"+v, "batch", "10", "partitions", v))
		seen := map[string]bool{}
		for _, m := range p.Messages {
			seen[m.Partition] = true
		}
		if len(p.Messages) != 3 || len(seen) != 3 || p.PartitionsClaimed != 3 {
			t.Errorf("partitions=%s: %d messages from %v (partitionsClaimed %d), want one from each of 3",
				v, len(p.Messages), seen, p.PartitionsClaimed)
		}
	}
}

// Contract A: GET /api/v1/dlq answers 400 naming limit (1..1000) or offset
// (>= 0) for a value that is not an integer or out of range.
func TestDLQLimitOffsetNotANumberOrOutOfRangeIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-dlq")
	for param, values := range map[string][]string{
		"limit":  {"abc", "1.5", "0", "-1", "1001", "2147483648", "99999999999999999999"},
		"offset": {"abc", "1.5", "-1", "99999999999999999999"},
	} {
		for _, v := range values {
			path := "/api/v1/dlq" + e2e.Query("queue", q, param, v)
			if _, err := e2e.CheckError(s.Get(t, path), 400, param); err != nil {
				t.Errorf("GET %s: %v", path, err)
			}
		}
	}
}

func TestDLQLimitOffsetBoundsAndEmptyAreAccepted(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-dlq-ok")
	for _, c := range []struct {
		pairs         []string
		limit, offset int
	}{
		{[]string{"limit", "1"}, 1, 0},
		{[]string{"limit", "1000"}, 1000, 0},
		{[]string{"limit", ""}, 100, 0},
		{[]string{"offset", "0"}, 100, 0},
		{[]string{"offset", "5", "limit", "7"}, 7, 5},
		{[]string{"offset", ""}, 100, 0},
	} {
		path := "/api/v1/dlq" + e2e.Query(append([]string{"queue", q}, c.pairs...)...)
		r := s.Get(t, path)
		if r.Status != 200 {
			t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
			continue
		}
		var l struct {
			Pagination struct{ Limit, Offset int } `json:"pagination"`
		}
		r.JSON(t, &l)
		if l.Pagination.Limit != c.limit || l.Pagination.Offset != c.offset {
			t.Errorf("GET %s: pagination %+v, want limit %d offset %d", path, l.Pagination, c.limit, c.offset)
		}
	}
}

// Contract A: while two clients hammer a queue with leaseSeconds=2147483648
// (each a 400), eight other clients' correct pops on the same queue all
// succeed (200 or 204, never a 500). 200 correct pops in all.
func TestBadLeasePopsDoNotFailConcurrentGoodPops(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-hammer")
	for k := 0; k < 4; k++ {
		s.PushN(t, q, fmt.Sprintf("p%d", k), 50)
	}
	const clients, perClient = 8, 25
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop := make(chan struct{})
	var bad, badWrong atomic.Int64
	var firstBad atomic.Value
	var hammers sync.WaitGroup
	for h := 0; h < 2; h++ {
		hammers.Add(1)
		go func() {
			defer hammers.Done()
			path := e2e.PopQueue(q, "leaseSeconds", "2147483648", "batch", "5", "partitions", "2")
			for i := 0; i < 1000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := s.DoCtx(ctx, "GET", path, nil)
				if err != nil {
					return
				}
				bad.Add(1)
				if _, err := e2e.CheckError(r, 400, "leaseSeconds"); err != nil {
					badWrong.Add(1)
					firstBad.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	var good200, good204 atomic.Int64
	var goodFailed []string
	var mu sync.Mutex
	var goods sync.WaitGroup
	for c := 0; c < clients; c++ {
		goods.Add(1)
		go func() {
			defer goods.Done()
			group := fmt.Sprintf("good-%d", c)
			for i := 0; i < perClient; i++ {
				pairs := []string{"consumerGroup", group, "batch", "2", "partitions", "2", "autoAck", "true"}
				if i%2 == 1 {
					pairs = append(pairs, "leaseSeconds", "30")
				}
				r, err := s.DoCtx(ctx, "GET", e2e.PopQueue(q, pairs...), nil)
				switch {
				case err != nil:
					mu.Lock()
					goodFailed = append(goodFailed, err.Error())
					mu.Unlock()
					return
				case r.Status == 200:
					good200.Add(1)
				case r.Status == 204:
					good204.Add(1)
				default:
					mu.Lock()
					goodFailed = append(goodFailed, fmt.Sprintf("%d %s", r.Status, r.Body))
					mu.Unlock()
				}
			}
		}()
	}
	goods.Wait()
	close(stop)
	hammers.Wait()
	t.Logf("good pops: %d x 200, %d x 204; bad pops: %d", good200.Load(), good204.Load(), bad.Load())
	if len(goodFailed) > 0 {
		t.Errorf("%d of %d correct pops failed, first: %s", len(goodFailed), clients*perClient, goodFailed[0])
	}
	if good200.Load() == 0 {
		t.Errorf("no correct pop delivered anything")
	}
	if n := badWrong.Load(); n > 0 {
		t.Errorf("%d of %d pops with leaseSeconds=2147483648 were not a 400 naming it; first: %v", n, bad.Load(), firstBad.Load())
	}
}
