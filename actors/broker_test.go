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

// The rest of Store for the fake: the lease extension of a lease no pop of
// the test took, answered harmlessly.

func (f *fakeStore) AckExtend(_ context.Context, items []queengo.AckItem, extends []queengo.LeaseExtend) ([]queengo.AckResult, []queengo.LeaseExtension, error) {
	ext := make([]queengo.LeaseExtension, len(extends))
	for i := range ext {
		ext[i].Failure = queengo.LeaseNotFound
	}
	return make([]queengo.AckResult, len(items)), ext, nil
}

// maintenanceStore is a fakeStore with a pop maintenance switch another
// process could flip, counting the broker's reads of it.
type maintenanceStore struct {
	*fakeStore
	on    atomic.Bool
	reads atomic.Int32
}

func (m *maintenanceStore) PopMaintenance(context.Context) (bool, error) {
	m.reads.Add(1)
	return m.on.Load(), nil
}

// maintenanceBundle is a broker on a maintenanceStore (m).
type maintenanceBundle struct {
	*bundle
	m *maintenanceStore
}

// setupMaintenance starts a broker that reads the switch once, at start,
// and waits for that read, so the test alone decides the local flag.
func setupMaintenance(t *testing.T) *maintenanceBundle {
	t.Helper()
	m := &maintenanceStore{fakeStore: newFakeStore()}
	s := &maintenanceBundle{bundle: setup(t, Config{Store: m, MaintenanceRefresh: time.Hour}), m: m}
	eventually(t, func() error {
		if m.reads.Load() == 0 {
			return errors.New("the broker never read the pop maintenance switch")
		}
		return nil
	})
	return s
}

// switchPopMaintenance switches pop maintenance as package admin does: it
// stores the switch, then tells the broker (Broker.PopMaintenanceSwitched).
func (s *maintenanceBundle) switchPopMaintenance(on bool) {
	s.m.on.Store(on)
	s.b.PopMaintenanceSwitched(on)
}

// popClaims pops once without waiting and reports whether the pop reached
// the store (a claim round) rather than being answered by maintenance.
func (s *maintenanceBundle) popClaims(t *testing.T) bool {
	t.Helper()
	before := len(s.f.roundSizes())
	res, err := s.b.Pop(context.Background(), &queengo.PopRequest{Queue: "q", Group: queengo.QueueModeGroup, Batch: 1})
	if err != nil || len(res.Messages) != 0 {
		t.Fatalf("pop: %d messages, %v; want an empty answer", len(res.Messages), err)
	}
	return len(s.f.roundSizes()) > before
}

// TestPopMaintenanceSwitched_AppliesHereAtOnce (D11): a switch made through
// this broker applies to its pops at once, not at the next refresh, both
// ways.
func TestPopMaintenanceSwitched_AppliesHereAtOnce(t *testing.T) {
	t.Parallel()
	s := setupMaintenance(t)
	s.switchPopMaintenance(true)
	if s.popClaims(t) {
		t.Fatal("a pop under maintenance ran a claim")
	}
	s.switchPopMaintenance(false)
	if !s.popClaims(t) {
		t.Fatal("a pop after maintenance was switched off ran no claim")
	}
}

// TestPopMaintenance_AParkedLongPollClaimsNothing (D11): a long poll that
// parked before pop maintenance was switched on claims nothing while it is
// on, even when a push wakes it: it waits out its timeout and answers empty.
func TestPopMaintenance_AParkedLongPollClaimsNothing(t *testing.T) {
	t.Parallel()
	s := setupMaintenance(t)
	var avail atomic.Bool
	claimed := make(chan struct{}, 8)
	s.f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		claimed <- struct{}{}
		if avail.Load() {
			return deliverOwn(claims), nil
		}
		return make([]queengo.ClaimResult, len(claims)), nil
	}
	const timeout = 500 * time.Millisecond
	reply := make(chan popReply, 1)
	go func() {
		res, err := s.b.Pop(context.Background(), &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: timeout})
		reply <- popReply{res: res, err: err}
	}()
	<-claimed // its first look found nothing: it parks
	s.switchPopMaintenance(true)
	avail.Store(true)
	rounds := len(s.f.roundSizes())
	if _, err := s.b.Push(context.Background(), []queengo.PushItem{pushItem("woke")}); err != nil {
		t.Fatal(err)
	}
	r := <-reply
	if r.err != nil || len(r.res.Messages) != 0 {
		t.Fatalf("the parked pop answered %d messages, %v; want an empty answer", len(r.res.Messages), r.err)
	}
	if n := len(s.f.roundSizes()) - rounds; n != 0 {
		t.Fatalf("%d claims under pop maintenance", n)
	}
}

// TestPopMaintenance_ALongPollThatCameDuringItPopsWhenItEnds (D11): a long
// poll that came while pop maintenance was on waits, and when maintenance
// is switched off it pops with the time it has left: a push then delivers
// at once, not after its timeout.
func TestPopMaintenance_ALongPollThatCameDuringItPopsWhenItEnds(t *testing.T) {
	t.Parallel()
	s := setupMaintenance(t)
	s.f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		if s.f.storedCount("after") > 0 {
			return deliverOwn(claims), nil
		}
		return make([]queengo.ClaimResult, len(claims)), nil
	}
	s.switchPopMaintenance(true)
	const timeout = 10 * time.Second
	start := time.Now()
	reply := make(chan popReply, 1)
	go func() {
		res, err := s.b.Pop(context.Background(), &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: timeout})
		reply <- popReply{res: res, err: err}
	}()
	waitFor(t, &s.signals.maintained, "the long poll waiting out maintenance")
	s.switchPopMaintenance(false)
	if _, err := s.b.Push(context.Background(), []queengo.PushItem{pushItem("after")}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-reply:
		if r.err != nil || len(r.res.Messages) != 1 {
			t.Fatalf("the long poll answered %d messages, %v; want the pushed one", len(r.res.Messages), r.err)
		}
	case <-time.After(timeout - time.Second):
		t.Fatalf("the long poll still waits %v after maintenance ended", time.Since(start))
	}
}

// TestClose_ReleasesALongPollWaitingOutPopMaintenance: closing the broker
// answers a long poll that waits out pop maintenance empty at once, as it
// answers the parked ones.
func TestClose_ReleasesALongPollWaitingOutPopMaintenance(t *testing.T) {
	t.Parallel()
	s := setupMaintenance(t)
	s.switchPopMaintenance(true)
	reply := make(chan popReply, 1)
	go func() {
		res, err := s.b.Pop(context.Background(), &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: time.Hour})
		reply <- popReply{res: res, err: err}
	}()
	waitFor(t, &s.signals.maintained, "the long poll waiting out maintenance")
	s.b.Close()
	select {
	case r := <-reply:
		if r.err != nil || len(r.res.Messages) != 0 {
			t.Fatalf("answer %d messages, %v; want empty", len(r.res.Messages), r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll waiting out maintenance was not released by Close")
	}
}

// TestPop_EndsWhenItsContextEnds: a parked long poll whose client went away
// (its context ended) returns queengo.ErrCancelled at once, not at its
// timeout.
func TestPop_EndsWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{}).b
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	_, err := b.Pop(ctx, &queengo.PopRequest{Queue: "q", Group: queengo.QueueModeGroup, Batch: 1, Wait: true,
		Timeout: time.Minute})
	if el := time.Since(start); !errors.Is(err, queengo.ErrCancelled) || el > 5*time.Second {
		t.Fatalf("pop whose context ended: %v after %v, want ErrCancelled at once", err, el)
	}
}

// blockedAckStore is a fakeStore whose ack commits tell acking they
// started and wait for release, and which records the extensions it is
// asked for.
type blockedAckStore struct {
	*fakeStore
	acking  chan struct{}
	release chan struct{}
	extends chan queengo.LeaseExtend
}

func (s *blockedAckStore) Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error) {
	s.acking <- struct{}{}
	<-s.release
	return s.fakeStore.Ack(ctx, items)
}

func (s *blockedAckStore) AckExtend(ctx context.Context, items []queengo.AckItem, extends []queengo.LeaseExtend) ([]queengo.AckResult, []queengo.LeaseExtension, error) {
	for _, e := range extends {
		s.extends <- e
	}
	return s.fakeStore.AckExtend(ctx, items, extends)
}

// TestExtendLease_UnknownLeaseNeverWaitsForTheAckCommit: a lease this process
// did not hand out is searched for among every cursor, so its extension runs
// on its own, while an ack commit is in flight, and with no cursors named; a
// lease this process handed out names its cursors and rides in the next ack
// commit.
func TestExtendLease_UnknownLeaseNeverWaitsForTheAckCommit(t *testing.T) {
	t.Parallel()
	s := &blockedAckStore{fakeStore: newFakeStore(), acking: make(chan struct{}, 1), release: make(chan struct{}),
		extends: make(chan queengo.LeaseExtend, 2)}
	b := setup(t, Config{Store: s}).b
	acked := make(chan error, 1)
	go func() {
		_, err := b.Ack(context.Background(), []queengo.AckItem{{PartitionID: uuid.New(), TransactionID: "t", Status: "completed"}})
		acked <- err
	}()
	waitChan(t, s.acking, "the ack commit's start")
	if _, failure, err := b.ExtendLease(context.Background(), uuid.New(), 30); err != nil || failure != queengo.LeaseNotFound {
		t.Fatalf("unknown lease during an ack commit: %q %v", failure, err)
	}
	if e := <-s.extends; e.Cursors != nil {
		t.Fatalf("an unknown lease's extension named cursors %v", e.Cursors)
	}

	booked, part := uuid.New(), uuid.New()
	b.leases.book(booked, bookedLease{group: "g", parts: []uuid.UUID{part}, until: time.Now().Add(time.Minute)}, nil)
	extended := make(chan error, 1)
	go func() {
		_, _, err := b.ExtendLease(context.Background(), booked, 30)
		extended <- err
	}()
	select {
	case <-extended:
		t.Fatal("a booked lease's extension did not wait for the ack commit in flight")
	case <-time.After(50 * time.Millisecond): // time enough for an extension that does not wait
	}
	close(s.release)
	if err := <-acked; err != nil {
		t.Fatal(err)
	}
	if err := <-extended; err != nil {
		t.Fatal(err)
	}
	if e := <-s.extends; len(e.Cursors) != 1 || e.Cursors[0] != (queengo.CursorKey{Partition: part, Group: "g"}) {
		t.Fatalf("a booked lease's extension named %v", e.Cursors)
	}
}
