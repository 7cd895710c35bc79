package pg

import (
	"testing"

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
