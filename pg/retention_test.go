package pg_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/pg"
)

// The retention statements (sql/functions/retention.sql), each rule against
// the rows it leaves. Segment ages are set by moving created_at back, keeping
// it non-decreasing along each log as append_segments does.

// retentionBundle is a queue (q) of one partition (pid, named p) on a
// store, and a retention connection (rc) of the store.
type retentionBundle struct {
	*bundle
	rc  *pg.RetentionConn
	q   queengo.Queue
	pid uuid.UUID
}

// retentionConn opens a retention connection of the bundle's store, closed
// when the test ends.
func (b *bundle) retentionConn(t *testing.T) *pg.RetentionConn {
	t.Helper()
	rc, err := b.s.ConnectRetention(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return rc
}

// setupRetention creates a queue with one partition and the given options
// (SQL assignments to queen.queues columns).
func setupRetention(t *testing.T, options string) *retentionBundle {
	t.Helper()
	b := &retentionBundle{bundle: setup(t)}
	q, err := b.s.EnsureQueue(context.Background(), "retention-"+uuid.NewString()[:8])
	if err != nil {
		t.Fatal(err)
	}
	b.q, b.pid, b.rc = q, b.partition(t, q, "p"), b.retentionConn(t)
	if options != "" {
		if _, err := b.conn(t).Exec(context.Background(), "UPDATE queen.queues SET "+options+" WHERE id = $1", q.ID); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// push writes one segment of n messages with transaction ids prefix-0...
func (b *retentionBundle) push(t *testing.T, prefix string, n int) {
	t.Helper()
	fs := make([]queengo.Frame, n)
	for i := range fs {
		fs[i] = frame(fmt.Sprintf("%s-%d", prefix, i))
	}
	d, err := b.s.Append(context.Background(), []queengo.Segment{{Partition: b.pid, Frames: fs}})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range d[0] {
		if id != uuid.Nil {
			t.Fatalf("frame %d not written: %v", i, id)
		}
	}
}

// age moves the segments holding offsets up to last back by d.
func (b *retentionBundle) age(t *testing.T, last int64, d time.Duration) {
	t.Helper()
	if _, err := b.conn(t).Exec(context.Background(), `UPDATE queen.segments SET created_at = created_at - $3::interval
WHERE partition_id = $1 AND last_offset <= $2`, b.pid, last, d); err != nil {
		t.Fatal(err)
	}
}

// count counts the rows of table on the bundle's partition.
func (b *retentionBundle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := b.conn(t).QueryRow(context.Background(), "SELECT count(*) FROM queen."+table+" WHERE partition_id = $1", b.pid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// cursor creates or moves the group's cursor to committed.
func (b *retentionBundle) cursor(t *testing.T, group string, committed int64) {
	t.Helper()
	if _, err := b.conn(t).Exec(context.Background(), `INSERT INTO queen.cursors (partition_id, consumer_group, committed)
VALUES ($1, $2, $3) ON CONFLICT (partition_id, consumer_group) DO UPDATE SET committed = EXCLUDED.committed`,
		b.pid, group, committed); err != nil {
		t.Fatal(err)
	}
}

// committed reads the group's committed offset.
func (b *retentionBundle) committed(t *testing.T, group string) int64 {
	t.Helper()
	var c int64
	if err := b.conn(t).QueryRow(context.Background(), `SELECT committed FROM queen.cursors WHERE partition_id = $1 AND consumer_group = $2`,
		b.pid, group).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// drop runs retention batches on this partition until it is finished.
func (b *retentionBundle) drop(t *testing.T, limit int) (queengo.Dropped, int) {
	t.Helper()
	var total queengo.Dropped
	batches := 0
	for parts := []uuid.UUID{b.pid}; len(parts) > 0; batches++ {
		d, done, err := b.rc.DropSegments(context.Background(), parts, limit)
		if err != nil {
			t.Fatal(err)
		}
		if done == 0 && d.Segments == 0 {
			t.Fatal("a batch made no progress")
		}
		total.Segments += d.Segments
		total.Messages += d.Messages
		total.Bytes += d.Bytes
		parts = parts[done:]
	}
	return total, batches
}

// targeted reports whether the partition is a retention target.
func (b *retentionBundle) targeted(t *testing.T) bool {
	t.Helper()
	ids, err := b.rc.RetentionTargets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(ids, b.pid)
}

// D9: retentionSeconds (with retentionEnabled) drops the segments older than
// it, consumed or not, with their transaction ids and attempt counts; young
// segments stay; a cursor behind the drop moves to the oldest retained
// offset, one inside the young part does not move.
func TestRetention_DropsExpiredSegmentsWithTheirRows(t *testing.T) {
	t.Parallel()
	b := setupRetention(t, "retention_enabled = true, retention_seconds = 60")
	b.push(t, "old-a", 3) // offsets 1..3
	b.push(t, "old-b", 2) // 4..5
	b.push(t, "young", 2) // 6..7
	b.age(t, 5, time.Hour)
	b.cursor(t, "behind", 1)
	b.cursor(t, "ahead", 6)
	if _, err := b.conn(t).Exec(context.Background(), `INSERT INTO queen.attempts (partition_id, consumer_group, "offset", failures)
VALUES ($1, 'behind', 2, 1), ($1, 'ahead', 7, 1)`, b.pid); err != nil {
		t.Fatal(err)
	}
	if !b.targeted(t) {
		t.Fatal("partition with expired segments not a target")
	}
	d, _ := b.drop(t, 1000)
	if d.Segments != 2 || d.Messages != 5 || d.Bytes <= 0 {
		t.Fatalf("dropped %+v, want 2 segments, 5 messages", d)
	}
	if n := b.count(t, "segments"); n != 1 {
		t.Fatalf("%d segments left, want 1", n)
	}
	rows, _ := b.conn(t).Query(context.Background(), `SELECT transaction_id FROM queen.txids WHERE partition_id = $1 ORDER BY "offset"`, b.pid)
	txids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !slices.Equal(txids, []string{"young-0", "young-1"}) {
		t.Fatalf("transaction ids left %v (%v)", txids, err)
	}
	if n := b.count(t, "attempts"); n != 1 {
		t.Fatalf("%d attempt rows left, want the young one", n)
	}
	if c := b.committed(t, "behind"); c != 5 {
		t.Fatalf("lagging cursor at %d, want 5", c)
	}
	if c := b.committed(t, "ahead"); c != 6 {
		t.Fatalf("cursor past the drop moved to %d", c)
	}
	if b.targeted(t) {
		t.Fatal("still a target with nothing left to drop")
	}
}

// D9: completedRetentionSeconds drops only what every group with a cursor
// has committed past, and only once it is older than the limit; a
// partition nobody consumes keeps everything.
func TestRetention_CompletedWaitsForEveryGroup(t *testing.T) {
	t.Parallel()
	b := setupRetention(t, "retention_enabled = true, completed_retention_seconds = 60")
	b.push(t, "a", 2) // 1..2
	b.push(t, "b", 2) // 3..4
	b.push(t, "c", 2) // 5..6
	b.age(t, 6, time.Hour)
	if b.targeted(t) {
		t.Fatal("a partition without consumers is a completed-retention target")
	}
	b.cursor(t, "fast", 6)
	b.cursor(t, "slow", 3)
	d, _ := b.drop(t, 1000)
	if d.Segments != 1 || b.count(t, "segments") != 2 {
		t.Fatalf("dropped %+v, %d left: want the one segment both groups passed", d, b.count(t, "segments"))
	}
	b.cursor(t, "slow", 6)
	b.push(t, "d", 1) // 7: consumed by nobody, and young
	b.cursor(t, "fast", 7)
	b.cursor(t, "slow", 7)
	d, _ = b.drop(t, 1000)
	if d.Segments != 2 || b.count(t, "segments") != 1 {
		t.Fatalf("dropped %+v, %d left: the young segment must stay", d, b.count(t, "segments"))
	}
}

// D9: without retentionEnabled nothing is dropped, whatever
// completedRetentionSeconds and retentionSeconds say (as the reference: a
// queue configured for it that sets only the numbers keeps its history).
func TestD9_NothingIsDroppedWithoutRetentionEnabled(t *testing.T) {
	t.Parallel()
	b := setupRetention(t, "completed_retention_seconds = 60, retention_seconds = 60")
	b.push(t, "a", 2) // 1..2
	b.cursor(t, "g", 2)
	b.age(t, 2, time.Hour)
	if b.targeted(t) {
		t.Fatal("a queue without retentionEnabled is a retention target")
	}
	if d, _ := b.drop(t, 1000); d.Segments != 0 || b.count(t, "segments") != 1 {
		t.Fatalf("dropped %+v without retentionEnabled", d)
	}
}

// D9: completedRetentionSeconds waits for every group of the queue, also
// one that has not met the partition yet (a subscription record on the
// queue, or a cursor on another partition): it would start at the oldest
// retained message. Once it has a cursor there and is past, the segment
// goes.
func TestRetention_CompletedWaitsForAGroupThatHasNotMetThePartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, known := range []string{"record", "cursor"} {
		t.Run(known, func(t *testing.T) {
			b := setupRetention(t, "retention_enabled = true, completed_retention_seconds = 60")
			switch known {
			case "record":
				if _, err := b.conn(t).Exec(ctx, `INSERT INTO queen.subscriptions (queue_id, consumer_group, mode) VALUES ($1, 'B', 'all')`,
					b.q.ID); err != nil {
					t.Fatal(err)
				}
			case "cursor":
				if _, err := b.conn(t).Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed) VALUES ($1, 'B', 0)`,
					b.partition(t, b.q, "other")); err != nil {
					t.Fatal(err)
				}
			}
			b.push(t, "x", 3) // 1..3
			b.cursor(t, "A", 3)
			b.age(t, 3, time.Hour)
			if d, _ := b.drop(t, 1000); d.Segments != 0 || b.count(t, "segments") != 1 {
				t.Fatalf("dropped %+v: B, a group of the queue, has not consumed it", d)
			}
			b.cursor(t, "B", 3)
			if d, _ := b.drop(t, 1000); d.Segments != 1 {
				t.Fatalf("dropped %+v once B is past too, want the segment", d)
			}
		})
	}
}

// RETENTION_BATCH_SIZE: one batch drops about limit messages (whole
// segments, at least one) and reports the partition unfinished; the next
// batches go on where it stopped.
func TestRetention_BatchesAreBounded(t *testing.T) {
	t.Parallel()
	b := setupRetention(t, "retention_enabled = true, retention_seconds = 60")
	for i := range 5 {
		b.push(t, fmt.Sprint("s", i), 3)
	}
	b.age(t, 15, time.Hour)
	d, done, err := b.rc.DropSegments(context.Background(), []uuid.UUID{b.pid}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if d.Segments != 2 || done != 0 {
		t.Fatalf("first batch dropped %d segments (done %d), want 2 and unfinished", d.Segments, done)
	}
	total, batches := b.drop(t, 4)
	if total.Segments != 3 || batches != 2 || b.count(t, "txids") != 0 {
		t.Fatalf("rest: %+v in %d batches, %d txids left", total, batches, b.count(t, "txids"))
	}
}

// A live lease reaching past the drop keeps its retained part; a lease
// entirely inside the dropped part ends, and the acks recorded past the
// drop let committed advance.
func TestRetention_LeasesAcrossTheDrop(t *testing.T) {
	t.Parallel()
	b := setupRetention(t, "retention_enabled = true, retention_seconds = 60")
	b.push(t, "old", 4)   // 1..4
	b.push(t, "young", 4) // 5..8
	b.age(t, 4, time.Hour)
	ctx := context.Background()
	if _, err := b.conn(t).Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed, lease_id, lease_end, lease_expires_at, acked)
VALUES ($1, 'inside', 1, gen_random_uuid(), 3, now() + interval '1 minute', '{3}'),
       ($1, 'across', 2, gen_random_uuid(), 7, now() + interval '1 minute', '{5,7}')`, b.pid); err != nil {
		t.Fatal(err)
	}
	b.drop(t, 1000)
	var inside, across struct {
		committed int64
		lease     *uuid.UUID
		acked     []int64
	}
	for _, c := range []struct {
		g string
		v *struct {
			committed int64
			lease     *uuid.UUID
			acked     []int64
		}
	}{{"inside", &inside}, {"across", &across}} {
		if err := b.conn(t).QueryRow(ctx, `SELECT committed, lease_id, acked FROM queen.cursors WHERE partition_id = $1 AND consumer_group = $2`,
			b.pid, c.g).Scan(&c.v.committed, &c.v.lease, &c.v.acked); err != nil {
			t.Fatal(err)
		}
	}
	if inside.committed != 4 || inside.lease != nil || len(inside.acked) != 0 {
		t.Fatalf("lease inside the drop: %+v, want committed 4 and no lease", inside)
	}
	if across.committed != 5 || across.lease == nil || !slices.Equal(across.acked, []int64{7}) {
		t.Fatalf("lease across the drop: %+v, want committed 5 (4, then acked 5), lease kept, acked {7}", across)
	}
}

// D9: maxWaitTimeSeconds dead-letters, per group, what waited too long
// without being consumed, with a reason, and moves the group's cursor past
// it; a group that consumed it is untouched; acked offsets of an expired
// lease are not dead letters; a group under a live lease is left alone.
func TestEvict_DeadLettersPerGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetention(t, "max_wait_time_seconds = 60")
	b.push(t, "old", 4)   // 1..4
	b.push(t, "young", 2) // 5..6
	b.age(t, 4, time.Hour)
	b.cursor(t, "done", 4)
	b.cursor(t, "idle", 0)
	if _, err := b.conn(t).Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed, lease_id, lease_end, lease_expires_at, acked)
VALUES ($1, 'expired', 0, gen_random_uuid(), 3, now() - interval '1 second', '{2}'),
       ($1, 'working', 0, gen_random_uuid(), 3, now() + interval '1 minute', '{}')`, b.pid); err != nil {
		t.Fatal(err)
	}
	mine := b.targetsOf(t)
	if want := []queengo.CursorKey{{Partition: b.pid, Group: "expired"}, {Partition: b.pid, Group: "idle"}}; !slices.Equal(mine, want) {
		t.Fatalf("targets %v, want %v", mine, want)
	}
	evicted, done, err := b.rc.Evict(ctx, mine, 1000)
	if err != nil || done != 2 || evicted != 7 {
		t.Fatalf("evict: %d evicted, %d done, %v; want 7 (4 idle + 3 expired), 2", evicted, done, err)
	}
	for g, want := range map[string]int64{"done": 4, "idle": 4, "expired": 4, "working": 0} {
		if c := b.committed(t, g); c != want {
			t.Fatalf("group %s at %d, want %d", g, c, want)
		}
	}
	rows, _ := b.conn(t).Query(ctx, `SELECT consumer_group || ':' || "offset" || ':' || error_message FROM queen.dead_letters
WHERE partition_id = $1 ORDER BY consumer_group, "offset"`, b.pid)
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	const why = "Evicted: not consumed within maxWaitTimeSeconds (60 s)"
	want := []string{"expired:1:" + why, "expired:3:" + why, "expired:4:" + why,
		"idle:1:" + why, "idle:2:" + why, "idle:3:" + why, "idle:4:" + why}
	if !slices.Equal(got, want) {
		t.Fatalf("dead letters %v, want %v", got, want)
	}
	if b.count(t, "segments") != 2 {
		t.Fatal("eviction deleted segments")
	}
}

// A partition nobody has a cursor on: its old messages are evicted for
// queue mode, whose cursor eviction creates as a first contact would.
func TestEvict_PartitionWithoutCursorsGoesToQueueMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetention(t, "max_wait_time_seconds = 60")
	b.push(t, "old", 3)
	b.age(t, 3, time.Hour)
	evicted, done, err := b.rc.Evict(ctx, []queengo.CursorKey{{Partition: b.pid, Group: queengo.QueueModeGroup}}, 2)
	if err != nil || evicted != 2 || done != 0 {
		t.Fatalf("first batch: %d evicted, %d done, %v; want 2 of 3, unfinished", evicted, done, err)
	}
	evicted, done, err = b.rc.Evict(ctx, []queengo.CursorKey{{Partition: b.pid, Group: queengo.QueueModeGroup}}, 2)
	if err != nil || evicted != 1 || done != 1 {
		t.Fatalf("second batch: %d evicted, %d done, %v", evicted, done, err)
	}
	if c := b.committed(t, queengo.QueueModeGroup); c != 3 {
		t.Fatalf("queue mode at %d, want 3", c)
	}
}

// targetsOf lists the eviction targets on the bundle's partition.
func (b *retentionBundle) targetsOf(t *testing.T) []queengo.CursorKey {
	t.Helper()
	targets, err := b.rc.EvictionTargets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mine []queengo.CursorKey
	for _, k := range targets {
		if k.Partition == b.pid {
			mine = append(mine, k)
		}
	}
	return mine
}

// D9, per group: a partition nobody has contacted on a queue a named group
// consumes waits for its groups (no queue-mode dead letters for a group
// nobody runs); and a queue-mode cursor eviction made before any group
// came goes once a named group reaches the partition, so that it neither
// dead-letters the messages that group consumes nor, lagging, holds back
// maxSize and completed retention. Its dead letters stay.
func TestEvict_QueueModeOnlyForPartitionsNoGroupConsumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetention(t, "max_wait_time_seconds = 60")
	b.push(t, "early", 3) // 1..3, before any consumer
	b.age(t, 3, time.Hour)
	want := []queengo.CursorKey{{Partition: b.pid, Group: queengo.QueueModeGroup}}
	if got := b.targetsOf(t); !slices.Equal(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	if n, _, err := b.rc.Evict(ctx, want, 1000); err != nil || n != 3 {
		t.Fatalf("evict: %d, %v; want the 3 early messages for queue mode", n, err)
	}
	// billing comes and consumes everything from now on.
	b.cursor(t, "billing", 3)
	b.push(t, "later", 2) // 4..5
	b.cursor(t, "billing", 5)
	b.age(t, 5, time.Hour)
	if got := b.targetsOf(t); len(got) != 0 {
		t.Fatalf("targets %v once billing consumes the partition, want none", got)
	}
	var qm, dead int
	if err := b.conn(t).QueryRow(ctx, `SELECT count(*) FROM queen.cursors WHERE partition_id = $1 AND consumer_group = $2`,
		b.pid, queengo.QueueModeGroup).Scan(&qm); err != nil || qm != 0 {
		t.Fatalf("queue-mode cursors left: %d, %v; want none", qm, err)
	}
	if err := b.conn(t).QueryRow(ctx, `SELECT count(*) FROM queen.dead_letters WHERE partition_id = $1`, b.pid).Scan(&dead); err != nil || dead != 3 {
		t.Fatalf("dead letters %d, %v; want the 3 of the first run", dead, err)
	}

	// A second partition of the same queue, which billing has not reached
	// yet: it waits for billing.
	other := b.partition(t, b.q, "other")
	b.append(t, segOf(other, "o-0"))
	if _, err := b.conn(t).Exec(ctx, `UPDATE queen.segments SET created_at = created_at - interval '1 hour' WHERE partition_id = $1`, other); err != nil {
		t.Fatal(err)
	}
	targets, err := b.rc.EvictionTargets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range targets {
		if k.Partition == other {
			t.Fatalf("target %v: a partition of a queue billing consumes went to queue mode", k)
		}
	}
}

// PARTITION_CLEANUP_DAYS: a partition with no segment and no activity for
// the period goes with its cursors; one with a recent cursor stays.
func TestRemoveIdlePartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetention(t, "")
	busy := b.partition(t, b.q, "busy")
	b.cursor(t, "g", 0)
	if _, err := b.conn(t).Exec(ctx, `UPDATE queen.partitions SET created_at = now() - interval '40 days' WHERE id = ANY ($1::uuid[]);
`, []uuid.UUID{b.pid, busy}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.conn(t).Exec(ctx, `UPDATE queen.cursors SET created_at = now() - interval '40 days' WHERE partition_id = $1`, b.pid); err != nil {
		t.Fatal(err)
	}
	if _, err := b.conn(t).Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed) VALUES ($1, 'recent', 0)`, busy); err != nil {
		t.Fatal(err)
	}
	if _, err := b.rc.RemoveIdlePartitions(ctx, 30*24*time.Hour, 1000); err != nil {
		t.Fatal(err)
	}
	var left []uuid.UUID
	rows, _ := b.conn(t).Query(ctx, `SELECT id FROM queen.partitions WHERE queue_id = $1`, b.q.ID)
	left, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil || !slices.Equal(left, []uuid.UUID{busy}) {
		t.Fatalf("partitions left %v (%v), want only the busy one", left, err)
	}
	if n := b.count(t, "cursors"); n != 0 {
		t.Fatalf("%d cursors of the removed partition left", n)
	}
}

// Lead: while one process holds a job's lock, another one skips the job; a
// different job is not blocked; the lock is free again after the run,
// though its connection stays open for the next job.
func TestLead_OneLeaderPerJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := setup(t).retentionConn(t), setup(t).retentionConn(t)
	job := "test-" + uuid.NewString()
	ran, err := a.Lead(ctx, job, func(ctx context.Context) error {
		if ran, err := b.Lead(ctx, job, func(context.Context) error { return nil }); ran || err != nil {
			t.Errorf("second leader ran (%v, %v)", ran, err)
		}
		if ran, err := b.Lead(ctx, job+"-other", func(context.Context) error { return nil }); !ran || err != nil {
			t.Errorf("another job blocked (%v, %v)", ran, err)
		}
		return errors.New("the run's own failure")
	})
	if !ran || err == nil {
		t.Fatalf("first leader: ran %v, err %v", ran, err)
	}
	if ran, err := b.Lead(ctx, job, func(context.Context) error { return nil }); !ran || err != nil {
		t.Fatalf("lock not released after the run: %v, %v", ran, err)
	}
}

// A retention connection is the only connection a job uses: leading it,
// listing and running both jobs' batches, idle-partition cleanup and the
// oldest messages never open a pooled connection, so they never compete
// with the requests for one.
func TestRetentionConn_TakesNoPoolConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetention(t, "retention_enabled = true, retention_seconds = 60, max_wait_time_seconds = 60")
	b.push(t, "old", 2)
	b.age(t, 2, time.Hour)
	small := setup(t, func(c *pg.Config) { c.PoolSize, c.AcquireTimeout = 1, time.Millisecond })
	rc := small.retentionConn(t)
	for _, job := range []string{"retention", "eviction"} {
		led, err := rc.Lead(ctx, "test-"+job+"-"+uuid.NewString(), func(ctx context.Context) error {
			if _, err := rc.RetentionTargets(ctx); err != nil {
				return err
			}
			if _, err := rc.EvictionTargets(ctx); err != nil {
				return err
			}
			if _, _, err := rc.Evict(ctx, []queengo.CursorKey{{Partition: b.pid, Group: queengo.QueueModeGroup}}, 1000); err != nil {
				return err
			}
			if _, _, err := rc.DropSegments(ctx, []uuid.UUID{b.pid}, 1000); err != nil {
				return err
			}
			// Idle for two centuries: it removes nothing other tests use.
			if _, err := rc.RemoveIdlePartitions(ctx, 200*365*24*time.Hour, 1); err != nil {
				return err
			}
			_, err := rc.OldestMessages(ctx)
			return err
		})
		if !led || err != nil {
			t.Fatalf("%s: led %v, %v", job, led, err)
		}
	}
	if total, _, _ := small.s.PoolStats(); total != 0 {
		t.Fatalf("the pool opened %d connections for the jobs", total)
	}
}

// An unreachable database fails the connect at once; a server that accepts
// and never answers holds it only until its context ends (a broker's
// shutdown), not for the request timeout.
func TestConnectRetention_UnreachableOrFrozen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, err := pg.Open(ctx, pg.Config{URL: "postgres://postgres@" + addr + "/postgres?sslmode=disable", RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ConnectRetention(ctx); !errors.Is(err, queengo.ErrUnavailable) {
		t.Fatalf("connect to a closed port: %v, want ErrUnavailable", err)
	}

	frozen, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	go func() {
		var held []net.Conn
		for {
			c, err := frozen.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	s, err = pg.Open(ctx, pg.Config{URL: "postgres://postgres@" + frozen.Addr().String() + "/postgres?sslmode=disable", RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	if _, err := s.ConnectRetention(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("connect to a frozen server: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the cancelled connect returned after %v", took)
	}
}

// maxSize: a push takes items in order while the queue holds fewer than
// maxSize unconsumed messages (counted against the slowest group), refuses
// the rest with QueueFullMark, and duplicates take no room; a transaction
// (appendSegments' all-or-nothing callers) fails with ErrQueueFull.
func TestAppend_MaxSizeRefusesPastTheSlowestGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetention(t, "max_queue_size = 3")
	b.push(t, "a", 2)
	d, err := b.s.Append(ctx, []queengo.Segment{{Partition: b.pid, Frames: []queengo.Frame{frame("a-0"), frame("b"), frame("c")}}})
	if err != nil {
		t.Fatal(err)
	}
	if d[0][0] == uuid.Nil || d[0][0] == queengo.QueueFullMark || d[0][1] != uuid.Nil || d[0][2] != queengo.QueueFullMark {
		t.Fatalf("results %v: want duplicate, written, refused", d[0])
	}
	b.cursor(t, "fast", 3)
	b.cursor(t, "slow", 0)
	d, err = b.s.Append(ctx, []queengo.Segment{{Partition: b.pid, Frames: []queengo.Frame{frame("d")}}})
	if err != nil || d[0][0] != queengo.QueueFullMark {
		t.Fatalf("with the slow group 3 behind: %v %v, want refused", d, err)
	}
	b.cursor(t, "slow", 1)
	d, err = b.s.Append(ctx, []queengo.Segment{{Partition: b.pid, Frames: []queengo.Frame{frame("d"), frame("e")}}})
	if err != nil || d[0][0] != uuid.Nil || d[0][1] != queengo.QueueFullMark {
		t.Fatalf("one slot free: %v %v", d, err)
	}
	_, err = b.s.Transaction(ctx, []queengo.TxOp{{Push: &queengo.PushItem{Queue: b.q.Name, Partition: "p", Frame: frame("f")}}})
	if !errors.Is(err, queengo.ErrQueueFull) {
		t.Fatalf("transaction into a full queue: %v, want ErrQueueFull", err)
	}
}

// Lock order: a retention batch takes key share on the partition, so a
// segment write holding it (FOR NO KEY UPDATE) does not block it, and it
// does not block the write.
func TestLockOrder_RetentionAndWritesNeverWaitForEachOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupRetention(t, "retention_enabled = true, retention_seconds = 60")
	b.push(t, "old", 2)
	b.age(t, 2, time.Hour)
	writer := holdWrite(t, b.session(t, "10s"), b.pid)
	bctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if d, _, err := b.rc.DropSegments(bctx, []uuid.UUID{b.pid}, 1000); err != nil || d.Segments != 1 {
		t.Fatalf("retention while a write holds the partition: %+v %v", d, err)
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	b.push(t, "older", 1)
	b.age(t, 4, 2*time.Hour)
	tx, err := b.session(t, "10s").Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM queen.retention_take(ARRAY[$1::uuid], 1000, 64)`, b.pid); err != nil {
		t.Fatal(err)
	}
	w := b.session(t, "2s")
	if _, err := w.Exec(ctx, `SELECT queen.append_segments(ARRAY[$1::uuid], '{1}', ARRAY[$2], ARRAY[$3::uuid], ARRAY['\x00'::bytea])`,
		b.pid, uuid.NewString(), uuid.NewString()); err != nil {
		t.Fatalf("write while a retention batch holds the partition: %v", err)
	}
}
