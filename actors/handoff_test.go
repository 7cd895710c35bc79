package actors

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// handOffBundle is a broker and a lease of group g on partition part of
// queue q that the broker handed out.
type handOffBundle struct {
	*bundle
	lease uuid.UUID
	part  uuid.UUID
}

// setupHandOff starts a broker on a fake store whose claims find nothing
// until an ack rode in a claim round, and books it a lease (handOff).
func setupHandOff(t *testing.T) *handOffBundle {
	t.Helper()
	f := newFakeStore()
	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		for _, c := range f.acked() {
			if c.claims > 0 {
				return deliverOwn(claims), nil
			}
		}
		return make([]queengo.ClaimResult, len(claims)), nil
	}
	return setup(t, Config{Store: f, RequestTimeout: 5 * time.Second}).handOff()
}

// handOff books the broker a lease of group g on a new partition of queue
// q, as a pop of its own would have taken it.
func (s *bundle) handOff() *handOffBundle {
	h := &handOffBundle{bundle: s, lease: uuid.New(), part: uuid.New()}
	s.b.leases.book(h.lease, bookedLease{queue: "q", full: true, group: "g", parts: []uuid.UUID{h.part},
		until: time.Now().Add(time.Minute)}, nil)
	return h
}

// ack acks message t1 of the bundle's partition under lease.
func (s *handOffBundle) ack(t *testing.T, lease uuid.UUID) queengo.AckResult {
	t.Helper()
	res, err := s.b.Ack(context.Background(), []queengo.AckItem{{PartitionID: s.part, TransactionID: "t1",
		Status: "completed", Group: "g", LeaseID: lease}})
	if err != nil || len(res) != 1 {
		t.Fatalf("ack: %v %v", res, err)
	}
	return res[0]
}

// TestHandOff_AnAckRidesInTheRoundOfThePopItFrees: an ack naming a lease this
// process handed out on a queue that keeps a pop of its group parked goes to
// the queue's actor, which applies it at the head of the claim round that
// serves the parked pop (one AckClaim call), and the pop gets the messages.
func TestHandOff_AnAckRidesInTheRoundOfThePopItFrees(t *testing.T) {
	t.Parallel()
	s := setupHandOff(t)
	w := s.parkPop(t)

	if r := s.ack(t, s.lease); !r.Success || !r.LeaseReleased {
		t.Fatalf("ack answered %+v", r)
	}
	if r := await(t, w, 5*time.Second); r.err != nil || len(r.res.Messages) != 1 {
		t.Fatalf("the parked pop got %+v %v, want one message", r.res, r.err)
	}
	calls := s.f.acked()
	if len(calls) != 1 || calls[0].claims != 1 || len(calls[0].items) != 1 || calls[0].items[0].LeaseID != s.lease {
		t.Fatalf("ack calls %+v, want one AckClaim of the ack with the parked pop's claim", calls)
	}
	var m bytes.Buffer
	s.b.cfg.Metrics.WritePrometheus(&m)
	if !strings.Contains(m.String(), "queengo_ack_handoff_items_count") {
		t.Error("the hand-off is not in queengo_ack_handoff_items")
	}
}

// TestHandOff_OtherAcksGoToTheCoalescer: an ack naming a lease this process
// does not know, or one of a queue with nothing parked, commits on its own
// (Ack), as before.
func TestHandOff_OtherAcksGoToTheCoalescer(t *testing.T) {
	t.Parallel()
	s := setupHandOff(t)
	s.ack(t, s.lease) // nothing parked
	s.parkPop(t)
	s.ack(t, uuid.New()) // not booked
	for i, c := range s.f.acked() {
		if c.claims != 0 {
			t.Fatalf("ack call %d carried %d claims, want a plain Ack", i, c.claims)
		}
	}
	if n := len(s.f.acked()); n != 2 {
		t.Fatalf("%d ack calls, want 2", n)
	}
}

// TestHandOff_AFailedActorAnswersTheAcksItHeld: a queue actor that fails
// while it holds a handed-off ack waiting for the next round answers it
// with an error at once, never a hang.
func TestHandOff_AFailedActorAnswersTheAcksItHeld(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	inRound, release := make(chan struct{}), make(chan struct{})
	var claims atomic.Int32
	f.claim = func(_ context.Context, cs []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		if claims.Add(1) == 2 {
			close(inRound)
			<-release
		}
		return make([]queengo.ClaimResult, len(cs)), nil
	}
	t.Cleanup(func() { close(release) })
	held := make(chan struct{}, 1)
	signalAcks := func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			next(c, env)
			if _, ok := env.Message.(*ackRequest); ok {
				held <- struct{}{}
			}
		}
	}
	// A parked pop re-checks only when woken.
	cfg := Config{Store: f, RequestTimeout: 5 * time.Second, Backoff: Backoff{Initial: time.Hour, Threshold: 100, Multiplier: 1, Max: time.Hour}}
	s := setup(t, cfg, withMiddleware(panicOnTestPanic, signalAcks)).handOff()
	s.parkPop(t)
	// Another group's first pop searches: its round holds the actor's only
	// claim slot, so the ack waits for the next round.
	sendPop(s.b, "q", &queengo.PopRequest{Queue: "q", Group: "g2", Batch: 1})
	waitChan(t, inRound, "the other group's round")

	answered := make(chan error, 1)
	go func() {
		_, err := s.b.Ack(context.Background(), []queengo.AckItem{{PartitionID: s.part, TransactionID: "t",
			Status: "completed", Group: "g", LeaseID: s.lease}})
		answered <- err
	}()
	waitChan(t, held, "the ack reaching the actor")
	s.b.system.Root.Send(s.b.queuePID("q"), &testPanic{})
	if err := waitChan(t, answered, "the held ack's answer"); !errors.Is(err, queengo.ErrActorFailed) {
		t.Fatalf("the held ack answered %v, want ErrActorFailed", err)
	}
}

// TestHandOff_AFailedQueueLoadAnswersTheHeldAcks: acks handed to a queue
// actor that must load its queue again (it was reconfigured) and cannot
// answer with the load's error, as its pending pops do, rather than wait.
func TestHandOff_AFailedQueueLoadAnswersTheHeldAcks(t *testing.T) {
	t.Parallel()
	s := setupHandOff(t)
	s.parkPop(t)
	down := errors.New("database down")
	s.f.ensure = func(context.Context) error { return down }
	s.b.hintQueue("q", &queueChanged{})
	_, err := s.b.Ack(context.Background(), []queengo.AckItem{{PartitionID: s.part, TransactionID: "t1",
		Status: "completed", Group: "g", LeaseID: s.lease}})
	if !errors.Is(err, down) {
		t.Fatalf("ack answered %v, want the queue load's error", err)
	}
}
