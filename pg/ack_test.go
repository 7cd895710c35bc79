package pg_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queengo/queengo"
)

// leasedPair creates a queue of partitions a and b (namedQueue), both
// claimed in queue mode under one lease.
func (b *bundle) leasedPair(t *testing.T) (queengo.Queue, []uuid.UUID, uuid.UUID) {
	t.Helper()
	q, parts := b.namedQueue(t, "a", "b")
	lease := uuid.Must(uuid.NewV7())
	res, err := b.s.Claim(context.Background(), []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID},
		Group: queengo.QueueModeGroup, Batch: 10, LeaseID: lease}})
	if err != nil || res[0].Err != nil || len(res[0].Messages) != 2 {
		t.Fatalf("claim: %+v %v", res, err)
	}
	return q, parts, lease
}

// TestAckExtend_OneCommitExtendsThenAcks: AckExtend answers every extension
// and every ack item with its own result and typed failure code, and applies
// the extensions before the acks: an extension of a lease that an ack of the
// same call releases succeeds, and the ack still releases it. The first
// item names its offset, as the broker sends it, so it is a span
// (queen.ack_spans) and the others go to queen.ack.
func TestAckExtend_OneCommitExtendsThenAcks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts, lease := b.leasedPair(t)
	acks, ext, err := b.s.AckExtend(ctx,
		[]queengo.AckItem{
			{PartitionID: parts[0], TransactionID: "m-a", Status: "completed", Group: queengo.QueueModeGroup, LeaseID: lease,
				Offset: 1},
			{PartitionID: parts[1], TransactionID: "nope", Status: "completed", Group: queengo.QueueModeGroup},
			{PartitionID: parts[1], TransactionID: "m-b", Status: "completed", Group: queengo.QueueModeGroup, LeaseID: uuid.New()},
		},
		[]queengo.LeaseExtend{{Lease: lease, Seconds: 120}, {Lease: uuid.New(), Seconds: 120}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ext) != 2 || ext[0].Failure != "" || ext[0].ExpiresAt == "" || ext[1].Failure != queengo.LeaseNotFound || ext[1].ExpiresAt != "" {
		t.Fatalf("extensions: %+v, want the live lease extended and the unknown one lease_not_found", ext)
	}
	want := []queengo.AckResult{
		{Success: true, LeaseReleased: true, Queue: q.Name, Partition: "a"},
		{Failure: queengo.AckMessageNotFound},
		{Failure: queengo.AckLeaseInvalid, Queue: q.Name, Partition: "b"},
	}
	if len(acks) != len(want) {
		t.Fatalf("%d ack results, want %d", len(acks), len(want))
	}
	for i := range want {
		if acks[i] != want[i] {
			t.Errorf("ack %d: %+v, want %+v", i, acks[i], want[i])
		}
	}
	// Partition b's span is still under the lease, now extended; a's ended.
	_, ext, err = b.s.AckExtend(ctx, nil, []queengo.LeaseExtend{{Lease: lease, Seconds: 1}})
	if err != nil || len(ext) != 1 || ext[0].ExpiresAt == "" {
		t.Fatalf("extending the lease of b alone: %+v %v", ext, err)
	}
}

// TestAckExtend_EndMakesTheLeasedMessagesClaimableAtOnce: an extension
// with End (an abandoned pop's lease) ends the lease now, whatever its
// time left: the next claim of the group takes the same messages again, and
// the ended lease can be neither extended nor ended again.
func TestAckExtend_EndMakesTheLeasedMessagesClaimableAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, _, lease := b.leasedPair(t)
	_, ext, err := b.s.AckExtend(ctx, nil, []queengo.LeaseExtend{{Lease: lease, End: true}})
	if err != nil || len(ext) != 1 || ext[0].Failure != "" {
		t.Fatalf("ending the lease: %+v %v", ext, err)
	}
	again := uuid.Must(uuid.NewV7())
	res, err := b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: queengo.QueueModeGroup, Batch: 10,
		LeaseID: again}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("claim after the end: %+v %v", res, err)
	}
	var txids []string
	for _, m := range res[0].Messages {
		txids = append(txids, m.TransactionID)
	}
	slices.Sort(txids)
	if !slices.Equal(txids, []string{"m-a", "m-b"}) {
		t.Fatalf("the claim after the end took %v, want both messages of the ended lease", txids)
	}
	_, ext, err = b.s.AckExtend(ctx, nil, []queengo.LeaseExtend{{Lease: lease, Seconds: 60}, {Lease: lease, End: true}})
	if err != nil || len(ext) != 2 || ext[0].Failure != queengo.LeaseNotFound || ext[1].Failure != queengo.LeaseNotFound {
		t.Fatalf("the ended lease after the new claim: %+v %v, want lease_not_found twice", ext, err)
	}
}

// heldPair is a queue with partitions a and b, one message each, a cursor
// of group 'merged' on each leased over it, and a session (holder) that
// holds the cursor of the lower partition id locked in an open transaction
// until release.
type heldPair struct {
	lo, hi         uuid.UUID
	nameLo, nameHi string
	holder         *pgx.Conn
	release        func()
}

// holdLowerCursor makes a heldPair whose lower cursor carries loLease and
// higher one hiLease.
func (b *bundle) holdLowerCursor(t *testing.T, loLease, hiLease uuid.UUID) heldPair {
	t.Helper()
	ctx := context.Background()
	m := heldPair{nameLo: "a", nameHi: "b"}
	_, parts := b.namedQueue(t, "a", "b")
	m.lo, m.hi = parts[0], parts[1]
	if bytes.Compare(m.lo[:], m.hi[:]) > 0 {
		m.lo, m.hi, m.nameLo, m.nameHi = m.hi, m.lo, "b", "a"
	}
	for _, c := range []struct{ part, lease uuid.UUID }{{m.lo, loLease}, {m.hi, hiLease}} {
		if _, err := b.conn(t).Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed, lease_id, lease_end, lease_expires_at)
VALUES ($1, 'merged', 0, $2, 1, now() + interval '60 seconds')`, c.part.String(), c.lease.String()); err != nil {
			t.Fatal(err)
		}
	}
	m.holder = b.session(t, "10s")
	tx, err := m.holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.release = func() { _ = tx.Rollback(context.Background()) }
	t.Cleanup(m.release)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM queen.cursors WHERE partition_id = $1 AND consumer_group = 'merged' FOR UPDATE`, m.lo.String()); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestLockOrder_AckExtendLocksAllCursorsInOneOrder: a commit carrying an
// extend and an ack locks the cursors of both in one (partition, group)
// pass. Here the extend's lease is on the higher cursor and the ack on the
// lower one, which another session holds: the commit waits for the lower
// one without holding the higher one (locking the lease's cursor first
// would take them out of order, and an ack of both holding the lower one
// would deadlock with it).
func TestLockOrder_AckExtendLocksAllCursorsInOneOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	lease := uuid.Must(uuid.NewV7())
	m := b.holdLowerCursor(t, uuid.Must(uuid.NewV7()), lease)
	done := make(chan error, 1)
	go func() {
		_, ext, err := b.s.AckExtend(ctx,
			[]queengo.AckItem{{PartitionID: m.lo, TransactionID: "m-" + m.nameLo, Status: "completed", Group: "merged"}},
			[]queengo.LeaseExtend{{Lease: lease, Seconds: 120}})
		if err == nil && ext[0].ExpiresAt == "" {
			err = fmt.Errorf("lease not extended: %+v", ext[0])
		}
		done <- err
	}()
	b.waitHigherCursorFree(t, m.holder, m.hi, "merged", "AckExtend")
	m.release()
	if err := <-done; err != nil {
		t.Fatalf("AckExtend: %v", err)
	}
}

// TestLockOrder_AnAckWithSpansLocksAllCursorsInOneOrder: an ack split into
// spans and the rest (ackCall) runs two statements, and the first,
// queen.ack_spans, locks the cursors of both in one (partition, group)
// pass. Here the span is on the higher cursor and the rest's item on the
// lower one, which another session holds: the ack waits for the lower one
// without holding the higher one (an ack of both holding the lower one
// would deadlock with it).
func TestLockOrder_AnAckWithSpansLocksAllCursorsInOneOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	lease := uuid.Must(uuid.NewV7())
	m := b.holdLowerCursor(t, lease, lease)
	done := make(chan error, 1)
	go func() {
		res, err := b.s.Ack(ctx, []queengo.AckItem{
			{PartitionID: m.hi, TransactionID: "m-" + m.nameHi, Status: "completed", Group: "merged", LeaseID: lease, Offset: 1},
			{PartitionID: m.lo, TransactionID: "m-" + m.nameLo, Status: "completed", Group: "merged"},
		})
		if err == nil && (!res[0].Success || !res[1].Success) {
			err = fmt.Errorf("not acked: %+v", res)
		}
		done <- err
	}()
	b.waitHigherCursorFree(t, m.holder, m.hi, "merged", "Ack")
	m.release()
	if err := <-done; err != nil {
		t.Fatalf("Ack: %v", err)
	}
}

// TestAck_SetPathMatchesItemLoop: queen.ack applies a batch that only
// completes messages of live leases in one set-based statement, and any
// other batch in its per-item loop. The two must agree (ackPathsAgree).
// Items name their message by transaction id alone or also by the offset
// the claim delivered it at, and name their lease or not, at random, so both
// ways of finding the message take both paths.
func TestAck_SetPathMatchesItemLoop(t *testing.T) {
	t.Parallel()
	ackPathsAgree(t, func(rng *rand.Rand, it *queengo.AckItem, lease uuid.UUID, off int64) {
		if rng.IntN(2) == 0 {
			it.LeaseID = lease
		}
		if rng.IntN(2) == 0 {
			it.Offset = off
		}
	}, false)
}

// TestAck_SpanPathMatchesItemLoop: the items of a cursor that complete a
// contiguous run of its lease are one cursor update (queen.ack_spans) when
// the run starts right after the committed offset, and go through queen.ack
// otherwise; either way they must resolve as the item loop resolves them
// (ackPathsAgree). Every item names its lease and offset, as the broker
// sends them; half the batches are the lowest offsets left, so that runs
// right after the committed offset are common, and one in four names a
// lease that is not the cursor's.
func TestAck_SpanPathMatchesItemLoop(t *testing.T) {
	t.Parallel()
	ackPathsAgree(t, func(rng *rand.Rand, it *queengo.AckItem, lease uuid.UUID, off int64) {
		it.LeaseID, it.Offset = lease, off
	}, true)
}

// ackPathsAgree checks that a batch of acks resolves the same whichever path
// of queen.ack applies it. Two partitions hold the same messages under the
// same kind of lease; a random batch (a random subset of the offsets in
// random order, 'completed' or 'success', each item shaped by mark) goes to
// x alone, and to y with one of its items repeated, which sends it through
// the loop (a repeat is either a no-op success or lease_invalid there, and
// changes no cursor). Every item's result and both cursors must match,
// after the batch and after a second batch of the offsets left. With runs,
// half the batches are the lowest offsets left (in random order) and one in
// four names a lease that is not the cursor's.
func ackPathsAgree(t *testing.T, mark func(rng *rand.Rand, it *queengo.AckItem, lease uuid.UUID, off int64), runs bool) {
	t.Helper()
	ctx := context.Background()
	b := setup(t)
	const n = 8
	names, txids := []string{"x", "y"}, make([][]string, 2)
	for i, name := range names {
		for k := range n {
			txids[i] = append(txids[i], fmt.Sprintf("%s-%d", name, k))
		}
	}
	q, ids := b.queue(t, names, txids)
	pids := map[string]uuid.UUID{"x": ids[0], "y": ids[1]}
	db := b.conn(t)
	cursor := func(part uuid.UUID, group string) string {
		var out string
		if err := db.QueryRow(ctx, `SELECT format('committed=%s leased=%s lease_end=%s acked=%s consumed=%s batches=%s',
       committed, lease_id IS NOT NULL, lease_end, acked, total_consumed, batches_consumed)
  FROM queen.cursors WHERE partition_id = $1 AND consumer_group = $2`, part.String(), group).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	rng := rand.New(rand.NewPCG(7, 9))
	for trial := range 60 {
		group := fmt.Sprintf("g%d", trial)
		leases := map[string]uuid.UUID{}
		for name, pid := range pids {
			leases[name] = uuid.Must(uuid.NewV7())
			res, err := b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Partition: pid,
				Candidates: []uuid.UUID{pid}, MaxParts: 1, Group: group, Batch: n, LeaseID: leases[name]}})
			if err != nil || res[0].Err != nil || len(res[0].Messages) != n {
				t.Fatalf("claim %s: %+v %v", name, res, err)
			}
			for i, m := range res[0].Messages {
				if want := fmt.Sprintf("%s-%d", name, i); m.TransactionID != want || m.Offset != int64(i+1) {
					t.Fatalf("claim %s: message %d is %s at offset %d, want %s at %d", name, i, m.TransactionID, m.Offset, want, i+1)
				}
			}
		}
		left := rng.Perm(n)
		for round := 0; round < 2 && len(left) > 0; round++ {
			k := len(left)
			if round == 0 {
				k = 1 + rng.IntN(len(left))
			}
			if runs && rng.IntN(2) == 0 {
				slices.Sort(left)
				rng.Shuffle(k, func(i, j int) { left[i], left[j] = left[j], left[i] })
			}
			batch := left[:k]
			left = left[k:]
			stale := runs && rng.IntN(4) == 0
			items := func(name string) []queengo.AckItem {
				lease := leases[name]
				if stale {
					lease = uuid.Must(uuid.NewV7())
				}
				var out []queengo.AckItem
				for _, off := range batch {
					it := queengo.AckItem{PartitionID: pids[name], TransactionID: fmt.Sprintf("%s-%d", name, off),
						Status: []string{"completed", "success"}[rng.IntN(2)], Group: group}
					mark(rng, &it, lease, int64(off+1))
					out = append(out, it)
				}
				return out
			}
			xs := items("x")
			ys := items("y")
			ys = append(ys, ys[rng.IntN(len(ys))])
			xr, err := b.s.Ack(ctx, xs)
			if err != nil {
				t.Fatal(err)
			}
			yr, err := b.s.Ack(ctx, ys)
			if err != nil {
				t.Fatal(err)
			}
			for i := range xr {
				a, b := xr[i], yr[i]
				a.Partition, b.Partition = "", ""
				if a != b {
					t.Fatalf("trial %d round %d, offsets %v, item %d: x %+v, the loop %+v", trial, round, batch, i, xr[i], yr[i])
				}
			}
			if cx, cy := cursor(pids["x"], group), cursor(pids["y"], group); cx != cy {
				t.Fatalf("trial %d round %d, offsets %v: x left %s, the loop %s", trial, round, batch, cx, cy)
			}
		}
	}
}

// TestExtendLeases_HintsOrAScanFindTheLease: an extension finds its lease's
// cursors from the hints of the broker that handed the lease out, or, with
// none, among every cursor; a hint is checked, so one that names a cursor
// not carrying the lease extends nothing.
func TestExtendLeases_HintsOrAScanFindTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, parts, lease := b.leasedPair(t)
	hints := []queengo.CursorKey{{Partition: parts[0], Group: queengo.QueueModeGroup},
		{Partition: parts[1], Group: queengo.QueueModeGroup}}
	for _, c := range []struct {
		name    string
		ext     queengo.LeaseExtend
		failure queengo.AckFailure
	}{
		{"hinted", queengo.LeaseExtend{Lease: lease, Seconds: 120, Cursors: hints}, ""},
		{"scanned", queengo.LeaseExtend{Lease: lease, Seconds: 180}, ""},
		{"a hint without the lease", queengo.LeaseExtend{Lease: lease, Seconds: 240,
			Cursors: []queengo.CursorKey{{Partition: parts[0], Group: "another"}}}, queengo.LeaseNotFound},
		{"unknown, scanned", queengo.LeaseExtend{Lease: uuid.New(), Seconds: 120}, queengo.LeaseNotFound},
	} {
		_, ext, err := b.s.AckExtend(ctx, nil, []queengo.LeaseExtend{c.ext})
		if err != nil || len(ext) != 1 || ext[0].Failure != c.failure || (c.failure == "") != (ext[0].ExpiresAt != "") {
			t.Fatalf("%s: %+v %v, want failure %q", c.name, ext, err, c.failure)
		}
	}
	db := b.conn(t)
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM queen.cursors
 WHERE partition_id = ANY ($1::uuid[]) AND lease_id = $2 AND lease_expires_at > now() + interval '170 seconds'
   AND lease_expires_at < now() + interval '190 seconds'`, []string{parts[0].String(), parts[1].String()}, lease.String()).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d cursors extended to 180 s (%v), want both and no more", n, err)
	}
}

// TestCursorUpdates_AreHOT: a claim or an ack changes a cursor's lease and
// offsets, and no index covers those columns (migration 007), so PostgreSQL
// updates the row in place of its page (HOT) without new index entries:
// half the WAL per consumed message.
func TestCursorUpdates_AreHOT(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	_, parts := b.namedQueue(t, "a")
	db := b.conn(t)
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	for _, stmt := range []string{
		`INSERT INTO queen.cursors (partition_id, consumer_group, committed) VALUES ($1, 'hot', 0)`,
		`UPDATE queen.cursors SET lease_id = gen_random_uuid(), lease_end = 1, lease_expires_at = now() + interval '1 minute',
        last_consumed_at = now() WHERE partition_id = $1 AND consumer_group = 'hot'`,
		`UPDATE queen.cursors SET committed = 1, lease_id = NULL, lease_end = NULL, lease_expires_at = NULL,
        total_consumed = total_consumed + 1 WHERE partition_id = $1 AND consumer_group = 'hot'`,
	} {
		if _, err := tx.Exec(ctx, stmt, parts[0].String()); err != nil {
			t.Fatal(err)
		}
	}
	var upd, hot int64
	if err := tx.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables
 WHERE relid = 'queen.cursors'::regclass`).Scan(&upd, &hot); err != nil {
		t.Fatal(err)
	}
	if upd != 2 || hot != 2 {
		t.Fatalf("%d of %d cursor updates were HOT, want both", hot, upd)
	}
}

// TestAck_AKnownOffsetSparesTheLookup: an item that carries the offset the
// broker delivered its message at is applied at that offset, without the
// lookup by transaction id, on the set path (completed); without the offset,
// or in the loop (failed), which looks every item up, the same item finds no
// message once its transaction id is gone.
func TestAck_AKnownOffsetSparesTheLookup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts, lease := b.leasedPair(t)
	db := b.conn(t)
	if _, err := db.Exec(ctx, `DELETE FROM queen.txids WHERE partition_id = ANY ($1::uuid[])`, []string{parts[0].String(), parts[1].String()}); err != nil {
		t.Fatal(err)
	}
	item := func(part uuid.UUID, txid, status string, off int64) queengo.AckItem {
		return queengo.AckItem{PartitionID: part, TransactionID: txid, Status: status, Group: queengo.QueueModeGroup,
			LeaseID: lease, Offset: off}
	}
	for _, c := range []struct {
		name string
		item queengo.AckItem
		want queengo.AckResult
	}{
		{"no offset", item(parts[0], "m-a", "completed", 0), queengo.AckResult{Failure: queengo.AckMessageNotFound}},
		{"set path", item(parts[0], "m-a", "completed", 1), queengo.AckResult{Success: true, LeaseReleased: true, Queue: q.Name, Partition: "a"}},
		{"loop", item(parts[1], "m-b", "failed", 1), queengo.AckResult{Failure: queengo.AckMessageNotFound}},
		{"set path, b", item(parts[1], "m-b", "completed", 1), queengo.AckResult{Success: true, LeaseReleased: true, Queue: q.Name, Partition: "b"}},
	} {
		res, err := b.s.Ack(ctx, []queengo.AckItem{c.item})
		if err != nil || len(res) != 1 || res[0] != c.want {
			t.Fatalf("%s: %+v %v, want %+v", c.name, res, err, c.want)
		}
	}
}

// TestAckSpans_ApplyOnlyARunRightAfterCommitted: queen.ack_spans applies a
// span (one cursor update) only when its run of offsets starts right after
// the cursor's committed offset, within the live lease it names; the lease
// ends with the run that reaches its end. It reports the spans it applied;
// the items of any other go through queen.ack in the same statement (each
// gets a row of its own), which is rolled back here so that each case
// meets the cursor as the previous span left it.
func TestAckSpans_ApplyOnlyARunRightAfterCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts := b.namedQueue(t, "a")
	b.append(t, segOf(parts[0], "m-2", "m-3", "m-4"))
	lease := uuid.Must(uuid.NewV7())
	res, err := b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: queengo.QueueModeGroup,
		Batch: 10, LeaseID: lease}})
	if err != nil || res[0].Err != nil || len(res[0].Messages) != 4 {
		t.Fatalf("claim: %+v %v", res, err)
	}
	db := b.conn(t)
	txids := []string{"m-a", "m-2", "m-3", "m-4", "m-5"} // by offset, from 1
	spans := func(lease uuid.UUID, first, last int64) string {
		t.Helper()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var out string
		if err := tx.QueryRow(ctx, `SELECT coalesce(string_agg(format('%s released=%s %s/%s', k, released, queue_name = $6,
       partition_name), ',') FILTER (WHERE k IS NOT NULL), 'none')
       || format(' items=%s', count(*) FILTER (WHERE idx IS NOT NULL))
  FROM queen.ack_spans($1::uuid[], $2::text[], $3::uuid[], $4::bigint[], $5::bigint[], '{}', '{}', $7::text[])`,
			[]string{parts[0].String()}, []string{queengo.QueueModeGroup}, []string{lease.String()},
			[]int64{first}, []int64{last}, q.Name, txids[first-1:last]).Scan(&out); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(out, "none") {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	cursor := func() string {
		var out string
		if err := db.QueryRow(ctx, `SELECT format('committed=%s lease_end=%s consumed=%s', committed, lease_end, total_consumed)
  FROM queen.cursors WHERE partition_id = $1`, parts[0].String()).Scan(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		name        string
		lease       uuid.UUID
		first, last int64
		want, after string
	}{
		{"a gap before the run", lease, 2, 3, "none items=2", "committed=0 lease_end=4 consumed=0"},
		{"another lease", uuid.Must(uuid.NewV7()), 1, 2, "none items=2", "committed=0 lease_end=4 consumed=0"},
		{"past the lease's end", lease, 1, 5, "none items=5", "committed=0 lease_end=4 consumed=0"},
		{"right after committed", lease, 1, 2, "1 released=f t/a items=0", "committed=2 lease_end=4 consumed=2"},
		{"to the lease's end", lease, 3, 4, "1 released=t t/a items=0", "committed=4 lease_end= consumed=4"},
		{"the lease ended", lease, 5, 5, "none items=1", "committed=4 lease_end= consumed=4"},
	} {
		if got := spans(c.lease, c.first, c.last); got != c.want {
			t.Fatalf("%s: ack_spans answered %s, want %s", c.name, got, c.want)
		}
		if got := cursor(); got != c.after {
			t.Fatalf("%s: cursor %s, want %s", c.name, got, c.after)
		}
	}
}

// TestAckSpans_TwoSpansOfOneCursorInOneCall: a shared ack commit may carry
// two requests' spans of one cursor. The one right after committed applies
// as a span; the other's items resolve through queen.ack in the same call,
// after it, so both end acked and the lease ends at its last offset.
func TestAckSpans_TwoSpansOfOneCursorInOneCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, parts := b.namedQueue(t, "a")
	b.append(t, segOf(parts[0], "t-2", "t-3", "t-4", "t-5"))
	lease := uuid.Must(uuid.NewV7())
	res, err := b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: queengo.QueueModeGroup,
		Batch: 10, LeaseID: lease}})
	if err != nil || res[0].Err != nil || len(res[0].Messages) != 5 {
		t.Fatalf("claim: %+v %v", res, err)
	}
	db := b.conn(t)
	part, group := parts[0].String(), queengo.QueueModeGroup
	var out string
	if err := db.QueryRow(ctx, `SELECT string_agg(format('%s/%s %s released=%s', k, idx, success, released), ',' ORDER BY k, idx)
  FROM queen.ack_spans($1::uuid[], $2::text[], $3::uuid[], $4::bigint[], $5::bigint[], $1::uuid[], $2::text[], $6::text[])`,
		[]string{part, part}, []string{group, group}, []string{lease.String(), lease.String()},
		[]int64{4, 1}, []int64{5, 3}, []string{"t-4", "t-5", "m-a", "t-2", "t-3"}).Scan(&out); err != nil {
		t.Fatal(err)
	}
	// Span 2 (offsets 1-3) applies; span 1 (4-5) is past committed when the
	// cursor is locked, so its items 1 and 2 go through queen.ack.
	if want := "2/ t released=f,/1 t released=f,/2 t released=t"; out != want {
		t.Fatalf("ack_spans answered %s, want %s", out, want)
	}
	var committed int64
	var leased bool
	if err := db.QueryRow(ctx, `SELECT committed, lease_id IS NOT NULL FROM queen.cursors WHERE partition_id = $1`, part).
		Scan(&committed, &leased); err != nil {
		t.Fatal(err)
	}
	if committed != 5 || leased {
		t.Fatalf("cursor committed=%d leased=%v, want 5 and no lease", committed, leased)
	}
}

// TestAck_BatchesConsumedCountsResolvedSpans: a cursor's batches_consumed
// counts the spans its claims handed out that ended resolved, whichever
// path of the ack resolved them (set, item loop, span) and whether the
// last message was acked or dead-lettered, and the auto-acked claims; a
// span a failure hands back, and acks that leave part of it, count nothing.
func TestAck_BatchesConsumedCountsResolvedSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	var txids []string
	for k := range 12 {
		txids = append(txids, fmt.Sprintf("m-%d", k))
	}
	q, ids := b.queue(t, []string{"p"}, [][]string{txids})
	db := b.conn(t)
	if _, err := db.Exec(ctx, `UPDATE queen.queues SET retry_limit = 0 WHERE id = $1`, q.ID); err != nil {
		t.Fatal(err)
	}
	const group = "g"
	claim := func(batch int, autoAck bool) (uuid.UUID, []queengo.Message) {
		t.Helper()
		lease := uuid.Must(uuid.NewV7())
		res, err := b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: group, Batch: batch,
			LeaseID: lease, AutoAck: autoAck}})
		if err != nil || res[0].Err != nil || len(res[0].Messages) != batch {
			t.Fatalf("claim: %+v %v", res, err)
		}
		return lease, res[0].Messages
	}
	ack := func(lease uuid.UUID, status string, span bool, ms ...queengo.Message) {
		t.Helper()
		var items []queengo.AckItem
		for _, m := range ms {
			it := queengo.AckItem{PartitionID: ids[0], TransactionID: m.TransactionID, Status: status, Group: group,
				LeaseID: lease}
			if span {
				it.Offset = m.Offset
			}
			items = append(items, it)
		}
		if _, err := b.s.Ack(ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	batches := func(what string, want int64) {
		t.Helper()
		var n int64
		if err := db.QueryRow(ctx, `SELECT batches_consumed FROM queen.cursors WHERE partition_id = $1 AND consumer_group = $2`,
			ids[0], group).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Fatalf("%s: %d batches consumed, want %d", what, n, want)
		}
	}
	lease, ms := claim(3, false)
	ack(lease, "completed", false, ms[:2]...)
	batches("two of three acked", 0)
	ack(lease, "completed", false, ms[2])
	batches("the last one acked (set path)", 1)
	lease, ms = claim(2, false)
	ack(lease, "completed", false, ms[0], ms[1], ms[1]) // a repeat sends it through the item loop
	batches("the item loop", 2)
	lease, ms = claim(2, false)
	ack(lease, "completed", true, ms...)
	batches("a span", 3)
	lease, ms = claim(2, false)
	ack(lease, "completed", false, ms[0])
	ack(lease, "failed", false, ms[1]) // retryLimit 0: dead-lettered
	batches("the last one dead-lettered", 4)
	claim(2, true)
	batches("an auto-acked claim", 5)
	if _, err := db.Exec(ctx, `UPDATE queen.queues SET retry_limit = 3 WHERE id = $1`, q.ID); err != nil {
		t.Fatal(err)
	}
	lease, ms = claim(1, false)
	ack(lease, "failed", false, ms[0])
	batches("a failure that hands the span back", 5)
}
