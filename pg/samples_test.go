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
