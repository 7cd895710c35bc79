package jobs

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

var tc0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

// figs makes the figures of queues ids with the given pushed counts and
// pending messages.
func figs(ids []uuid.UUID, pushed, pending []int64) []queengo.QueueFigures {
	out := make([]queengo.QueueFigures, len(ids))
	for i, id := range ids {
		out[i] = queengo.QueueFigures{QueueID: id, Name: id.String()[:8], Pushed: pushed[i], Pending: pending[i],
			Retained: pending[i], OffsetLag: pending[i], Partitions: 1}
	}
	return out
}

func rowsOf(fs []queengo.QueueFigures, at time.Time) map[uuid.UUID]queueRow {
	out := map[uuid.UUID]queueRow{}
	for i := range fs {
		out[fs[i].QueueID] = rowOf(&fs[i], at)
	}
	return out
}

// sampleKey is a written row as (queue, time, pushed).
type sampleKey struct {
	id     uuid.UUID
	at     time.Time
	pushed int64
}

func keys(t *testing.T, rows []queengo.QueueSample) []sampleKey {
	t.Helper()
	out := make([]sampleKey, len(rows))
	for i, r := range rows {
		var q queueRow
		if err := json.Unmarshal(r.Figures, &q); err != nil {
			t.Fatal(err)
		}
		out[i] = sampleKey{r.QueueID, r.At, q.Pushed}
	}
	return out
}

func wantRows(t *testing.T, what string, got []queengo.QueueSample, want ...sampleKey) {
	t.Helper()
	k := keys(t, got)
	if len(k) != len(want) {
		t.Fatalf("%s: rows %v, want %v", what, k, want)
	}
	for i := range k {
		if k[i] != want[i] {
			t.Fatalf("%s: rows %v, want %v", what, k, want)
		}
	}
}

// selectRows: an idle queue (same figures, nothing pending) gets no row on
// continuous ticks; when it changes, its previous tick's row comes along,
// so no delta spans the gap; a queue with a backlog gets a row every tick.
func TestSelectRows_SkipsIdleQueuesWithoutGaps(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	ids := []uuid.UUID{a, b}
	t1, t2, t3, t4 := tc0, tc0.Add(10*time.Second), tc0.Add(20*time.Second), tc0.Add(30*time.Second)

	f1 := figs(ids, []int64{5, 7}, []int64{0, 3})
	rows, st := selectRows(nil, f1, rowsOf(f1, t1), t1, time.Time{})
	wantRows(t, "first tick (not continuous)", rows, sampleKey{a, t1, 5}, sampleKey{b, t1, 7})

	f2 := figs(ids, []int64{5, 7}, []int64{0, 3})
	rows, st = selectRows(st, f2, rowsOf(f2, t2), t2, t1)
	wantRows(t, "a idle, b has a backlog", rows, sampleKey{b, t2, 7})

	f3 := figs(ids, []int64{5, 7}, []int64{0, 3})
	rows, st = selectRows(st, f3, rowsOf(f3, t3), t3, t2)
	wantRows(t, "a still idle", rows, sampleKey{b, t3, 7})

	f4 := figs(ids, []int64{9, 7}, []int64{4, 3})
	rows, _ = selectRows(st, f4, rowsOf(f4, t4), t4, t3)
	wantRows(t, "a changed after skipped ticks", rows, sampleKey{a, t3, 5}, sampleKey{a, t4, 9}, sampleKey{b, t4, 7})
}

// selectRows: a queue created since the previous tick gets a row of zeros
// at that tick, so its first messages count; without a continuous previous
// tick every queue gets exactly one row.
func TestSelectRows_NewQueueStartsFromZero(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	t1, t2 := tc0, tc0.Add(10*time.Second)
	f1 := figs([]uuid.UUID{a}, []int64{1}, []int64{0})
	_, st := selectRows(nil, f1, rowsOf(f1, t1), t1, time.Time{})
	f2 := figs([]uuid.UUID{a, b}, []int64{1, 4}, []int64{0, 4})
	rows, _ := selectRows(st, f2, rowsOf(f2, t2), t2, t1)
	wantRows(t, "continuous", rows, sampleKey{b, t1, 0}, sampleKey{b, t2, 4})
	rows, _ = selectRows(st, f2, rowsOf(f2, t2), t2, time.Time{})
	wantRows(t, "not continuous", rows, sampleKey{a, t2, 1}, sampleKey{b, t2, 4})
}

// perMinute and trimHistory: rates are the growth over the last minute of
// samples, per minute; a queue created after the oldest sample counts from
// 0; a counter that went back is no growth.
func TestPerMinute_RatesOverTheLastMinute(t *testing.T) {
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	var h []rateSample
	for i := range 13 { // every 10 s for two minutes
		at := tc0.Add(time.Duration(i) * 10 * time.Second)
		counts := map[uuid.UUID][3]int64{a: {int64(i) * 10, int64(i) * 5, int64(i) * 5}, c: {100 - int64(i), 0, 0}}
		if i >= 10 {
			counts[b] = [3]int64{30, 0, 0}
		}
		h = trimHistory(append(h, rateSample{at: at, counts: counts}), at)
	}
	now := h[len(h)-1]
	if got := now.at.Sub(h[0].at); got != time.Minute {
		t.Fatalf("history spans %v, want 1m", got)
	}
	if r := perMinute(h[0], now, a, tc0); r != [3]float64{60, 30, 30} {
		t.Fatalf("a: %v, want 60, 30, 30 per minute", r)
	}
	if r := perMinute(h[0], now, b, tc0.Add(95*time.Second)); r[0] != 30 {
		t.Fatalf("b, created within the window: %v, want 30", r)
	}
	if r := perMinute(h[0], now, b, tc0); r[0] != 0 {
		t.Fatalf("b, older than the window but unknown to it: %v, want no rate", r)
	}
	if r := perMinute(h[0], now, c, tc0); r[0] != 0 {
		t.Fatalf("c, a counter going back: %v, want 0", r)
	}
}

// collectorStore is a CollectorStore in memory that leads every tick but
// those it is told not to and keeps what it was asked to write. A tick is
// continuous when the collector has rows of its own (no other process
// writes here).
type collectorStore struct {
	mu     sync.Mutex
	figs   []queengo.QueueFigures
	writes []queengo.SampleWrite
	rows   [][]queengo.QueueSample
	// follow: the next tick is not led (its process row only).
	follow bool
}

func (s *collectorStore) AllQueueFigures(context.Context) ([]queengo.QueueFigures, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]queengo.QueueFigures(nil), s.figs...), nil
}

func (s *collectorStore) WriteSamples(_ context.Context, w queengo.SampleWrite) (queengo.SampleResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, w)
	if s.follow {
		s.follow = false
		s.rows = append(s.rows, nil)
		return queengo.SampleResult{}, nil
	}
	s.rows = append(s.rows, w.Queues(!w.LastWritten.IsZero()))
	return queengo.SampleResult{Led: true}, nil
}

func (s *collectorStore) PoolStats() (int32, int32, int32) { return 4, 3, 1 }

// A tick reads the figures once, writes the process row with the request
// counters and the retention cutoff, the queue rows and the row of every
// queue together, and publishes per-minute rates from its history: pushes
// of 60 messages over a minute of ticks are a push rate of 60 a minute.
func TestCollectorTick_WritesAndPublishesRates(t *testing.T) {
	id := uuid.New()
	st := &collectorStore{}
	c := NewCollector(CollectorConfig{Interval: 10 * time.Second, Retention: time.Hour, Instance: "h:1", Hostname: "h",
		Requests: func() queengo.RequestCounts { return queengo.RequestCounts{PushRequests: 3} }}, st, nil)
	now := tc0
	c.clock = func() time.Time { return now }
	for i := range 7 {
		st.figs = []queengo.QueueFigures{{QueueID: id, Name: "q", Pushed: int64(i) * 10, Consumed: int64(i) * 10,
			CreatedAt: tc0.Add(-time.Hour)}}
		c.tick(context.Background())
		now = now.Add(10 * time.Second)
	}
	w := st.writes[len(st.writes)-1]
	if w.Instance != "h:1" || !w.Cutoff.Equal(tc0.Add(60*time.Second-time.Hour)) || w.DeleteLimit != sampleDeleteBatch ||
		w.MinGap != 5*time.Second {
		t.Fatalf("write %+v", w)
	}
	var proc map[string]any
	if err := json.Unmarshal(w.Process, &proc); err != nil {
		t.Fatal(err)
	}
	if proc["pushRequests"] != float64(3) || proc["hostname"] != "h" || proc["poolIdle"] != float64(3) {
		t.Fatalf("process row %v", proc)
	}
	if r := st.rows[0]; len(r) != 2 || r[0].QueueID != id || r[1].QueueID != queengo.AllQueuesID {
		t.Fatalf("first tick wrote %v, want the queue's row and the row of every queue", r)
	}
	var total totalRow
	if err := json.Unmarshal(st.rows[6][len(st.rows[6])-1].Figures, &total); err != nil {
		t.Fatal(err)
	}
	if total.Pushed != 60 || total.Queues != 1 {
		t.Fatalf("row of every queue %+v", total)
	}
	s := c.Snapshot()
	if s == nil || len(s.Queues) != 1 || s.Queues[0].PushPerMinute != 60 || s.Queues[0].AckPerMinute != 60 {
		t.Fatalf("snapshot %+v", s)
	}
}

// A tick the collector does not lead (a slow tick made the next one come
// within MinGap of it) keeps the state of the one it led: the next led tick
// is continuous, and a queue created meanwhile starts from a row of zeros
// at the last led tick, so its first messages count.
func TestCollectorTick_ATickNotLedKeepsTheHistoryContinuous(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	st := &collectorStore{}
	c := NewCollector(CollectorConfig{Interval: 10 * time.Second, Retention: time.Hour, Instance: "h:1"}, st, nil)
	t1, t2, t3 := tc0, tc0.Add(10*time.Second), tc0.Add(20*time.Second)
	now := t1
	c.clock = func() time.Time { return now }
	st.figs = figs([]uuid.UUID{a}, []int64{1}, []int64{1})
	c.tick(context.Background())
	now, st.follow = t2, true
	st.figs = figs([]uuid.UUID{a, b}, []int64{1, 4}, []int64{1, 4})
	c.tick(context.Background())
	now = t3
	c.tick(context.Background())
	if len(st.rows) != 3 || st.rows[1] != nil {
		t.Fatalf("ticks wrote %d sets of rows, the second %v: want three, the second none", len(st.rows), st.rows[1])
	}
	wantRows(t, "the led tick after one not led", st.rows[2][:len(st.rows[2])-1],
		sampleKey{a, t3, 1}, sampleKey{b, t1, 0}, sampleKey{b, t3, 4})
}
