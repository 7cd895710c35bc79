package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// The metrics samples (pg/samples.go). The ticks are dated in the future so
// that no other test's rows are near them.

// tick writes one tick of instance at at and reports whether it led and,
// when it did, whether the store called it continuous.
func (b *bundle) tick(t *testing.T, instance string, at, last time.Time) (led, continuous bool) {
	t.Helper()
	called := false
	res, err := b.s.WriteSamples(context.Background(), queengo.SampleWrite{At: at, Instance: instance,
		Process: []byte(`{}`), LastWritten: last, MinGap: 5 * time.Second, Cutoff: time.Unix(0, 0), DeleteLimit: 10,
		Queues: func(c bool) []queengo.QueueSample {
			called, continuous = true, c
			return []queengo.QueueSample{{QueueID: uuid.New(), At: at, Figures: []byte(`{"pushed":1}`)},
				{QueueID: queengo.AllQueuesID, At: at, Figures: []byte(`{"pushed":1}`)}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Led != called {
		t.Fatalf("led %v, but the queue rows were made: %v", res.Led, called)
	}
	return res.Led, continuous
}

// One process writes a tick's queue rows: a second within MinGap writes its
// process row only. A tick is continuous when the newest queue rows are the
// instance's own at LastWritten.
func TestWriteSamples_OneWriterPerTickAndContinuity(t *testing.T) {
	bb := setup(t)
	db := bb.conn(t) // before the cleanup below, which uses it
	a, b := "a-"+uuid.NewString()[:8], "b-"+uuid.NewString()[:8]
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(time.Now().UnixNano() % int64(time.Hour)))
	base = base.Truncate(time.Microsecond)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), `DELETE FROM queen.metrics_samples WHERE instance IN ($1, $2)`, a, b)
	})
	if led, cont := bb.tick(t, a, base, time.Time{}); !led || cont {
		t.Fatalf("first tick: led %v continuous %v, want led, not continuous", led, cont)
	}
	if led, _ := bb.tick(t, b, base.Add(time.Second), time.Time{}); led {
		t.Fatal("a second process led within MinGap")
	}
	if led, cont := bb.tick(t, a, base.Add(10*time.Second), base); !led || !cont {
		t.Fatalf("a's next tick: led %v continuous %v, want both", led, cont)
	}
	if led, cont := bb.tick(t, b, base.Add(20*time.Second), time.Time{}); !led || cont {
		t.Fatalf("b's tick: led %v continuous %v", led, cont)
	}
	if _, cont := bb.tick(t, a, base.Add(30*time.Second), base.Add(10*time.Second)); cont {
		t.Fatal("a's tick after b wrote was continuous")
	}
	var procs int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM queen.metrics_samples
 WHERE instance IN ($1, $2) AND queue_id IS NULL`, a, b).Scan(&procs); err != nil {
		t.Fatal(err)
	}
	if procs != 5 {
		t.Fatalf("%d process rows, want one per tick (5)", procs)
	}
}

// Samples past the cutoff go, at most DeleteLimit a tick.
func TestWriteSamples_DeletesExpiredInBatches(t *testing.T) {
	b := setup(t)
	inst := "old-" + uuid.NewString()[:8]
	db := b.conn(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO queen.metrics_samples (sampled_at, instance, figures)
SELECT timestamptz '1990-01-01' + make_interval(secs => g), $1, '{}' FROM generate_series(1, 25) g`, inst); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(time.Now().UnixNano() % int64(time.Hour)))
	for i, want := range []int64{10, 10, 5, 0} {
		res, err := b.s.WriteSamples(ctx, queengo.SampleWrite{At: at.Add(time.Duration(i) * time.Minute), Instance: inst,
			Process: []byte(`{}`), MinGap: time.Second, Cutoff: time.Date(1991, 1, 1, 0, 0, 0, 0, time.UTC), DeleteLimit: 10,
			Queues: func(bool) []queengo.QueueSample { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		if res.Deleted != want {
			t.Fatalf("tick %d deleted %d, want %d", i, res.Deleted, want)
		}
	}
	if _, err := db.Exec(ctx, `DELETE FROM queen.metrics_samples WHERE instance = $1`, inst); err != nil {
		t.Fatal(err)
	}
}

// A tick reads the newest process row of every other instance since
// OthersSince and adds up their counters (queen_cluster_*): its own rows,
// older rows of the others and instances not seen since are left out; the
// dead letters are the requests' and eviction's.
func TestWriteSamples_AddsUpTheOtherInstances(t *testing.T) {
	bb := setup(t)
	db := bb.conn(t)
	ctx := context.Background()
	a, b, c := "a-"+uuid.NewString()[:8], "b-"+uuid.NewString()[:8], "c-"+uuid.NewString()[:8]
	base := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(time.Now().UnixNano() % int64(time.Hour)))
	base = base.Truncate(time.Microsecond)
	t.Cleanup(func() {
		_, _ = db.Exec(context.Background(), `DELETE FROM queen.metrics_samples WHERE instance IN ($1, $2, $3)`, a, b, c)
	})
	write := func(instance string, at time.Time, process string) queengo.SampleResult {
		t.Helper()
		res, err := bb.s.WriteSamples(ctx, queengo.SampleWrite{At: at, Instance: instance, Process: []byte(process),
			MinGap: time.Hour, Cutoff: time.Unix(0, 0), DeleteLimit: 10, OthersSince: at.Add(-time.Minute),
			Queues: func(bool) []queengo.QueueSample { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	write(c, base.Add(-2*time.Minute), `{"pushRequests": 100}`)
	write(b, base, `{"pushRequests": 5}`)
	write(b, base.Add(time.Second), `{"pushRequests": 6, "popRequests": 2, "ackRequests": 3, "transactions": 1,
 "pushMessages": 9, "popMessages": 7, "ackItems": 4, "ackFailed": 1, "dbErrors": 1, "deadLettered": 2, "evictedMessages": 3}`)
	got := write(a, base.Add(2*time.Second), `{"pushRequests": 1000}`).Others
	want := queengo.ClusterTotals{PushRequests: 6, PopRequests: 2, AckRequests: 3, Transactions: 1, PushMessages: 9,
		PopMessages: 7, AckMessages: 4, AckFailed: 1, DBErrors: 1, DeadLettered: 5, Processes: 1}
	if got != want {
		t.Fatalf("the others: %+v, want b's newest row: %+v", got, want)
	}
}
