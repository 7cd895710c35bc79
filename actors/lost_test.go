package actors

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

func lostPop(autoAck bool) *waiter {
	return &waiter{req: &queengo.PopRequest{AutoAck: autoAck}, leaseID: uuid.New()}
}

// TestLostLeases_OnlyClaimsThatMayHaveCommitted: a failed claim's lease is
// kept only when the failure is the request deadline or a lost connection,
// after which PostgreSQL may have committed the claim, and only when the pop
// leases (an autoAck claim has no lease to end).
func TestLostLeases_OnlyClaimsThatMayHaveCommitted(t *testing.T) {
	t.Parallel()
	l := newLostLeases()
	for _, tc := range []struct {
		err     error
		autoAck bool
		want    bool
	}{
		{fmt.Errorf("error claiming: %w: request deadline passed", queengo.ErrTimeout), false, true},
		{fmt.Errorf("error claiming: %w: connection lost", queengo.ErrUnavailable), false, true},
		{fmt.Errorf("error claiming: %w", queengo.ErrTimeout), true, false},
		{fmt.Errorf("error claiming: %w", queengo.ErrPool), false, false},
		{errors.New("error claiming: syntax"), false, false},
	} {
		if got := l.claimFailed(lostPop(tc.autoAck), tc.err, t0); got != tc.want {
			t.Errorf("%v (autoAck %v): kept %v, want %v", tc.err, tc.autoAck, got, tc.want)
		}
	}
	if n := len(l.leases); n != 2 {
		t.Fatalf("%d leases kept, want 2", n)
	}
}

// TestLostLeases_TriedAtGrowingIntervalsThenForgotten: a lost lease is due
// lostFirstTry after its failure, then after twice the wait each time, seven
// times over about two minutes, and then forgotten; a settled one is
// forgotten at once.
func TestLostLeases_TriedAtGrowingIntervalsThenForgotten(t *testing.T) {
	t.Parallel()
	l := newLostLeases()
	w := lostPop(false)
	l.claimFailed(w, queengo.ErrTimeout, t0)
	if ids := l.due(t0.Add(lostFirstTry - time.Millisecond)); len(ids) != 0 {
		t.Fatalf("due before lostFirstTry: %v", ids)
	}
	var tries []time.Duration
	for at := time.Duration(0); at <= 5*time.Minute; at += 100 * time.Millisecond {
		if ids := l.due(t0.Add(at)); len(ids) == 1 && ids[0] == w.leaseID {
			tries = append(tries, at)
		}
	}
	want := []time.Duration{1, 3, 7, 15, 31, 63, 127}
	if len(tries) != len(want) {
		t.Fatalf("tried at %v, want at %v s", tries, want)
	}
	for i := range want {
		if tries[i] != want[i]*time.Second {
			t.Fatalf("tried at %v, want at %v s", tries, want)
		}
	}
	if n := len(l.leases); n != 0 {
		t.Fatalf("%d leases kept after the last try", n)
	}

	l.claimFailed(w, queengo.ErrTimeout, t0)
	l.settled(w.leaseID)
	if ids := l.due(t0.Add(time.Hour)); len(ids) != 0 || len(l.leases) != 0 {
		t.Fatalf("a settled lease is still kept: due %v", ids)
	}
}

// TestLostLeases_Bounded: past lostLeasesMax a lost lease is not kept (it
// runs out instead).
func TestLostLeases_Bounded(t *testing.T) {
	t.Parallel()
	l := newLostLeases()
	for range lostLeasesMax {
		l.claimFailed(lostPop(false), queengo.ErrTimeout, t0)
	}
	if l.claimFailed(lostPop(false), queengo.ErrTimeout, t0) || len(l.leases) != lostLeasesMax {
		t.Fatalf("kept past the cap: %d", len(l.leases))
	}
}

// TestPop_AClaimThatTimedOutHasItsLeaseEnded (D12): a pop whose claim
// failed on the request deadline answers that error, and the Broker then
// ends, by its id alone, the lease the claim may have committed: about
// lostFirstTry later, with no cursors to name.
func TestPop_AClaimThatTimedOutHasItsLeaseEnded(t *testing.T) {
	t.Parallel()
	s := &endStore{fakeStore: newFakeStore(), ends: make(chan uuid.UUID, 4)}
	entered := make(chan uuid.UUID, 4)
	s.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		for _, c := range claims {
			entered <- c.LeaseID
		}
		return nil, fmt.Errorf("error claiming: %w: request deadline passed", queengo.ErrTimeout)
	}
	b := setup(t, Config{Store: s}).b
	start := time.Now()
	if _, err := b.Pop(context.Background(), &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1}); !errors.Is(err, queengo.ErrTimeout) {
		t.Fatalf("the pop returned %v, want ErrTimeout", err)
	}
	lease := <-entered
	select {
	case got := <-s.ends:
		if got != lease {
			t.Fatalf("ended lease %s, want the failed claim's %s", got, lease)
		}
		if d := time.Since(start); d < lostFirstTry {
			t.Fatalf("ended after %v, before lostFirstTry", d)
		}
	case <-time.After(lostFirstTry + 5*time.Second):
		t.Fatal("the lease of the timed-out claim was not ended")
	}
}

// TestPop_ALostClaimsEndedLeaseWakesAParkedPopOfItsGroup (D12): once the lease
// of a claim whose answer was lost is ended, a pop of its group parked
// meanwhile looks again at once, searching every partition (which ones the
// lost claim took is not known), instead of waiting for its backoff; even
// though its group's last full search is recent enough for its ready set to
// be used otherwise.
func TestPop_ALostClaimsEndedLeaseWakesAParkedPopOfItsGroup(t *testing.T) {
	t.Parallel()
	s := &endStore{fakeStore: newFakeStore(), ends: make(chan uuid.UUID, 4)}
	claims := make(chan queengo.ClaimParams, 16)
	first := true
	s.claim = func(_ context.Context, cs []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		for _, c := range cs {
			claims <- c
		}
		if first {
			first = false
			return nil, fmt.Errorf("error claiming: %w: request deadline passed", queengo.ErrTimeout)
		}
		return make([]queengo.ClaimResult, len(cs)), nil
	}
	// A parked pop re-checks only when woken.
	cfg := Config{Store: s, Backoff: Backoff{Initial: time.Hour, Threshold: 100, Multiplier: 1, Max: time.Hour}}
	clock := newTestClock()
	b := setup(t, cfg, withClock(clock)).b
	if _, err := b.Pop(context.Background(), &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1}); !errors.Is(err, queengo.ErrTimeout) {
		t.Fatalf("the lost pop returned %v, want ErrTimeout", err)
	}
	lost := waitChan(t, claims, "the lost claim").LeaseID
	parked := sendPop(b, "q", &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: time.Minute})
	if c := waitChan(t, claims, "the parked pop's first claim"); c.LeaseID != parked.leaseID {
		t.Fatalf("claim of lease %s, want the parked pop's %s", c.LeaseID, parked.leaseID)
	}
	// The lost lease is due; the parked pop's full search is not older than
	// fullScanEvery.
	clock.Advance(lostFirstTry)
	if got := waitChan(t, s.ends, "the end of the lost lease"); got != lost {
		t.Fatalf("ended lease %s, want the lost claim's %s", got, lost)
	}
	c := waitChan(t, claims, "the parked pop's claim after the lost lease ended")
	if c.LeaseID != parked.leaseID || c.Candidates != nil {
		t.Fatalf("claim of lease %s with candidates %v, want the parked pop's %s searching every partition",
			c.LeaseID, c.Candidates, parked.leaseID)
	}
}
