package pg

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TestClaimTake_AsyncCommitOnlyWithoutAutoAck: a take whose pops only lease
// commits without waiting for the WAL flush; one carrying an autoAck pop,
// whose claim is its delivery's only record, waits for it.
func TestClaimTake_AsyncCommitOnlyWithoutAutoAck(t *testing.T) {
	t.Parallel()
	r := &scopeRound{
		claims: []queengo.ClaimParams{{Group: "g"}, {Group: "g", AutoAck: true}, {Group: "h"}},
		pops:   []roundPop{{claim: 0}, {claim: 1}, {claim: 2}},
	}
	if !r.asyncCommit([]*takeCall{{pops: []int{0}}, {pops: []int{2}}}) {
		t.Error("a take of leasing pops only commits synchronously")
	}
	if r.asyncCommit([]*takeCall{{pops: []int{0}}, {pops: []int{1}}}) {
		t.Error("a take carrying an autoAck pop commits asynchronously")
	}
}

// TestHandOut_PopsOfTheSinglePartitionRouteShareOneTake: the pops of a group
// restricted to one partition each go to one claim_take, pinned (each its
// own partition, slot by slot), beside the group's call for the pops that
// take any partition, whatever the number of pops.
func TestHandOut_PopsOfTheSinglePartitionRouteShareOneTake(t *testing.T) {
	t.Parallel()
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	claims := []queengo.ClaimParams{{Group: "g", Batch: 1, Partition: a}, {Group: "g", Batch: 1, Partition: b},
		{Group: "g", Batch: 1, Partition: c}, {Group: "g", Batch: 1}}
	r := newScopeRound(claims, []int{0, 1, 2, 3})
	r.groups[0].entries = []roundEntry{{pid: c, avail: 1}, {pid: b, avail: 1}, {pid: a, avail: 1}, {pid: uuid.New(), avail: 1}}
	calls := r.handOut()
	if len(calls) != 2 {
		t.Fatalf("%d claim_take calls, want 2 (the pinned pops', the others')", len(calls))
	}
	pin := calls[0]
	if !pin.pinned || !slices.Equal(pin.pops, []int{0, 1, 2}) || !slices.Equal(pin.slots, []int{1, 2, 3}) ||
		!slices.Equal(pin.pool, []int{2, 1, 0}) {
		t.Fatalf("pinned call %+v, want pops 0, 1, 2 on entries 2, 1, 0, slot by slot", *pin)
	}
	if any := calls[1]; any.pinned || !slices.Equal(any.pops, []int{3}) || !slices.Equal(any.pool, []int{3}) {
		t.Fatalf("the other pop's call %+v, want pop 3 on entry 3", *any)
	}
}

// TestHandOut_APinnedGroupNeedsNoRead: a group whose pops are all of the
// single-partition route sends no claim_read (read uses no connection): its
// entries are its pops' partitions, each once, and the first pop of each
// partition goes to the group's pinned claim_take.
func TestHandOut_APinnedGroupNeedsNoRead(t *testing.T) {
	t.Parallel()
	a, b := uuid.New(), uuid.New()
	claims := []queengo.ClaimParams{{Group: "g", Batch: 1, Partition: a, MaxParts: 1}, {Group: "g", Batch: 1, Partition: a, MaxParts: 1},
		{Group: "g", Batch: 1, Partition: b, MaxParts: 1}}
	r := newScopeRound(claims, []int{0, 1, 2})
	if err := r.read(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	g := r.groups[0]
	if !g.pinned || len(g.entries) != 2 || g.entries[0].pid != a || g.entries[1].pid != b {
		t.Fatalf("pinned %v, entries %+v; want a pinned group on a and b", g.pinned, g.entries)
	}
	calls := r.handOut()
	if len(calls) != 1 || !calls[0].pinned || !slices.Equal(calls[0].pops, []int{0, 2}) || !slices.Equal(calls[0].pool, []int{0, 1}) {
		t.Fatalf("calls %+v, want one pinned call of pops 0 and 2 on a and b", calls)
	}
}
