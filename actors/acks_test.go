package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// ackStore is an acker that records every call and answers each item with
// its transaction id as the queue name, and each lease extension with its
// lease as the expiry, so a caller can check it got its own results. Calls
// block until the test lets them go (gate), when set.
type ackStore struct {
	gate  chan struct{} // when set, each call waits for a value
	calls chan ackCall
	fail  func(items []queengo.AckItem) error

	mu       sync.Mutex
	inflight int
	maxIn    int
}

func newAckStore(gated bool) *ackStore {
	s := &ackStore{calls: make(chan ackCall, 100)}
	if gated {
		s.gate = make(chan struct{})
	}
	return s
}

// ackCall is one store call: Ack (extends nil, viaAck) or AckExtend.
type ackCall struct {
	items   []queengo.AckItem
	extends []queengo.LeaseExtend
	viaAck  bool
}

func (s *ackStore) Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error) {
	return s.call(ctx, ackCall{items: items, viaAck: true})
}

func (s *ackStore) AckExtend(ctx context.Context, items []queengo.AckItem, extends []queengo.LeaseExtend) ([]queengo.AckResult, []queengo.LeaseExtension, error) {
	res, err := s.call(ctx, ackCall{items: items, extends: extends})
	if err != nil {
		return nil, nil, err
	}
	ext := make([]queengo.LeaseExtension, len(extends))
	for i, e := range extends {
		ext[i].ExpiresAt = e.Lease.String()
	}
	return res, ext, nil
}

func (s *ackStore) call(ctx context.Context, call ackCall) ([]queengo.AckResult, error) {
	items := call.items
	s.mu.Lock()
	s.inflight++
	s.maxIn = max(s.maxIn, s.inflight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	s.calls <- call
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.fail != nil {
		if err := s.fail(items); err != nil {
			return nil, err
		}
	}
	out := make([]queengo.AckResult, len(items))
	for i, it := range items {
		out[i] = queengo.AckResult{Success: true, Queue: it.TransactionID}
	}
	return out, nil
}

// ackItems are n completions with transaction ids prefix-0, prefix-1...
func ackItems(prefix string, n int) []queengo.AckItem {
	items := make([]queengo.AckItem, n)
	for i := range items {
		items[i] = queengo.AckItem{TransactionID: fmt.Sprintf("%s-%d", prefix, i), Status: "completed"}
	}
	return items
}

// ackAnswer is what an ack returned.
type ackAnswer struct {
	res []queengo.AckResult
	err error
}

// ackAsync acks items through c on a goroutine of its own; the answer
// arrives on the channel.
func ackAsync(c *ackCoalescer, items []queengo.AckItem) <-chan ackAnswer {
	ch := make(chan ackAnswer, 1)
	go func() {
		res, err := c.ack(context.Background(), items)
		ch <- ackAnswer{res, err}
	}()
	return ch
}

// wantOwn checks that a caller got exactly the results of its own items.
func wantOwn(t *testing.T, a ackAnswer, items []queengo.AckItem) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("ack: %v", a.err)
	}
	if len(a.res) != len(items) {
		t.Fatalf("%d results for %d items", len(a.res), len(items))
	}
	for i, r := range a.res {
		if r.Queue != items[i].TransactionID {
			t.Fatalf("result %d is for %q, want %q", i, r.Queue, items[i].TransactionID)
		}
	}
}

// nextCall waits for the store's next call and returns its ack items.
func nextCall(t *testing.T, s *ackStore) []queengo.AckItem {
	t.Helper()
	return nextStoreCall(t, s).items
}

// nextStoreCall waits for the store's next call.
func nextStoreCall(t *testing.T, s *ackStore) ackCall {
	t.Helper()
	return waitChan(t, s.calls, "a store call")
}

// TestAckCoalescer_LoneAckCommitsAtOnce: with nothing in flight an ack is
// one store call of its own items, started at once.
func TestAckCoalescer_LoneAckCommitsAtOnce(t *testing.T) {
	s := newAckStore(false)
	c := newAckCoalescer(s, time.Second, testMetrics())
	items := ackItems("a", 3)
	res, err := c.ack(context.Background(), items)
	wantOwn(t, ackAnswer{res, err}, items)
	if got := nextCall(t, s); len(got) != 3 {
		t.Fatalf("store call of %d items, want 3", len(got))
	}
}

// TestAckCoalescer_ArrivalsDuringACommitShareTheNext: acks that arrive
// while a commit is in flight wait, then go together into one store call,
// each request's items together and in order; every caller gets its own
// results.
func TestAckCoalescer_ArrivalsDuringACommitShareTheNext(t *testing.T) {
	s := newAckStore(true)
	c := newAckCoalescer(s, 5*time.Second, testMetrics())
	first := ackItems("first", 1)
	a0 := ackAsync(c, first)
	nextCall(t, s) // in flight, held at the gate
	reqs := make([][]queengo.AckItem, 5)
	answers := make([]<-chan ackAnswer, 5)
	for i := range reqs {
		reqs[i] = ackItems(fmt.Sprintf("r%d", i), i+1)
		answers[i] = ackAsync(c, reqs[i])
	}
	// Every request is queued before the first commit ends.
	waitQueued(t, c, len(reqs))
	select {
	case call := <-s.calls:
		t.Fatalf("a second store call (%d items) while the first is in flight and the backlog is small", len(call.items))
	default:
	}
	s.gate <- struct{}{}
	wantOwn(t, <-a0, first)
	merged := nextCall(t, s)
	if len(merged) != 15 {
		t.Fatalf("the next commit carries %d items, want all 15 that waited", len(merged))
	}
	s.gate <- struct{}{}
	for i, ch := range answers {
		wantOwn(t, <-ch, reqs[i])
	}
	select {
	case call := <-s.calls:
		t.Fatalf("an extra store call of %d items", len(call.items))
	default:
	}
}

// TestAckCoalescer_LargeBacklogStartsAnotherCommit: a backlog of
// ackConcurrentMin items starts a commit beside the ones in flight, up to
// ackCommitsMax; beyond that requests wait.
func TestAckCoalescer_LargeBacklogStartsAnotherCommit(t *testing.T) {
	s := newAckStore(true)
	c := newAckCoalescer(s, 5*time.Second, testMetrics())
	answers := []<-chan ackAnswer{ackAsync(c, ackItems("first", 1))}
	nextCall(t, s)
	for i := 1; i < ackCommitsMax; i++ {
		answers = append(answers, ackAsync(c, ackItems(fmt.Sprintf("big%d", i), ackConcurrentMin)))
		if got := nextCall(t, s); len(got) != ackConcurrentMin {
			t.Fatalf("commit %d of %d items, want %d", i+1, len(got), ackConcurrentMin)
		}
	}
	answers = append(answers, ackAsync(c, ackItems("over", ackConcurrentMin)))
	select {
	case call := <-s.calls:
		t.Fatalf("a commit (%d items) beside %d in flight", len(call.items), ackCommitsMax)
	case <-time.After(50 * time.Millisecond):
	}
	close(s.gate)
	for _, ch := range answers {
		if a := <-ch; a.err != nil {
			t.Fatal(a.err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxIn > ackCommitsMax {
		t.Fatalf("%d store calls in flight at once, want at most %d", s.maxIn, ackCommitsMax)
	}
}

// TestAckCoalescer_OneBadRequestFailsOnlyItself: when a merged call fails
// for a reason of its own, each request runs alone, and only the one whose
// items fail gets the error.
func TestAckCoalescer_OneBadRequestFailsOnlyItself(t *testing.T) {
	s := newAckStore(true)
	bad := errors.New("invalid byte sequence")
	s.fail = failOn("bad-0", bad)
	c := newAckCoalescer(s, 5*time.Second, testMetrics())
	a0 := ackAsync(c, ackItems("first", 1))
	nextCall(t, s)
	good1, badReq, good2 := ackItems("good1", 2), ackItems("bad", 1), ackItems("good2", 2)
	ch1 := ackAsync(c, good1)
	waitQueued(t, c, 1)
	chBad := ackAsync(c, badReq)
	waitQueued(t, c, 2)
	ch2 := ackAsync(c, good2)
	waitQueued(t, c, 3)
	close(s.gate)
	<-a0
	wantOwn(t, <-ch1, good1)
	wantOwn(t, <-ch2, good2)
	if a := <-chBad; !errors.Is(a.err, bad) {
		t.Fatalf("the bad request: %v, want its own error", a.err)
	}
}

// TestAckCoalescer_DatabaseDownFailsEveryoneOnce: a failure that is the
// database's state (no connection, timeout) is every caller's answer; the
// requests are not run again one by one.
func TestAckCoalescer_DatabaseDownFailsEveryoneOnce(t *testing.T) {
	s := newAckStore(true)
	s.fail = func([]queengo.AckItem) error { return fmt.Errorf("%w: no server", queengo.ErrUnavailable) }
	c := newAckCoalescer(s, 5*time.Second, testMetrics())
	a0 := ackAsync(c, ackItems("first", 1))
	nextCall(t, s)
	chs := []<-chan ackAnswer{ackAsync(c, ackItems("x", 1))}
	waitQueued(t, c, 1)
	chs = append(chs, ackAsync(c, ackItems("y", 1)))
	waitQueued(t, c, 2)
	close(s.gate)
	<-a0
	for _, ch := range chs {
		if a := <-ch; !errors.Is(a.err, queengo.ErrUnavailable) {
			t.Fatalf("caller got %v, want ErrUnavailable", a.err)
		}
	}
	nextCall(t, s) // the merged call
	select {
	case call := <-s.calls:
		t.Fatalf("a request ran again alone (%d items) after the database failed", len(call.items))
	default:
	}
}

// TestAckCoalescer_CallerDeadline: a caller whose deadline passes while its
// commit is held gets queengo.ErrTimeout; the commit goes on.
func TestAckCoalescer_CallerDeadline(t *testing.T) {
	s := newAckStore(true)
	c := newAckCoalescer(s, 5*time.Second, testMetrics())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.ack(ctx, ackItems("late", 1)); !errors.Is(err, queengo.ErrTimeout) {
		t.Fatalf("ack past its deadline: %v, want ErrTimeout", err)
	}
	nextCall(t, s)
	close(s.gate)
	items := ackItems("after", 1)
	res, err := c.ack(context.Background(), items)
	wantOwn(t, ackAnswer{res, err}, items)
}

// extendAnswer is what a lease extension returned.
type extendAnswer struct {
	ext queengo.LeaseExtension
	err error
}

// extendAsync extends lease by 30 s through c on a goroutine of its own;
// the answer arrives on the channel.
func extendAsync(c *ackCoalescer, lease uuid.UUID) <-chan extendAnswer {
	ch := make(chan extendAnswer, 1)
	go func() {
		ext, err := c.extend(context.Background(), queengo.LeaseExtend{Lease: lease, Seconds: 30})
		ch <- extendAnswer{ext, err}
	}()
	return ch
}

// wantOwnExtension checks that a caller got the result of its own lease.
func wantOwnExtension(t *testing.T, a extendAnswer, lease uuid.UUID) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("extend: %v", a.err)
	}
	if a.ext.ExpiresAt != lease.String() {
		t.Fatalf("extension answered for %q, want %s", a.ext.ExpiresAt, lease)
	}
}

// TestAckCoalescer_LoneExtendCommitsAtOnce: with nothing in flight a lease
// extension is one store call of its own, started at once.
func TestAckCoalescer_LoneExtendCommitsAtOnce(t *testing.T) {
	s := newAckStore(false)
	c := newAckCoalescer(s, time.Second, testMetrics())
	lease := uuid.New()
	ext, err := c.extend(context.Background(), queengo.LeaseExtend{Lease: lease, Seconds: 30})
	wantOwnExtension(t, extendAnswer{ext, err}, lease)
	call := nextStoreCall(t, s)
	if call.viaAck || len(call.items) != 0 || len(call.extends) != 1 || call.extends[0].Lease != lease || call.extends[0].Seconds != 30 {
		t.Fatalf("store call %+v, want AckExtend of the one extension", call)
	}
}

// TestAckCoalescer_ExtendsRideWithTheNextAckCommit: lease extensions that
// arrive while an ack commit is in flight wait and go into the next commit
// with the acks that waited, one store call for all; every caller gets its
// own result.
func TestAckCoalescer_ExtendsRideWithTheNextAckCommit(t *testing.T) {
	s := newAckStore(true)
	c := newAckCoalescer(s, 5*time.Second, testMetrics())
	first := ackItems("first", 1)
	a0 := ackAsync(c, first)
	if call := nextStoreCall(t, s); !call.viaAck {
		t.Fatal("a commit of acks only is not one Ack call")
	}
	r0, r1 := ackItems("r0", 2), ackItems("r1", 3)
	l0, l1 := uuid.New(), uuid.New()
	ch0 := ackAsync(c, r0)
	waitQueued(t, c, 1)
	e0 := extendAsync(c, l0)
	waitQueued(t, c, 2)
	ch1 := ackAsync(c, r1)
	waitQueued(t, c, 3)
	e1 := extendAsync(c, l1)
	waitQueued(t, c, 4)
	select {
	case call := <-s.calls:
		t.Fatalf("a store call (%d items, %d extensions) while an ack commit is in flight", len(call.items), len(call.extends))
	default:
	}
	s.gate <- struct{}{}
	wantOwn(t, <-a0, first)
	merged := nextStoreCall(t, s)
	if merged.viaAck || len(merged.items) != 5 || len(merged.extends) != 2 ||
		merged.extends[0].Lease != l0 || merged.extends[1].Lease != l1 {
		t.Fatalf("the next commit: %d items, %d extensions (via Ack: %v), want one AckExtend of 5 items and both extensions in order",
			len(merged.items), len(merged.extends), merged.viaAck)
	}
	s.gate <- struct{}{}
	wantOwn(t, <-ch0, r0)
	wantOwn(t, <-ch1, r1)
	wantOwnExtension(t, <-e0, l0)
	wantOwnExtension(t, <-e1, l1)
	select {
	case call := <-s.calls:
		t.Fatalf("an extra store call (%d items, %d extensions)", len(call.items), len(call.extends))
	default:
	}
}

// TestAckCoalescer_FailedSharedCommitRunsExtendsAlone: when a commit
// carrying acks and an extension fails for a reason of its own, the
// extension runs alone and gets its own result; only the bad request fails.
func TestAckCoalescer_FailedSharedCommitRunsExtendsAlone(t *testing.T) {
	s := newAckStore(true)
	bad := errors.New("invalid byte sequence")
	s.fail = failOn("bad-0", bad)
	c := newAckCoalescer(s, 5*time.Second, testMetrics())
	a0 := ackAsync(c, ackItems("first", 1))
	nextCall(t, s)
	lease := uuid.New()
	chBad := ackAsync(c, ackItems("bad", 1))
	waitQueued(t, c, 1)
	e := extendAsync(c, lease)
	waitQueued(t, c, 2)
	close(s.gate)
	<-a0
	wantOwnExtension(t, <-e, lease)
	if a := <-chBad; !errors.Is(a.err, bad) {
		t.Fatalf("the bad request: %v, want its own error", a.err)
	}
}

// waitQueued waits until n requests wait for the next commit.
func waitQueued(t *testing.T, c *ackCoalescer, n int) {
	t.Helper()
	eventually(t, func() error {
		c.mu.Lock()
		k := len(c.waiting)
		c.mu.Unlock()
		if k < n {
			return fmt.Errorf("%d of %d requests queued", k, n)
		}
		return nil
	})
}

// failOn fails every store call carrying the item with transaction id tx.
func failOn(tx string, err error) func([]queengo.AckItem) error {
	return func(items []queengo.AckItem) error {
		for _, it := range items {
			if it.TransactionID == tx {
				return err
			}
		}
		return nil
	}
}
