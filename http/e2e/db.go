package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/queengo/queengo/pg/pgtest"
)

// QueueMode is the reserved group name of queue mode (docs/pop-routes.md).
const QueueMode = "__QUEUE_MODE__"

// QueryInt runs a query on db that returns one integer.
func QueryInt(t testing.TB, db *pgtest.Database, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(sql, args, &n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// Counts is what the package database holds for a set of queues.
type Counts struct {
	Queues, Partitions, Segments, Txids, Cursors int64
	Heads                                        int64 // the sum of the partitions' heads
}

// QueueCounts counts the rows of the named queues in the package database.
func QueueCounts(t testing.TB, names ...string) Counts {
	t.Helper()
	var c Counts
	err := DB.QueryRow(`WITH q AS (SELECT id FROM queen.queues WHERE name = ANY($1::text[])),
p AS (SELECT id, head FROM queen.partitions WHERE queue_id IN (SELECT id FROM q))
SELECT (SELECT count(*) FROM q), (SELECT count(*) FROM p),
       (SELECT count(*) FROM queen.segments WHERE partition_id IN (SELECT id FROM p)),
       (SELECT count(*) FROM queen.txids WHERE partition_id IN (SELECT id FROM p)),
       (SELECT count(*) FROM queen.cursors WHERE partition_id IN (SELECT id FROM p)),
       (SELECT coalesce(sum(head), 0)::bigint FROM p)`, []any{names},
		&c.Queues, &c.Partitions, &c.Segments, &c.Txids, &c.Cursors, &c.Heads)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// QueueRow is a row of queen.queues.
type QueueRow struct {
	ID, Namespace, Task                                        string
	LeaseTime, RetryLimit, RetryDelay, Priority, MaxQueueSize  int
	TTL, DelayedProcessing, WindowBuffer, RetentionSeconds     int
	CompletedRetentionSeconds, MaxWaitTimeSeconds, MinPopWait  int
	DeadLetterQueue, DLQAfterMaxRetries, RetentionEnabled, Enc bool
}

// ReadQueue reads the queen.queues row of name in the package database; no
// row fails the test.
func ReadQueue(t testing.TB, name string) QueueRow {
	t.Helper()
	var r QueueRow
	err := DB.QueryRow(`SELECT id::text, namespace, task, lease_time, retry_limit, retry_delay, priority,
max_queue_size, ttl, delayed_processing, window_buffer, retention_seconds, completed_retention_seconds,
max_wait_time_seconds, min_pop_wait_time, dead_letter_queue, dlq_after_max_retries, retention_enabled,
encryption_enabled FROM queen.queues WHERE name = $1`, []any{name},
		&r.ID, &r.Namespace, &r.Task, &r.LeaseTime, &r.RetryLimit, &r.RetryDelay, &r.Priority, &r.MaxQueueSize,
		&r.TTL, &r.DelayedProcessing, &r.WindowBuffer, &r.RetentionSeconds, &r.CompletedRetentionSeconds,
		&r.MaxWaitTimeSeconds, &r.MinPopWait, &r.DeadLetterQueue, &r.DLQAfterMaxRetries, &r.RetentionEnabled,
		&r.Enc)
	if err != nil {
		t.Fatalf("reading queen.queues row of %q: %v", name, err)
	}
	return r
}

// PartitionID returns the id of queue/partition in the package database, ""
// when there is none.
func PartitionID(t testing.TB, queue, partition string) string {
	t.Helper()
	var id string
	err := DB.QueryRow(`SELECT coalesce(max(p.id::text), '') FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 AND p.name = $2`, []any{queue, partition}, &id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Cursor is a (partition, group) row of queen.cursors as a test sees it;
// the zero Cursor is a row that does not exist.
type Cursor struct {
	Found     bool
	Committed int64
	LeaseID   string     // "" when none
	LeaseEnd  *int64     // the last offset of the leased span
	Expires   *time.Time // lease_expires_at
	ExpiresIn float64    // seconds from the database's now to Expires; 0 when none
	Live      bool       // a lease that has not expired
	Acked     []int64    // offsets acked beyond the committed prefix
	Consumed  int64      // how many times committed advanced
	Failures  int64      // queen.attempts failures of the (partition, group), summed
}

// ReadCursor reads the cursor of group ("": queue mode) on the partition
// with id partitionID in the package database.
func ReadCursor(t testing.TB, partitionID, group string) Cursor {
	t.Helper()
	if group == "" {
		group = QueueMode
	}
	var c Cursor
	err := DB.QueryRow(`SELECT c.partition_id IS NOT NULL, coalesce(c.committed, 0), coalesce(c.lease_id::text, ''),
       c.lease_end, c.lease_expires_at, coalesce(extract(epoch FROM c.lease_expires_at - now())::float8, 0),
       coalesce(c.lease_id IS NOT NULL AND c.lease_expires_at > now(), false), coalesce(c.acked, '{}'),
       coalesce(c.total_consumed, 0),
       (SELECT coalesce(sum(failures), 0) FROM queen.attempts a WHERE a.partition_id = $1 AND a.consumer_group = $2)
  FROM (SELECT 1) x LEFT JOIN queen.cursors c ON c.partition_id = $1 AND c.consumer_group = $2`,
		[]any{partitionID, group},
		&c.Found, &c.Committed, &c.LeaseID, &c.LeaseEnd, &c.Expires, &c.ExpiresIn, &c.Live, &c.Acked, &c.Consumed,
		&c.Failures)
	if err != nil {
		t.Fatalf("reading cursor (%s, %s): %v", partitionID, group, err)
	}
	return c
}

// WaitListeners waits until n broker processes listen for the others'
// announcements on db (D12): a broker announces only once it has counted
// another listener there.
func WaitListeners(t testing.TB, db *pgtest.Database, n int) {
	t.Helper()
	err := Eventually(10*time.Second, 50*time.Millisecond, func() error {
		if got := QueryInt(t, db, `SELECT count(*) FROM pg_stat_activity
  WHERE datname = current_database() AND application_name = 'queengo-listener'`); got < int64(n) {
			return fmt.Errorf("%d listeners", got)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for %d brokers listening: %v", n, err)
	}
}
