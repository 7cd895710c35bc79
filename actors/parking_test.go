package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

var testBackoff = Backoff{Initial: 100 * time.Millisecond, Threshold: 3, Multiplier: 2, Max: time.Second}

// t0 is the tests' fixed "now".
var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// longPoll is a parked-to-be pop of group on partition ("" for the
// wildcard route) whose deadline is t0+timeout.
func longPoll(group, partition string, timeout time.Duration) *waiter {
	return &waiter{req: &queengo.PopRequest{Group: group, Partition: partition, Wait: true, Timeout: timeout, Batch: 1},
		reply: make(chan popReply, 1), leaseID: uuid.New(), deadline: t0.Add(timeout)}
}

// TestBackoff_Schedule: docs/pop-routes.md's re-check schedule: the initial
// interval for the first POP_WAIT_BACKOFF_THRESHOLD empty checks, then
// growing by the multiplier per empty check, capped at the maximum.
func TestBackoff_Schedule(t *testing.T) {
	t.Parallel()
	k := &parkedKey{interval: testBackoff.Initial}
	var got []time.Duration
	for range 8 {
		testBackoff.after(k, t0)
		got = append(got, k.next.Sub(t0))
	}
	want := []time.Duration{100, 100, 100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("intervals %v, want %v ms", got, want)
		}
	}
}

// TestParkingLot_OneRecheckPerKey: parked pops with the same (group,
// partition) share one re-check on the key's backoff; other keys re-check on
// their own.
func TestParkingLot_OneRecheckPerKey(t *testing.T) {
	t.Parallel()
	l := newParkingLot(testBackoff, 100)
	a1, a2, b1 := longPoll("g", "", time.Minute), longPoll("g", "", time.Minute), longPoll("h", "", time.Minute)
	for _, w := range []*waiter{a1, a2, b1} {
		if !l.park(w, t0) {
			t.Fatal("park refused below the maximum")
		}
	}
	if re, exp := l.due(t0.Add(testBackoff.Initial-recheckSlack-time.Millisecond), nil, nil); len(re)+len(exp) != 0 {
		t.Fatalf("before the first interval: %d re-checks, %d expired", len(re), len(exp))
	}
	re, _ := l.due(t0.Add(100*time.Millisecond), nil, nil)
	if len(re) != 2 || !(re[0] == a1 || re[1] == a1) || !(re[0] == b1 || re[1] == b1) {
		t.Fatalf("re-checks %v, want the oldest pop of each key", re)
	}
	if l.n != 1 {
		t.Fatalf("%d parked after the re-checks left, want 1", l.n)
	}
}

// TestParkingLot_KeysDueTogetherRecheckTogether: when a key's re-check
// comes, the keys due within recheckSlack after it re-check with it, so
// that their pops ride one claim round; the later ones keep their time.
func TestParkingLot_KeysDueTogetherRecheckTogether(t *testing.T) {
	t.Parallel()
	l := newParkingLot(testBackoff, 100)
	var ws []*waiter
	for i, at := range []time.Duration{0, 5 * time.Millisecond, recheckSlack, recheckSlack + time.Millisecond} {
		w := longPoll("g", fmt.Sprintf("p%d", i), time.Minute)
		l.park(w, t0.Add(at))
		ws = append(ws, w)
	}
	if got := l.next(); !got.Equal(t0.Add(testBackoff.Initial)) {
		t.Fatalf("next event %v, want the first key's re-check", got.Sub(t0))
	}
	re, _ := l.due(l.next(), nil, nil)
	if len(re) != 3 || re[0] != ws[0] || re[1] != ws[1] || re[2] != ws[2] {
		t.Fatalf("re-checks %v, want the three keys due within %v, in order", re, recheckSlack)
	}
	if got := l.next(); !got.Equal(t0.Add(testBackoff.Initial + recheckSlack + time.Millisecond)) {
		t.Fatalf("next event %v, want the fourth key's own re-check", got.Sub(t0))
	}
}

// TestParkingLot_NextIsALiveEvent: the next event is never an entry that
// would only be skipped (a re-check a wake superseded, the deadline of a pop
// that left), so the actor's timer does not tick for nothing.
func TestParkingLot_NextIsALiveEvent(t *testing.T) {
	t.Parallel()
	l := newParkingLot(testBackoff, 100)
	w := longPoll("g", "", time.Minute)
	l.park(w, t0) // re-check at +100 ms
	woke := t0.Add(10 * time.Millisecond)
	l.wake(woke, []freedPartition{{group: "g"}}, nil)
	if re, _ := l.due(woke, nil, nil); len(re) != 1 || re[0] != w {
		t.Fatalf("the wake re-checked %v, want the pop", re)
	}
	if got, want := l.next(), woke.Add(testBackoff.Initial); !got.Equal(want) {
		t.Fatalf("next event at %v, want the key's new re-check at %v", got.Sub(t0), want.Sub(t0))
	}
	if re, _ := l.due(l.next(), nil, nil); len(re) != 0 || len(l.keys) != 0 {
		t.Fatalf("re-checks %v, %d keys; want the key, left without pops, forgotten", re, len(l.keys))
	}
	if got := l.next(); !got.IsZero() {
		t.Fatalf("next event at %v with nothing parked, want none (the pop's deadline went with it)", got.Sub(t0))
	}
}

// TestParkingLot_DeadlineAnswersEmpty: a parked pop whose deadline passed
// leaves the lot as expired; the key's other pops stay parked, and a key
// left empty is forgotten.
func TestParkingLot_DeadlineAnswersEmpty(t *testing.T) {
	t.Parallel()
	l := newParkingLot(Backoff{Initial: time.Hour, Threshold: 3, Multiplier: 2, Max: time.Hour}, 100)
	short, long := longPoll("g", "p", time.Second), longPoll("g", "p", time.Minute)
	l.park(short, t0)
	l.park(long, t0)
	if got := l.next(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("next event %v, want the short deadline %v", got, t0.Add(time.Second))
	}
	re, exp := l.due(t0.Add(time.Second), nil, nil)
	if len(re) != 0 || len(exp) != 1 || exp[0] != short {
		t.Fatalf("at the short deadline: re-checks %v, expired %v", re, exp)
	}
	_, exp = l.due(t0.Add(time.Minute), nil, nil)
	if len(exp) != 1 || exp[0] != long || len(l.keys) != 0 || !l.empty() {
		t.Fatalf("at the long deadline: expired %v, %d keys left", exp, len(l.keys))
	}
}

// TestParkingLot_WakeResetsBackoff: a push in scope resets every key's
// backoff and makes it re-check now; held pops are released.
func TestParkingLot_WakeResetsBackoff(t *testing.T) {
	t.Parallel()
	l := newParkingLot(testBackoff, 100)
	l.park(longPoll("g", "", time.Minute), t0)
	k := l.keys["g\x00"]
	for range 9 {
		l.after(k, t0) // empty re-checks: the interval grows to Max
	}
	held := longPoll("g", "", time.Minute)
	held.holdUntil = t0.Add(time.Minute)
	l.hold(held)

	out := l.wake(t0, nil, nil)
	if k.empties != 0 || k.interval != 100*time.Millisecond || !k.next.Equal(t0) {
		t.Fatalf("after a wake: %d empties, interval %v, next %v", k.empties, k.interval, k.next)
	}
	if len(out) != 1 || out[0] != held || len(l.held) != 0 {
		t.Fatalf("a wake released %v, want the held pop", out)
	}
	if re, _ := l.due(t0, nil, nil); len(re) != 1 {
		t.Fatalf("after a wake %d re-checks are due, want 1", len(re))
	}
}

// TestParkingLot_AWakeReachesTheKeysItConcerns: a wake re-checks at once
// the keys whose pops may claim what it freed: the wildcard keys of the
// freed group, the key of the freed partition (by id or, for a write, by
// name), a key whose partition id is not known; and it releases the held
// pops of the freed group. The others keep their schedule, however many
// partitions the wake names.
func TestParkingLot_AWakeReachesTheKeysItConcerns(t *testing.T) {
	t.Parallel()
	p1, p2 := uuid.New(), uuid.New()
	parked := func(group, partition string, pid uuid.UUID) *waiter {
		w := longPoll(group, partition, time.Minute)
		w.pid = pid
		return w
	}
	many := make([]freedPartition, 100)
	for i := range many {
		many[i] = freedPartition{group: "g", pid: uuid.New()}
	}
	cases := []struct {
		name  string
		freed []freedPartition
		want  []string // keys that re-check now and held groups released, sorted
	}{
		{"a lease of g on p1 ended", []freedPartition{{group: "g", pid: p1}}, []string{"g/", "g/new", "g/p1", "held g"}},
		{"a write to p2", []freedPartition{{pid: p2, name: "p2"}}, []string{"g/", "g/p2", "h/", "held g", "held h"}},
		{"a lost claim of g", []freedPartition{{group: "g"}}, []string{"g/", "g/new", "g/p1", "g/p2", "held g"}},
		{"a scope's wake", nil, []string{"g/", "g/new", "g/p1", "g/p2", "h/", "held g", "held h"}},
		{"a batch ack of g over 100 other partitions", many, []string{"g/", "g/new", "held g"}},
	}
	for _, c := range cases {
		l := newParkingLot(Backoff{Initial: time.Hour, Threshold: 3, Multiplier: 2, Max: time.Hour}, 100)
		for _, w := range []*waiter{parked("g", "", uuid.Nil), parked("g", "p1", p1), parked("g", "p2", p2),
			parked("g", "new", uuid.Nil), parked("h", "", uuid.Nil)} {
			l.park(w, t0)
		}
		for _, g := range []string{"g", "h"} {
			l.hold(longPoll(g, "", time.Minute))
		}
		var got []string
		for _, w := range l.wake(t0, c.freed, nil) {
			got = append(got, "held "+w.req.Group)
		}
		re, _ := l.due(t0, nil, nil)
		for _, w := range re {
			got = append(got, w.req.Group+"/"+w.req.Partition)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: woke %v, want %v", c.name, got, c.want)
		}
	}
}

// TestParkingLot_AWakeFindsTheKeysConcernsNames: the keys a wake makes
// re-check, found through the lot's indexes, are exactly the parked keys
// concerns names, for wakes of every shape over keys of both routes, some
// whose partition id is not known.
func TestParkingLot_AWakeFindsTheKeysConcernsNames(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	pids := make([]uuid.UUID, 8)
	for i := range pids {
		pids[i] = uuid.New()
	}
	groups := []string{"g", "h", "i"}
	for round := range 300 {
		l := newParkingLot(Backoff{Initial: time.Hour, Threshold: 3, Multiplier: 2, Max: time.Hour}, 1000)
		for range 1 + rnd.IntN(20) {
			w := longPoll(groups[rnd.IntN(len(groups))], "", time.Minute)
			if p := rnd.IntN(len(pids) + 1); p < len(pids) {
				w.req.Partition = fmt.Sprintf("p%d", p)
				if rnd.IntN(4) > 0 {
					w.pid = pids[p]
				}
			}
			l.park(w, t0)
		}
		var freed []freedPartition
		for range 1 + rnd.IntN(4) {
			var f freedPartition
			if g := rnd.IntN(len(groups) + 1); g < len(groups) {
				f.group = groups[g]
			}
			switch p := rnd.IntN(len(pids) + 1); {
			case p == len(pids): // known by neither
			case rnd.IntN(2) == 0:
				f.pid, f.name = pids[p], fmt.Sprintf("p%d", p)
			default:
				f.pid = pids[p]
			}
			freed = append(freed, f)
		}
		var want []string
		for _, k := range l.keys {
			if concerns(freed, k.group, k.partition, k.pid) {
				want = append(want, k.id)
			}
		}
		l.wake(t0, freed, nil)
		re, _ := l.due(t0, nil, nil)
		var got []string
		for _, w := range re {
			got = append(got, w.key)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: wake %+v re-checked %q, concerns names %q", round, freed, got, want)
		}
	}
}

// TestParkingLot_AKeyOutlivesItsPopsClaim: the pop a re-check took out comes
// back empty and parks under the same key, whose backoff goes on, though the
// lot looked in between (another key's tick); a key whose re-check finds no
// pop is forgotten, and the next pop starts over.
func TestParkingLot_AKeyOutlivesItsPopsClaim(t *testing.T) {
	t.Parallel()
	l := newParkingLot(testBackoff, 100)
	w := longPoll("g", "p", time.Hour)
	l.park(w, t0)
	var at []time.Duration
	now := t0
	for range 5 {
		now = l.next()
		re, _ := l.due(now, nil, nil)
		if len(re) != 1 || re[0] != w {
			t.Fatalf("at %v: re-checks %v, want the one pop", now.Sub(t0), re)
		}
		at = append(at, now.Sub(t0))
		now = now.Add(time.Millisecond)
		if re, exp := l.due(now, nil, nil); len(re)+len(exp) != 0 { // another key's tick meanwhile
			t.Fatalf("a look while the pop claims took %v, %v", re, exp)
		}
		l.park(w, now) // its claim found nothing
	}
	ms := time.Millisecond
	if want := []time.Duration{100 * ms, 200 * ms, 300 * ms, 500 * ms, 900 * ms}; !slices.Equal(at, want) {
		t.Fatalf("re-checks at %v, want %v", at, want)
	}
	re, _ := l.due(l.next(), nil, nil) // its claim finds a message now
	if len(re) != 1 || len(l.keys) != 1 {
		t.Fatalf("re-checks %v, %d keys; want the pop out and its key kept", re, len(l.keys))
	}
	if re, _ := l.due(l.next(), nil, nil); len(re) != 0 || len(l.keys) != 0 {
		t.Fatalf("re-checks %v, %d keys; want the key forgotten", re, len(l.keys))
	}
	later := longPoll("g", "p", time.Hour)
	l.park(later, now)
	if got := l.next().Sub(now); got != testBackoff.Initial {
		t.Fatalf("a new pop re-checks after %v, want the initial interval", got)
	}
}

// TestParkingLot_HoldEndsAtHoldUntil: a held pop stays held until its
// holdUntil, then leaves; a cancelled one is dropped.
func TestParkingLot_HoldEndsAtHoldUntil(t *testing.T) {
	t.Parallel()
	l := newParkingLot(testBackoff, 100)
	w, gone := longPoll("g", "", time.Minute), longPoll("g", "", time.Minute)
	w.holdUntil, gone.holdUntil = t0.Add(200*time.Millisecond), t0.Add(200*time.Millisecond)
	l.hold(w)
	l.hold(gone)
	gone.cancelled = true
	if got := l.next(); !got.Equal(w.holdUntil) {
		t.Fatalf("next event %v, want the hold's end", got)
	}
	if out := l.holdsDue(t0.Add(199*time.Millisecond), nil); len(out) != 0 {
		t.Fatalf("released %v before the hold ended", out)
	}
	if out := l.holdsDue(t0.Add(200*time.Millisecond), nil); len(out) != 1 || out[0] != w || !l.empty() {
		t.Fatalf("at the hold's end: released %v, want only the live pop", out)
	}
}

// TestParkingLot_RefusesPastMax: the lot parks at most max pops; the next
// one is refused (its pop answers queengo.ErrTooManyParked) until one
// leaves.
func TestParkingLot_RefusesPastMax(t *testing.T) {
	t.Parallel()
	l := newParkingLot(testBackoff, 2)
	a, b, c := longPoll("g", "", time.Minute), longPoll("h", "", time.Minute), longPoll("g", "", time.Minute)
	if !l.park(a, t0) || !l.park(b, t0) {
		t.Fatal("refused below the maximum")
	}
	if l.park(c, t0) {
		t.Fatal("parked past the maximum")
	}
	l.remove(a)
	if !l.park(c, t0) {
		t.Fatal("refused after a pop left")
	}
}

// TestParkingLot_ReleaseNTakesTheOldest: releaseN takes the oldest n pops
// of a key (a key-mate's claim left n partitions untaken, n leases ended),
// and no more than the key holds.
func TestParkingLot_ReleaseNTakesTheOldest(t *testing.T) {
	t.Parallel()
	l := newParkingLot(testBackoff, 100)
	ws := []*waiter{longPoll("g", "", time.Minute), longPoll("g", "", time.Minute), longPoll("g", "", time.Minute)}
	for _, w := range ws {
		l.park(w, t0)
	}
	out := l.releaseN("g\x00", 2, nil)
	if len(out) != 2 || out[0] != ws[0] || out[1] != ws[1] || l.n != 1 {
		t.Fatalf("releaseN(2) took %v, %d left", out, l.n)
	}
	out = l.releaseN("g\x00", 2, nil)
	if len(out) != 1 || out[0] != ws[2] || l.n != 0 {
		t.Fatalf("releaseN(2) of one took %v, %d left", out, l.n)
	}
}

// TestParkingLot_ExpiresInDeadlineOrder: the pops whose deadline passed
// leave the lot earliest first, whatever their key and the order they
// parked in; the next event is then the earliest deadline left.
func TestParkingLot_ExpiresInDeadlineOrder(t *testing.T) {
	t.Parallel()
	l := newParkingLot(Backoff{Initial: time.Hour, Threshold: 3, Multiplier: 2, Max: time.Hour}, 100)
	s3, s1, s2, s4 := longPoll("g", "p", 3*time.Second), longPoll("h", "", time.Second),
		longPoll("g", "p", 2*time.Second), longPoll("h", "", 4*time.Second)
	for _, w := range []*waiter{s3, s1, s2, s4} {
		l.park(w, t0)
	}
	_, exp := l.due(t0.Add(3*time.Second), nil, nil)
	if len(exp) != 3 || exp[0] != s1 || exp[1] != s2 || exp[2] != s3 {
		t.Fatalf("expired %v, want the 1 s, 2 s and 3 s pops in that order", exp)
	}
	if l.n != 1 || len(l.keys) != 1 || !l.next().Equal(s4.deadline) {
		t.Fatalf("%d parked under %d keys, next event %v; want the 4 s pop alone", l.n, len(l.keys), l.next())
	}
}

// TestParkingLot_ACancelledPopLeavesAtOnce: a pop whose client went away
// leaves its key at once: its key-mates keep their order, and neither its
// deadline nor a re-check brings it back.
func TestParkingLot_ACancelledPopLeavesAtOnce(t *testing.T) {
	t.Parallel()
	l := newParkingLot(testBackoff, 100)
	a, b, c := longPoll("g", "", 3*time.Second), longPoll("g", "", time.Second), longPoll("g", "", 2*time.Second)
	for _, w := range []*waiter{a, b, c} {
		l.park(w, t0)
	}
	l.remove(b)
	l.remove(b) // a second cancel of the same pop changes nothing
	if l.n != 2 || !l.next().Equal(t0.Add(testBackoff.Initial)) {
		t.Fatalf("%d parked, next event %v after the cancel; want 2 and the key's re-check", l.n, l.next())
	}
	if re, exp := l.due(t0.Add(time.Second), nil, nil); len(exp) != 0 || len(re) != 1 || re[0] != a {
		t.Fatalf("at the cancelled pop's deadline: re-checks %v, expired %v; want a re-check of the oldest", re, exp)
	}
	if out := l.releaseN("g\x00", 5, nil); len(out) != 1 || out[0] != c || !l.empty() {
		t.Fatalf("releaseN took %v, want the last pop left", out)
	}
}

// TestScheduler_PopsPastTheLimitAreRefused: a pop that reaches an actor
// whose parked and pending pops number maxParked answers
// queengo.ErrTooManyParked at once, whatever its wait; the waiting ones stay.
func TestScheduler_PopsPastTheLimitAreRefused(t *testing.T) {
	t.Parallel()
	s := newPopScheduler(&deps{metrics: testMetrics(), backoff: testBackoff, maxParked: 2, claimsInFlight: 1})
	parked, pending := longPoll("g", "", time.Minute), longPoll("g", "", time.Minute)
	s.add(parked, t0)
	s.take()
	s.empty(parked, t0)
	s.add(pending, t0)
	late := &waiter{req: &queengo.PopRequest{Group: "g", Batch: 1}, reply: make(chan popReply, 1)}
	s.add(late, t0)
	select {
	case r := <-late.reply:
		if !errors.Is(r.err, queengo.ErrTooManyParked) {
			t.Fatalf("the pop past the limit answered %+v %v, want ErrTooManyParked", r.res, r.err)
		}
	default:
		t.Fatal("the pop past the limit got no answer")
	}
	if len(s.pending) != 1 || s.lot.n != 1 || parked.answered || pending.answered {
		t.Fatalf("%d pending, %d parked after the refusal, want the 1 and 1 that waited", len(s.pending), s.lot.n)
	}
}

// TestParkingLot_CountsKeysInBackoff: the back-off counts follow the keys'
// intervals: a key whose empty re-checks passed the threshold is in
// back-off (its group and its queue with it); a wake that concerns it, its
// last pop leaving, and a drain take it out; a discovery scope's lot
// counts groups and keys but no queue.
func TestParkingLot_CountsKeysInBackoff(t *testing.T) {
	t.Parallel()
	b := &Broker{metrics: &brokerMetrics{}}
	l := newParkingLot(testBackoff, 100)
	l.queue, l.backoffs = new(atomic.Int64), &b.metrics.backoff
	want := func(what string, groups, queues, keys int64, avg time.Duration) {
		t.Helper()
		if st := b.BackoffStats(); st != (queengo.BackoffStats{Groups: groups, Queues: queues, Keys: keys, AvgInterval: avg}) {
			t.Fatalf("%s: %+v, want %d groups, %d queues, %d keys, average %v", what, st, groups, queues, keys, avg)
		}
	}
	// emptyRechecks runs n rounds of re-checks of lot that find nothing:
	// each re-checking pop parks again.
	now := t0
	emptyRechecks := func(lot *parkingLot, n int) {
		for range n {
			now = lot.next()
			re, _ := lot.due(now, nil, nil)
			for _, w := range re {
				lot.park(w, now)
			}
		}
	}
	g, h1, h2 := longPoll("g", "", time.Hour), longPoll("h", "p1", time.Hour), longPoll("h", "p2", time.Hour)
	for _, w := range []*waiter{g, h1, h2} {
		l.park(w, now)
	}
	emptyRechecks(&l, 2)
	want("within the threshold", 0, 0, 0, 0)
	emptyRechecks(&l, 1)
	want("past the threshold", 2, 1, 3, 200*time.Millisecond)
	emptyRechecks(&l, 1)
	want("one more empty re-check", 2, 1, 3, 400*time.Millisecond)

	l.wake(now, []freedPartition{{group: "h", name: "p1"}}, nil)
	want("after a wake of h on p1", 2, 1, 2, 400*time.Millisecond)
	l.remove(g)
	want("after g's only pop left", 1, 1, 1, 400*time.Millisecond)
	l.wake(now, nil, nil)
	want("after a wake of every key", 0, 0, 0, 0)

	emptyRechecks(&l, 4)
	want("in back-off again", 1, 1, 2, 200*time.Millisecond)
	l.drain(nil)
	want("after a drain", 0, 0, 0, 0)

	scope := newParkingLot(testBackoff, 100)
	scope.backoffs = &b.metrics.backoff
	scope.park(longPoll("s", "", time.Hour), now)
	emptyRechecks(&scope, 3)
	want("a discovery scope's key in back-off", 1, 0, 1, 200*time.Millisecond)
}

// TestScheduler_StopTakesKeysOutOfBackoff: a key in back-off whose pop left
// to claim and found messages stays in the lot until its next re-check;
// when the actor stops first (passivated), stopping its scheduler takes the
// key out of the back-off counts.
func TestScheduler_StopTakesKeysOutOfBackoff(t *testing.T) {
	t.Parallel()
	b := &Broker{metrics: &brokerMetrics{}}
	s := &popScheduler{lot: newParkingLot(testBackoff, 100)}
	s.lot.queue, s.lot.backoffs = new(atomic.Int64), &b.metrics.backoff
	now := t0
	s.lot.park(longPoll("g", "", time.Hour), now)
	for range 4 {
		now = s.lot.next()
		re, _ := s.lot.due(now, nil, nil)
		if len(re) != 1 {
			t.Fatalf("%d re-checks, want 1", len(re))
		}
		if st := b.BackoffStats(); st.Keys == 1 {
			break // the re-checking pop found messages: it does not park again
		}
		s.lot.park(re[0], now)
	}
	if st := b.BackoffStats(); st.Groups != 1 || st.Queues != 1 || !s.lot.empty() {
		t.Fatalf("before the stop: %+v, lot empty %v; want a key in back-off and no pop", st, s.lot.empty())
	}
	s.stop()
	if st := b.BackoffStats(); st != (queengo.BackoffStats{}) {
		t.Fatalf("after the stop: %+v", st)
	}
}
