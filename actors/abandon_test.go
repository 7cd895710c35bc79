package actors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// endStore is a fakeStore that answers every lease ending a success and
// reports the lease on ends.
type endStore struct {
	*fakeStore
	ends chan uuid.UUID
}

func (s *endStore) AckExtend(ctx context.Context, items []queengo.AckItem, extends []queengo.LeaseExtend) ([]queengo.AckResult, []queengo.LeaseExtension, error) {
	acks, ext, err := s.fakeStore.AckExtend(ctx, items, extends)
	for i, e := range extends {
		if e.End {
			ext[i].Failure = ""
			s.ends <- e.Lease
		}
	}
	return acks, ext, err
}

// abandonBundle is a broker on an endStore (store) whose claims serve each
// pop one message under its lease, on a span of partition part, once the
// test lets them go (open); entered gets each claimed lease as its claim
// starts, back a signal when the queue actor has handled a claim round that
// came back, and freed each partition offered to the queue actor.
type abandonBundle struct {
	*bundle
	store    *endStore
	part     uuid.UUID
	entered  chan uuid.UUID
	back     chan struct{}
	freed    chan uuid.UUID
	release  chan struct{}
	released bool
}

// setupAbandon starts an abandonBundle; its claims are let go when the test
// ends at the latest.
func setupAbandon(t *testing.T) *abandonBundle {
	t.Helper()
	s := &abandonBundle{store: &endStore{fakeStore: newFakeStore(), ends: make(chan uuid.UUID, 4)}, part: uuid.New(),
		entered: make(chan uuid.UUID, 4), back: make(chan struct{}, 16), freed: make(chan uuid.UUID, 16),
		release: make(chan struct{})}
	s.store.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		for _, c := range claims {
			s.entered <- c.LeaseID
		}
		<-s.release
		out := deliverOwn(claims)
		for i := range out {
			out[i].Spans = []queengo.Span{{PartitionID: s.part, Queue: "q", From: 1, To: 1, Lease: time.Minute}}
		}
		return out, nil
	}
	signal := func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			next(c, env)
			// Never blocking the actor: a test reads only what it waits for.
			switch m := env.Message.(type) {
			case *claimRound:
				select {
				case s.back <- struct{}{}:
				default:
				}
			case *partitionFreed:
				select {
				case s.freed <- m.partition:
				default:
				}
			}
		}
	}
	s.bundle = setup(t, Config{Store: s.store}, withMiddleware(signal))
	t.Cleanup(s.open)
	return s
}

// open lets the claims go, once.
func (s *abandonBundle) open() {
	if !s.released {
		s.released = true
		close(s.release)
	}
}

// wantEnded waits for the store to end lease, then for the lease book to
// offer its partition to the queue actor.
func (s *abandonBundle) wantEnded(t *testing.T, lease uuid.UUID) {
	t.Helper()
	if got := waitChan(t, s.store.ends, "the end of the abandoned pop's lease"); got != lease {
		t.Fatalf("ended lease %s, want the abandoned pop's %s", got, lease)
	}
	if got := waitChan(t, s.freed, "the offer of the ended lease's partition"); got != s.part {
		t.Fatalf("offered partition %s, want the ended lease's %s", got, s.part)
	}
	if s.b.leases.cursors(lease) != nil {
		t.Fatal("the lease book still holds the ended lease")
	}
}

// claimed waits for a claim to start and returns its lease.
func (s *abandonBundle) claimed(t *testing.T) uuid.UUID {
	t.Helper()
	return waitChan(t, s.entered, "a claim's start")
}

// TestPop_AClientThatLeavesDuringItsClaimHasItsLeaseEnded (D12): a pop
// whose client leaves while its claim round is out answers ErrCancelled,
// and what the round then takes for it is not left hidden under a lease
// nobody holds until it runs out: the lease is ended at once.
func TestPop_AClientThatLeavesDuringItsClaimHasItsLeaseEnded(t *testing.T) {
	t.Parallel()
	s := setupAbandon(t)
	ctx, cancel := context.WithCancel(context.Background())
	popped := make(chan error, 1)
	go func() {
		_, err := s.b.Pop(ctx, &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: time.Minute})
		popped <- err
	}()
	lease := s.claimed(t)
	cancel()
	if err := <-popped; !errors.Is(err, queengo.ErrCancelled) {
		t.Fatalf("the left pop returned %v, want ErrCancelled", err)
	}
	s.open()
	s.wantEnded(t, lease)
}

// TestPop_AnAnswerItsClientLeftBeforeReadingHasItsLeaseEnded (D12): when
// the round's answer reached the pop just before its client left, the
// cancel takes the unread answer back and ends its lease.
func TestPop_AnAnswerItsClientLeftBeforeReadingHasItsLeaseEnded(t *testing.T) {
	t.Parallel()
	s := setupAbandon(t)
	s.open()
	w := sendPop(s.b, "q", &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: time.Minute})
	lease := s.claimed(t)
	waitChan(t, s.back, "the claim round's return")
	if len(w.reply) == 0 {
		t.Fatal("the pop was not answered")
	}
	s.b.system.Root.Send(s.b.queueHandle("q").pid, &cancelPop{w: w})
	s.wantEnded(t, lease)
	if len(w.reply) != 0 {
		t.Fatal("the unread answer is still there")
	}
}

// TestPop_AnswersWithinItsBoundWhenTheDatabaseStalls: pops queued behind
// claim rounds that never come back (a database that stopped answering, a
// store that ignores its deadline) answer ErrTimeout after popSlack request
// timeouts, those of the round in flight and those still waiting for one
// alike; none hangs.
func TestPop_AnswersWithinItsBoundWhenTheDatabaseStalls(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	release := make(chan struct{})
	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		<-release
		return make([]queengo.ClaimResult, len(claims)), nil
	}
	const timeout = 200 * time.Millisecond
	b := setup(t, Config{Store: f, RequestTimeout: timeout}).b
	t.Cleanup(func() { close(release) }) // before the broker closes
	const pops = roundMax + 8            // one round in flight, the rest pending
	errs := make(chan error, pops)
	for range pops {
		go func() {
			_, err := b.Pop(context.Background(), &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1})
			errs <- err
		}()
	}
	deadline := time.After(popSlack*timeout + 5*time.Second)
	for range pops {
		select {
		case err := <-errs:
			if !errors.Is(err, queengo.ErrTimeout) {
				t.Fatalf("a pop returned %v, want ErrTimeout", err)
			}
		case <-deadline:
			t.Fatal("a pop did not answer within its bound")
		}
	}
}
