package admin

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/cmd/queengo/jobs"
)

// fakeStore answers the statements the tests below make; any other call
// panics (the embedded nil Store).
type fakeStore struct {
	Store
	popMaintenance atomic.Bool
	overviews      atomic.Int32 // Overview computations
	moved          []queengo.GroupCursor
	change         queengo.MessageChange
	retry          queengo.MessageRetry
	dead           queengo.DeadLetter
}

func (f *fakeStore) Configure(_ context.Context, name, ns, task string, o queengo.QueueOptions) (queengo.Queue, uuid.UUID, error) {
	return queengo.Queue{Name: name, Namespace: ns, Task: task, Options: o}, uuid.New(), nil
}
func (f *fakeStore) DeleteQueue(context.Context, string) (bool, error) { return true, nil }
func (f *fakeStore) PopMaintenance(context.Context) (bool, error) {
	return f.popMaintenance.Load(), nil
}
func (f *fakeStore) SetPopMaintenance(_ context.Context, on bool) error {
	f.popMaintenance.Store(on)
	return nil
}
func (f *fakeStore) SeekGroup(context.Context, queengo.GroupSeek) (queengo.GroupSought, error) {
	return queengo.GroupSought{Moved: f.moved}, nil
}
func (f *fakeStore) DeleteMessage(context.Context, uuid.UUID, string) (queengo.MessageChange, error) {
	return f.change, nil
}
func (f *fakeStore) RetryMessage(context.Context, uuid.UUID, string) (queengo.MessageRetry, error) {
	return f.retry, nil
}
func (f *fakeStore) RequeueDeadLetter(context.Context, uuid.UUID) (queengo.DeadLetter, queengo.Frame, error) {
	return f.dead, queengo.Frame{}, nil
}
func (f *fakeStore) Overview(context.Context) (queengo.Overview, error) {
	f.overviews.Add(1)
	return queengo.Overview{}, nil
}

// fakeHooks records what the admin told the data path, one line per call.
type fakeHooks struct {
	mu    sync.Mutex
	calls []string
}

func (h *fakeHooks) record(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf(format, args...))
}
func (h *fakeHooks) QueueChanged(name string, deleted bool) { h.record("changed %s %v", name, deleted) }
func (h *fakeHooks) GroupMoved(group string, cursors []queengo.GroupCursor) {
	h.record("moved %s %d", group, len(cursors))
}
func (h *fakeHooks) Freed(queue string, partition uuid.UUID, group string) {
	h.record("freed %s %s %q", queue, partition, group)
}
func (h *fakeHooks) PopMaintenanceSwitched(on bool) { h.record("pop maintenance %v", on) }

func (h *fakeHooks) told() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

type bundle struct {
	a     *Admin
	store *fakeStore
	hooks *fakeHooks
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{store: &fakeStore{}, hooks: &fakeHooks{}}
	b.a = New(b.store, b.hooks, jobs.NewFigures(b.store, time.Second))
	return b
}

// wantTold checks the hooks were told exactly want, in order.
func (b *bundle) wantTold(t *testing.T, want ...string) {
	t.Helper()
	if got := b.hooks.told(); !slices.Equal(got, want) {
		t.Fatalf("hooks told %q, want %q", got, want)
	}
}

// overviewComputed reads the overview and reports whether that computed
// it anew (the shared figures were dropped or never read).
func (b *bundle) overviewComputed(t *testing.T) bool {
	t.Helper()
	before := b.store.overviews.Load()
	if _, err := b.a.Overview(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b.store.overviews.Load() > before
}

// A configure makes the queue's actor read its row again; a delete also
// drops the shared figures, which showed the queue.
func TestAdmin_QueueWritesTellTheQueueActor(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	if _, _, err := b.a.Configure(ctx, "orders", "", "", queengo.ConfigureDefaults()); err != nil {
		t.Fatal(err)
	}
	b.overviewComputed(t)
	if _, err := b.a.DeleteQueue(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	b.wantTold(t, "changed orders false", "changed orders true")
	if !b.overviewComputed(t) {
		t.Fatal("the figures kept showing a deleted queue")
	}
}

// D11: switching pop maintenance stores the switch, then applies it here;
// reading it changes nothing here.
func TestAdmin_PopMaintenanceIsStoredThenSwitchedHere(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.store.popMaintenance.Store(true) // another broker process switched it on
	if on, err := b.a.PopMaintenance(ctx); err != nil || !on {
		t.Fatalf("PopMaintenance: %v, %v; want the stored true", on, err)
	}
	b.wantTold(t)
	if err := b.a.SetPopMaintenance(ctx, false); err != nil {
		t.Fatal(err)
	}
	if b.store.popMaintenance.Load() {
		t.Fatal("the switch was not written to the store")
	}
	b.wantTold(t, "pop maintenance false")
}

// A seek tells the data path which cursors moved, so the group's parked
// pops look again at once, and drops the figures.
func TestAdmin_SeekTellsWhichCursorsMoved(t *testing.T) {
	b := setup(t)
	b.store.moved = []queengo.GroupCursor{{Queue: "q", Partition: uuid.New()}, {Queue: "q", Partition: uuid.New()}}
	b.overviewComputed(t)
	if _, err := b.a.SeekGroup(context.Background(), queengo.GroupSeek{Group: "g", Queue: "q"}); err != nil {
		t.Fatal(err)
	}
	b.wantTold(t, "moved g 2")
	if !b.overviewComputed(t) {
		t.Fatal("a seek kept the figures")
	}
}

// A message delete frees its partition for each group whose lease it
// ended; a retry frees it for every group when it requeued a dead letter,
// and for each group whose failed attempts it reset; a dead letter's
// requeue frees its partition for every group.
func TestAdmin_MessageWritesFreeThePartition(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	p := uuid.New()
	b.store.change = queengo.MessageChange{Queue: "q", Released: []string{"g1", "g2"}}
	if _, err := b.a.DeleteMessage(ctx, p, "tx"); err != nil {
		t.Fatal(err)
	}
	b.store.retry = queengo.MessageRetry{Queue: "q", Requeued: &queengo.Frame{}, Reset: []string{"g3"}}
	if _, err := b.a.RetryMessage(ctx, p, "tx"); err != nil {
		t.Fatal(err)
	}
	b.store.dead = queengo.DeadLetter{Queue: "q", PartitionID: p}
	if _, _, err := b.a.RequeueDeadLetter(ctx, uuid.New()); err != nil {
		t.Fatal(err)
	}
	freed := func(g string) string { return fmt.Sprintf("freed q %s %q", p, g) }
	b.wantTold(t, freed("g1"), freed("g2"), freed(""), freed("g3"), freed(""))
}
