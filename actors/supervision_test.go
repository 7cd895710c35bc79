package actors

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// supervisionBundle is a broker on f whose actors run on clock and panic
// at a testPanic.
type supervisionBundle struct {
	*bundle
	clock *testClock
}

// setupSupervision starts a supervisionBundle.
func setupSupervision(t *testing.T, f *fakeStore) *supervisionBundle {
	t.Helper()
	clock := newTestClock()
	return &supervisionBundle{bundle: setup(t, Config{Store: f, RequestTimeout: 5 * time.Second}, withClock(clock),
		withMiddleware(panicOnTestPanic)), clock: clock}
}

// checkIdle runs one idle check of every actor, as the registry's timer does.
func (s *supervisionBundle) checkIdle() { s.b.system.Root.Send(s.b.registry, idleTickMsg) }

// TestSupervision_FailedActorAnswersWhatItHeldAndIsReplaced: a queue actor
// that panics answers its parked pop and its push whose commit is in flight
// with an error at once (never a hang), and the next push and pop are served
// by its replacement; likewise a scope actor's parked pop.
func TestSupervision_FailedActorAnswersWhatItHeldAndIsReplaced(t *testing.T) {
	t.Parallel()
	t.Run("queue", func(t *testing.T) {
		t.Parallel()
		f := newFakeStore()
		committing, release := make(chan struct{}), make(chan struct{})
		first := true
		f.append = func(context.Context, []queengo.Segment) error {
			if first {
				first = false
				close(committing)
				<-release
			}
			return nil
		}
		s := setupSupervision(t, f)
		pushed := make(chan error, 1)
		go func() {
			_, err := s.b.Push(context.Background(), []queengo.PushItem{pushItem("a")})
			pushed <- err
		}()
		<-committing
		// Parked after the commit started: one parked before it would ride
		// in the commit's claim round (commitRound).
		parked := sendPop(s.b, "q", &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: time.Hour})

		s.b.system.Root.Send(s.b.queuePID("q"), &testPanic{})
		waitFor(t, &s.signals.restarted, "the failed actor answering")
		if r := await(t, parked, time.Second); !errors.Is(r.err, queengo.ErrActorFailed) {
			t.Fatalf("the parked pop answered %+v %v, want ErrActorFailed", r.res, r.err)
		}
		select {
		case err := <-pushed:
			if !errors.Is(err, queengo.ErrActorFailed) {
				t.Fatalf("the push in flight answered %v, want ErrActorFailed", err)
			}
		case <-time.After(time.Second):
			t.Fatal("the push in flight was not answered")
		}

		close(release) // the old commit lands; its outcome reaches nobody
		res, err := s.b.Push(context.Background(), []queengo.PushItem{pushItem("b")})
		if err != nil || res[0].Status != queengo.PushQueued {
			t.Fatalf("push after the restart: %+v %v", res, err)
		}
		if r := await(t, sendPop(s.b, "q", &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1}), 5*time.Second); r.err != nil {
			t.Fatalf("pop after the restart: %v", r.err)
		}
	})
	t.Run("scope", func(t *testing.T) {
		t.Parallel()
		s := setupSupervision(t, newFakeStore())
		k := scopeKey{namespace: "ns"}
		parked := sendPop(s.b, k, &queengo.PopRequest{Namespace: "ns", Group: "g", Batch: 1, Wait: true, Timeout: time.Hour})
		s.b.system.Root.Send(s.b.scopeHandle(k).pid, &testPanic{})
		waitFor(t, &s.signals.restarted, "the failed actor answering")
		if r := await(t, parked, time.Second); !errors.Is(r.err, queengo.ErrActorFailed) {
			t.Fatalf("the parked pop answered %+v %v, want ErrActorFailed", r.res, r.err)
		}
		if r := await(t, sendPop(s.b, k, &queengo.PopRequest{Namespace: "ns", Group: "g", Batch: 1}), 5*time.Second); r.err != nil {
			t.Fatalf("pop after the restart: %v", r.err)
		}
	})
}

// TestPassivation_IdleActorStopsAndIsRespawnedOnDemand: a queue actor that
// held nothing and received no request through a whole idle interval is
// stopped and forgotten; the next push spawns a fresh one.
func TestPassivation_IdleActorStopsAndIsRespawnedOnDemand(t *testing.T) {
	t.Parallel()
	s := setupSupervision(t, newFakeStore())
	if _, err := s.b.Push(context.Background(), []queengo.PushItem{pushItem("a")}); err != nil {
		t.Fatal(err)
	}
	old := s.b.queueHandle("q")
	s.checkIdle() // the push came since the last check: it stays
	waitFor(t, &s.signals.idleChecked, "the first idle check")
	s.checkIdle()
	waitFor(t, &s.signals.passivated, "the passivation")
	if _, ok := s.b.dir.queues.Load("q"); ok || !old.retired() {
		t.Fatalf("after passivation: still in the directory %v, retired %v", ok, old.retired())
	}

	res, err := s.b.Push(context.Background(), []queengo.PushItem{pushItem("b")})
	if err != nil || res[0].Status != queengo.PushQueued {
		t.Fatalf("push after passivation: %+v %v", res, err)
	}
	if h := s.b.queueHandle("q"); h == old || h.pid.Equal(old.pid) {
		t.Fatal("the push went to the passivated actor")
	}
}

// TestPassivation_WritersOfQuietPartitionsAreForgotten: a queue actor that
// stays busy forgets the writers of the partitions no push came to through
// a whole idle interval (the next push to one looks its partition up again)
// and keeps the others.
func TestPassivation_WritersOfQuietPartitionsAreForgotten(t *testing.T) {
	t.Parallel()
	s := setupSupervision(t, newFakeStore())
	push := func(partition string) {
		t.Helper()
		it := pushItem(uuid.NewString())
		it.Partition = partition
		if res, err := s.b.Push(context.Background(), []queengo.PushItem{it}); err != nil || res[0].Status != queengo.PushQueued {
			t.Fatalf("push to %s: %+v %v", partition, res, err)
		}
	}
	push("quiet")
	push("busy")
	s.checkIdle()
	waitFor(t, &s.signals.idleChecked, "the first idle check")
	push("busy")
	s.checkIdle()
	waitFor(t, &s.signals.idleChecked, "the second idle check")
	push("quiet")
	push("busy")
	if q, b := s.f.ensuredOf("quiet"), s.f.ensuredOf("busy"); q != 2 || b != 1 {
		t.Fatalf("partition lookups: quiet %d, busy %d; want 2 (its writer was forgotten) and 1", q, b)
	}
}

// TestPassivation_ActorWithAParkedPopStays: an actor holding a parked long
// poll is not passivated however long it stays quiet.
func TestPassivation_ActorWithAParkedPopStays(t *testing.T) {
	t.Parallel()
	s := setupSupervision(t, newFakeStore())
	w := sendPop(s.b, scopeKey{task: "t"}, &queengo.PopRequest{Task: "t", Group: "g", Batch: 1, Wait: true, Timeout: time.Hour})
	for range 3 {
		s.checkIdle()
		waitFor(t, &s.signals.idleChecked, "an idle check")
	}
	if h := s.b.scopeHandle(scopeKey{task: "t"}); h.retired() {
		t.Fatal("an actor with a parked pop was passivated")
	}
	select {
	case r := <-w.reply:
		t.Fatalf("the parked pop answered %+v %v", r.res, r.err)
	default:
	}
}

// TestLongPoll_TooManyParkedIsAnError: past deps.maxParked parked pops, a
// long poll that finds nothing answers queengo.ErrTooManyParked instead of
// parking; the parked ones wait on.
func TestLongPoll_TooManyParkedIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{ClaimsInFlight: 1}, func(d *deps) { d.maxParked = 1 }).b
	long := func() *waiter {
		return sendPop(b, "q", &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: time.Hour})
	}
	first := long()
	if r := await(t, long(), 5*time.Second); !errors.Is(r.err, queengo.ErrTooManyParked) {
		t.Fatalf("the second long poll answered %+v %v, want ErrTooManyParked", r.res, r.err)
	}
	select {
	case r := <-first.reply:
		t.Fatalf("the parked pop answered %+v %v", r.res, r.err)
	default:
	}
}

// TestLongPoll_DeadlineOnTheActorsClock: a parked pop answers empty when the
// actor's clock passes its deadline, not before.
func TestLongPoll_DeadlineOnTheActorsClock(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	claimed := make(chan struct{}, 16)
	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		claimed <- struct{}{}
		return make([]queengo.ClaimResult, len(claims)), nil
	}
	s := setupSupervision(t, f)
	drain := func() {
		for {
			select {
			case <-s.clock.armed:
			default:
				return
			}
		}
	}
	drain()
	w := sendPop(s.b, "q", &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: time.Minute})
	<-claimed
	waitChan(t, s.clock.armed, "the actor arming its timer") // parked: the timer points at the key's re-check
	select {
	case r := <-w.reply:
		t.Fatalf("answered %+v %v before its deadline", r.res, r.err)
	case <-time.After(50 * time.Millisecond): // real time passes, the actor's clock does not
	}
	s.clock.Advance(time.Minute)
	if r := await(t, w, 5*time.Second); r.err != nil || len(r.res.Messages) != 0 {
		t.Fatalf("at its deadline: %+v %v, want empty", r.res, r.err)
	}
}

// TestSupervision_PopWhoseRoundWasInFlightGetsWhatItClaimed: a pop whose
// claim round is in flight when its actor fails gets the messages the round
// claimed once it comes back, not the actor's error: an autoAck claim has
// committed them, so an error would lose them. The other pops the actor
// held get the error at once.
func TestSupervision_PopWhoseRoundWasInFlightGetsWhatItClaimed(t *testing.T) {
	t.Parallel()
	f := newFakeStore()
	inClaim, release := make(chan struct{}, 1), make(chan struct{})
	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		select {
		case inClaim <- struct{}{}:
			<-release
		default: // the replacement's claims
		}
		return deliverOwn(claims), nil
	}
	s := setupSupervision(t, f)
	claiming := sendPop(s.b, "q", &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, AutoAck: true})
	<-inClaim
	parked := sendPop(s.b, "q", &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: time.Hour})
	s.b.system.Root.Send(s.b.queuePID("q"), &testPanic{})
	waitFor(t, &s.signals.restarted, "the failed actor answering")
	if r := await(t, parked, time.Second); !errors.Is(r.err, queengo.ErrActorFailed) {
		t.Fatalf("the parked pop answered %+v %v, want ErrActorFailed", r.res, r.err)
	}
	select {
	case r := <-claiming.reply:
		t.Fatalf("the pop in the round answered %+v %v before its round came back", r.res, r.err)
	default:
	}
	close(release)
	r := await(t, claiming, 5*time.Second)
	if r.err != nil || len(r.res.Messages) != 1 || r.res.Messages[0].TransactionID != uuid.Nil.String() {
		t.Fatalf("the pop in the round answered %+v %v, want the message it claimed", r.res, r.err)
	}
}

// TestClose_HeldPopWhoseRoundWasInFlightAnswersEmpty: a minPopWaitTime pop
// whose claim round is in flight when the broker closes, and comes back
// with fewer messages than its batch, answers empty at once rather than be
// held in a lot nothing looks at any more.
func TestClose_HeldPopWhoseRoundWasInFlightAnswersEmpty(t *testing.T) {
	f := newFakeStore()
	f.queue.Options.MinPopWaitTime = 60000
	inClaim, release := make(chan struct{}, 1), make(chan struct{})
	f.claim = func(ctx context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		inClaim <- struct{}{}
		<-release
		out := make([]queengo.ClaimResult, len(claims))
		for i := range out {
			out[i].Taken = 1 // fewer than the batch: held
		}
		return out, nil
	}
	b := setup(t, Config{Store: f}).b
	w := sendPop(b, "q", &queengo.PopRequest{Queue: "q", Group: queengo.QueueModeGroup, Batch: 10, Wait: true,
		Timeout: time.Minute})
	<-inClaim
	b.Close()
	close(release)
	if r := await(t, w, 5*time.Second); r.err != nil || len(r.res.Messages) != 0 {
		t.Fatalf("answer %+v, want empty", r)
	}
}

// panicClock is a testClock that panics at its first Now after the first
// claim round comes back to an actor (failOnFirstRound), as a bug in the
// actor's handling of the round would.
type panicClock struct {
	*testClock
	armed, used atomic.Bool
}

func (c *panicClock) Now() time.Time {
	if c.armed.CompareAndSwap(true, false) {
		panic("a bug")
	}
	return c.testClock.Now()
}

// failOnFirstRound is receiver middleware that arms c as the first claim
// round reaches its actor: the actor fails inside its handling of the round.
func (c *panicClock) failOnFirstRound(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(ctx actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*claimRound); ok && c.used.CompareAndSwap(false, true) {
			c.armed.Store(true)
		}
		next(ctx, env)
	}
}

// TestSupervision_FailureHandlingARoundAnswersItsPops: an actor that fails
// while it handles a claim round that came back (no longer in flight, so
// not among the rounds a failure orphans) still answers the round's pops: a
// pop that claimed a message gets it, never a hang; the replacement serves
// the next pop.
func TestSupervision_FailureHandlingARoundAnswersItsPops(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		target any
		req    func() *queengo.PopRequest
	}{
		{"queue", "q", func() *queengo.PopRequest { return &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1} }},
		{"scope", scopeKey{namespace: "ns"}, func() *queengo.PopRequest {
			return &queengo.PopRequest{Namespace: "ns", Group: "g", Batch: 1}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeStore()
			f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
				return deliverOwn(claims), nil
			}
			clock := &panicClock{testClock: newTestClock()}
			s := setup(t, Config{Store: f, RequestTimeout: 5 * time.Second}, withClock(clock), withMiddleware(clock.failOnFirstRound))
			w := sendPop(s.b, tc.target, tc.req())
			waitFor(t, &s.signals.restarted, "the failed actor answering")
			r := await(t, w, time.Second)
			if r.err != nil || len(r.res.Messages) != 1 || r.res.Messages[0].TransactionID != w.leaseID.String() {
				t.Fatalf("the pop of the round answered %+v %v, want the message it claimed", r.res, r.err)
			}
			if r := await(t, sendPop(s.b, tc.target, tc.req()), 5*time.Second); r.err != nil || len(r.res.Messages) != 1 {
				t.Fatalf("pop after the restart: %+v %v", r.res, r.err)
			}
		})
	}
}
