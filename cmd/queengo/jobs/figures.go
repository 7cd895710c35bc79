package jobs

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/queengo/queengo"
)

// shared holds one broker-wide read that is costly at scale and that
// dashboards poll: it sums every partition and cursor (50-120 ms of
// PostgreSQL at 10,000 partitions and 30,000 cursors, docs/performance.md "The dated record").
// The broker computes it at most once per fresh however many clients read
// it, the way the reference's stats roll-up does (its answers carry
// statsAge):
//
//   - a read of a result younger than fresh gets that result;
//   - a read of an older one, younger than maxAge, gets it at once and
//     starts one computation in the background, so a dashboard that polls
//     sees, at each poll, what was computed after its previous one;
//   - with no result, or one past maxAge, the read waits for a computation
//     (one for all the readers waiting).
//
// Drop forgets the result: POST /api/v1/stats/refresh and the operator's
// writes (seek, group and queue deletes, clears, DLQ requeues and deletes)
// call it, so the next read
// computes anew and a computation that started before the drop is not kept.
type shared[T any] struct {
	compute func(context.Context) (T, error)
	clock   func() time.Time
	fresh   time.Duration
	maxAge  time.Duration
	timeout time.Duration // bounds a computation, which no request owns

	mu      sync.Mutex
	val     T
	at      time.Time // when the computation of val started; zero: none
	gen     uint64    // bumped by drop
	running *flight[T]
}

// flight is one computation; done closes when val, at and err are set.
type flight[T any] struct {
	done chan struct{}
	val  T
	at   time.Time
	err  error
}

// get returns the figures and when their computation started.
func (f *shared[T]) get(ctx context.Context) (T, time.Time, error) {
	f.mu.Lock()
	now := f.clock()
	if !f.at.IsZero() && now.Sub(f.at) < f.maxAge {
		val, at := f.val, f.at
		if now.Sub(f.at) >= f.fresh && f.running == nil {
			f.start()
		}
		f.mu.Unlock()
		return val, at, nil
	}
	fl := f.running
	if fl == nil {
		fl = f.start()
	}
	f.mu.Unlock()
	select {
	case <-fl.done:
		return fl.val, fl.at, fl.err
	case <-ctx.Done():
		var zero T
		return zero, time.Time{}, ctx.Err()
	}
}

// drop forgets the result and detaches the computation in flight, whose
// result then reaches only the readers already waiting for it.
func (f *shared[T]) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	f.val, f.at = zero, time.Time{}
	f.gen++
	f.running = nil
}

// start begins a computation; f.mu is held.
func (f *shared[T]) start() *flight[T] {
	fl := &flight[T]{done: make(chan struct{})}
	f.running = fl
	gen := f.gen
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		defer cancel()
		fl.at = f.clock()
		fl.val, fl.err = f.compute(ctx)
		f.mu.Lock()
		if f.running == fl {
			f.running = nil
		}
		if fl.err == nil && gen == f.gen {
			f.val, f.at = fl.val, fl.at
		}
		f.mu.Unlock()
		close(fl.done)
	}()
	return fl
}

const (
	// statsFresh: each kind of dashboard figures is computed at most once
	// per 5 s, however many dashboards, tabs and scrapers poll it: at
	// 10,000 partitions one computation of each costs 0.1-0.3 s of
	// PostgreSQL, so once a second for the six kinds would keep a core
	// busy for one open dashboard. 5 s is the dashboard's own refresh.
	statsFresh = 5 * time.Second
	// statsMaxAge: a reader never gets figures older than this; after a
	// quiet spell the first read waits for new ones.
	statsMaxAge = 30 * time.Second
)

// FiguresStore is what the shared figures are computed from; *pg.Store is
// one.
type FiguresStore interface {
	Overview(ctx context.Context) (queengo.Overview, error)
	ListGroupings(ctx context.Context, by string, limit, offset int) ([]queengo.GroupingSummary, int, error)
	AllQueueFigures(ctx context.Context) ([]queengo.QueueFigures, error)
	ListGroups(ctx context.Context, limit, offset int) ([]queengo.GroupSummary, error)
	LaggingGroups(ctx context.Context, minLag time.Duration, limit, offset int) ([]queengo.GroupPartition, error)
}

// Figures are the broker-wide figures of the dashboard routes, each shared
// between the readers of this process (see shared for when they are
// computed). Each getter returns the figures and when their computation
// started.
type Figures struct {
	overview   *shared[queengo.Overview]
	namespaces *shared[[]queengo.GroupingSummary]
	tasks      *shared[[]queengo.GroupingSummary]
	queues     *shared[[]queengo.QueueFigures] // every queue, by name
	groups     *shared[[]queengo.GroupSummary] // every (group, queue)
	// lagging are the cursors behind their head, the longest waiting
	// first.
	lagging *shared[[]queengo.GroupPartition]
}

// NewFigures computes each kind of figures from store when read, each
// computation bounded by timeout.
func NewFigures(store FiguresStore, timeout time.Duration) *Figures {
	return newFigures(store, time.Now, timeout)
}

func newFigures(store FiguresStore, clk func() time.Time, timeout time.Duration) *Figures {
	grouping := func(by string) func(context.Context) ([]queengo.GroupingSummary, error) {
		return func(ctx context.Context) ([]queengo.GroupingSummary, error) {
			list, _, err := store.ListGroupings(ctx, by, math.MaxInt32, 0)
			return list, err
		}
	}
	return &Figures{
		overview:   newShared(clk, timeout, store.Overview),
		namespaces: newShared(clk, timeout, grouping("namespace")),
		tasks:      newShared(clk, timeout, grouping("task")),
		queues:     newShared(clk, timeout, store.AllQueueFigures),
		groups: newShared(clk, timeout, func(ctx context.Context) ([]queengo.GroupSummary, error) {
			return store.ListGroups(ctx, math.MaxInt32, 0)
		}),
		lagging: newShared(clk, timeout, func(ctx context.Context) ([]queengo.GroupPartition, error) {
			return store.LaggingGroups(ctx, 0, math.MaxInt32, 0)
		}),
	}
}

// newShared keeps what compute returns for statsFresh, serving it up to
// statsMaxAge.
func newShared[T any](clk func() time.Time, timeout time.Duration, compute func(context.Context) (T, error)) *shared[T] {
	return &shared[T]{compute: compute, clock: clk, fresh: statsFresh, maxAge: statsMaxAge, timeout: timeout}
}

// Overview is the broker-wide summary of queues, messages, lag and rates.
func (s *Figures) Overview(ctx context.Context) (queengo.Overview, time.Time, error) {
	return s.overview.get(ctx)
}

// Groupings are every namespace (by "namespace") or task (by "task"), by
// name.
func (s *Figures) Groupings(ctx context.Context, by string) ([]queengo.GroupingSummary, time.Time, error) {
	if by == "task" {
		return s.tasks.get(ctx)
	}
	return s.namespaces.get(ctx)
}

// Queues are the figures of every queue, by name.
func (s *Figures) Queues(ctx context.Context) ([]queengo.QueueFigures, time.Time, error) {
	return s.queues.get(ctx)
}

// Groups are every (group, queue) of the consumer-group list.
func (s *Figures) Groups(ctx context.Context) ([]queengo.GroupSummary, time.Time, error) {
	return s.groups.get(ctx)
}

// Lagging are the cursors behind their partition's head, the longest
// waiting first.
func (s *Figures) Lagging(ctx context.Context) ([]queengo.GroupPartition, time.Time, error) {
	return s.lagging.get(ctx)
}

// Drop forgets every figure, so the next read of each computes anew.
func (s *Figures) Drop() {
	s.overview.drop()
	s.namespaces.drop()
	s.tasks.drop()
	s.queues.drop()
	s.groups.drop()
	s.lagging.drop()
}
