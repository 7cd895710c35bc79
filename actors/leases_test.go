package actors

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TestLeaseBook_RemembersALeaseUntilItEnds: a booked lease's cursors are
// known until every span of it is released or it ends; an extension moves
// its end, and a sweep forgets the leases that ended.
func TestLeaseBook_RemembersALeaseUntilItEnds(t *testing.T) {
	t.Parallel()
	b := newLeaseBook()
	lease, other := uuid.New(), uuid.New()
	p1, p2 := uuid.New(), uuid.New()
	b.book(lease, "g", []uuid.UUID{p1, p2}, t0.Add(time.Minute), t0)
	want := []queengo.CursorKey{{Partition: p1, Group: "g"}, {Partition: p2, Group: "g"}}
	if got := b.cursors(lease); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("cursors %v, want %v", got, want)
	}
	if got := b.cursors(other); got != nil {
		t.Fatalf("an unknown lease: cursors %v, want none", got)
	}
	b.released(lease, p1)
	if got := b.cursors(lease); len(got) != 1 || got[0] != want[1] {
		t.Fatalf("after releasing %v: cursors %v, want %v", p1, got, want[1:])
	}
	b.released(lease, p2)
	if got := b.cursors(lease); got != nil {
		t.Fatalf("every span released: cursors %v, want the lease forgotten", got)
	}

	b.book(lease, "g", []uuid.UUID{p1}, t0.Add(time.Minute), t0)
	b.book(other, "g", []uuid.UUID{p2}, t0.Add(time.Minute), t0)
	b.extended(lease, t0.Add(time.Hour))
	sweep := t0.Add(time.Minute + leaseSweepEvery)
	b.book(uuid.New(), "g", []uuid.UUID{p2}, sweep.Add(time.Minute), sweep)
	if b.cursors(other) != nil {
		t.Fatal("a lease that ended survived the sweep")
	}
	if b.cursors(lease) == nil {
		t.Fatal("an extended lease was swept at its first end")
	}
}

// TestLeaseBook_AutoAckTakesNoLease: a pop that took no lease (autoAck, or
// nothing delivered) books nothing; a leased pop books its spans' partitions
// until its longest span's lease ends.
func TestLeaseBook_AutoAckTakesNoLease(t *testing.T) {
	t.Parallel()
	b := newLeaseBook()
	p := uuid.New()
	res := &queengo.ClaimResult{Spans: []queengo.Span{{PartitionID: p, Lease: time.Minute}}}
	auto := &waiter{req: &queengo.PopRequest{Group: "g", AutoAck: true}, leaseID: uuid.New()}
	b.bookDelivered(auto, res, t0)
	if b.cursors(auto.leaseID) != nil {
		t.Fatal("an autoAck pop booked a lease")
	}
	leased := &waiter{req: &queengo.PopRequest{Group: "g"}, leaseID: uuid.New()}
	b.bookDelivered(leased, res, t0)
	if got := b.cursors(leased.leaseID); len(got) != 1 || got[0] != (queengo.CursorKey{Partition: p, Group: "g"}) {
		t.Fatalf("leased pop: cursors %v", got)
	}
	if l := b.leases[leased.leaseID]; !l.until.Equal(t0.Add(time.Minute)) {
		t.Fatalf("booked until %v, want the lease's end %v", l.until, t0.Add(time.Minute))
	}
}
