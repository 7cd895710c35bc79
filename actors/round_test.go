package actors

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TestClaimRound_OneWaitersFailureLeavesTheOthersServed (issue 8, defect 3):
// the pops of a queue (or of a discovery scope) share one claim round; when
// one of them fails (its claim, or the lookup of its partition), only that pop
// answers the error, and every other pop of the same round is served its own
// messages.
func TestClaimRound_OneWaitersFailureLeavesTheOthersServed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		target any // queue name or scope key
		req    func() *queengo.PopRequest
		broken bool // add a pop whose partition lookup fails
	}{
		{"queue", "q", func() *queengo.PopRequest {
			return &queengo.PopRequest{Queue: "q", Group: queengo.QueueModeGroup, Batch: 1}
		}, true},
		{"discovery", scopeKey{namespace: "ns"}, func() *queengo.PopRequest {
			return &queengo.PopRequest{Namespace: "ns", Group: queengo.QueueModeGroup, Batch: 1}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const bad = 1 << 31 // the leaseSeconds of defect 3
			f := newFakeStore()
			started, gate := make(chan struct{}), make(chan struct{})
			var calls atomic.Int32
			f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
				if calls.Add(1) == 1 {
					close(started)
					<-gate
				}
				// As pg.Store.Claim does: a failing claim reports its own
				// error, the others their results.
				out := deliverOwn(claims)
				for i, p := range claims {
					if p.LeaseSeconds == bad {
						out[i] = queengo.ClaimResult{Err: errBadClaim}
					}
				}
				return out, nil
			}
			f.lookup = func(_ context.Context, name string) (uuid.UUID, error) {
				if name == "broken" {
					return uuid.Nil, errors.New("lookup failed")
				}
				return uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)), nil
			}
			b := setup(t, Config{Store: f, ClaimsInFlight: 1, RequestTimeout: 5 * time.Second}).b

			// The first pop's round holds the actor's only claim slot, so
			// the pops sent meanwhile all ride in the next round together.
			w0 := sendPop(b, tc.target, tc.req())
			waitChan(t, started, "the first claim round's start")
			var good []*waiter
			var failing []*waiter
			for i := range 8 {
				r := tc.req()
				switch {
				case i == 3:
					r.LeaseSeconds = bad
					failing = append(failing, sendPop(b, tc.target, r))
					continue
				case i == 5 && tc.broken:
					r.Partition = "broken"
					failing = append(failing, sendPop(b, tc.target, r))
					continue
				}
				good = append(good, sendPop(b, tc.target, r))
			}
			close(gate)

			for _, w := range append([]*waiter{w0}, good...) {
				r := await(t, w, 5*time.Second)
				if r.err != nil {
					t.Fatalf("a pop of the round failed with another pop's error: %v", r.err)
				}
				if len(r.res.Messages) != 1 || r.res.Messages[0].TransactionID != w.leaseID.String() {
					t.Fatalf("pop %s got %+v, want its own message", w.leaseID, r.res.Messages)
				}
			}
			for _, w := range failing {
				if r := await(t, w, 5*time.Second); r.err == nil {
					t.Fatalf("the failing pop answered %+v, want its error", r.res)
				}
			}
			sizes := f.roundSizes()
			if len(sizes) != 2 || sizes[0] != 1 {
				t.Fatalf("claim rounds of %v pops, want [1 n]", sizes)
			}
			// The round carried the bad claim along with the good ones (the
			// pop whose lookup failed never reached the claim).
			if want := 8 - len(failing) + 1; sizes[1] != want {
				t.Fatalf("second round of %d claims, want %d", sizes[1], want)
			}
		})
	}
}

// TestClaimRound_DeadlineBoundsTheClaimNotTheLongPoll: a claim round whose
// statement hangs answers its pops with queengo.ErrTimeout at the request
// deadline; a long poll whose claims find nothing waits its own timeout,
// however short the request deadline.
func TestClaimRound_DeadlineBoundsTheClaimNotTheLongPoll(t *testing.T) {
	t.Parallel()
	const rt = 150 * time.Millisecond
	f := newFakeStore()
	hang := make(chan struct{})
	f.claim = func(ctx context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		select {
		case <-hang:
			<-ctx.Done() // the database does not answer: pg gives up at the deadline
			return nil, queengo.ErrTimeout
		default:
			return make([]queengo.ClaimResult, len(claims)), nil
		}
	}
	b := setup(t, Config{Store: f, RequestTimeout: rt}).b

	start := time.Now()
	w := sendPop(b, "q", &queengo.PopRequest{Queue: "q", Group: queengo.QueueModeGroup, Batch: 1, Wait: true,
		Timeout: 4 * rt})
	r := await(t, w, 5*time.Second)
	if el := time.Since(start); r.err != nil || len(r.res.Messages) != 0 || el < 4*rt {
		t.Fatalf("long poll answered after %v with %+v %v, want empty after %v", el, r.res, r.err, 4*rt)
	}

	close(hang)
	start = time.Now()
	// Another group: its first pop searches (the first one's ready set is
	// known to be empty).
	w = sendPop(b, "q", &queengo.PopRequest{Queue: "q", Group: "g2", Batch: 1})
	r = await(t, w, 5*time.Second)
	if el := time.Since(start); !errors.Is(r.err, queengo.ErrTimeout) || el > rt+time.Second {
		t.Fatalf("pop with a hanging claim answered after %v with %v, want ErrTimeout after about %v", el, r.err, rt)
	}
}

// roundOf builds a round of the given pops of one queue, as the queue
// actor does: every claim has the queue, none knows its partition yet.
func roundOf(queue uuid.UUID, reqs ...*queengo.PopRequest) *claimRound {
	r := &claimRound{queue: queue}
	for _, req := range reqs {
		w := &waiter{req: req, reply: make(chan popReply, 1), leaseID: uuid.New()}
		p := claimOf(w)
		p.QueueIDs = []uuid.UUID{queue}
		r.ws, r.params = append(r.ws, w), append(r.params, p)
	}
	return r
}

// TestClaimRound_OneClaimCallForTheWholeRound: a round hands the store every
// claim that has somewhere to look in one Claim call and gives each pop its
// own result; a single-partition pop whose partition does not exist yet
// finds nothing without a claim (with a subscription intent, a claim that
// only records it: SubscribeOnly), and one whose lookup failed gets that
// error, alone.
func TestClaimRound_OneClaimCallForTheWholeRound(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		return deliverOwn(claims), nil
	}
	f.lookup = func(_ context.Context, name string) (uuid.UUID, error) {
		switch name {
		case "missing":
			return uuid.Nil, queengo.ErrNotFound
		case "broken":
			return uuid.Nil, errors.New("lookup failed")
		}
		return uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)), nil
	}
	q := uuid.New()
	r := roundOf(q,
		&queengo.PopRequest{Group: "g", Batch: 1},
		&queengo.PopRequest{Group: "g", Batch: 1, Partition: "missing"},
		&queengo.PopRequest{Group: "g", Batch: 1, Partition: "p1"},
		&queengo.PopRequest{Group: "g", Batch: 1, Partition: "broken"},
		&queengo.PopRequest{Group: "h", Batch: 1, AutoAck: true})
	r.run(context.Background(), f, testMetrics())

	if sizes := f.roundSizes(); len(sizes) != 1 || sizes[0] != 3 {
		t.Fatalf("Claim calls of %v claims, want one of 3 (no claim for a missing or failed partition)", sizes)
	}
	want := []outcome{outcomeDelivered, outcomeEmpty, outcomeDelivered, outcomeFailed, outcomeDelivered}
	for i, o := range want {
		if got := r.outcome(i); got != o {
			t.Fatalf("pop %d: outcome %d, want %d", i, got, o)
		}
	}
	for _, i := range []int{0, 2} {
		if got := r.delivered(i); got.Messages[0].TransactionID != r.ws[i].leaseID.String() || got.LeaseID != r.ws[i].leaseID.String() {
			t.Fatalf("pop %d got %+v, want its own message under its lease", i, got)
		}
	}
	if got := r.delivered(4); got.LeaseID != "" {
		t.Fatalf("an autoAck pop's lease id %q, want empty", got.LeaseID)
	}
	if pid := r.parts["p1"]; pid != uuid.NewSHA1(uuid.NameSpaceOID, []byte("p1")) || r.params[2].Partition != pid {
		t.Fatalf("looked-up partition %v, claim's %v", pid, r.params[2].Partition)
	}

	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		return make([]queengo.ClaimResult, len(claims)), nil
	}
	r = roundOf(q, &queengo.PopRequest{Group: "g", Batch: 1, Partition: "missing", SubMode: queengo.SubscriptionAll})
	r.run(context.Background(), f, testMetrics())
	if c := f.rounds[len(f.rounds)-1]; len(c) != 1 || !c[0].SubscribeOnly || c[0].Partition != uuid.Nil {
		t.Fatalf("claim of a missing partition's pop with an intent: %+v, want one that only subscribes", c)
	}
	if got := r.outcome(0); got != outcomeEmpty {
		t.Fatalf("its outcome %d, want empty", got)
	}
}

// TestClaimRound_ScopeLoadsItsQueuesFirst: a discovery round asked to load
// its scope claims from the queues it loaded; a failed load fails the whole
// round without a claim.
func TestClaimRound_ScopeLoadsItsQueuesFirst(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	r := &claimRound{scope: &scopeKey{namespace: "ns"}}
	w := &waiter{req: &queengo.PopRequest{Namespace: "ns", Group: "g", Batch: 1}, leaseID: uuid.New()}
	r.ws, r.params = []*waiter{w}, []queengo.ClaimParams{claimOf(w)}
	r.run(context.Background(), f, testMetrics())
	if len(r.loaded) != 1 || r.loaded[0] != f.queue.ID || len(r.params[0].QueueIDs) != 1 || r.params[0].QueueIDs[0] != f.queue.ID {
		t.Fatalf("loaded %v, claimed from %v, want the scope's queue %v", r.loaded, r.params[0].QueueIDs, f.queue.ID)
	}

	broken := &scopeStore{fakeStore: newFakeStore(), err: errors.New("scope load failed")}
	r = &claimRound{scope: &scopeKey{namespace: "ns"}, ws: r.ws, params: []queengo.ClaimParams{claimOf(w)}}
	r.run(context.Background(), broken, testMetrics())
	if r.outcome(0) != outcomeFailed || len(broken.roundSizes()) != 0 {
		t.Fatalf("a failed scope load: outcome %d after %d claims, want failed without one", r.outcome(0), len(broken.roundSizes()))
	}
}

// scopeStore fails QueuesInScope.
type scopeStore struct {
	*fakeStore
	err error
}

func (s *scopeStore) QueuesInScope(context.Context, string, string) ([]queengo.Queue, error) {
	return nil, s.err
}

// TestClaimRound_HeldOnlyUnderAMinimum: a claim with minPopWaitTime's
// minimum that found fewer messages than it is held; without a minimum the
// same answer is empty.
func TestClaimRound_HeldOnlyUnderAMinimum(t *testing.T) {
	t.Parallel()
	r := roundOf(uuid.New(), &queengo.PopRequest{Group: "g", Batch: 10}, &queengo.PopRequest{Group: "g", Batch: 10})
	r.params[0].Min = 10
	r.res = []queengo.ClaimResult{{Taken: 3}, {Taken: 3}}
	if r.outcome(0) != outcomeHeld || r.outcome(1) != outcomeEmpty {
		t.Fatalf("outcomes %d and %d, want held and empty", r.outcome(0), r.outcome(1))
	}
}

// TestClaimRound_WakeDuringRoundLooksAgain: a push that lands while a pop's
// claim round is in flight may be invisible to that round; the pop then
// looks again at once instead of holding for its whole minPopWaitTime (or
// parking until its next re-check).
func TestClaimRound_WakeDuringRoundLooksAgain(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	f.queue.Options.MinPopWaitTime = 20000
	inFlight, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	f.claim = func(ctx context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		res := make([]queengo.ClaimResult, len(claims))
		if calls.Add(1) == 1 {
			close(inFlight)
			<-release
			res[0].Taken = 1 // under the batch: held
			return res, nil
		}
		res[0].Messages = []queengo.Message{{Frame: queengo.Frame{TransactionID: "filled"}}}
		return res, nil
	}
	b := setup(t, Config{Store: f}).b
	w := sendPop(b, "q", &queengo.PopRequest{Queue: "q", Group: queengo.QueueModeGroup, Batch: 10, Wait: true,
		Timeout: 30 * time.Second})
	<-inFlight
	b.freed("q", uuid.New(), "") // the push that fills the batch commits now
	close(release)
	// Well before the 20 s hold would end.
	r := await(t, w, 10*time.Second)
	if r.err != nil || len(r.res.Messages) != 1 {
		t.Fatalf("pop answered %+v %v, want the message of the second look", r.res, r.err)
	}
}

// TestScheduler_WakeDuringRoundLooksAgainOncePerFreedPartition: a partition
// freed while a round is in flight sends one of that round's empty pops
// back to claim, not all of them; the others park (one re-check per key),
// so pops outnumbering the partitions do not claim in a loop on every ack.
func TestScheduler_WakeDuringRoundLooksAgainOncePerFreedPartition(t *testing.T) {
	t.Parallel()
	s := newPopScheduler(&deps{metrics: testMetrics(), backoff: testBackoff, maxParked: 100, claimsInFlight: 1})
	ws := []*waiter{longPoll("g", "", time.Minute), longPoll("g", "", time.Minute), longPoll("g", "", time.Minute)}
	r := &claimRound{ws: ws}
	s.started(r)
	s.wake(t0, 1, nil)
	if !s.finished(r) {
		t.Fatal("the round was not the scheduler's")
	}
	for _, w := range ws {
		s.emptyAfter(r, w, t0)
	}
	if len(s.pending) != 1 || s.lot.n != 2 {
		t.Fatalf("%d pops look again and %d parked, want 1 and 2", len(s.pending), s.lot.n)
	}
}

// TestPartitionRoute_IdLookedUpAgainAfterEmptyPops: the single-partition
// route keeps the partition id it looked up, and a pop that finds nothing
// with an id older than lookupRecheck makes the next pop look it up again: a
// partition removed and created again under a new id (by another process)
// is found. Younger ids are not looked up again.
func TestPartitionRoute_IdLookedUpAgainAfterEmptyPops(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	clk := newTestClock()
	var mu sync.Mutex
	id := uuid.New()
	lookups, searched := 0, []uuid.UUID{}
	f.lookup = func(context.Context, string) (uuid.UUID, error) {
		mu.Lock()
		defer mu.Unlock()
		lookups++
		return id, nil
	}
	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range claims {
			searched = append(searched, c.Partition)
		}
		return make([]queengo.ClaimResult, len(claims)), nil
	}
	b := setup(t, Config{Store: f}, withClock(clk)).b
	pop := func() {
		t.Helper()
		w := sendPop(b, "q", &queengo.PopRequest{Queue: "q", Partition: "P", Group: queengo.QueueModeGroup, Batch: 1})
		if r := await(t, w, 5*time.Second); r.err != nil || len(r.res.Messages) != 0 {
			t.Fatalf("pop %+v %v, want empty", r.res, r.err)
		}
	}
	want := func(wantLookups int, wantID uuid.UUID) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if lookups != wantLookups || searched[len(searched)-1] != wantID {
			t.Fatalf("%d lookups, last claim on %v; want %d, on %v", lookups, searched[len(searched)-1], wantLookups, wantID)
		}
	}
	first := id
	pop()
	want(1, first)
	mu.Lock()
	id = uuid.New() // removed and created again elsewhere
	mu.Unlock()
	pop()
	want(1, first) // younger than lookupRecheck: kept
	clk.Advance(lookupRecheck)
	pop() // still the old id, which found nothing: forgotten
	want(1, first)
	pop()
	want(2, id)
}

// TestPartitionRoute_AWakeReachesOnlyThePopsOfItsPartition: long polls of
// the single-partition route parked on P1 and P2; a lease of their group
// that ends on P1 makes only the P1 pop claim again, a push to P2 only the
// P2 pop (the wildcard route's pops would claim at both).
func TestPartitionRoute_AWakeReachesOnlyThePopsOfItsPartition(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	claimed := make(chan []queengo.ClaimParams, 16)
	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		claimed <- claims
		return make([]queengo.ClaimResult, len(claims)), nil
	}
	// The fake clock never moves: no pop re-checks on its backoff.
	b := setup(t, Config{Store: f}, withClock(newTestClock())).b
	id := func(name string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)) }
	nextRound := func() []uuid.UUID {
		t.Helper()
		var parts []uuid.UUID
		for _, c := range waitChan(t, claimed, "a claim round") {
			parts = append(parts, c.Partition)
		}
		return parts
	}
	for _, name := range []string{"P1", "P2"} {
		sendPop(b, "q", &queengo.PopRequest{Queue: "q", Partition: name, Group: "g", Batch: 1, Wait: true, Timeout: time.Hour})
		if got := nextRound(); len(got) != 1 || got[0] != id(name) {
			t.Fatalf("the %s pop's first round claimed %v", name, got)
		}
	}
	// The second round's answer is on its way to the actor.
	eventually(t, func() error {
		if b.ParkedByQueue()["q"] != 2 {
			return errors.New("the pops were not parked")
		}
		return nil
	})

	b.freed("q", id("P1"), "g")
	if got := nextRound(); len(got) != 1 || got[0] != id("P1") {
		t.Fatalf("after P1's lease ended the round claimed %v, want the P1 pop alone", got)
	}
	if _, err := b.Push(context.Background(), []queengo.PushItem{{Queue: "q", Partition: "P2",
		Frame: queengo.Frame{ID: uuid.New(), TransactionID: "t1", Payload: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	if got := nextRound(); len(got) != 1 || got[0] != id("P2") {
		t.Fatalf("after a push to P2 the round claimed %v, want the P2 pop alone", got)
	}
}

// TestQueue_RowReadAgainAfterEmptyPops: a queue actor keeps the queue row it
// read, and a wildcard pop that finds nothing with a row older than
// lookupRecheck makes the next pop read it again: a queue deleted and
// created again under a new id by another process whose announcement never
// came is found. Younger rows are kept.
func TestQueue_RowReadAgainAfterEmptyPops(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	clk := newTestClock()
	var mu sync.Mutex
	searched := []uuid.UUID{}
	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range claims {
			searched = append(searched, c.QueueIDs...)
		}
		return make([]queengo.ClaimResult, len(claims)), nil
	}
	b := setup(t, Config{Store: f}, withClock(clk)).b
	pop := func() {
		t.Helper()
		w := sendPop(b, "q", &queengo.PopRequest{Queue: "q", Group: queengo.QueueModeGroup, Batch: 1})
		if r := await(t, w, 5*time.Second); r.err != nil || len(r.res.Messages) != 0 {
			t.Fatalf("pop %+v %v, want empty", r.res, r.err)
		}
	}
	want := func(id uuid.UUID) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if last := searched[len(searched)-1]; last != id {
			t.Fatalf("last claim searched queue %v, want %v", last, id)
		}
	}
	first := f.queue.ID
	pop()
	want(first)
	f.mu.Lock()
	f.queue.ID = uuid.New() // deleted and created again elsewhere
	again := f.queue.ID
	f.mu.Unlock()
	clk.Advance(time.Second)
	pop()
	want(first) // younger than lookupRecheck: kept
	clk.Advance(lookupRecheck)
	pop() // still the old row, which found nothing: forgotten
	want(first)
	pop()
	want(again)
}
