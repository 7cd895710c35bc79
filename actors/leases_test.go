package actors

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TestLeaseBook_RemembersALeaseUntilItEnds: a booked lease's cursors are
// known until every span of it is released or it ends; an extension moves
// its end, and expire forgets the leases that ended and returns those no
// ack released.
func TestLeaseBook_RemembersALeaseUntilItEnds(t *testing.T) {
	t.Parallel()
	b := newLeaseBook()
	lease, other := uuid.New(), uuid.New()
	p1, p2 := uuid.New(), uuid.New()
	b.book(lease, bookedLease{group: "g", parts: []uuid.UUID{p1, p2}, until: t0.Add(time.Minute)}, nil)
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

	b.book(lease, bookedLease{queue: "q", group: "g", parts: []uuid.UUID{p1}, until: t0.Add(time.Minute)}, nil)
	b.book(other, bookedLease{queue: "q", group: "g", parts: []uuid.UUID{p2}, until: t0.Add(time.Minute)}, nil)
	acked := uuid.New()
	b.book(acked, bookedLease{queue: "q", group: "g", parts: []uuid.UUID{p2}, until: t0.Add(time.Second)}, nil)
	b.released(acked, p2)
	b.extended(lease, t0.Add(time.Hour))
	if got := b.expire(t0.Add(time.Minute - time.Nanosecond)); got != nil {
		t.Fatalf("before any end: expired %v", got)
	}
	got := b.expire(t0.Add(time.Minute))
	if len(got) != 1 || got[0].queue != "q" || got[0].group != "g" || !slices.Equal(got[0].parts, []uuid.UUID{p2}) {
		t.Fatalf("expired %+v, want the lease on %v alone (the acked one was released, the other extended)", got, p2)
	}
	if b.cursors(other) != nil {
		t.Fatal("a lease that ended is still booked")
	}
	if b.cursors(lease) == nil {
		t.Fatal("an extended lease ended at its first end")
	}
	if got := b.expire(t0.Add(time.Hour)); len(got) != 1 || b.cursors(lease) != nil {
		t.Fatalf("at the extension's end: expired %+v, want the extended lease", got)
	}
}

// TestLeaseBook_ExpireNamesEachPartitionsQueue: a lease a pop took on
// several queues (the discovery route) ends with the queue of each of its
// partitions, as far as acks left them.
func TestLeaseBook_ExpireNamesEachPartitionsQueue(t *testing.T) {
	t.Parallel()
	b := newLeaseBook()
	p1, p2, p3 := uuid.New(), uuid.New(), uuid.New()
	w := &waiter{req: &queengo.PopRequest{Group: "g", Batch: 3}, leaseID: uuid.New()}
	b.bookDelivered(w, &queengo.ClaimResult{Spans: []queengo.Span{{PartitionID: p1, Queue: "a", Lease: time.Minute},
		{PartitionID: p2, Queue: "b", Lease: time.Minute}, {PartitionID: p3, Queue: "c", Lease: time.Minute}}}, t0)
	b.released(w.leaseID, p2)
	got := b.expire(t0.Add(time.Minute))
	if len(got) != 1 || got[0].queue != "" || !slices.Equal(got[0].parts, []uuid.UUID{p1, p3}) ||
		!slices.Equal(got[0].queues, []string{"a", "c"}) {
		t.Fatalf("expired %+v, want p1 of a and p3 of c", got)
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

// TestLeaseBook_KnowsTheOffsetsOfDeliveredMessages: an ack of a message
// this process delivered gets its offset from the book, until the lease it
// was delivered under ends there (released or expired); a redelivery under
// another lease owns the entry, so the first lease's end leaves it.
func TestLeaseBook_KnowsTheOffsetsOfDeliveredMessages(t *testing.T) {
	t.Parallel()
	b := newLeaseBook()
	p1, p2 := uuid.New(), uuid.New()
	msg := func(p uuid.UUID, txid string, off int64) queengo.Message {
		return queengo.Message{Frame: queengo.Frame{TransactionID: txid}, PartitionID: p, Offset: off}
	}
	offsets := func(keys ...queengo.AckItem) []int64 {
		b.fillOffsets(keys)
		out := make([]int64, len(keys))
		for i, k := range keys {
			out[i] = k.Offset
		}
		return out
	}
	first, second := uuid.New(), uuid.New()
	a1, a2, b1 := queengo.AckItem{PartitionID: p1, TransactionID: "a1", LeaseID: first},
		queengo.AckItem{PartitionID: p1, TransactionID: "a2", LeaseID: first},
		queengo.AckItem{PartitionID: p2, TransactionID: "b1", LeaseID: first}
	b.book(first, bookedLease{group: "g", parts: []uuid.UUID{p1, p2}, until: t0.Add(time.Minute)}, []queengo.Message{msg(p1, "a1", 7), msg(p1, "a2", 8), msg(p2, "b1", 3)})
	if got := offsets(a1, a2, b1, queengo.AckItem{PartitionID: p2, TransactionID: "a1", LeaseID: first}); !slices.Equal(got, []int64{7, 8, 3, 0}) {
		t.Fatalf("offsets %v, want [7 8 3 0] (a1 is not a message of p2)", got)
	}
	if got := offsets(queengo.AckItem{PartitionID: p1, TransactionID: "a1"},
		queengo.AckItem{PartitionID: p1, TransactionID: "a1", LeaseID: second}); !slices.Equal(got, []int64{0, 0}) {
		t.Fatalf("acks naming no lease or another one: offsets %v, want [0 0]", got)
	}
	b.released(first, p1)
	if got := offsets(a1, a2, b1); !slices.Equal(got, []int64{0, 0, 3}) {
		t.Fatalf("after p1's span was released: offsets %v, want [0 0 3]", got)
	}

	// b1 is delivered again under second; first ends (expire) without
	// taking second's entry along.
	b.book(second, bookedLease{group: "g", parts: []uuid.UUID{p2}, until: t0.Add(time.Hour)}, []queengo.Message{msg(p2, "b1", 3)})
	b.expire(t0.Add(time.Minute))
	if b.cursors(first) != nil {
		t.Fatal("the ended lease is still booked")
	}
	b1.LeaseID = second
	if got := offsets(b1); !slices.Equal(got, []int64{3}) {
		t.Fatalf("b1 redelivered under a live lease: offset %v, want [3]", got)
	}
	b.released(second, p2)
	if got := offsets(b1); !slices.Equal(got, []int64{0}) || len(b.offsets) != 0 {
		t.Fatalf("every lease ended: offset %v, book %v, want nothing", got, b.offsets)
	}
}

// TestLeaseBook_NamesTheQueueOnlyWhenEveryItemIsAFullLeaseOfIt: fillOffsets
// names the queue of an ack (for a hand-off, Broker.Ack) only when every
// item names a lease the book knows, taken by a pop that got its whole
// batch, for the item's group, on that one queue.
func TestLeaseBook_NamesTheQueueOnlyWhenEveryItemIsAFullLeaseOfIt(t *testing.T) {
	t.Parallel()
	b := newLeaseBook()
	t0 := time.Now()
	p := uuid.New()
	lease := func(queue string, full bool) uuid.UUID {
		id := uuid.New()
		b.book(id, bookedLease{queue: queue, full: full, group: "g", parts: []uuid.UUID{p}, until: t0.Add(time.Minute)}, nil)
		return id
	}
	q1, q1b, q2, part := lease("q1", true), lease("q1", true), lease("q2", true), lease("q1", false)
	item := func(l uuid.UUID, group string) queengo.AckItem {
		return queengo.AckItem{PartitionID: p, TransactionID: "t", Group: group, LeaseID: l}
	}
	for _, tc := range []struct {
		name  string
		items []queengo.AckItem
		want  string
	}{
		{"one queue", []queengo.AckItem{item(q1, "g"), item(q1b, "g")}, "q1"},
		{"two queues", []queengo.AckItem{item(q1, "g"), item(q2, "g")}, ""},
		{"a partial batch", []queengo.AckItem{item(q1, "g"), item(part, "g")}, ""},
		{"an unknown lease", []queengo.AckItem{item(q1, "g"), item(uuid.New(), "g")}, ""},
		{"no lease", []queengo.AckItem{item(uuid.Nil, "g")}, ""},
		{"another group", []queengo.AckItem{item(q1, "h")}, ""},
	} {
		if got := b.fillOffsets(tc.items); got != tc.want {
			t.Errorf("%s: queue %q, want %q", tc.name, got, tc.want)
		}
	}
}
