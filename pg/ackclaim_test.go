package pg_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TestAckClaim_APartitionTheAckFreesIsClaimedInTheSameCall: the acks of an
// AckClaim apply before its claims, in the round's transaction, so a claim
// takes the partition whose lease an ack of the same call ends; the acks get
// their results in item order.
func TestAckClaim_APartitionTheAckFreesIsClaimedInTheSameCall(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q, parts := b.countedQueue(t, 2)
	p := pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 1, MaxParts: 1})
	first := b.claimOK(t, p)
	if len(first[0].Messages) != 1 {
		t.Fatalf("first claim: %+v", first[0])
	}
	msg := first[0].Messages[0]
	next := pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 1, MaxParts: 1})
	if res := b.claimOK(t, next); len(res[0].Messages) != 0 {
		t.Fatalf("a claim while the lease is live took %+v", res[0])
	}

	acks, res, err := b.s.AckClaim(context.Background(), []queengo.AckItem{
		{PartitionID: parts[0], TransactionID: msg.TransactionID, Status: "completed", Group: "g", LeaseID: p[0].LeaseID},
		{PartitionID: parts[0], TransactionID: "nope", Status: "completed", Group: "g"},
	}, next)
	if err != nil {
		t.Fatal(err)
	}
	want := []queengo.AckResult{{Success: true, LeaseReleased: true, Queue: q.Name, Partition: "p0"},
		{Failure: queengo.AckMessageNotFound}}
	if len(acks) != 2 || acks[0] != want[0] || acks[1] != want[1] {
		t.Fatalf("acks %+v, want %+v", acks, want)
	}
	if res[0].Err != nil || len(res[0].Messages) != 1 || res[0].Messages[0].TransactionID != "p0-1" {
		t.Fatalf("the claim after the ack got %+v, want p0-1", res[0])
	}
}

// TestAckClaim_AnAckThatFailsItsStatementLeavesTheClaimsServed: when the
// acks make the round's first batch fail, they run alone and report their
// error, and the claims run again on their own and are served.
func TestAckClaim_AnAckThatFailsItsStatementLeavesTheClaimsServed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q, parts := b.countedQueue(t, 1)
	// A NUL byte is not valid in PostgreSQL text: the ack statement fails.
	acks, res, err := b.s.AckClaim(context.Background(), []queengo.AckItem{
		{PartitionID: parts[0], TransactionID: "p0-0\x00", Status: "completed", Group: "g"},
	}, pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 1, MaxParts: 1}))
	if err == nil || acks != nil {
		t.Fatalf("acks %+v %v, want the statement's error", acks, err)
	}
	if res[0].Err != nil || len(res[0].Messages) != 1 {
		t.Fatalf("the claim got %+v, want p0-0", res[0])
	}
}

// TestAckClaim_ASpanThatDoesNotApplyResolvesInTheRound: acks that name the
// leases and offsets they were delivered under apply as spans in the
// round's transaction; a span that does not apply goes through the item
// rules in the same statement. Here offset 2 of a two-message lease was
// acked first, so the ack of offset 1 is no span of the cursor's: it
// still ends the lease inside the round, and the round's claim takes the
// partition's next message, while a span naming another lease fails.
func TestAckClaim_ASpanThatDoesNotApplyResolvesInTheRound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts := b.countedQueue(t, 3, 1)
	p := pops(q, 2, queengo.ClaimParams{Group: "g", Batch: 2, MaxParts: 1})
	first := b.claimOK(t, p)
	items := map[string]queengo.AckItem{}
	for i, r := range first {
		for _, m := range r.Messages {
			items[m.TransactionID] = queengo.AckItem{PartitionID: m.PartitionID, TransactionID: m.TransactionID,
				Status: "completed", Group: "g", LeaseID: p[i].LeaseID, Offset: m.Offset}
		}
	}
	if len(items) != 3 || items["p0-1"].PartitionID != parts[0] {
		t.Fatalf("first claims %+v", first)
	}
	if res, err := b.s.Ack(ctx, []queengo.AckItem{items["p0-1"]}); err != nil || !res[0].Success || res[0].LeaseReleased {
		t.Fatalf("ack of p0-1 ahead of p0-0: %+v %v", res, err)
	}
	stale := items["p1-0"]
	stale.LeaseID = uuid.Must(uuid.NewV7())
	next := pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 1, MaxParts: 1})
	acks, res, err := b.s.AckClaim(ctx, []queengo.AckItem{stale, items["p0-0"]}, next)
	if err != nil {
		t.Fatal(err)
	}
	want := []queengo.AckResult{{Failure: queengo.AckLeaseInvalid, Queue: q.Name, Partition: "p1"},
		{Success: true, LeaseReleased: true, Queue: q.Name, Partition: "p0"}}
	if len(acks) != 2 || acks[0] != want[0] || acks[1] != want[1] {
		t.Fatalf("acks %+v, want %+v", acks, want)
	}
	if res[0].Err != nil || len(res[0].Messages) != 1 || res[0].Messages[0].TransactionID != "p0-2" {
		t.Fatalf("the claim after the acks got %+v, want p0-2", res[0])
	}
}

// TestAckClaim_AHandOffLeavesThePartitionRowAlone: a round that acks a
// cursor and claims it again updates the row twice in one transaction,
// which fired a foreign key's check and locked the partition row (a WAL
// record per hand-off, a MultiXact beside a concurrent push); cursors have
// no foreign key (migration 008), so the partition row keeps its xmax.
func TestAckClaim_AHandOffLeavesThePartitionRowAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts := b.countedQueue(t, 2)
	p := pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 1, MaxParts: 1})
	msg := b.claimOK(t, p)[0].Messages[0]
	c := b.conn(t)
	xmax := func() string {
		var x string
		if err := c.QueryRow(ctx, `SELECT xmax::text FROM queen.partitions WHERE id = $1`, parts[0].String()).Scan(&x); err != nil {
			t.Fatal(err)
		}
		return x
	}
	before := xmax()
	next := pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 1, MaxParts: 1})
	_, res, err := b.s.AckClaim(ctx, []queengo.AckItem{
		{PartitionID: parts[0], TransactionID: msg.TransactionID, Status: "completed", Group: "g", LeaseID: p[0].LeaseID},
	}, next)
	if err != nil || res[0].Err != nil || len(res[0].Messages) != 1 {
		t.Fatalf("the hand-off: %+v %v", res, err)
	}
	if after := xmax(); after != before {
		t.Fatalf("the partition row's xmax went from %s to %s: the hand-off locked it", before, after)
	}
}
