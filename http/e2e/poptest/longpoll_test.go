package poptest

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// TestPop_WaitFalseIsOneAttempt: with wait=false (the default) a pop is a
// single attempt: what is claimable now, otherwise a 204 at once; a message
// pushed just after it is not waited for.
func TestPop_WaitFalseIsOneAttempt(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "once")
	q := ns + ".t.q"
	s.Configure(t, q, nil)
	for _, path := range []string{
		e2e.PopQueue(q, "consumerGroup", "g"),
		e2e.PopPartition(q, "Default", "consumerGroup", "g", "wait", "false"),
		e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "wait", "false", "timeout", "10000"),
	} {
		if r := s.PopEmpty(t, path); r.Elapsed >= atOnce {
			t.Fatalf("%s: empty answer after %v", path, r.Elapsed)
		}
	}
	txs := s.PushN(t, q, "Default", 2).TxIDs()
	for _, path := range []string{
		e2e.PopQueue(q, "consumerGroup", "w", "batch", "10"),
		e2e.PopPartition(q, "Default", "consumerGroup", "s", "batch", "10", "wait", "false"),
		e2e.PopDiscovery("namespace", ns, "consumerGroup", "d", "batch", "10", "timeout", "10000"),
	} {
		r := s.TryPop(t, path)
		if r.Status != 200 || r.Elapsed >= atOnce {
			t.Fatalf("%s: %d after %v", path, r.Status, r.Elapsed)
		}
		e2e.WantTxIDs(t, path, r.Pop, txs)
	}
}

// TestPop_WaitTrueParksUntilTimeout: with wait=true an empty pop parks until
// its timeout, then answers a bare 204 (a long poll that times out is not an
// error); on every route.
func TestPop_WaitTrueParksUntilTimeout(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "park")
	q := ns + ".t.q"
	s.Configure(t, q, nil)
	for _, tc := range []struct{ name, path string }{
		{"wildcard", e2e.PopQueue(q, "wait", "true", "timeout", "800")},
		{"single", e2e.PopPartition(q, "Default", "wait", "true", "timeout", "800")},
		{"discovery", e2e.PopDiscovery("namespace", ns, "wait", "true", "timeout", "800")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := s.PopEmpty(t, tc.path)
			if r.Elapsed < 800*time.Millisecond || r.Elapsed >= 800*time.Millisecond+atOnce {
				t.Fatalf("answered after %v, want at its 800ms timeout", r.Elapsed)
			}
		})
	}
}

// TestD12_AnAckThatEndsALeaseWakesParkedPop: an ack that ends a lease frees
// its partition for the group at once: a pop of the group parked on the
// queue (every partition was leased when it looked) gets the partition's
// next message then, long before the lease would expire. Also when the
// last offset acked is the first of the span, after the others were acked
// out of order (the ack is then no span of the cursor's, pg/ack.go). On a
// broker of its own that samples parked pops every 100 ms.
func TestD12_AnAckThatEndsALeaseWakesParkedPop(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t, "METRICS_SAMPLE_INTERVAL_MS=100")
	for _, tc := range []struct {
		name        string
		first, last int // the message acked before the pop parks, and after
	}{
		{"in order", 0, 1},
		{"out of order", 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := e2e.Unique(t, "ack-wakes")
			txs := s.PushN(t, q, "p", 3).TxIDs()
			p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "leaseSeconds", "60"))
			e2e.WantTxIDs(t, "pop", p, txs[:2])
			if r := s.AckOK(t, p.Messages[tc.first], "completed", ""); r.LeaseReleased {
				t.Fatalf("the first ack released the lease: %+v", r)
			}
			woken := parkThenAck(t, s, s, e2e.PopQueue(q, "wait", "true", "timeout", "20000"), q, p.Messages[tc.last], "")
			e2e.WantTxIDs(t, "woken pop", woken.r.Pop, txs[2:])
			if woken.after > 5*time.Second {
				t.Fatalf("the parked pop answered %v after the ack that ended the lease", woken.after)
			}
		})
	}
}

// TestD12_AnAckInAnotherProcessWakesParkedPop: D12 with two broker
// processes on one database: an ack through one that ends a lease wakes a
// pop of the group parked in the other at once (the ack is announced over
// NOTIFY), not at the parked pop's next re-check, which the parked pop's
// broker here makes 8 s apart.
func TestD12_AnAckInAnotherProcessWakesParkedPop(t *testing.T) {
	t.Parallel()
	a, b := slowRecheckPair(t, "ackwake2")
	q := e2e.Unique(t, "ack-wakes-2proc")
	txs := a.PushN(t, q, "p", 2).TxIDs()
	p := a.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "1"))
	e2e.WantTxIDs(t, "pop", p, txs[:1])
	woken := parkThenAck(t, b, a, e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "20000"), q,
		p.Messages[0], "g")
	e2e.WantTxIDs(t, "woken pop", woken.r.Pop, txs[1:])
	t.Logf("the pop parked in the other process answered %v after the ack", woken.after)
	if woken.after > 4*time.Second {
		t.Fatalf("the pop parked in the other process answered %v after the ack that ended the lease, want within 4s",
			woken.after)
	}
}

// TestD12_AnotherProcessWakesParkedDiscoveryPop: D12 on the discovery route
// with two broker processes on one database: a push through one to a queue
// of the scope wakes a discovery pop parked in the other at once (announced
// over NOTIFY), though that process runs no actor for the queue; so does an
// ack that ends a lease of the pop's group, through either process. Not at
// the parked pop's next re-check, which its broker here makes 8 s apart.
func TestD12_AnotherProcessWakesParkedDiscoveryPop(t *testing.T) {
	t.Parallel()
	a, b := slowRecheckPair(t, "scopewake2")
	ns, q := scopedQueue(t, a, "scope-2proc")
	path := e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "wait", "true", "timeout", "20000")
	const within = 4 * time.Second
	t.Run("push", func(t *testing.T) {
		var txs []string
		o, pushed := parkThenPush(t, b, path, func() { txs = a.PushN(t, q, "pushed", 1).TxIDs() })
		if o.r.Status != 200 {
			t.Fatalf("parked pop: %d %q", o.r.Status, o.r.Body)
		}
		e2e.WantTxIDs(t, "woken pop", o.r.Pop, txs)
		after := o.at.Sub(pushed)
		t.Logf("the discovery pop parked in the other process answered %v after the push", after)
		if after > within {
			t.Fatalf("the discovery pop parked in the other process answered %v after the push, want within %v", after, within)
		}
		b.AckOK(t, o.r.Pop.Messages[0], "completed", "g")
	})
	for _, tc := range []struct {
		name, partition string
		leaser          *e2e.Server // pops the partition and acks
	}{
		{"ack in the other process", "acked-there", a},
		{"ack in the same process", "acked-here", b},
	} {
		t.Run(tc.name, func(t *testing.T) {
			txs := a.PushN(t, q, tc.partition, 2).TxIDs()
			p := tc.leaser.PopOK(t, e2e.PopPartition(q, tc.partition, "consumerGroup", "g", "batch", "1"))
			e2e.WantTxIDs(t, "pop", p, txs[:1])
			ch := async(context.Background(), b, path)
			if o, parked := pending(ch, 400*time.Millisecond); !parked {
				t.Fatalf("pop answered %d %q while the group's only partition was leased", o.r.Status, o.r.Body)
			}
			if r := tc.leaser.AckOK(t, p.Messages[0], "completed", "g"); !r.LeaseReleased {
				t.Fatalf("the ack did not end the lease: %+v", r)
			}
			acked := time.Now()
			o := await(t, ch, 15*time.Second)
			if o.r.Status != 200 {
				t.Fatalf("parked pop: %d %q", o.r.Status, o.r.Body)
			}
			e2e.WantTxIDs(t, "woken pop", o.r.Pop, txs[1:])
			after := o.at.Sub(acked)
			t.Logf("the parked discovery pop answered %v after the ack", after)
			if after > within {
				t.Fatalf("the parked discovery pop answered %v after the ack, want within %v", after, within)
			}
			b.AckOK(t, o.r.Pop.Messages[0], "completed", "g")
		})
	}
}

// TestD12_AnExpiredLeaseWakesParkedPops: a lease that ends without an ack
// frees its partition like an ack that ends it: the pops of its group parked
// on either route, in this process or another, take it at once, not at
// their next re-check, which the parked pops' broker here makes 8 s apart.
func TestD12_AnExpiredLeaseWakesParkedPops(t *testing.T) {
	t.Parallel()
	a, b := slowRecheckPair(t, "expirywake2")
	ns, q := scopedQueue(t, a, "expiry")
	for _, tc := range []struct {
		name, partition string
		leaser          *e2e.Server
		park            string
	}{
		{"queue route, other process", "p1", a, e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "20000")},
		{"discovery route, other process", "p2", a,
			e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "wait", "true", "timeout", "20000")},
		{"discovery route, same process", "p3", b,
			e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "wait", "true", "timeout", "20000")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			txs := a.PushN(t, q, tc.partition, 1).TxIDs()
			p := tc.leaser.PopOK(t, e2e.PopPartition(q, tc.partition, "consumerGroup", "g", "leaseSeconds", "1"))
			leased := time.Now()
			e2e.WantTxIDs(t, "pop", p, txs)
			o := await(t, async(context.Background(), b, tc.park), 15*time.Second)
			if o.r.Status != 200 {
				t.Fatalf("parked pop: %d %q", o.r.Status, o.r.Body)
			}
			e2e.WantTxIDs(t, "woken pop", o.r.Pop, txs)
			after := o.at.Sub(leased)
			t.Logf("the parked pop got the message %v after its 1 s lease was taken", after)
			if after > 4*time.Second {
				t.Fatalf("the parked pop got the message %v after its 1 s lease was taken, want within 4s", after)
			}
			b.AckOK(t, o.r.Pop.Messages[0], "completed", "g")
		})
	}
}

// slowRecheckPair starts two brokers on a database of their own, b with its
// parked pops re-checking only every 8 s, and returns once each listens for
// the other's announcements.
func slowRecheckPair(t *testing.T, name string) (a, b *e2e.Server) {
	t.Helper()
	db := e2e.CreateDB(t, name)
	a = e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL})
	b = e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: []string{"METRICS_SAMPLE_INTERVAL_MS=100",
		"POP_WAIT_INITIAL_INTERVAL_MS=8000", "POP_WAIT_MAX_INTERVAL_MS=8000"}})
	e2e.WaitListeners(t, db, 2)
	return a, b
}

// scopedQueue configures, through s, a queue of a namespace of its own, and
// returns both.
func scopedQueue(t *testing.T, s *e2e.Server, prefix string) (ns, queue string) {
	t.Helper()
	ns = e2e.Unique(t, prefix)
	queue = ns + ".t.q"
	s.Configure(t, queue, nil)
	return ns, queue
}

// woken is the answer of a parked pop and how long after the ack it came.
type woken struct {
	outcome
	after time.Duration
}

// parkThenAck parks path (a pop of queue) on park, then acks m through ack
// for group, which must end the lease, and returns the parked pop's answer,
// which must deliver.
func parkThenAck(t *testing.T, park, ack *e2e.Server, path, queue string, m e2e.Message, group string) woken {
	t.Helper()
	ch := async(context.Background(), park, path)
	park.WaitParked(t, queue, 1)
	if r := ack.AckOK(t, m, "completed", group); !r.LeaseReleased {
		t.Fatalf("the ack did not end the lease: %+v", r)
	}
	acked := time.Now()
	o := await(t, ch, 15*time.Second)
	if o.r.Status != 200 {
		t.Fatalf("parked pop: %d %q", o.r.Status, o.r.Body)
	}
	return woken{outcome: o, after: o.at.Sub(acked)}
}

// parkThenPush parks path, checks it is still parked after a while, runs
// push, and returns the pop's outcome and the time the push answered.
func parkThenPush(t *testing.T, s *e2e.Server, path string, push func()) (outcome, time.Time) {
	t.Helper()
	ch := async(context.Background(), s, path)
	if o, parked := pending(ch, 400*time.Millisecond); !parked {
		t.Fatalf("pop answered %d %q before anything was pushed", o.r.Status, o.r.Body)
	}
	push()
	pushed := time.Now()
	o := await(t, ch, 15*time.Second)
	return o, pushed
}

// TestD12_PushWakesParkedPop: a push wakes parked pops at once: on the
// queue-scoped routes a push to that queue, on the discovery route any push
// within its scope. The wake latency is logged; the pop must answer well
// before its 10 s timeout (within 5 s: slack for a loaded box).
func TestD12_PushWakesParkedPop(t *testing.T) {
	t.Parallel()
	s := shared(t)
	const timeout = "10000"
	const within = 5 * time.Second
	check := func(t *testing.T, o outcome, pushed time.Time, want []string) {
		t.Helper()
		if o.r.Status != 200 {
			t.Fatalf("woken pop: %d %q", o.r.Status, o.r.Body)
		}
		e2e.WantTxIDs(t, "woken pop", o.r.Pop, want)
		lat := o.at.Sub(pushed)
		t.Logf("wake latency (push answered to pop answered): %v; pop took %v", lat, o.r.Elapsed)
		if lat > within {
			t.Fatalf("the pop answered %v after the push, want within %v", lat, within)
		}
	}
	t.Run("wildcard", func(t *testing.T) {
		t.Parallel()
		q := e2e.Unique(t, "wake-w")
		var txs []string
		o, at := parkThenPush(t, s, e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", timeout),
			func() { txs = s.PushN(t, q, "p", 1).TxIDs() })
		check(t, o, at, txs)
	})
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		q := e2e.Unique(t, "wake-s")
		s.PushN(t, q, "p", 1)
		s.PopOK(t, e2e.PopPartition(q, "p", "consumerGroup", "g", "autoAck", "true"))
		var txs []string
		o, at := parkThenPush(t, s, e2e.PopPartition(q, "p", "consumerGroup", "g", "wait", "true", "timeout", timeout),
			func() { txs = s.PushN(t, q, "p", 1).TxIDs() })
		check(t, o, at, txs)
	})
	t.Run("single, partition created by the push", func(t *testing.T) {
		t.Parallel()
		q := e2e.Unique(t, "wake-s-new")
		var txs []string
		o, at := parkThenPush(t, s, e2e.PopPartition(q, "fresh", "consumerGroup", "g", "wait", "true", "timeout", timeout),
			func() { txs = s.PushN(t, q, "fresh", 1).TxIDs() })
		check(t, o, at, txs)
	})
	t.Run("discovery", func(t *testing.T) {
		t.Parallel()
		ns := e2e.Unique(t, "wake-d")
		q := ns + ".t.q"
		s.Configure(t, q, nil)
		outside := e2e.Unique(t, "wake-d-out") + ".t.q"
		var txs []string
		path := e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "wait", "true", "timeout", timeout, "autoAck", "true")
		o, at := parkThenPush(t, s, path, func() { txs = s.PushN(t, q, "Default", 1).TxIDs() })
		check(t, o, at, txs)

		// A push outside the scope leaves it parked; one inside wakes it.
		ch := async(context.Background(), s, path)
		if o, parked := pending(ch, 400*time.Millisecond); !parked {
			t.Fatalf("answered %d %q before anything was pushed", o.r.Status, o.r.Body)
		}
		s.PushN(t, outside, "Default", 1)
		if o, parked := pending(ch, 700*time.Millisecond); !parked {
			t.Fatalf("a push outside the scope answered it: %d %q", o.r.Status, o.r.Body)
		}
		txs = s.PushN(t, q, "Default", 1).TxIDs()
		at = time.Now()
		check(t, await(t, ch, 15*time.Second), at, txs)
	})
	t.Run("discovery, queue created by the push", func(t *testing.T) {
		t.Parallel()
		ns := e2e.Unique(t, "wake-d-new")
		var txs []string
		o, at := parkThenPush(t, s, e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "wait", "true", "timeout", timeout),
			func() { txs = s.PushN(t, ns+".t.brand-new", "Default", 1).TxIDs() })
		check(t, o, at, txs)
	})
}

// TestD12_BackoffRecheckFindsMessagesWithoutPush: between wakes a parked pop
// re-checks on the POP_WAIT_* backoff (here 50 ms initial, threshold 2, x2,
// capped at 300 ms), so messages that become deliverable without a push (an
// expired lease, a delayedProcessing delay running out) reach it within about
// the maximum interval, long before its timeout.
//
// Never before they are deliverable: that bound is strict. The upper bound
// tells a re-check from its absence (the pop would sit until its 20 s
// timeout and answer empty) with seconds of slack for a loaded box, where a
// claim round alone can take a second or more; the latency itself is logged
// (bench/ measures it).
func TestD12_BackoffRecheckFindsMessagesWithoutPush(t *testing.T) {
	t.Parallel()
	s := bothServer(t)
	const slack = 5 * time.Second
	const timeout = "20000"
	t.Run("lease expiry", func(t *testing.T) {
		t.Parallel()
		// The long poll has to go out well before the lease ends, or its
		// first claim finds the redelivery and says nothing of re-checks:
		// on a loaded box the round is repeated with a longer lease.
		for lease := 3; ; lease *= 2 {
			q := e2e.Unique(t, "bo-lease")
			txs := s.PushN(t, q, "p", 1).TxIDs()
			first := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "leaseSeconds", strconv.Itoa(lease)))
			e2e.WantTxIDs(t, "leased", first, txs)
			expiry := leaseExpiresAt(t, q, "p", "g")
			if left := time.Until(expiry); left < time.Second {
				if lease >= 24 {
					t.Fatalf("the box was too slow: %v of a %ds lease left when the long poll was to go out", left, lease)
				}
				t.Logf("%v of the %ds lease left when the long poll was to go out: again with a longer lease", left, lease)
				continue
			}
			ch := async(context.Background(), s, e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", timeout))
			o := await(t, ch, 30*time.Second)
			if o.r.Status != 200 {
				t.Fatalf("parked pop: %d %q, want the redelivery", o.r.Status, o.r.Body)
			}
			e2e.WantTxIDs(t, "redelivery", o.r.Pop, txs)
			d := o.at.Sub(expiry)
			t.Logf("redelivered %v after the lease expired", d)
			if d < -100*time.Millisecond || d > boMax+slack {
				t.Fatalf("redelivered %v after the lease expired, want within about %v (at most %v on a loaded box)", d, boMax, boMax+slack)
			}
			return
		}
	})
	t.Run("delayedProcessing", func(t *testing.T) {
		t.Parallel()
		q := e2e.Unique(t, "bo-delay")
		s.Configure(t, q, map[string]any{"delayedProcessing": 1})
		ch := async(context.Background(), s, e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", timeout))
		if o, parked := pending(ch, 300*time.Millisecond); !parked {
			t.Fatalf("answered %d %q before the push", o.r.Status, o.r.Body)
		}
		txs := s.PushN(t, q, "Default", 1).TxIDs()
		var created float64
		if err := e2e.DB.QueryRow(`SELECT extract(epoch FROM s.created_at)::float8 FROM queen.segments s
  JOIN queen.partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1`,
			[]any{q}, &created); err != nil {
			t.Fatal(err)
		}
		visible := time.Unix(0, int64(created*1e9)).Add(time.Second)
		o := await(t, ch, 30*time.Second)
		if o.r.Status != 200 {
			t.Fatalf("parked pop: %d %q", o.r.Status, o.r.Body)
		}
		e2e.WantTxIDs(t, "delayed message", o.r.Pop, txs)
		d := o.at.Sub(visible)
		t.Logf("delivered %v after the delay ran out", d)
		if d < -50*time.Millisecond || d > boMax+slack {
			t.Fatalf("delivered %v after the delay ran out, want within about %v (at most %v on a loaded box)", d, boMax, boMax+slack)
		}
	})
}

// TestD12_ParkedPopHoldsNoConnection: a parked pop holds no PostgreSQL
// connection: 2,000 parked long polls on a broker with a pool of 4, while a
// push and a pop on another queue still complete promptly, and the database
// never sees more than the pool's 4 connections.
func TestD12_ParkedPopHoldsNoConnection(t *testing.T) {
	t.Parallel()
	const parked, pool = 2000, 4
	db := e2e.CreateDB(t, "popidle")
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: []string{"DB_POOL_SIZE=4"}})
	idle, busy := e2e.Unique(t, "idle"), e2e.Unique(t, "busy")
	s.PushN(t, busy, "p", 1)
	s.PopOK(t, e2e.PopQueue(busy, "autoAck", "true"))

	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: parked + 100,
		MaxIdleConns: parked + 100, IdleConnTimeout: time.Minute}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wrote, early atomic.Int64
	var earlyMu sync.Mutex
	var earlyErr error
	var wg sync.WaitGroup
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) }}
	target := s.URL + e2e.PopQueue(idle, "wait", "true", "timeout", "20000")
	start := time.Now()
	for i := 0; i < parked; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), "GET", target, nil)
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			if ctx.Err() != nil {
				return // cancelled at the end: expected
			}
			early.Add(1)
			earlyMu.Lock()
			if earlyErr == nil {
				if err == nil {
					err = errors.New(resp.Status)
				}
				earlyErr = err
			}
			earlyMu.Unlock()
		}()
		if i%200 == 199 {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := e2e.Eventually(30*time.Second, 20*time.Millisecond, func() error {
		if wrote.Load() != parked && early.Load() == 0 {
			return errors.New("not all sent")
		}
		return nil
	}); err != nil {
		t.Fatalf("only %d of %d long polls were sent within 30s", wrote.Load(), parked)
	}
	time.Sleep(time.Second) // let the broker park them all
	t.Logf("%d long polls sent and parked in %v", parked, time.Since(start))

	// The broker's connections carry application_name queengo; the test's
	// own probes (one short connection each) do not.
	conns := func() int64 {
		return e2e.QueryInt(t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
   AND application_name = 'queengo'`)
	}
	maxConns := conns()
	pushStart := time.Now()
	s.PushN(t, busy, "p", 1)
	pushTook := time.Since(pushStart)
	maxConns = max(maxConns, conns())
	r := s.TryPop(t, e2e.PopQueue(busy, "autoAck", "true"))
	maxConns = max(maxConns, conns())
	t.Logf("with %d parked: push took %v, pop took %v; at most %d database connections seen", parked, pushTook, r.Elapsed, maxConns)
	if r.Status != 200 || len(r.Pop.Messages) != 1 {
		t.Fatalf("pop on the other queue: %d %q", r.Status, r.Body)
	}
	if pushTook > 3*time.Second || r.Elapsed > 3*time.Second {
		t.Fatalf("with %d parked pops a push took %v and a pop %v, want a few seconds at most", parked, pushTook, r.Elapsed)
	}
	if maxConns > pool {
		t.Fatalf("%d database connections with %d parked pops, pool size %d", maxConns, parked, pool)
	}
	if n := early.Load(); n > 0 {
		t.Fatalf("%d of the parked long polls answered before their timeout; first: %v", n, earlyErr)
	}
	cancel()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("cancelled long polls did not return")
	}
}

// TestD12_DisconnectedClientDroppedFromPark: a client that disconnects is
// removed from the park, so a message pushed after it left goes to the next
// client rather than to a lease nobody holds. On a broker of its own that
// samples parked pops every 100 ms: the push waits until the park is empty.
func TestD12_DisconnectedClientDroppedFromPark(t *testing.T) {
	t.Parallel()
	s := hangUpBroker(t)
	q := e2e.Unique(t, "gone")
	s.Configure(t, q, map[string]any{}) // the sampler counts the queues it lists
	leaveParked(t, s, q)
	s.WaitParked(t, q, 0) // the broker checks parked sockets every 500 ms
	txs := s.PushN(t, q, "Default", 1).TxIDs()
	r := popAsAnotherClient(t, s, q, "3000")
	e2e.WantTxIDs(t, "second client", r.Pop, txs)
	if c := cursorOf(t, q, "Default", "g"); c.LeaseID != r.Pop.LeaseID {
		t.Fatalf("cursor lease %q, the second client's %q", c.LeaseID, r.Pop.LeaseID)
	}
}

// hangUpBroker starts a broker of its own that samples parked pops every
// 100 ms and whose parked pops do not re-check while a test runs: a parked
// pop out for its re-check is not counted parked, and WaitParked(0) would
// take that for the hang-up (then the re-check, still the gone client's,
// could claim the push).
func hangUpBroker(t *testing.T) *e2e.Server {
	t.Helper()
	return e2e.Start(t, "METRICS_SAMPLE_INTERVAL_MS=100", "POP_WAIT_INITIAL_INTERVAL_MS=120000",
		"POP_WAIT_MAX_INTERVAL_MS=120000")
}

// leaveParked parks a long poll of group g on q through a client of its
// own, waits until it is parked, and hangs up. Its timeout outlasts
// WaitParked's 15 s: only dropping it empties the park.
func leaveParked(t *testing.T, s *e2e.Server, q string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	gone := &http.Client{Transport: &http.Transport{}}
	ch := async(ctx, s.WithClient(gone), e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "60000"))
	s.WaitParked(t, q, 1)
	cancel()
	if o := <-ch; o.err == nil {
		t.Fatalf("the cancelled pop returned %d %q", o.r.Status, o.r.Body)
	}
}

// popAsAnotherClient long-polls group g on q through a new client, for
// timeout ms, and requires a delivery.
func popAsAnotherClient(t *testing.T, s *e2e.Server, q, timeout string) *e2e.PopResult {
	t.Helper()
	other := &http.Client{Transport: &http.Transport{}}
	r, err := s.WithClient(other).PopCtx(context.Background(),
		e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", timeout))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 200 {
		t.Fatalf("the next client got %d %q: the message went to the client that left", r.Status, r.Body)
	}
	return r
}

// TestD12_APopWhoseClientLeftBeforeTheWatcherLookedFreesItsLease: a message
// pushed right after a parked long poll's client hung up, before the broker's
// check of parked sockets (every 500 ms) saw it, is claimed for the gone
// client; the broker finds the socket closed as it answers, ends the lease
// at once, and the next pop of the group gets the message, not after the
// lease (300 s here). The push follows the hang-up within milliseconds, so
// the check falls between them only rarely (the test then passes the way
// TestD12_DisconnectedClientDroppedFromPark does).
func TestD12_APopWhoseClientLeftBeforeTheWatcherLookedFreesItsLease(t *testing.T) {
	t.Parallel()
	s := hangUpBroker(t)
	q := e2e.Unique(t, "gone-late")
	s.Configure(t, q, map[string]any{"leaseTime": 300})
	leaveParked(t, s, q)
	txs := s.PushN(t, q, "Default", 1).TxIDs()
	e2e.WantTxIDs(t, "next pop", popAsAnotherClient(t, s, q, "5000").Pop, txs)
}
