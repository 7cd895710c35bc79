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

type lifecycle struct {
	s   *pg.Store
	rc  *pg.RetentionConn
	db  *pgx.Conn
	q   queengo.Queue
	pid uuid.UUID
}

// retentionConn opens a retention connection of s, closed when the test
// ends.
func retentionConn(t *testing.T, s *pg.Store) *pg.RetentionConn {
	t.Helper()
	rc, err := s.ConnectRetention(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return rc
}

// newLifecycle creates a queue with one partition and the given options
// (SQL assignments to queen.queues columns).
func newLifecycle(t *testing.T, options string) *lifecycle {
	t.Helper()
	ctx := context.Background()
	s := openStore(t)
	q, err := s.EnsureQueue(ctx, "retention-"+uuid.NewString()[:8])
	if err != nil {
		t.Fatal(err)
	}
	pid, err := s.EnsurePartition(ctx, q.ID, "p")
	if err != nil {
		t.Fatal(err)
	}
	db := session(t, "10s")
	if options != "" {
		if _, err := db.Exec(ctx, "UPDATE queen.queues SET "+options+" WHERE id = $1", q.ID); err != nil {
			t.Fatal(err)
		}
	}
	return &lifecycle{s: s, rc: retentionConn(t, s), db: db, q: q, pid: pid}
}

// push writes one segment of n messages with transaction ids prefix-0...
func (l *lifecycle) push(t *testing.T, prefix string, n int) {
	t.Helper()
	fs := make([]queengo.Frame, n)
	for i := range fs {
		fs[i] = frame(fmt.Sprintf("%s-%d", prefix, i))
	}
	d, err := l.s.Append(context.Background(), []queengo.Segment{{Partition: l.pid, Frames: fs}})
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
func (l *lifecycle) age(t *testing.T, last int64, d time.Duration) {
	t.Helper()
	if _, err := l.db.Exec(context.Background(), `UPDATE queen.segments SET created_at = created_at - $3::interval
WHERE partition_id = $1 AND last_offset <= $2`, l.pid, last, d); err != nil {
		t.Fatal(err)
	}
}

func (l *lifecycle) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := l.db.QueryRow(context.Background(), "SELECT count(*) FROM queen."+table+" WHERE partition_id = $1", l.pid).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// cursor creates or moves the group's cursor to committed.
func (l *lifecycle) cursor(t *testing.T, group string, committed int64) {
	t.Helper()
	if _, err := l.db.Exec(context.Background(), `INSERT INTO queen.cursors (partition_id, consumer_group, committed)
VALUES ($1, $2, $3) ON CONFLICT (partition_id, consumer_group) DO UPDATE SET committed = EXCLUDED.committed`,
		l.pid, group, committed); err != nil {
		t.Fatal(err)
	}
}

func (l *lifecycle) committed(t *testing.T, group string) int64 {
	t.Helper()
	var c int64
	if err := l.db.QueryRow(context.Background(), `SELECT committed FROM queen.cursors WHERE partition_id = $1 AND consumer_group = $2`,
		l.pid, group).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// drop runs retention batches on this partition until it is finished.
func (l *lifecycle) drop(t *testing.T, limit int) (queengo.Dropped, int) {
	t.Helper()
	var total queengo.Dropped
	batches := 0
	for parts := []uuid.UUID{l.pid}; len(parts) > 0; batches++ {
		d, done, err := l.rc.DropSegments(context.Background(), parts, limit)
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

func (l *lifecycle) targeted(t *testing.T) bool {
	t.Helper()
	ids, err := l.rc.RetentionTargets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(ids, l.pid)
}

// D9: retentionSeconds (with retentionEnabled) drops the segments older than
// it, consumed or not, with their transaction ids and attempt counts; young
// segments stay; a cursor behind the drop moves to the oldest retained
// offset, one inside the young part does not move.
func TestRetention_DropsExpiredSegmentsWithTheirRows(t *testing.T) {
	t.Parallel()
	l := newLifecycle(t, "retention_enabled = true, retention_seconds = 60")
	l.push(t, "old-a", 3) // offsets 1..3
	l.push(t, "old-b", 2) // 4..5
	l.push(t, "young", 2) // 6..7
	l.age(t, 5, time.Hour)
	l.cursor(t, "behind", 1)
	l.cursor(t, "ahead", 6)
	if _, err := l.db.Exec(context.Background(), `INSERT INTO queen.attempts (partition_id, consumer_group, "offset", failures)
VALUES ($1, 'behind', 2, 1), ($1, 'ahead', 7, 1)`, l.pid); err != nil {
		t.Fatal(err)
	}
	if !l.targeted(t) {
		t.Fatal("partition with expired segments not a target")
	}
	d, _ := l.drop(t, 1000)
	if d.Segments != 2 || d.Messages != 5 || d.Bytes <= 0 {
		t.Fatalf("dropped %+v, want 2 segments, 5 messages", d)
	}
	if n := l.count(t, "segments"); n != 1 {
		t.Fatalf("%d segments left, want 1", n)
	}
	rows, _ := l.db.Query(context.Background(), `SELECT transaction_id FROM queen.txids WHERE partition_id = $1 ORDER BY "offset"`, l.pid)
	txids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !slices.Equal(txids, []string{"young-0", "young-1"}) {
		t.Fatalf("transaction ids left %v (%v)", txids, err)
	}
	if n := l.count(t, "attempts"); n != 1 {
		t.Fatalf("%d attempt rows left, want the young one", n)
	}
	if c := l.committed(t, "behind"); c != 5 {
		t.Fatalf("lagging cursor at %d, want 5", c)
	}
	if c := l.committed(t, "ahead"); c != 6 {
		t.Fatalf("cursor past the drop moved to %d", c)
	}
	if l.targeted(t) {
		t.Fatal("still a target with nothing left to drop")
	}
}

// D9: completedRetentionSeconds drops only what every group with a cursor
// has committed past, and only once it is older than the limit; a
// partition nobody consumes keeps everything.
func TestRetention_CompletedWaitsForEveryGroup(t *testing.T) {
	t.Parallel()
	l := newLifecycle(t, "completed_retention_seconds = 60")
	l.push(t, "a", 2) // 1..2
	l.push(t, "b", 2) // 3..4
	l.push(t, "c", 2) // 5..6
	l.age(t, 6, time.Hour)
	if l.targeted(t) {
		t.Fatal("a partition without consumers is a completed-retention target")
	}
	l.cursor(t, "fast", 6)
	l.cursor(t, "slow", 3)
	d, _ := l.drop(t, 1000)
	if d.Segments != 1 || l.count(t, "segments") != 2 {
		t.Fatalf("dropped %+v, %d left: want the one segment both groups passed", d, l.count(t, "segments"))
	}
	l.cursor(t, "slow", 6)
	l.push(t, "d", 1) // 7: consumed by nobody, and young
	l.cursor(t, "fast", 7)
	l.cursor(t, "slow", 7)
	d, _ = l.drop(t, 1000)
	if d.Segments != 2 || l.count(t, "segments") != 1 {
		t.Fatalf("dropped %+v, %d left: the young segment must stay", d, l.count(t, "segments"))
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
			l := newLifecycle(t, "completed_retention_seconds = 60")
			switch known {
			case "record":
				if _, err := l.db.Exec(ctx, `INSERT INTO queen.subscriptions (queue_id, consumer_group, mode) VALUES ($1, 'B', 'all')`,
					l.q.ID); err != nil {
					t.Fatal(err)
				}
			case "cursor":
				other, err := l.s.EnsurePartition(ctx, l.q.ID, "other")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := l.db.Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed) VALUES ($1, 'B', 0)`,
					other); err != nil {
					t.Fatal(err)
				}
			}
			l.push(t, "x", 3) // 1..3
			l.cursor(t, "A", 3)
			l.age(t, 3, time.Hour)
			if d, _ := l.drop(t, 1000); d.Segments != 0 || l.count(t, "segments") != 1 {
				t.Fatalf("dropped %+v: B, a group of the queue, has not consumed it", d)
			}
			l.cursor(t, "B", 3)
			if d, _ := l.drop(t, 1000); d.Segments != 1 {
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
	l := newLifecycle(t, "retention_enabled = true, retention_seconds = 60")
	for i := range 5 {
		l.push(t, fmt.Sprint("s", i), 3)
	}
	l.age(t, 15, time.Hour)
	d, done, err := l.rc.DropSegments(context.Background(), []uuid.UUID{l.pid}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if d.Segments != 2 || done != 0 {
		t.Fatalf("first batch dropped %d segments (done %d), want 2 and unfinished", d.Segments, done)
	}
	total, batches := l.drop(t, 4)
	if total.Segments != 3 || batches != 2 || l.count(t, "txids") != 0 {
		t.Fatalf("rest: %+v in %d batches, %d txids left", total, batches, l.count(t, "txids"))
	}
}

// A live lease reaching past the drop keeps its retained part; a lease
// entirely inside the dropped part ends, and the acks recorded past the
// drop let committed advance.
func TestRetention_LeasesAcrossTheDrop(t *testing.T) {
	t.Parallel()
	l := newLifecycle(t, "retention_enabled = true, retention_seconds = 60")
	l.push(t, "old", 4)   // 1..4
	l.push(t, "young", 4) // 5..8
	l.age(t, 4, time.Hour)
	ctx := context.Background()
	if _, err := l.db.Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed, lease_id, lease_end, lease_expires_at, acked)
VALUES ($1, 'inside', 1, gen_random_uuid(), 3, now() + interval '1 minute', '{3}'),
       ($1, 'across', 2, gen_random_uuid(), 7, now() + interval '1 minute', '{5,7}')`, l.pid); err != nil {
		t.Fatal(err)
	}
	l.drop(t, 1000)
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
		if err := l.db.QueryRow(ctx, `SELECT committed, lease_id, acked FROM queen.cursors WHERE partition_id = $1 AND consumer_group = $2`,
			l.pid, c.g).Scan(&c.v.committed, &c.v.lease, &c.v.acked); err != nil {
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
	l := newLifecycle(t, "max_wait_time_seconds = 60")
	l.push(t, "old", 4)   // 1..4
	l.push(t, "young", 2) // 5..6
	l.age(t, 4, time.Hour)
	l.cursor(t, "done", 4)
	l.cursor(t, "idle", 0)
	if _, err := l.db.Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed, lease_id, lease_end, lease_expires_at, acked)
VALUES ($1, 'expired', 0, gen_random_uuid(), 3, now() - interval '1 second', '{2}'),
       ($1, 'working', 0, gen_random_uuid(), 3, now() + interval '1 minute', '{}')`, l.pid); err != nil {
		t.Fatal(err)
	}
	mine := l.targetsOf(t)
	if want := []queengo.CursorKey{{Partition: l.pid, Group: "expired"}, {Partition: l.pid, Group: "idle"}}; !slices.Equal(mine, want) {
		t.Fatalf("targets %v, want %v", mine, want)
	}
	evicted, done, err := l.rc.Evict(ctx, mine, 1000)
	if err != nil || done != 2 || evicted != 7 {
		t.Fatalf("evict: %d evicted, %d done, %v; want 7 (4 idle + 3 expired), 2", evicted, done, err)
	}
	for g, want := range map[string]int64{"done": 4, "idle": 4, "expired": 4, "working": 0} {
		if c := l.committed(t, g); c != want {
			t.Fatalf("group %s at %d, want %d", g, c, want)
		}
	}
	rows, _ := l.db.Query(ctx, `SELECT consumer_group || ':' || "offset" || ':' || error_message FROM queen.dead_letters
WHERE partition_id = $1 ORDER BY consumer_group, "offset"`, l.pid)
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
	if l.count(t, "segments") != 2 {
		t.Fatal("eviction deleted segments")
	}
}

// A partition nobody has a cursor on: its old messages are evicted for
// queue mode, whose cursor eviction creates as a first contact would.
func TestEvict_PartitionWithoutCursorsGoesToQueueMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLifecycle(t, "max_wait_time_seconds = 60")
	l.push(t, "old", 3)
	l.age(t, 3, time.Hour)
	evicted, done, err := l.rc.Evict(ctx, []queengo.CursorKey{{Partition: l.pid, Group: queengo.QueueModeGroup}}, 2)
	if err != nil || evicted != 2 || done != 0 {
		t.Fatalf("first batch: %d evicted, %d done, %v; want 2 of 3, unfinished", evicted, done, err)
	}
	evicted, done, err = l.rc.Evict(ctx, []queengo.CursorKey{{Partition: l.pid, Group: queengo.QueueModeGroup}}, 2)
	if err != nil || evicted != 1 || done != 1 {
		t.Fatalf("second batch: %d evicted, %d done, %v", evicted, done, err)
	}
	if c := l.committed(t, queengo.QueueModeGroup); c != 3 {
		t.Fatalf("queue mode at %d, want 3", c)
	}
}

// targetsOf lists the eviction targets on the lifecycle's partition.
func (l *lifecycle) targetsOf(t *testing.T) []queengo.CursorKey {
	t.Helper()
	targets, err := l.rc.EvictionTargets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var mine []queengo.CursorKey
	for _, k := range targets {
		if k.Partition == l.pid {
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
	l := newLifecycle(t, "max_wait_time_seconds = 60")
	l.push(t, "early", 3) // 1..3, before any consumer
	l.age(t, 3, time.Hour)
	want := []queengo.CursorKey{{Partition: l.pid, Group: queengo.QueueModeGroup}}
	if got := l.targetsOf(t); !slices.Equal(got, want) {
		t.Fatalf("targets %v, want %v", got, want)
	}
	if n, _, err := l.rc.Evict(ctx, want, 1000); err != nil || n != 3 {
		t.Fatalf("evict: %d, %v; want the 3 early messages for queue mode", n, err)
	}
	// billing comes and consumes everything from now on.
	l.cursor(t, "billing", 3)
	l.push(t, "later", 2) // 4..5
	l.cursor(t, "billing", 5)
	l.age(t, 5, time.Hour)
	if got := l.targetsOf(t); len(got) != 0 {
		t.Fatalf("targets %v once billing consumes the partition, want none", got)
	}
	var qm, dead int
	if err := l.db.QueryRow(ctx, `SELECT count(*) FROM queen.cursors WHERE partition_id = $1 AND consumer_group = $2`,
		l.pid, queengo.QueueModeGroup).Scan(&qm); err != nil || qm != 0 {
		t.Fatalf("queue-mode cursors left: %d, %v; want none", qm, err)
	}
	if err := l.db.QueryRow(ctx, `SELECT count(*) FROM queen.dead_letters WHERE partition_id = $1`, l.pid).Scan(&dead); err != nil || dead != 3 {
		t.Fatalf("dead letters %d, %v; want the 3 of the first run", dead, err)
	}

	// A second partition of the same queue, which billing has not reached
	// yet: it waits for billing.
	other, err := l.s.EnsurePartition(ctx, l.q.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.Append(ctx, []queengo.Segment{{Partition: other, Frames: []queengo.Frame{frame("o-0")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(ctx, `UPDATE queen.segments SET created_at = created_at - interval '1 hour' WHERE partition_id = $1`, other); err != nil {
		t.Fatal(err)
	}
	targets, err := l.rc.EvictionTargets(ctx)
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
	l := newLifecycle(t, "")
	busy, err := l.s.EnsurePartition(ctx, l.q.ID, "busy")
	if err != nil {
		t.Fatal(err)
	}
	l.cursor(t, "g", 0)
	if _, err := l.db.Exec(ctx, `UPDATE queen.partitions SET created_at = now() - interval '40 days' WHERE id = ANY ($1::uuid[]);
`, []uuid.UUID{l.pid, busy}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(ctx, `UPDATE queen.cursors SET created_at = now() - interval '40 days' WHERE partition_id = $1`, l.pid); err != nil {
		t.Fatal(err)
	}
	if _, err := l.db.Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed) VALUES ($1, 'recent', 0)`, busy); err != nil {
		t.Fatal(err)
	}
	if _, err := l.rc.RemoveIdlePartitions(ctx, 30*24*time.Hour, 1000); err != nil {
		t.Fatal(err)
	}
	var left []uuid.UUID
	rows, _ := l.db.Query(ctx, `SELECT id FROM queen.partitions WHERE queue_id = $1`, l.q.ID)
	left, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil || !slices.Equal(left, []uuid.UUID{busy}) {
		t.Fatalf("partitions left %v (%v), want only the busy one", left, err)
	}
	if n := l.count(t, "cursors"); n != 0 {
		t.Fatalf("%d cursors of the removed partition left", n)
	}
}

// Lead: while one process holds a job's lock, another one skips the job; a
// different job is not blocked; the lock is free again after the run,
// though its connection stays open for the next job.
func TestLead_OneLeaderPerJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := retentionConn(t, openStore(t)), retentionConn(t, openStore(t))
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
	l := newLifecycle(t, "retention_enabled = true, retention_seconds = 60, max_wait_time_seconds = 60")
	l.push(t, "old", 2)
	l.age(t, 2, time.Hour)
	s, err := pg.Open(ctx, pg.Config{URL: testURL, PoolSize: 1, AcquireTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rc := retentionConn(t, s)
	for _, job := range []string{"retention", "eviction"} {
		led, err := rc.Lead(ctx, "test-"+job+"-"+uuid.NewString(), func(ctx context.Context) error {
			if _, err := rc.RetentionTargets(ctx); err != nil {
				return err
			}
			if _, err := rc.EvictionTargets(ctx); err != nil {
				return err
			}
			if _, _, err := rc.Evict(ctx, []queengo.CursorKey{{Partition: l.pid, Group: queengo.QueueModeGroup}}, 1000); err != nil {
				return err
			}
			if _, _, err := rc.DropSegments(ctx, []uuid.UUID{l.pid}, 1000); err != nil {
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
	if total, _, _ := s.PoolStats(); total != 0 {
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
	l := newLifecycle(t, "max_queue_size = 3")
	l.push(t, "a", 2)
	d, err := l.s.Append(ctx, []queengo.Segment{{Partition: l.pid, Frames: []queengo.Frame{frame("a-0"), frame("b"), frame("c")}}})
	if err != nil {
		t.Fatal(err)
	}
	if d[0][0] == uuid.Nil || d[0][0] == queengo.QueueFullMark || d[0][1] != uuid.Nil || d[0][2] != queengo.QueueFullMark {
		t.Fatalf("results %v: want duplicate, written, refused", d[0])
	}
	l.cursor(t, "fast", 3)
	l.cursor(t, "slow", 0)
	d, err = l.s.Append(ctx, []queengo.Segment{{Partition: l.pid, Frames: []queengo.Frame{frame("d")}}})
	if err != nil || d[0][0] != queengo.QueueFullMark {
		t.Fatalf("with the slow group 3 behind: %v %v, want refused", d, err)
	}
	l.cursor(t, "slow", 1)
	d, err = l.s.Append(ctx, []queengo.Segment{{Partition: l.pid, Frames: []queengo.Frame{frame("d"), frame("e")}}})
	if err != nil || d[0][0] != uuid.Nil || d[0][1] != queengo.QueueFullMark {
		t.Fatalf("one slot free: %v %v", d, err)
	}
	_, err = l.s.Transaction(ctx, []queengo.TxOp{{Push: &queengo.PushItem{Queue: l.q.Name, Partition: "p", Frame: frame("f")}}})
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
	l := newLifecycle(t, "retention_enabled = true, retention_seconds = 60")
	l.push(t, "old", 2)
	l.age(t, 2, time.Hour)
	writer := holdWrite(t, session(t, "10s"), l.pid)
	bctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if d, _, err := l.rc.DropSegments(bctx, []uuid.UUID{l.pid}, 1000); err != nil || d.Segments != 1 {
		t.Fatalf("retention while a write holds the partition: %+v %v", d, err)
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	l.push(t, "older", 1)
	l.age(t, 4, 2*time.Hour)
	tx, err := session(t, "10s").Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM queen.retention_take(ARRAY[$1::uuid], 1000, 64)`, l.pid); err != nil {
		t.Fatal(err)
	}
	w := session(t, "2s")
	if _, err := w.Exec(ctx, `SELECT queen.append_segments(ARRAY[$1::uuid], '{1}', ARRAY[$2], ARRAY[$3::uuid], ARRAY['\x00'::bytea])`,
		l.pid, uuid.NewString(), uuid.NewString()); err != nil {
		t.Fatalf("write while a retention batch holds the partition: %v", err)
	}
}
