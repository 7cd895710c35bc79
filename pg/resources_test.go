package pg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/queengo/queengo"
)

// TestLockOrder_ClearQueueNeverWaits: a clear takes its partition and cursor
// locks with NOWAIT and retries, so a writer holding a partition is never
// waited on while the clear holds anything (no cycle can form); the clear
// goes through once the writer commits, and drops what it wrote too.
func TestLockOrder_ClearQueueNeverWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts := b.namedQueue(t, "a", "b")
	writer := b.session(t, "5s")
	tx := holdWrite(t, writer, parts[1])

	done := make(chan error, 1)
	var cleared queengo.Cleared
	go func() {
		var err error
		cleared, err = b.s.ClearQueue(ctx, q.Name, "")
		done <- err
	}()
	// The clear is retrying (sleeping between attempts, holding nothing)
	// while the writer holds partition b.
	watch := b.conn(t)
	eventually(t, func() error {
		var n int
		if err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
 WHERE wait_event = 'PgSleep' AND query LIKE '%clear_queue%'`).Scan(&n); err != nil || n > 0 {
			return err
		}
		return errors.New("the clear never retried while the writer held partition b")
	})
	// The writer is not waited on: it writes again and commits.
	appendIn(t, tx, parts[1])
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("clear: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("clear did not finish within 10s of the writer's commit")
	}
	// One message per partition from namedQueue, two from the writer.
	if cleared.Partitions != 2 || cleared.Messages != 4 {
		t.Fatalf("cleared %+v, want 2 partitions, 4 messages", cleared)
	}
	var left int
	if err := watch.QueryRow(ctx, `SELECT (SELECT count(*) FROM queen.segments WHERE partition_id = ANY ($1::uuid[]))
     + (SELECT count(*) FROM queen.txids WHERE partition_id = ANY ($1::uuid[]))`,
		[]string{parts[0].String(), parts[1].String()}).Scan(&left); err != nil || left != 0 {
		t.Fatalf("rows left after clear: %d %v", left, err)
	}
	_, err := b.s.ClearQueue(ctx, q.Name, "zzz")
	var m *queengo.MissingError
	if !errors.As(err, &m) || m.What != "partition" || !errors.Is(err, queengo.ErrNotFound) {
		t.Fatalf("clear of an unknown partition: %v", err)
	}
}
