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
	// limits holds the limit of each call, by method.
	limits   map[string][]int
	ranEvent chan string
}

func newFakeRetentionStore() *fakeRetentionStore {
	return &fakeRetentionStore{calls: map[string]int{}, limits: map[string][]int{}, ranEvent: make(chan string, 64)}
}

func (f *fakeRetentionStore) limit(name string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits[name] = append(f.limits[name], n)
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
	f.limit("DropSegments", limit)
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
	f.limit("Evict", limit)
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

// A run works through every target, batch after batch, each batch going on
// with the targets the previous one left unfinished.
func TestRetention_RunDrainsTargetsInBatches(t *testing.T) {
	t.Parallel()
	s := setup(t, RetentionConfig{Interval: time.Minute})
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	s.f.targets = []uuid.UUID{a, b, c}
	var seen [][]uuid.UUID
	s.f.drop = func(parts []uuid.UUID) (queengo.Dropped, int, error) {
		seen = append(seen, parts)
		if len(seen) == 1 {
			return queengo.Dropped{Segments: 2, Messages: 10, Bytes: 100}, 0, nil // a is unfinished
		}
		return queengo.Dropped{Segments: 1, Messages: 5, Bytes: 50}, 1, nil
	}
	before := s.r.count.droppedSegments.Get()
	s.r.retain(context.Background(), s.f)
	if len(seen) != 4 || len(seen[0]) != 3 || len(seen[1]) != 3 || len(seen[2]) != 2 || seen[3][0] != c {
		t.Fatalf("batches saw %v", seen)
	}
	if got := s.r.count.droppedSegments.Get() - before; got < 5 {
		t.Fatalf("dropped segments counter grew by %d, want 5", got)
	}
	if s.f.called("RemoveIdlePartitions") != 1 {
		t.Fatal("the run did not clean up idle partitions")
	}
}

// A run stops starting batches once half its interval has passed, so its
// cost per interval is bounded however large the backlog; the next run goes
// on with it.
func TestRetention_RunStopsAtHalfItsInterval(t *testing.T) {
	t.Parallel()
	s := setup(t, RetentionConfig{Interval: time.Minute})
	s.f.targets = []uuid.UUID{uuid.New()}
	s.f.drop = func([]uuid.UUID) (queengo.Dropped, int, error) {
		s.clock.advance(15 * time.Second) // an endless backlog, 15 s a batch
		return queengo.Dropped{Segments: 1}, 0, nil
	}
	s.r.retain(context.Background(), s.f)
	if n := s.f.called("DropSegments"); n != 2 {
		t.Fatalf("%d batches, want 2 (30 s of a 60 s interval)", n)
	}
}

// A batch that neither drops nor finishes anything ends the run with an
// error instead of spinning.
func TestRetention_BatchWithoutProgressEndsTheRun(t *testing.T) {
	t.Parallel()
	s := setup(t, RetentionConfig{})
	s.f.targets = []uuid.UUID{uuid.New()}
	s.f.drop = func([]uuid.UUID) (queengo.Dropped, int, error) { return queengo.Dropped{}, 0, nil }
	failed := s.r.runOutcome(jobRetention, "failed").Get()
	s.r.retain(context.Background(), s.f)
	if s.f.called("DropSegments") != 1 || s.r.runOutcome(jobRetention, "failed").Get() != failed+1 {
		t.Fatalf("%d batches; failed runs %d -> %d", s.f.called("DropSegments"), failed, s.r.runOutcome(jobRetention, "failed").Get())
	}
}

// Another process holds the lock: this one does none of the work.
func TestRetention_SkipsWhenAnotherProcessLeads(t *testing.T) {
	t.Parallel()
	s := setup(t, RetentionConfig{})
	s.f.notLed = true
	s.f.targets = []uuid.UUID{uuid.New()}
	s.f.cursors = []queengo.CursorKey{{Partition: uuid.New(), Group: "g"}}
	s.r.retain(context.Background(), s.f)
	s.r.evict(context.Background(), s.f)
	if s.f.called("DropSegments")+s.f.called("Evict")+s.f.called("RemoveIdlePartitions") != 0 {
		t.Fatalf("work done without the lock: %v", s.f.calls)
	}
}

// Eviction works through its targets in batches within half its interval.
func TestEviction_RunDrainsTargetsInBatches(t *testing.T) {
	t.Parallel()
	s := setup(t, RetentionConfig{})
	p := uuid.New()
	s.f.cursors = []queengo.CursorKey{{Partition: p, Group: "a"}, {Partition: p, Group: "b"}}
	var seen []int
	s.f.evict = func(targets []queengo.CursorKey) (int64, int, error) {
		seen = append(seen, len(targets))
		return 3, 1, nil
	}
	before := s.r.count.evicted.Get()
	s.r.evict(context.Background(), s.f)
	if len(seen) != 2 || seen[0] != 2 || seen[1] != 1 || s.r.count.evicted.Get()-before < 6 {
		t.Fatalf("batches saw %v, evicted counter +%d", seen, s.r.count.evicted.Get()-before)
	}
}

// EvictionBatchSize caps an eviction batch and BatchSize a retention
// batch; without EvictionBatchSize eviction takes BatchSize.
func TestEviction_BatchSizeOfItsOwn(t *testing.T) {
	t.Parallel()
	p := uuid.New()
	for _, c := range []struct {
		cfg                 RetentionConfig
		wantDrop, wantEvict int
	}{
		{RetentionConfig{BatchSize: 50, EvictionBatchSize: 7}, 50, 7},
		{RetentionConfig{BatchSize: 50}, 50, 50},
	} {
		s := setup(t, c.cfg)
		s.f.targets = []uuid.UUID{p}
		s.f.cursors = []queengo.CursorKey{{Partition: p, Group: "a"}}
		s.r.retain(context.Background(), s.f)
		s.r.evict(context.Background(), s.f)
		s.f.mu.Lock()
		drop, evict := s.f.limits["DropSegments"], s.f.limits["Evict"]
		s.f.mu.Unlock()
		if len(drop) != 1 || drop[0] != c.wantDrop || len(evict) != 1 || evict[0] != c.wantEvict {
			t.Errorf("%+v: drop limits %v, evict limits %v; want [%d] and [%d]", c.cfg, drop, evict, c.wantDrop, c.wantEvict)
		}
	}
}

// The oldest-message-age gauge of a queue reads the age at scrape time, and
// goes away with the queue's last message.
func TestRetention_OldestMessageAgeGauge(t *testing.T) {
	t.Parallel()
	s := setup(t, RetentionConfig{})
	q := "age-" + uuid.NewString()[:8] + `"quoted"`
	s.f.oldest = map[string]time.Time{q: s.clock.Now().Add(-10 * time.Second)}
	s.r.refreshAges(context.Background(), s.f)
	s.clock.advance(5 * time.Second)
	line := `queengo_queue_oldest_message_age_seconds{queue="` + strings.ReplaceAll(q, `"`, `\"`) + `"} 15`
	if out := prometheus(s.r); !strings.Contains(out, line) {
		t.Fatalf("want %q in the metrics", line)
	}
	s.f.mu.Lock()
	s.f.oldest = map[string]time.Time{}
	s.f.mu.Unlock()
	s.r.refreshAges(context.Background(), s.f)
	if out := prometheus(s.r); strings.Contains(out, q[:12]) {
		t.Fatal("the gauge of a queue without messages is still exported")
	}
}

// prometheus is the service's metrics as /metrics/prometheus shows them.
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
	s := setup(t, RetentionConfig{Interval: 20 * time.Millisecond, EvictionInterval: 30 * time.Millisecond})
	s.r.Start()
	runs := map[string]int{}
	deadline := time.After(10 * time.Second)
	for runs[jobRetention] < 2 || runs[jobEviction] < 2 {
		select {
		case job := <-s.f.ranEvent:
			runs[job]++
		case <-deadline:
			t.Fatalf("runs after 10 s: %v", runs)
		}
	}
	stopped := make(chan struct{})
	go func() { s.r.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
	if err := s.r.ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("context after Stop: %v", err)
	}
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.maxOpen != 1 || s.f.open != 0 || s.f.overlap {
		t.Fatalf("connections: at most %d open at once, %d left open; jobs overlapped: %v", s.f.maxOpen, s.f.open, s.f.overlap)
	}
}

// A database that cannot be reached fails the due jobs with one log line
// per run, and they are tried again at their next interval.
func TestRetention_ConnectFailureLogsOncePerRun(t *testing.T) {
	t.Parallel()
	s := setup(t, RetentionConfig{Interval: time.Hour, EvictionInterval: time.Minute})
	s.f.connectErr = errors.New("connection refused")
	var logs bytes.Buffer
	s.r.log = slog.New(slog.NewTextHandler(&logs, nil))
	jobs := []*job{{name: jobRetention, interval: time.Hour}, {name: jobEviction, interval: time.Minute}}
	failed := s.r.runOutcome(jobEviction, "failed").Get()
	before := time.Now()
	s.r.runDue(context.Background(), jobs)
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "connection refused") {
		t.Fatalf("%d log lines, want 1 with the error:\n%s", n, logs.String())
	}
	if s.r.runOutcome(jobEviction, "failed").Get() != failed+1 || s.f.called("Lead "+jobRetention) != 0 {
		t.Fatalf("failed eviction runs %d -> %d; Lead called %d times", failed, s.r.runOutcome(jobEviction, "failed").Get(), s.f.called("Lead "+jobRetention))
	}
	if next := jobs[1].next; next.Before(before.Add(time.Minute)) || next.After(time.Now().Add(time.Minute)) {
		t.Fatalf("eviction next due in %v, want its interval", time.Until(next))
	}
}

// Stop does not wait for a connect to a server that never answers.
func TestRetention_StopEndsAHungConnect(t *testing.T) {
	t.Parallel()
	s := setup(t, RetentionConfig{})
	s.f.connectBlocks = true
	s.r.Start()
	eventually(t, func() error {
		if s.f.called("connect") == 0 {
			return errors.New("the service never connected")
		}
		return nil
	})
	stopped := make(chan struct{})
	go func() { s.r.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop waited for the connect")
	}
}
