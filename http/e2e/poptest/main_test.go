// Package poptest holds the black-box HTTP tests of the three pop routes
// (docs/pop-routes.md, docs/api.md "Pop maintenance", docs/rules.md D1, D2, D6,
// D11, D12 and the O-* rules). Every test is named after the rule it checks.
//
// Most tests share one lazily started broker on the package database; tests
// that need special environment start their own, and tests that lock tables
// or flip the process-wide pop maintenance switch run against a database of
// their own so they cannot disturb the others.
package poptest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
	"github.com/queengo/queengo/pg/pgtest"
)

func TestMain(m *testing.M) { e2e.Main(m, "pop") }

// shared returns the broker every test without special needs uses: default
// environment (DEFAULT_TIMEOUT and POP_DEFAULT_TIMEOUT_MS cleared, whatever
// the test process's environment holds), the package database.
func shared(t *testing.T) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "DEFAULT_TIMEOUT=", "POP_DEFAULT_TIMEOUT_MS=")
}

// run is a maximal stretch of consecutive messages of one partition.
type run struct {
	partition string
	txs       []string
}

// runs splits a delivery into its per-partition stretches, in order.
func runs(p *e2e.PopResponse) []run {
	var out []run
	for _, m := range p.Messages {
		if n := len(out); n > 0 && out[n-1].partition == m.Partition {
			out[n-1].txs = append(out[n-1].txs, m.TransactionID)
			continue
		}
		out = append(out, run{partition: m.Partition, txs: []string{m.TransactionID}})
	}
	return out
}

// ---------------------------------------------------------------- SQL

// cursorOf reads the cursor of group on queue/partition.
func cursorOf(t testing.TB, queue, partition, group string) e2e.Cursor {
	t.Helper()
	return e2e.ReadCursor(t, e2e.PartitionID(t, queue, partition), group)
}

// leaseExpiresAt returns when the live lease of (queue, partition, group)
// ends (the box has one clock).
func leaseExpiresAt(t testing.TB, queue, partition, group string) time.Time {
	t.Helper()
	c := cursorOf(t, queue, partition, group)
	if c.Expires == nil {
		t.Fatalf("%s/%s@%s holds no lease: %+v", queue, partition, group, c)
	}
	return *c.Expires
}

var lockSeq atomic.Int64

// holdLock takes an ACCESS EXCLUSIVE lock on table in a session of its own on
// db and returns once the lock is granted. The session keeps it until release
// is called (at the latest 60s), then commits; done yields its error. The
// release signal is a row in public.poptest_release, which the locking
// session polls (each plpgsql statement sees newly committed rows).
func holdLock(t testing.TB, db *pgtest.Database, table string) (release func(), done <-chan error) {
	t.Helper()
	if err := db.Exec(`CREATE TABLE IF NOT EXISTS public.poptest_release (key text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("%s-%d", table, lockSeq.Add(1))
	ch := make(chan error, 1)
	go func() {
		ch <- db.Exec(fmt.Sprintf(`DO $$
BEGIN
    LOCK TABLE %s IN ACCESS EXCLUSIVE MODE;
    FOR i IN 1..3000 LOOP
        EXIT WHEN EXISTS (SELECT 1 FROM public.poptest_release WHERE key = '%s');
        PERFORM pg_sleep(0.02);
    END LOOP;
END $$`, table, key))
	}()
	schema, rel, _ := strings.Cut(table, ".")
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := e2e.QueryInt(t, db, `SELECT count(*) FROM pg_locks l
  JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND n.nspname = $1 AND c.relname = $2 AND l.mode = 'AccessExclusiveLock' AND l.granted`, schema, rel)
		if n > 0 {
			break
		}
		select {
		case err := <-ch:
			t.Fatalf("lock session on %s ended early: %v", table, err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock on %s not granted within 20s", table)
		}
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := db.Exec(`INSERT INTO public.poptest_release (key) VALUES ($1)`, key); err != nil {
				t.Errorf("releasing the lock on %s: %v", table, err)
			}
		})
	}
	t.Cleanup(release)
	return release, ch
}

// ---------------------------------------------------------------- misc

// async runs a pop in the background; the channel yields its outcome.
type outcome struct {
	r   *e2e.PopResult
	err error
	at  time.Time // when the answer arrived
}

func async(ctx context.Context, s *e2e.Server, path string) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		r, err := s.PopCtx(ctx, path)
		ch <- outcome{r: r, err: err, at: time.Now()}
	}()
	return ch
}

// await waits up to d for an async pop, failing the test on a timeout or a
// transport error.
func await(t testing.TB, ch <-chan outcome, d time.Duration) outcome {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("pop: %v", o.err)
		}
		return o
	case <-time.After(d):
		t.Fatalf("pop did not answer within %v", d)
	}
	return outcome{}
}

// pending reports whether an async pop is still parked after d.
func pending(ch <-chan outcome, d time.Duration) (outcome, bool) {
	select {
	case o := <-ch:
		return o, false
	case <-time.After(d):
		return outcome{}, true
	}
}
