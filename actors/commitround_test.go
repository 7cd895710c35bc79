package actors

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/queengo/queengo"
)

// TestCommitRound_AParkedPopGetsAPushWithItsCommit: a push to a queue that
// keeps a pop parked commits in the transaction of the claim round that
// serves the pop (one AppendClaim carrying the pop's claim), so the pop gets
// the message with the push's commit, and no round follows the commit for
// what it wrote.
func TestCommitRound_AParkedPopGetsAPushWithItsCommit(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		f.mu.Lock()
		stored := len(f.stored)
		f.mu.Unlock()
		if stored == 0 {
			return make([]queengo.ClaimResult, len(claims)), nil
		}
		return deliverOwn(claims), nil
	}
	s := setup(t, Config{Store: f, RequestTimeout: 5 * time.Second})
	w := s.parkPop(t)

	res, err := s.b.Push(context.Background(), []queengo.PushItem{pushItem("a")})
	if err != nil || res[0].Status != queengo.PushQueued {
		t.Fatalf("push: %+v %v", res, err)
	}
	if r := await(t, w, 5*time.Second); r.err != nil || len(r.res.Messages) != 1 {
		t.Fatalf("the parked pop got %+v %v, want one message", r.res, r.err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.appendClaims, []int{1}) || len(f.rounds) != 2 {
		t.Fatalf("AppendClaim calls %v and %d claim calls, want one AppendClaim with the parked pop's claim after the pop's first look",
			f.appendClaims, len(f.rounds))
	}
}
