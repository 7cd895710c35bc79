package actors

import (
	"context"
	"errors"
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
			b := newTestBroker(t, Config{Store: f, ClaimsInFlight: 1, RequestTimeout: 5 * time.Second})

			// The first pop's round holds the actor's only claim slot, so
			// the pops sent meanwhile all ride in the next round together.
			w0 := sendPop(b, tc.target, tc.req())
			select {
			case <-started:
			case <-time.After(5 * time.Second):
				t.Fatal("the first claim round did not start")
			}
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
	b := newTestBroker(t, Config{Store: f, RequestTimeout: rt})

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
