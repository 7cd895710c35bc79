package poptest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
	"github.com/queengo/queengo/pg/pgtest"
)

// want503 runs a pop that must fail with exactly 503 body and a
// Retry-After: a failure that passes, which a client retries.
func want503(t *testing.T, s *e2e.Server, path, body string) *e2e.PopResult {
	t.Helper()
	r := s.TryPop(t, path)
	if r.Status != 503 || string(r.Body) != body || r.Header.Get("Retry-After") == "" {
		t.Errorf("GET %s: %d %q (Retry-After %q) after %v, want 503 %s with Retry-After", path, r.Status, r.Body,
			r.Header.Get("Retry-After"), r.Elapsed, body)
	}
	return r
}

// waitLockWaiter waits until one of the broker's connections to db waits on
// a lock.
func waitLockWaiter(t *testing.T, db *pgtest.Database) {
	t.Helper()
	if err := e2e.Eventually(10*time.Second, 20*time.Millisecond, func() error {
		if e2e.QueryInt(t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
   AND application_name = 'queengo' AND wait_event_type = 'Lock'`) == 0 {
			return errors.New("no lock waiter")
		}
		return nil
	}); err != nil {
		t.Fatal("no broker connection came to wait on the lock")
	}
}

// poolBody is the body of the 503 a pop gets when no database connection can
// be had within DB_POOL_ACQUIRE_TIMEOUT_MS.
const poolBody = `{"error":"pool"}`

// isPool reports whether r is the 503 of an exhausted pool.
func isPool(r *e2e.Response) bool { return r.Status == 503 && string(r.Body) == poolBody }

// pushNoConnBody is how the push route answers when it gets no database
// connection in time (the pool's, or one the pool could not dial in time):
// the 503 of every route but the pops.
const pushNoConnBody = `{"error":"database unavailable"}`

// pushThroughPool pushes one message to queue/p, again while the broker
// answers 503 for want of a connection: with one connection and a 50 ms
// acquire timeout, the broker's own background work (the pop maintenance
// refresh every second, the metrics collector) holds that connection now and
// then for longer than the acquire timeout on a loaded box, and dialing it
// may take longer too. Any answer other than 201 or that 503 is an error.
func pushThroughPool(ctx context.Context, s *e2e.Server, queue string) error {
	body := map[string]any{"items": []e2e.PushItem{{Queue: queue, Partition: "p", TransactionID: e2e.TxID("tx"),
		Payload: map[string]any{"n": 0.0}}}}
	for {
		r, err := s.DoCtx(ctx, "POST", "/api/v1/push", body)
		switch {
		case err != nil:
			return err
		case r.Status == 201:
			return nil
		case r.Status != 503 || string(r.Body) != pushNoConnBody:
			return fmt.Errorf("push: %d %q", r.Status, r.Body)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("push: still 503 %s when giving up: %w", pushNoConnBody, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestPop_PoolExhaustedIs503Pool: when no database connection can be had
// within DB_POOL_ACQUIRE_TIMEOUT_MS a pop answers 503 {"error":"pool"} with
// Retry-After (issue 41, defect 5; the reference answers 500), on
// every route. The pool (DB_POOL_SIZE=1) is kept busy by a push blocked on a
// lock the test holds on queen.partitions.
//
// Outside that stretch the broker's background work may take the one
// connection for a moment too: the pushes that set the stage are repeated
// while they get no connection, and the pop that checks the broker recovers
// while it gets 503 pool.
func TestPop_PoolExhaustedIs503Pool(t *testing.T) {
	t.Parallel()
	db := e2e.CreateDB(t, "poppool")
	// The broker applies DB_POOL_ACQUIRE_TIMEOUT_MS to the dial of its
	// start-up (migration) connection too, so with 50ms it sometimes exits
	// at start on a loaded box. That is reported as a broker finding; the
	// test retries so the rule under test, the pop's 503, still gets checked.
	// The request deadline is long so that the blocked push outlasts the
	// checks however slow the box (the lock session ends within 60 s).
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL,
		Env: []string{"DB_POOL_SIZE=1", "DB_POOL_ACQUIRE_TIMEOUT_MS=50", "DB_REQUEST_TIMEOUT_MS=90000"}, Attempts: 8})
	ns := e2e.Unique(t, "pool")
	qa, qb := ns+".t.a", ns+".t.b"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, q := range []string{qa, qb} {
		if err := pushThroughPool(ctx, s, q); err != nil {
			t.Fatal(err)
		}
	}

	release, lock := holdLock(t, db, "queen.partitions")
	pushed := make(chan error, 1)
	go func() { pushed <- pushThroughPool(ctx, s, qa) }()
	waitLockWaiter(t, db) // the pool's only connection now waits on the lock
	for _, path := range []string{
		e2e.PopQueue(qb),
		e2e.PopPartition(qb, "p"),
		e2e.PopQueue(qb, "wait", "true", "timeout", "2000"),
		e2e.PopDiscovery("namespace", ns),
	} {
		r := want503(t, s, path, poolBody)
		t.Logf("%s: %d after %v", path, r.Status, r.Elapsed)
	}
	release()
	if err := <-lock; err != nil {
		t.Fatalf("lock session: %v", err)
	}
	if err := <-pushed; err != nil {
		t.Fatalf("the push blocked behind the lock: %v", err)
	}
	// With the connection back, pops work again.
	path := e2e.PopQueue(qb, "batch", "10")
	var p *e2e.PopResponse
	if err := e2e.Eventually(10*time.Second, 50*time.Millisecond, func() error {
		r := s.TryPop(t, path)
		if isPool(r.Response) {
			return errors.New("503 pool")
		}
		var err error
		if p, err = r.Delivered(); err != nil || p == nil {
			t.Fatalf("GET %s after the lock: %d %q, want the message", path, r.Status, r.Body)
		}
		return nil
	}); err != nil {
		t.Fatalf("GET %s after the lock: still 503 pool after 10s", path)
	}
	if len(p.Messages) != 1 {
		t.Fatalf("after the lock: %v", p.TxIDs())
	}
}

// TestPop_StatementTimeoutIs503PopFailed: when the pop's statement times out
// (DB_STATEMENT_TIMEOUT_MS) and is cancelled, the pop answers 503
// {"error":"pop failed"} at once, on every route and also with wait=true
// (an error is not parked). The statement is blocked by a lock the test holds
// on queen.cursors. "At once" is well before the 10 s request deadline,
// which would end an uncut statement with the same answer.
//
// Outside the lock a loaded box may make an ordinary statement outlast the
// 200 ms too (a cancelled statement leaves nothing behind): the requests
// that set the stage and check the end are repeated while they time out.
func TestPop_StatementTimeoutIs503PopFailed(t *testing.T) {
	t.Parallel()
	db := e2e.CreateDB(t, "popstmt")
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL,
		Env: []string{"DB_POOL_SIZE=2", "DB_STATEMENT_TIMEOUT_MS=200"}})
	ns := e2e.Unique(t, "stmt")
	q := ns + ".t.q"
	var first []string
	for k := 0; k < 2; k++ {
		tx := e2e.TxID("tx")
		body := map[string]any{"items": []e2e.PushItem{{Queue: q, Partition: "p", TransactionID: tx, Payload: map[string]any{"n": float64(k)}}}}
		if err := e2e.Eventually(20*time.Second, 50*time.Millisecond, func() error {
			switch r := s.Post(t, "/api/v1/push", body); {
			case r.Status == 201:
				return nil
			case r.Status == 503 && string(r.Body) == `{"error":"database timed out"}`:
				return errors.New("503 database timed out")
			default:
				t.Fatalf("push: %d %q", r.Status, r.Body)
				return nil
			}
		}); err != nil {
			t.Fatalf("push: %v for 20s", err)
		}
		first = append(first, tx)
	}
	// popPastTimeouts pops path, again while it answers 503 pop failed.
	popPastTimeouts := func(what, path string) *e2e.PopResponse {
		t.Helper()
		var r *e2e.PopResult
		if err := e2e.Eventually(20*time.Second, 50*time.Millisecond, func() error {
			if r = s.TryPop(t, path); r.Status == 503 && string(r.Body) == `{"error":"pop failed"}` {
				return errors.New("503 pop failed")
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: GET %s: %v for 20s", what, path, err)
		}
		p, err := r.Delivered()
		if err != nil || p == nil {
			t.Fatalf("%s: GET %s: %d %q, want messages", what, path, r.Status, r.Body)
		}
		return p
	}
	e2e.WantTxIDs(t, "before the lock", popPastTimeouts("before the lock", e2e.PopQueue(q, "consumerGroup", "g", "autoAck", "true")), first[:1])
	e2e.WantTxIDs(t, "before the lock, discovery",
		popPastTimeouts("before the lock, discovery", e2e.PopDiscovery("namespace", ns, "consumerGroup", "d", "autoAck", "true")), first[:1])

	release, lock := holdLock(t, db, "queen.cursors")
	for _, path := range []string{
		e2e.PopQueue(q, "consumerGroup", "g"),
		e2e.PopPartition(q, "p", "consumerGroup", "g"),
		e2e.PopDiscovery("namespace", ns, "consumerGroup", "d"),
		e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "10000"),
	} {
		r := want503(t, s, path, `{"error":"pop failed"}`)
		t.Logf("%s: %d after %v", path, r.Status, r.Elapsed)
		if r.Elapsed > atOnce {
			t.Errorf("%s answered after %v: the 200ms statement timeout did not cut it short", path, r.Elapsed)
		}
	}
	release()
	if err := <-lock; err != nil {
		t.Fatalf("lock session: %v", err)
	}
	e2e.WantTxIDs(t, "after the lock", popPastTimeouts("after the lock", e2e.PopQueue(q, "consumerGroup", "g")), first[1:])
}
