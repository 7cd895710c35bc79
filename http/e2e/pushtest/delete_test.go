package pushtest

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// rowsOf counts, by ids taken before a delete, what is left of a queue in
// every table that hangs off it.
type leftovers struct {
	Queues, Partitions, Segments, Txids, Cursors int64
}

func rowsOf(t testing.TB, queueID string) leftovers {
	t.Helper()
	var l leftovers
	err := e2e.DB.QueryRow(`WITH p AS (SELECT id FROM queen.partitions WHERE queue_id = $1::uuid)
SELECT (SELECT count(*) FROM queen.queues WHERE id = $1::uuid), (SELECT count(*) FROM p),
 (SELECT count(*) FROM queen.segments WHERE partition_id IN (SELECT id FROM p)),
 (SELECT count(*) FROM queen.txids WHERE partition_id IN (SELECT id FROM p)),
 (SELECT count(*) FROM queen.cursors WHERE partition_id IN (SELECT id FROM p))`, []any{queueID},
		&l.Queues, &l.Partitions, &l.Segments, &l.Txids, &l.Cursors)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// orphans counts, in every table of schema queen that has a partition_id
// (or queue_id) column, the rows that still reference the given partitions
// (or queues): the cascade must leave none. The tables are found in the
// catalogue, so tables added later are checked too.
func orphans(t testing.TB, partitionIDs, queueIDs []string) int64 {
	t.Helper()
	var n int64
	err := e2e.DB.QueryRow(`SELECT coalesce(sum((xpath('/row/c/text()', query_to_xml(format(
    'SELECT count(*) AS c FROM %I.%I WHERE %I::text = ANY(%L::text[])', c.table_schema, c.table_name, c.column_name,
    CASE c.column_name WHEN 'partition_id' THEN $1::text[]::text ELSE $2::text[]::text END), false, true, '')))[1]::text::bigint), 0)::bigint
FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name)
WHERE c.table_schema = 'queen' AND t.table_type = 'BASE TABLE'
  AND (c.column_name = 'partition_id' OR (c.column_name = 'queue_id' AND c.table_name <> 'partitions'))`,
		[]any{partitionIDs, queueIDs}, &n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func partitionIDs(t testing.TB, queueID string) []string {
	t.Helper()
	var ids []string
	if err := e2e.DB.QueryRow(`SELECT coalesce(array_agg(id::text), '{}') FROM queen.partitions WHERE queue_id = $1::uuid`,
		[]any{queueID}, &ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

// fill pushes to two partitions and pops in queue mode and as a group, so
// the queue has partitions, segments, txids and cursors.
func fill(t testing.TB, s *e2e.Server, q string) (queueID string) {
	t.Helper()
	s.Push(t, e2e.PushItem{Queue: q, TransactionID: "a", Payload: 1},
		e2e.PushItem{Queue: q, Partition: "p2", TransactionID: "b", Payload: 2})
	s.Push(t, e2e.PushItem{Queue: q, TransactionID: "c", Payload: 3})
	s.PopOK(t, "/api/v1/pop/queue/"+q+"?batch=10")
	s.Pop(t, "/api/v1/pop/queue/"+q+"/partition/p2?consumerGroup=g1&subscriptionMode=all")
	queueID = e2e.ReadQueue(t, q).ID
	l := rowsOf(t, queueID)
	if l.Queues != 1 || l.Partitions != 2 || l.Segments != 3 || l.Txids != 3 || l.Cursors < 2 {
		t.Fatalf("before delete: %+v, want 1 queue, 2 partitions, 3 segments, 3 txids, >= 2 cursors", l)
	}
	return queueID
}

// docs/api-admin.md "Resources", Q-10: DELETE /api/v1/resources/queues/:queue answers
// {"deleted":true,"queue":q,"existed":true} and removes the queue with its
// partitions, segments, txids and cursors; an unknown queue answers
// existed:false; a push afterwards recreates the queue from scratch.
func TestQ10_DeleteQueueCascades(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "del")
	queueID := fill(t, s, q)
	parts := partitionIDs(t, queueID)
	// The catalogue-driven count sees the rows while they exist (3
	// segments, 3 txids, 2 or more cursors).
	if n := orphans(t, parts, []string{queueID}); n < 8 {
		t.Fatalf("before delete the queue's partitions are referenced by %d rows, want at least 8", n)
	}

	r := s.Delete(t, "/api/v1/resources/queues/"+q)
	var body map[string]any
	r.JSON(t, &body)
	if want := map[string]any{"deleted": true, "queue": q, "existed": true}; r.Status != 200 || !reflect.DeepEqual(body, want) {
		t.Fatalf("delete: %d %s, want 200 %v", r.Status, r.Body, want)
	}
	if l := rowsOf(t, queueID); l != (leftovers{}) {
		t.Fatalf("after delete: %+v, want nothing", l)
	}
	if n := orphans(t, parts, []string{queueID}); n != 0 {
		t.Fatalf("%d rows still reference the deleted queue or its partitions", n)
	}

	// Again: it no longer exists.
	r = s.Delete(t, "/api/v1/resources/queues/"+q)
	body = nil
	r.JSON(t, &body)
	if want := map[string]any{"deleted": true, "queue": q, "existed": false}; r.Status != 200 || !reflect.DeepEqual(body, want) {
		t.Fatalf("second delete: %d %s, want 200 %v", r.Status, r.Body, want)
	}

	// A push recreates it: a new id, offsets from 1, the old transaction id
	// is no longer a duplicate, the implicit defaults again.
	res := s.Push(t, e2e.PushItem{Queue: q, TransactionID: "a", Payload: "again"})
	if res[0].Status != "queued" {
		t.Fatalf("push after delete: %+v", res[0])
	}
	row := e2e.ReadQueue(t, q)
	if row.ID == queueID || row.LeaseTime != 60 {
		t.Fatalf("recreated queue %+v (old id %s)", row, queueID)
	}
	if c := e2e.QueueCounts(t, q); c != (e2e.Counts{Queues: 1, Partitions: 1, Segments: 1, Txids: 1, Heads: 1}) {
		t.Fatalf("recreated queue counts %+v", c)
	}
	msgs := popAll(t, s, q, 10)
	if len(msgs) != 1 || compact(t, msgs[0].RawData) != `"again"` {
		t.Fatalf("pop after recreate: %+v", msgs)
	}
}

// docs/api-admin.md "Resources": deleting a queue that never existed answers existed:false and
// creates nothing.
func TestQ10_DeleteUnknownQueue(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "del-unknown")
	r := s.Delete(t, "/api/v1/resources/queues/"+q)
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil || r.Status != 200 ||
		!reflect.DeepEqual(body, map[string]any{"deleted": true, "queue": q, "existed": false}) {
		t.Fatalf("delete unknown: %d %s", r.Status, r.Body)
	}
	if c := e2e.QueueCounts(t, q); c != (e2e.Counts{}) {
		t.Fatalf("delete of an unknown queue wrote %+v", c)
	}
}

// Issue 2, schema: everything hangs off queen.queues with ON DELETE CASCADE,
// so DELETE FROM queen.queues WHERE name LIKE 'x-%' in SQL removes those
// queues and all their data, and nothing of other queues; the broker then
// recreates a deleted queue on the next push.
func TestSchema_SQLDeleteCascades(t *testing.T) {
	t.Parallel()
	s := shared(t)
	// Only this test names queues x-<pid>-<n>..., so the prefix below is
	// this test's own.
	prefix := e2e.Unique(t, "x")
	qa, qb, keep := prefix+"-a", prefix+"-b", e2e.Unique(t, "keep")
	ida, idb := fill(t, s, qa), fill(t, s, qb)
	parts := append(partitionIDs(t, ida), partitionIDs(t, idb)...)
	s.Push(t, e2e.PushItem{Queue: keep, Payload: 1})
	keepBefore := e2e.QueueCounts(t, keep)

	if err := e2e.DB.Exec(`DELETE FROM queen.queues WHERE name LIKE $1`, prefix+"-%"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{ida, idb} {
		if l := rowsOf(t, id); l != (leftovers{}) {
			t.Fatalf("after SQL delete: %+v", l)
		}
	}
	if n := orphans(t, parts, []string{ida, idb}); n != 0 {
		t.Fatalf("%d rows still reference the deleted queues or their partitions", n)
	}
	if c := e2e.QueueCounts(t, keep); c != keepBefore {
		t.Fatalf("unrelated queue changed: %+v, was %+v", c, keepBefore)
	}
	// The broker notices on the next push: it recreates queue and partition
	// (its cached partition id is gone) and starts again at offset 1.
	res := s.Push(t, e2e.PushItem{Queue: qa, TransactionID: "a", Payload: "back"},
		e2e.PushItem{Queue: qa, Partition: "p2", TransactionID: "b", Payload: "back2"})
	for i, r := range res {
		if r.Status != "queued" {
			t.Fatalf("push %d after SQL delete: %+v", i, r)
		}
	}
	if c := e2e.QueueCounts(t, qa); c != (e2e.Counts{Queues: 1, Partitions: 2, Segments: 2, Txids: 2, Heads: 2}) {
		t.Fatalf("recreated queue counts %+v", c)
	}
	if msgs := popAll(t, s, qa, 10); len(msgs) != 2 {
		t.Fatalf("pop after recreate: %+v", msgs)
	}
}

// Q-10 with two broker processes on one database: a queue deleted through
// one process and created again by a push there is served by the other at
// once, on the queue route and the single-partition route, though the
// other's queue actor had read the old queue and its partition: the process
// that deleted it announces the change (NOTIFY), and the other reads the row
// again. (Its own database: the listener count below is per database.)
func TestQ10_DeletedAndCreatedAgainByAnotherProcess(t *testing.T) {
	t.Parallel()
	// What the announcement allows; a lost one is made good after about 10 s
	// (an empty pop reads the row again), which this bound tells apart.
	const within = 5 * time.Second
	db := e2e.CreateDB(t, "del2proc")
	a := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL})
	b := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL})
	e2e.WaitListeners(t, db, 2)
	q := e2e.Unique(t, "del-2proc")
	a.PushN(t, q, "p", 2)
	a.PopOK(t, e2e.PopQueue(q, "batch", "1", "autoAck", "true"))
	a.PopOK(t, e2e.PopPartition(q, "p", "batch", "1", "autoAck", "true"))
	queueID := func() (id string) {
		t.Helper()
		if err := db.QueryRow(`SELECT id::text FROM queen.queues WHERE name = $1`, []any{q}, &id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	old := queueID()

	if r := b.Delete(t, "/api/v1/resources/queues/"+q); r.Status != 200 {
		t.Fatalf("delete through the other process: %d %s", r.Status, r.Body)
	}
	for _, path := range []string{
		e2e.PopQueue(q, "batch", "10", "autoAck", "true"),
		e2e.PopPartition(q, "p", "batch", "10", "autoAck", "true"),
	} {
		txs := b.PushN(t, q, "p", 1).TxIDs()
		pushed := time.Now()
		p := a.PopUntil(t, path, 15*time.Second, 50*time.Millisecond)
		took := time.Since(pushed)
		e2e.WantTxIDs(t, path, p, txs)
		t.Logf("%s: delivered %v after the other process pushed", path, took)
		if took > within {
			t.Fatalf("%s: delivered %v after the other process pushed, want within %v (announcement lost?)", path, took, within)
		}
	}
	if queueID() == old {
		t.Fatal("the queue kept its id: it was not deleted and created again")
	}
}
