package pg_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queengo/queengo"
)

// The lock order of docs/storage.md, one rule per test: each holds a
// lock the way one operation does, in a transaction left open, and checks
// that the other operation does not wait for it (lock_timeout turns a wait
// into an error) or waits without holding what the first would need next.

// claimNewGroup is a round's first contact of group $2 with every partition
// of queue $1: it creates their cursors.
const claimNewGroup = `SELECT count(*) FROM (SELECT queen.claim_contact(ARRAY[$2::text], ARRAY[''], ARRAY[NULL::timestamptz],
       array_fill(1, ARRAY[count(*)::integer]), array_agg(p.id ORDER BY p.id))
  FROM queen.partitions p WHERE p.queue_id = $1::uuid) x`

// TestLockOrder_FirstContactAndWritesNeverWaitForEachOther: a segment
// write locks its partition rows FOR NO KEY UPDATE, which does not conflict
// with the FOR KEY SHARE lock a cursor insert takes on them, so a group's
// first contact goes through while a write holds the
// partitions, and a write goes through while a first contact holds them
// (issue 8: with FOR UPDATE the two deadlocked, each locking partitions in
// its own order).
func TestLockOrder_FirstContactAndWritesNeverWaitForEachOther(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts := b.namedQueue(t, "a", "b", "c")
	ids := []string{parts[0].String(), parts[1].String(), parts[2].String()}

	// A write holds the partitions; a first contact must not wait.
	writer := holdWrite(t, b.session(t, "10s"), parts...)
	c := b.session(t, "2s")
	var rows int
	if err := c.QueryRow(ctx, claimNewGroup, q.ID.String(), "first-contact").Scan(&rows); err != nil {
		t.Fatalf("first contact while a write holds the partitions: %v", err)
	}
	var cursors int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM queen.cursors WHERE consumer_group = 'first-contact' AND partition_id = ANY ($1::uuid[])`,
		ids).Scan(&cursors); err != nil || cursors != 3 {
		t.Fatalf("cursors created: %d, %v", cursors, err)
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatalf("the write after the first contact: %v", err)
	}

	// A first contact holds the partitions (its transaction still open); a
	// write must not wait.
	contact, err := b.session(t, "10s").Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = contact.Rollback(context.Background()) }()
	if err := contact.QueryRow(ctx, claimNewGroup, q.ID.String(), "second-contact").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	w := b.session(t, "2s")
	if _, err := w.Exec(ctx, `SELECT queen.append_segments($1::uuid[], '{1,2,3}', $2, $3::uuid[], $4::bytea[])`,
		ids, []string{uuid.NewString(), uuid.NewString(), uuid.NewString()},
		[]string{uuid.NewString(), uuid.NewString(), uuid.NewString()}, [][]byte{{0}, {0}, {0}}); err != nil {
		t.Fatalf("write while a first contact holds the partitions: %v", err)
	}
	if err := contact.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockOrder_FirstContactNeverCreatesACursorForADeletedPartition: a
// first contact with a partition whose delete is under way waits for it
// (the partition row's lock) and then creates no cursor: cursors have no
// foreign key (migration 008), so the lock is what keeps a cursor from
// outliving its partition, as the key's check did.
func TestLockOrder_FirstContactNeverCreatesACursorForADeletedPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts := b.namedQueue(t, "a")
	deleter := b.session(t, "10s")
	del, err := deleter.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = del.Rollback(context.Background()) }()
	if _, err := del.Exec(ctx, `DELETE FROM queen.partitions WHERE id = $1`, parts[0].String()); err != nil {
		t.Fatal(err)
	}
	contact := b.session(t, "10s")
	done := make(chan error, 1)
	go func() {
		var rows int
		done <- contact.QueryRow(ctx, `SELECT count(*) FROM (SELECT queen.claim_contact(ARRAY['late'], ARRAY[''],
			ARRAY[NULL::timestamptz], ARRAY[1], ARRAY[$1::uuid])) x`, parts[0].String()).Scan(&rows)
	}()
	b.waitBlockedBy(t, deleter, "the first contact, for the partition being deleted,")
	if err := del.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the first contact after the delete: %v", err)
	}
	var cursors int
	if err := b.conn(t).QueryRow(ctx, `SELECT count(*) FROM queen.cursors WHERE partition_id = $1`,
		parts[0].String()).Scan(&cursors); err != nil || cursors != 0 {
		t.Fatalf("cursors of the deleted partition of %s: %d, %v", q.Name, cursors, err)
	}
}

// TestLockOrder_AckNeverWaitsForWriter: an ack that fails or dead-letters a
// message inserts into queen.attempts or queen.dead_letters, whose foreign
// keys take FOR KEY SHARE on the partition while the ack holds the cursor;
// it must not wait for a write (a transaction writes partitions and then
// acks, which would close the cycle).
func TestLockOrder_AckNeverWaitsForWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts := b.namedQueue(t, "a")
	leases := make([]string, 2)
	for i, g := range []string{"failing", "dead-lettering"} {
		lease := uuid.Must(uuid.NewV7())
		res, err := b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: g, Batch: 1, LeaseID: lease}})
		if err != nil || len(res[0].Messages) != 1 {
			t.Fatalf("claim %s: %+v %v", g, res, err)
		}
		leases[i] = lease.String()
	}
	writer := holdWrite(t, b.session(t, "10s"), parts...)

	c := b.session(t, "2s")
	rows, err := c.Query(ctx, `SELECT idx, success, coalesce(error, ''), dlq FROM queen.ack($1::uuid[], $2, $3, $4, $5::uuid[], $6)`,
		[]string{parts[0].String(), parts[0].String()}, []string{"m-a", "m-a"}, []string{"failed", "dlq"},
		[]string{"failing", "dead-lettering"}, leases, []string{"boom", "boom"})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		idx  int32
		ok   bool
		msg  string
		dead bool
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (result, error) {
		var x result
		return x, r.Scan(&x.idx, &x.ok, &x.msg, &x.dead)
	})
	if err != nil {
		t.Fatalf("ack while a write holds the partition: %v", err)
	}
	byIdx := map[int32]result{}
	for _, r := range got {
		byIdx[r.idx] = r
	}
	if len(byIdx) != 2 || !byIdx[1].ok || byIdx[1].dead || !byIdx[2].ok || !byIdx[2].dead {
		t.Fatalf("ack results (item 1 failed, item 2 dead-lettered): %+v", got)
	}
	if err := writer.Commit(ctx); err != nil {
		t.Fatalf("the write after the ack: %v", err)
	}
}

// TestLockOrder_ExtendLeaseLocksCursorsInAckOrder: queen.extend_leases
// locks a lease's cursor rows in (partition, group) order, the order an ack
// locks them in. While another session holds the lower one, it waits for
// it without holding the higher one, whatever the rows' physical order.
func TestLockOrder_ExtendLeaseLocksCursorsInAckOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, parts := b.namedQueue(t, "a", "b")
	lo, hi := parts[0], parts[1]
	if bytes.Compare(lo[:], hi[:]) > 0 {
		lo, hi = hi, lo
	}
	// The higher partition's cursor first, so that the physical order (the
	// one an UPDATE finds rows in) is the opposite of the key order.
	lease := uuid.Must(uuid.NewV7())
	c := b.conn(t)
	for _, p := range []uuid.UUID{hi, lo} {
		if _, err := c.Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed, lease_id, lease_end, lease_expires_at)
VALUES ($1, 'extend', 0, $2, 1, now() + interval '60 seconds')`, p.String(), lease.String()); err != nil {
			t.Fatal(err)
		}
	}
	var hiFirst bool
	if err := c.QueryRow(ctx, `SELECT (array_agg(partition_id ORDER BY ctid))[1] = $2::uuid FROM queen.cursors WHERE lease_id = $1`,
		lease.String(), hi.String()).Scan(&hiFirst); err != nil || !hiFirst {
		t.Skipf("could not lay the cursors out in reverse order (%v); nothing to check", err)
	}

	acker := b.session(t, "10s")
	tx, err := acker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM queen.cursors WHERE partition_id = $1 AND consumer_group = 'extend' FOR UPDATE`, lo.String()); err != nil {
		t.Fatal(err)
	}

	extender := b.session(t, "10s")
	done := make(chan error, 1)
	go func() {
		var expires, failure *string
		err := extender.QueryRow(ctx, `SELECT expires_at, failure FROM queen.extend_leases(ARRAY[$1::uuid], '{120}', '{}', '{}', '{}', '{}', '{}')`, lease.String()).Scan(&expires, &failure)
		if err == nil && expires == nil {
			err = errors.New("lease not extended")
		}
		done <- err
	}()
	b.waitHigherCursorFree(t, acker, hi, "extend", "extend_leases")
	_ = tx.Rollback(ctx)
	if err := <-done; err != nil {
		t.Fatalf("extend_leases: %v", err)
	}
}

// TestLockOrder_DeleteQueueNeverWaits: queen.delete_queue takes its locks
// with NOWAIT and retries, so it never waits and cannot close a cycle. Here
// an ack holds a cursor (and, through the attempts insert, its partition),
// then a first contact needs every partition: a plain DELETE holding the
// partitions and waiting for the cursor would deadlock with it.
func TestLockOrder_DeleteQueueNeverWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts := b.namedQueue(t, "a", "b", "c")
	// The lease is on the last partition in name order, the order a plain
	// DELETE cascades in: it would hold a and b when it meets c.
	lease, leased := uuid.Must(uuid.NewV7()), parts[2]
	if res, err := b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Partition: leased, Candidates: []uuid.UUID{leased},
		Group: "acking", Batch: 1, MaxParts: 1, LeaseID: lease}}); err != nil || len(res[0].Messages) != 1 {
		t.Fatalf("claim: %+v %v", res, err)
	}

	acker := b.session(t, "5s")
	tx, err := acker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT success FROM queen.ack(ARRAY[$1::uuid], ARRAY[$2], ARRAY['failed'], ARRAY['acking'], ARRAY[$3::uuid], ARRAY['boom'])`,
		leased.String(), "m-c", lease.String()).Scan(&ok); err != nil || !ok {
		t.Fatalf("ack: %v %v", ok, err)
	}

	deleter := b.session(t, "10s")
	done := make(chan error, 1)
	go func() {
		var existed bool
		err := deleter.QueryRow(ctx, `SELECT queen.delete_queue($1)`, q.Name).Scan(&existed)
		if err == nil && !existed {
			err = errors.New("delete_queue: queue not found")
		}
		done <- err
	}()
	// It finds the locks it needs held and sleeps before it tries again.
	eventually(t, func() error {
		var sleeping bool
		if err := b.conn(t).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'PgSleep')`,
			deleter.PgConn().PID()).Scan(&sleeping); err != nil || sleeping {
			return err
		}
		return errors.New("delete_queue never retried while the ack held its locks")
	})
	var n int
	if err := tx.QueryRow(ctx, claimNewGroup, q.ID.String(), "newcomer").Scan(&n); err != nil {
		t.Fatalf("first contact while delete_queue retries: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("delete_queue: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("delete_queue did not finish within 10s of the ack's commit")
	}
	var left int
	if err := b.conn(t).QueryRow(ctx, `SELECT (SELECT count(*) FROM queen.queues WHERE id = $1)
     + (SELECT count(*) FROM queen.partitions WHERE queue_id = $1)
     + (SELECT count(*) FROM queen.cursors WHERE partition_id = ANY ($2::uuid[]))
     + (SELECT count(*) FROM queen.attempts WHERE partition_id = ANY ($2::uuid[]))
     + (SELECT count(*) FROM queen.segments WHERE partition_id = ANY ($2::uuid[]))`,
		q.ID.String(), []string{parts[0].String(), parts[1].String(), parts[2].String()}).Scan(&left); err != nil || left != 0 {
		t.Fatalf("rows left after delete_queue: %d %v", left, err)
	}
}
