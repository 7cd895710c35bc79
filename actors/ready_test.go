package actors

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TestReadySet_LaterOfferSurvivesEarlierClaim: a claim that started before a
// partition was offered again must not erase that offer when it comes back
// without the partition (the bug that left one partition circulating among
// ten consumers).
func TestReadySet_LaterOfferSurvivesEarlierClaim(t *testing.T) {
	t.Parallel()
	rs := newReadySet()
	p := uuid.New()
	rs.offer(p, 1)
	since := uint64(1) // a claim starts after offer 1
	rs.offer(p, 2)     // the partition is freed again meanwhile
	rs.drop(p, since)
	if _, ok := rs.set[p]; !ok {
		t.Fatal("an offer made after the claim started was dropped")
	}
	rs.drop(p, 2)
	if _, ok := rs.set[p]; ok {
		t.Fatal("a claim that started after the last offer did not drop it")
	}
}

// fullScan is what a claim that searched every partition and found ready
// untaken saw.
func fullScan(r *readySets, group string, ready []uuid.UUID, now time.Time) {
	r.learn(&queengo.ClaimParams{Group: group}, &queengo.ClaimResult{Ready: ready}, r.since(), now)
}

// TestReadySets_CandidatesSampleTheSet: a group without a known set searches
// everything; after a full scan its claims search a sample of the ready
// partitions (twice the need, at least candidatesMin, at most
// candidatesMax); an empty set answers without a claim until emptyRescan
// passed; a set older than fullScanEvery is searched in full again.
func TestReadySets_CandidatesSampleTheSet(t *testing.T) {
	t.Parallel()
	r := newReadySets()
	if c, skip := r.candidates("g", 1, t0); c != nil || skip {
		t.Fatalf("unknown group: candidates %v skip %v, want a full scan", c, skip)
	}
	var ready []uuid.UUID
	for range 100 {
		ready = append(ready, uuid.New())
	}
	fullScan(&r, "g", ready, t0)
	for _, tc := range []struct{ need, want int }{{1, candidatesMin}, {10, 20}, {50, candidatesMax}} {
		if c, skip := r.candidates("g", tc.need, t0); len(c) != tc.want || skip {
			t.Fatalf("need %d: %d candidates (skip %v), want %d", tc.need, len(c), skip, tc.want)
		}
	}
	if c, _ := r.candidates("g", 1, t0.Add(fullScanEvery+time.Millisecond)); c != nil {
		t.Fatalf("a set older than fullScanEvery: candidates %v, want a full scan", c)
	}

	fullScan(&r, "empty", nil, t0)
	if _, skip := r.candidates("empty", 1, t0.Add(emptyRescan-time.Millisecond)); !skip {
		t.Fatal("an empty set rescanned before emptyRescan passed")
	}
	if c, skip := r.candidates("empty", 1, t0.Add(emptyRescan)); c != nil || skip {
		t.Fatalf("an empty set after emptyRescan: candidates %v skip %v, want a full scan", c, skip)
	}
}

// TestReadySets_AnUnknownPartitionMakesTheNextClaimSearchEverything: after
// unknown (a lost claim's lease ended on partitions nobody here can name) a
// group's claim searches every partition, whatever its set holds or however
// recent its last full scan; other groups keep their sets.
func TestReadySets_AnUnknownPartitionMakesTheNextClaimSearchEverything(t *testing.T) {
	t.Parallel()
	r := newReadySets()
	fullScan(&r, "g", []uuid.UUID{uuid.New()}, t0)
	fullScan(&r, "empty", nil, t0)
	fullScan(&r, "other", []uuid.UUID{uuid.New()}, t0)
	r.unknown("g")
	r.unknown("empty")
	r.unknown("never seen")
	for _, g := range []string{"g", "empty"} {
		if c, skip := r.candidates(g, 1, t0); c != nil || skip {
			t.Fatalf("%s: candidates %v skip %v, want a full scan", g, c, skip)
		}
	}
	if c, _ := r.candidates("other", 1, t0); len(c) != 1 {
		t.Fatalf("another group's candidates %v, want its set", c)
	}
}

// TestReadySets_CandidatesLongestReadyFirst: claims search the partitions
// that have been ready longest first; an offer to a partition already ready
// keeps its place, one that left the set and comes back goes last; the
// claims of one round get different partitions until the set is used up,
// then start over, and the next round starts from the head again.
func TestReadySets_CandidatesLongestReadyFirst(t *testing.T) {
	t.Parallel()
	r := newReadySets()
	p := make([]uuid.UUID, 6)
	for i := range p {
		p[i] = uuid.New()
	}
	fullScan(&r, "g", nil, t0)
	for _, pid := range p {
		r.offer(pid, "g")
	}
	r.offer(p[0], "g") // ready already: keeps its place
	r.groups["g"].drop(p[1], r.since())
	r.offer(p[1], "g") // left and came back: last
	want := []uuid.UUID{p[0], p[2], p[3], p[4], p[5], p[1]}
	r.roundStarts()
	var got []uuid.UUID
	for range 3 {
		c, _ := r.candidates("g", 1, t0) // candidatesMin each
		got = append(got, c...)
	}
	for i, pid := range want {
		if got[i] != pid {
			t.Fatalf("candidate %d of the round: %v, want %v (order %v)", i, got[i], pid, want)
		}
	}
	if got[6] != want[0] {
		t.Fatalf("past the end of the set the round starts over: got %v, want %v", got[6], want[0])
	}
	r.roundStarts()
	if c, _ := r.candidates("g", 1, t0); c[0] != want[0] {
		t.Fatalf("a new round starts at %v, want the head %v", c[0], want[0])
	}
}

// TestReadySet_OrderStaysBounded: partitions that come and go leave stale
// entries in the order, which is compacted so it stays about the set's size.
func TestReadySet_OrderStaysBounded(t *testing.T) {
	t.Parallel()
	rs := newReadySet()
	keep := uuid.New()
	rs.offer(keep, 1)
	for n := uint64(2); n < 10_000; n++ {
		pid := uuid.New()
		rs.offer(pid, n)
		rs.drop(pid, n)
	}
	if len(rs.order) > 2*len(rs.set)+readyOrderSlack {
		t.Fatalf("order holds %d entries for %d ready partitions", len(rs.order), len(rs.set))
	}
	if c := rs.take(4); len(c) != 1 || c[0] != keep {
		t.Fatalf("take: %v, want [%v]", c, keep)
	}
}

// TestReadySets_LeasedIsNotReadyUntilItsLeaseEnds: a partition a claim
// leased leaves the set until the lease's end, when it is offered again and
// its group reported; one an autoAck claim committed stays ready (it may
// hold more).
func TestReadySets_LeasedIsNotReadyUntilItsLeaseEnds(t *testing.T) {
	t.Parallel()
	r := newReadySets()
	leased, committed := uuid.New(), uuid.New()
	fullScan(&r, "g", []uuid.UUID{leased, committed}, t0)
	since := r.since()
	r.learn(&queengo.ClaimParams{Group: "g", Candidates: []uuid.UUID{leased}},
		&queengo.ClaimResult{Spans: []queengo.Span{{PartitionID: leased, Lease: time.Minute}}}, since, t0)
	r.learn(&queengo.ClaimParams{Group: "g", AutoAck: true, Candidates: []uuid.UUID{committed}},
		&queengo.ClaimResult{Spans: []queengo.Span{{PartitionID: committed}}}, since, t0)
	set := r.groups["g"].set
	if _, ok := set[leased]; ok {
		t.Fatal("a leased partition stayed ready")
	}
	if _, ok := set[committed]; !ok {
		t.Fatal("a partition an autoAck claim committed left the set")
	}
	if got := r.next(); !got.Equal(t0.Add(time.Minute)) {
		t.Fatalf("next lease expiry %v, want %v", got, t0.Add(time.Minute))
	}
	if groups := r.expire(t0.Add(time.Minute-time.Millisecond), nil); len(groups) != 0 {
		t.Fatalf("expired %v before the lease ended", groups)
	}
	groups := r.expire(t0.Add(time.Minute), nil)
	if len(groups) != 1 || groups[0] != "g" || len(r.leases) != 0 || len(r.leaseHeap) != 0 {
		t.Fatalf("at the lease's end: groups %v, %d leases left", groups, len(r.leases))
	}
	if _, ok := set[leased]; !ok {
		t.Fatal("a partition whose lease ended is not ready again")
	}
}

// TestReadySets_LaterLeaseSupersedesEarlier: a partition leased again
// before its first lease ended is offered at the end of the later lease
// only, and superseded lease ends do not pile up.
func TestReadySets_LaterLeaseSupersedesEarlier(t *testing.T) {
	t.Parallel()
	r := newReadySets()
	p := uuid.New()
	fullScan(&r, "g", []uuid.UUID{p}, t0)
	lease := func(at time.Time) {
		r.learn(&queengo.ClaimParams{Group: "g", Candidates: []uuid.UUID{p}},
			&queengo.ClaimResult{Spans: []queengo.Span{{PartitionID: p, Lease: time.Minute}}}, r.since(), at)
	}
	lease(t0)
	lease(t0.Add(time.Second))
	if groups := r.expire(t0.Add(time.Minute), nil); len(groups) != 0 {
		t.Fatalf("the superseded lease's end offered the partition to %v", groups)
	}
	if got := r.next(); !got.Equal(t0.Add(time.Minute + time.Second)) {
		t.Fatalf("next lease expiry %v, want the later lease's end", got)
	}
	if groups := r.expire(t0.Add(time.Minute+time.Second), nil); len(groups) != 1 {
		t.Fatalf("the later lease's end offered the partition to %v, want g", groups)
	}
	for i := range 10 * endHeapSlack {
		lease(t0.Add(time.Duration(i) * time.Millisecond))
	}
	if n := len(r.leaseHeap); n > 2*len(r.leases)+endHeapSlack {
		t.Fatalf("%d lease ends kept for %d live leases", n, len(r.leases))
	}
}

// TestReadySets_OfferReachesEveryGroupOrOne: a commit offers a partition to
// every group; a lease released by a group's ack only to that group.
func TestReadySets_OfferReachesEveryGroupOrOne(t *testing.T) {
	t.Parallel()
	r := newReadySets()
	fullScan(&r, "a", nil, t0)
	fullScan(&r, "b", nil, t0)
	p, q := uuid.New(), uuid.New()
	r.offer(p, "")
	r.offer(q, "b")
	if _, ok := r.groups["a"].set[p]; !ok {
		t.Fatal("a commit's offer missed group a")
	}
	if _, ok := r.groups["a"].set[q]; ok {
		t.Fatal("group b's freed lease was offered to group a")
	}
	if len(r.groups["b"].set) != 2 {
		t.Fatalf("group b's set %v, want both partitions", r.groups["b"].set)
	}
}
