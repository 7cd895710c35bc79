package jobs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// fakeRetentionStore is an in-memory RetentionConn, and its connect. Each
// batch method answers from its hook; Lead runs fn unless notLed; connect
// fails with connectErr, or blocks until its context ends with
// connectBlocks.
type fakeRetentionStore struct {
	mu            sync.Mutex
	notLed        bool
	connectErr    error
	connectBlocks bool
	// open counts the connections open now, maxOpen the most at once;
	// leading is set while a Lead runs fn, overlap when two did at once.
	open, maxOpen    int
	leading, overlap bool
	targets          []uuid.UUID
	drop             func(parts []uuid.UUID) (queengo.Dropped, int, error)
	cursors          []queengo.CursorKey
	evict            func(targets []queengo.CursorKey) (int64, int, error)
	oldest           map[string]time.Time
	calls            map[string]int
	ranEvent         chan string
}

func newFakeRetentionStore() *fakeRetentionStore {
	return &fakeRetentionStore{calls: map[string]int{}, ranEvent: make(chan string, 64)}
}

func (f *fakeRetentionStore) count(name string) {
	f.mu.Lock()
	f.calls[name]++
	f.mu.Unlock()
}

func (f *fakeRetentionStore) called(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

func (f *fakeRetentionStore) connect(ctx context.Context) (RetentionConn, error) {
	f.count("connect")
	if f.connectBlocks {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f.connectErr != nil {
		return nil, f.connectErr
	}
	f.mu.Lock()
	f.open++
	f.maxOpen = max(f.maxOpen, f.open)
	f.mu.Unlock()
	return f, nil
}

func (f *fakeRetentionStore) Close() {
	f.mu.Lock()
	f.open--
	f.mu.Unlock()
}

func (f *fakeRetentionStore) Lead(ctx context.Context, job string, fn func(context.Context) error) (bool, error) {
	f.count("Lead " + job)
	defer func() {
		select {
		case f.ranEvent <- job:
		default:
		}
	}()
	if f.notLed {
		return false, nil
	}
	f.mu.Lock()
	f.overlap = f.overlap || f.leading
	f.leading = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.leading = false
		f.mu.Unlock()
	}()
	return true, fn(ctx)
}

func (f *fakeRetentionStore) RetentionTargets(context.Context) ([]uuid.UUID, error) {
	return f.targets, nil
}

func (f *fakeRetentionStore) DropSegments(_ context.Context, parts []uuid.UUID, limit int) (queengo.Dropped, int, error) {
	f.count("DropSegments")
	if f.drop == nil {
		return queengo.Dropped{}, len(parts), nil
	}
	return f.drop(parts)
}

func (f *fakeRetentionStore) EvictionTargets(context.Context) ([]queengo.CursorKey, error) {
	return f.cursors, nil
}

func (f *fakeRetentionStore) Evict(_ context.Context, targets []queengo.CursorKey, limit int) (int64, int, error) {
	f.count("Evict")
	if f.evict == nil {
		return 0, len(targets), nil
	}
	return f.evict(targets)
}

func (f *fakeRetentionStore) RemoveIdlePartitions(context.Context, time.Duration, int) (int, error) {
	f.count("RemoveIdlePartitions")
	return 0, nil
}

func (f *fakeRetentionStore) OldestMessages(context.Context) (map[string]time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.oldest, nil
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newTestRetention(f *fakeRetentionStore, cfg RetentionConfig) (*Retention, *fakeClock) {
	r := NewRetention(cfg, f.connect, nil)
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	r.clock = clk.Now
	return r, clk
}

// A run works through every target, batch after batch, each batch going on
// with the targets the previous one left unfinished.
func TestRetention_RunDrainsTargetsInBatches(t *testing.T) {
	t.Parallel()
	f := newFakeRetentionStore()
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	f.targets = []uuid.UUID{a, b, c}
	var seen [][]uuid.UUID
	f.drop = func(parts []uuid.UUID) (queengo.Dropped, int, error) {
		seen = append(seen, parts)
		if len(seen) == 1 {
			return queengo.Dropped{Segments: 2, Messages: 10, Bytes: 100}, 0, nil // a is unfinished
		}
		return queengo.Dropped{Segments: 1, Messages: 5, Bytes: 50}, 1, nil
	}
	r, _ := newTestRetention(f, RetentionConfig{Interval: time.Minute})
	before := r.count.droppedSegments.Get()
	r.retain(context.Background(), f)
	if len(seen) != 4 || len(seen[0]) != 3 || len(seen[1]) != 3 || len(seen[2]) != 2 || seen[3][0] != c {
		t.Fatalf("batches saw %v", seen)
	}
	if got := r.count.droppedSegments.Get() - before; got < 5 {
		t.Fatalf("dropped segments counter grew by %d, want 5", got)
	}
	if f.called("RemoveIdlePartitions") != 1 {
		t.Fatal("the run did not clean up idle partitions")
	}
}

// A run stops starting batches once half its interval has passed, so its
// cost per interval is bounded however large the backlog; the next run goes
// on with it.
func TestRetention_RunStopsAtHalfItsInterval(t *testing.T) {
	t.Parallel()
	f := newFakeRetentionStore()
	f.targets = []uuid.UUID{uuid.New()}
	r, clk := newTestRetention(f, RetentionConfig{Interval: time.Minute})
	f.drop = func([]uuid.UUID) (queengo.Dropped, int, error) {
		clk.advance(15 * time.Second) // an endless backlog, 15 s a batch
		return queengo.Dropped{Segments: 1}, 0, nil
	}
	r.retain(context.Background(), f)
	if n := f.called("DropSegments"); n != 2 {
		t.Fatalf("%d batches, want 2 (30 s of a 60 s interval)", n)
	}
}

// A batch that neither drops nor finishes anything ends the run with an
// error instead of spinning.
func TestRetention_BatchWithoutProgressEndsTheRun(t *testing.T) {
	t.Parallel()
	f := newFakeRetentionStore()
	f.targets = []uuid.UUID{uuid.New()}
	f.drop = func([]uuid.UUID) (queengo.Dropped, int, error) { return queengo.Dropped{}, 0, nil }
	r, _ := newTestRetention(f, RetentionConfig{})
	failed := r.runOutcome(jobRetention, "failed").Get()
	r.retain(context.Background(), f)
	if f.called("DropSegments") != 1 || r.runOutcome(jobRetention, "failed").Get() != failed+1 {
		t.Fatalf("%d batches; failed runs %d -> %d", f.called("DropSegments"), failed, r.runOutcome(jobRetention, "failed").Get())
	}
}

// Another process holds the lock: this one does none of the work.
func TestRetention_SkipsWhenAnotherProcessLeads(t *testing.T) {
	t.Parallel()
	f := newFakeRetentionStore()
	f.notLed = true
	f.targets = []uuid.UUID{uuid.New()}
	f.cursors = []queengo.CursorKey{{Partition: uuid.New(), Group: "g"}}
	r, _ := newTestRetention(f, RetentionConfig{})
	r.retain(context.Background(), f)
	r.evict(context.Background(), f)
	if f.called("DropSegments")+f.called("Evict")+f.called("RemoveIdlePartitions") != 0 {
		t.Fatalf("work done without the lock: %v", f.calls)
	}
}

// Eviction works through its targets in batches within half its interval.
func TestEviction_RunDrainsTargetsInBatches(t *testing.T) {
	t.Parallel()
	f := newFakeRetentionStore()
	p := uuid.New()
	f.cursors = []queengo.CursorKey{{Partition: p, Group: "a"}, {Partition: p, Group: "b"}}
	var seen []int
	f.evict = func(targets []queengo.CursorKey) (int64, int, error) {
		seen = append(seen, len(targets))
		return 3, 1, nil
	}
	r, _ := newTestRetention(f, RetentionConfig{})
	before := r.count.evicted.Get()
	r.evict(context.Background(), f)
	if len(seen) != 2 || seen[0] != 2 || seen[1] != 1 || r.count.evicted.Get()-before < 6 {
		t.Fatalf("batches saw %v, evicted counter +%d", seen, r.count.evicted.Get()-before)
	}
}

// The oldest-message-age gauge of a queue reads the age at scrape time, and
// goes away with the queue's last message.
func TestRetention_OldestMessageAgeGauge(t *testing.T) {
	t.Parallel()
	f := newFakeRetentionStore()
	r, clk := newTestRetention(f, RetentionConfig{})
	q := "age-" + uuid.NewString()[:8] + `"quoted"`
	f.oldest = map[string]time.Time{q: clk.Now().Add(-10 * time.Second)}
	r.refreshAges(context.Background(), f)
	clk.advance(5 * time.Second)
	line := `queengo_queue_oldest_message_age_seconds{queue="` + strings.ReplaceAll(q, `"`, `\"`) + `"} 15`
	if out := prometheus(r); !strings.Contains(out, line) {
		t.Fatalf("want %q in the metrics", line)
	}
	f.mu.Lock()
	f.oldest = map[string]time.Time{}
	f.mu.Unlock()
	r.refreshAges(context.Background(), f)
	if out := prometheus(r); strings.Contains(out, q[:12]) {
		t.Fatal("the gauge of a queue without messages is still exported")
	}
}

func prometheus(r *Retention) string {
	var b bytes.Buffer
	r.set.WritePrometheus(&b)
	return b.String()
}

// Start runs both jobs at once and then at their intervals, one after the
// other on one connection per run, closed after it; Stop returns once the
// loop is done.
func TestRetention_StartRunsBothJobsUntilStop(t *testing.T) {
	t.Parallel()
	f := newFakeRetentionStore()
	r := NewRetention(RetentionConfig{Interval: 20 * time.Millisecond, EvictionInterval: 30 * time.Millisecond}, f.connect, nil)
	r.Start()
	runs := map[string]int{}
	deadline := time.After(10 * time.Second)
	for runs[jobRetention] < 2 || runs[jobEviction] < 2 {
		select {
		case job := <-f.ranEvent:
			runs[job]++
		case <-deadline:
			t.Fatalf("runs after 10 s: %v", runs)
		}
	}
	stopped := make(chan struct{})
	go func() { r.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
	if err := r.ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("context after Stop: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.maxOpen != 1 || f.open != 0 || f.overlap {
		t.Fatalf("connections: at most %d open at once, %d left open; jobs overlapped: %v", f.maxOpen, f.open, f.overlap)
	}
}

// A database that cannot be reached fails the due jobs with one log line
// per run, and they are tried again at their next interval.
func TestRetention_ConnectFailureLogsOncePerRun(t *testing.T) {
	t.Parallel()
	f := newFakeRetentionStore()
	f.connectErr = errors.New("connection refused")
	var logs bytes.Buffer
	r := NewRetention(RetentionConfig{Interval: time.Hour, EvictionInterval: time.Minute}, f.connect,
		slog.New(slog.NewTextHandler(&logs, nil)))
	jobs := []*job{{name: jobRetention, interval: time.Hour}, {name: jobEviction, interval: time.Minute}}
	failed := r.runOutcome(jobEviction, "failed").Get()
	before := time.Now()
	r.runDue(context.Background(), jobs)
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "connection refused") {
		t.Fatalf("%d log lines, want 1 with the error:\n%s", n, logs.String())
	}
	if r.runOutcome(jobEviction, "failed").Get() != failed+1 || f.called("Lead "+jobRetention) != 0 {
		t.Fatalf("failed eviction runs %d -> %d; Lead called %d times", failed, r.runOutcome(jobEviction, "failed").Get(), f.called("Lead "+jobRetention))
	}
	if next := jobs[1].next; next.Before(before.Add(time.Minute)) || next.After(time.Now().Add(time.Minute)) {
		t.Fatalf("eviction next due in %v, want its interval", time.Until(next))
	}
}

// Stop does not wait for a connect to a server that never answers.
func TestRetention_StopEndsAHungConnect(t *testing.T) {
	t.Parallel()
	f := newFakeRetentionStore()
	f.connectBlocks = true
	r := NewRetention(RetentionConfig{}, f.connect, nil)
	r.Start()
	for f.called("connect") == 0 {
		time.Sleep(time.Millisecond)
	}
	stopped := make(chan struct{})
	go func() { r.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop waited for the connect")
	}
}
