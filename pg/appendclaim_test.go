package pg_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TestAppendClaim_TheClaimsFindTheMessagesOfTheWrite: the segments of an
// AppendClaim are written first, in the round's transaction, so its claims
// take the messages they bring, whether the round's pops take one partition
// each (claim_take alone) or any number (claim_read first), and whether the
// group met the partitions before or meets them in this round.
func TestAppendClaim_TheClaimsFindTheMessagesOfTheWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, tc := range []struct {
		name  string
		met   bool // the group met the partitions in an earlier round
		claim queengo.ClaimParams
		pops  int
		want  [][]string
	}{
		{"one partition each", true, queengo.ClaimParams{Group: "g", Batch: 10, MaxParts: 1}, 2, [][]string{{"a1", "a2"}, {"b1"}}},
		{"any number, first contact", false, queengo.ClaimParams{Group: "g", Batch: 10}, 1, [][]string{{"a1", "a2", "b1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, parts := b.countedQueue(t, 0, 0)
			if tc.met {
				b.claimOK(t, pops(q, 1, tc.claim))
			}
			dups, res, seen, err := b.s.AppendClaim(ctx, []queengo.Segment{segOf(parts[0], "a1", "a2"), segOf(parts[1], "b1")},
				pops(q, tc.pops, tc.claim))
			if err != nil || !seen {
				t.Fatalf("AppendClaim: seen %v, %v", seen, err)
			}
			if len(dups) != 2 || len(dups[0]) != 2 || len(dups[1]) != 1 || dups[0][0] != uuid.Nil || dups[1][0] != uuid.Nil {
				t.Fatalf("dups %v, want every frame written", dups)
			}
			var got [][]string
			for _, r := range res {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				got = append(got, delivered(r))
			}
			slices.SortFunc(got, func(a, b []string) int { return len(b) - len(a) })
			if !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Fatalf("claims got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAppendClaim_ClaimsThatMustRecordASubscriptionFirstMayMissTheWrite: a
// group's subscription record goes in a transaction before its claims, which
// the write does not join (lock order), so seen is false: the claims ran
// without it. The write stands, and the next claim finds it.
func TestAppendClaim_ClaimsThatMustRecordASubscriptionFirstMayMissTheWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts := b.countedQueue(t, 0)
	claims := pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 10, MaxParts: 1, SubMode: queengo.SubscriptionAll})
	dups, _, seen, err := b.s.AppendClaim(ctx, []queengo.Segment{segOf(parts[0], "a1")}, claims)
	if err != nil || seen || len(dups) != 1 || dups[0][0] != uuid.Nil {
		t.Fatalf("AppendClaim: dups %v, seen %v, %v; want the write and seen false", dups, seen, err)
	}
	res := b.claimOK(t, pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 10, MaxParts: 1}))
	if got := delivered(res[0]); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("the next claim got %v, want a1", got)
	}
}

// TestAppendClaim_AWriteThatFailsLeavesTheClaimsServed: a write to a
// partition that does not exist fails the round's first batch; it runs again
// alone and reports its error, and the claims run on their own and are
// served.
func TestAppendClaim_AWriteThatFailsLeavesTheClaimsServed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q, _ := b.countedQueue(t, 1)
	dups, res, seen, err := b.s.AppendClaim(context.Background(), []queengo.Segment{segOf(uuid.New(), "x")},
		pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 1, MaxParts: 1}))
	if !errors.Is(err, queengo.ErrNotFound) || dups != nil || seen {
		t.Fatalf("AppendClaim: dups %v, seen %v, %v; want ErrNotFound", dups, seen, err)
	}
	if res[0].Err != nil || !slices.Equal(delivered(res[0]), []string{"p0-0"}) {
		t.Fatalf("the claim got %+v, want p0-0", res[0])
	}
}
