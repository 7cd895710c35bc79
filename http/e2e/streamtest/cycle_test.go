package streamtest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 42 "all or nothing": a committed cycle applies its state ops,
// stores its sink pushes and moves the source cursor together; a cycle that
// fails anywhere inside the transaction (a sink push refused, an ack that
// does not match) changes no state, stores no sink message and moves no
// cursor.
func TestCycle_AllOrNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	src, sink, full := e2e.Unique(t, "aon-src"), e2e.Unique(t, "aon-sink"), e2e.Unique(t, "aon-full")
	s.Configure(t, full, map[string]any{"maxSize": 1})
	s.PushN(t, full, "p", 1)
	s.PushN(t, src, "p", 3)
	q := register(t, s, e2e.Unique(t, "aon-q"), src, sink)
	group := "streams-aon"
	p := s.PopOK(t, e2e.PopQueue(src, "consumerGroup", group, "batch", "3", "wait", "false"))
	pid := p.Messages[0].PartitionID
	ops := []map[string]any{{"type": "upsert", "key": "sum", "value": map[string]any{"n": 3}}}

	// A sink push refused (its queue is full) after the state op ran.
	body := cycleBody(q, p, group, sink, ops)
	body["push_items"] = append(body["push_items"].([]map[string]any), map[string]any{"queue": full, "partition": "p", "payload": 1})
	wantCycleRefused(t, s.Post(t, "/streams/v1/cycle", body), http.StatusConflict, "")
	// An ack that does not match: a transaction id the partition lacks.
	body = cycleBody(q, p, group, sink, ops)
	body["ack"].(map[string]any)["transactionId"] = "no-such-message"
	wantCycleRefused(t, s.Post(t, "/streams/v1/cycle", body), http.StatusConflict, "Message not found")
	for what, got := range map[string]int64{"state rows": int64(len(state(t, s, q, pid))), "sink messages": sinkCount(t, sink),
		"committed": committed(t, pid, group)} {
		if got != 0 {
			t.Fatalf("after refused cycles: %s = %d, want 0", what, got)
		}
	}

	// The same cycle, correct, commits all three.
	r := s.Post(t, "/streams/v1/cycle", cycleBody(q, p, group, sink, ops))
	if r.Status != 200 {
		t.Fatalf("cycle: %d %s", r.Status, r.Body)
	}
	var a struct {
		Success         bool              `json:"success"`
		QueryID         string            `json:"query_id"`
		PartitionID     string            `json:"partition_id"`
		StateOpsApplied int               `json:"state_ops_applied"`
		PushResults     []json.RawMessage `json:"push_results"`
		AckResult       struct {
			Success       bool `json:"success"`
			Count         int  `json:"count"`
			LeaseReleased bool `json:"lease_released"`
		} `json:"ack_result"`
	}
	r.JSON(t, &a)
	if !a.Success || a.QueryID != q || a.PartitionID != pid || a.StateOpsApplied != 1 || len(a.PushResults) != 3 ||
		!a.AckResult.Success || a.AckResult.Count != 3 || !a.AckResult.LeaseReleased {
		t.Fatalf("cycle answer: %s", r.Body)
	}
	if got := string(state(t, s, q, pid)["sum"]); got != `{"n": 3}` && got != `{"n":3}` {
		t.Fatalf("state sum = %s", got)
	}
	if n, c := sinkCount(t, sink), committed(t, pid, group); n != 3 || c != 3 {
		t.Fatalf("after the cycle: sink %d, committed %d; want 3 and 3", n, c)
	}
}

// Issue 42 "stale or foreign lease": a cycle whose lease has ended, or was
// taken by another worker since, applies nothing and says so; the current
// lease holder's cycle commits.
func TestCycle_StaleOrForeignLeaseAppliesNothingAndSaysSo(t *testing.T) {
	t.Parallel()
	s := shared(t)
	src, sink := e2e.Unique(t, "lease-src"), e2e.Unique(t, "lease-sink")
	s.Configure(t, src, map[string]any{"leaseTime": 1})
	s.PushN(t, src, "p", 2)
	q := register(t, s, e2e.Unique(t, "lease-q"), src, sink)
	group := "streams-lease"
	pop := e2e.PopQueue(src, "consumerGroup", group, "batch", "2", "wait", "false")
	first := s.PopOK(t, pop)
	pid := first.Messages[0].PartitionID
	ops := []map[string]any{{"type": "upsert", "key": "k", "value": 1}}

	// The lease ends: its cycle is refused.
	time.Sleep(1200 * time.Millisecond)
	wantCycleRefused(t, s.Post(t, "/streams/v1/cycle", cycleBody(q, first, group, sink, ops)), http.StatusConflict, "lease")
	// Another worker takes the batch: the first worker's cycle is still refused.
	second := s.PopUntil(t, pop, 5*time.Second, 100*time.Millisecond)
	if second.Messages[0].LeaseID == first.Messages[0].LeaseID {
		t.Fatalf("the redelivery carries the old lease %s", second.Messages[0].LeaseID)
	}
	wantCycleRefused(t, s.Post(t, "/streams/v1/cycle", cycleBody(q, first, group, sink, ops)), http.StatusConflict, "lease")
	if n, rows, c := sinkCount(t, sink), len(state(t, s, q, pid)), committed(t, pid, group); n != 0 || rows != 0 || c != 0 {
		t.Fatalf("after refused cycles: sink %d, state rows %d, committed %d; want 0", n, rows, c)
	}
	// The holder's cycle commits.
	if r := s.Post(t, "/streams/v1/cycle", cycleBody(q, second, group, sink, ops)); r.Status != 200 {
		t.Fatalf("the lease holder's cycle: %d %s", r.Status, r.Body)
	}
	if n, rows, c := sinkCount(t, sink), len(state(t, s, q, pid)), committed(t, pid, group); n != 2 || rows != 1 || c != 2 {
		t.Fatalf("after the holder's cycle: sink %d, state rows %d, committed %d; want 2, 1, 2", n, rows, c)
	}
}

// Issue 42 "release_lease:false": the ordered partial ack moves the cursor
// to the acked message and keeps the lease on the rest, which comes back,
// in order, once the lease expires.
func TestCycle_PartialAckKeepsTheLeaseOnTheRest(t *testing.T) {
	t.Parallel()
	s := shared(t)
	src, sink := e2e.Unique(t, "gate-src"), e2e.Unique(t, "gate-sink")
	s.Configure(t, src, map[string]any{"leaseTime": 1})
	pushed := s.PushN(t, src, "p", 4)
	q := register(t, s, e2e.Unique(t, "gate-q"), src, sink)
	group := "streams-gate"
	pop := e2e.PopQueue(src, "consumerGroup", group, "batch", "4", "wait", "false")
	p := s.PopOK(t, pop)
	pid := p.Messages[0].PartitionID
	allowed := *p
	allowed.Messages = p.Messages[:2]
	body := cycleBody(q, &allowed, group, sink, nil)
	body["release_lease"] = false
	if r := s.Post(t, "/streams/v1/cycle", body); r.Status != 200 || !strings.Contains(string(r.Body), `"lease_released":false`) {
		t.Fatalf("partial cycle: %d %s", r.Status, r.Body)
	}
	c := e2e.ReadCursor(t, pid, group)
	if c.Committed != 2 || !c.Live {
		t.Fatalf("after the partial ack: committed %d live %v; want 2 and a live lease", c.Committed, c.Live)
	}
	s.PopEmpty(t, pop)
	again := s.PopUntil(t, pop, 5*time.Second, 100*time.Millisecond)
	e2e.WantTxIDs(t, "the rest after the lease", again, pushed.TxIDs()[2:])
}

// Issue 42 "concurrent cycles serialize": cycles of one (query, partition)
// run one after the other, so of two cycles acking the same batch one
// commits and the other is refused, and the sink holds one copy; a cycle
// of the same query on another partition does not wait for them.
func TestCycle_SamePartitionSerializesOtherPartitionsDoNotBlock(t *testing.T) {
	t.Parallel()
	s := shared(t)
	src, sink := e2e.Unique(t, "ser-src"), e2e.Unique(t, "ser-sink")
	s.PushN(t, src, "a", 5)
	s.PushN(t, src, "b", 5)
	q := register(t, s, e2e.Unique(t, "ser-q"), src, sink)
	group := "streams-ser"
	pa := s.PopOK(t, e2e.PopPartition(src, "a", "consumerGroup", group, "batch", "5", "wait", "false"))
	pb := s.PopOK(t, e2e.PopPartition(src, "b", "consumerGroup", group, "batch", "5", "wait", "false"))
	pidA := pa.Messages[0].PartitionID

	// Hold the serialisation point of (q, a) (queen.streams_begin).
	release, err := e2e.DB.Hold(`SELECT pg_advisory_xact_lock(x'7173'::integer, hashtext($1::text || $2::text))`, q, pidA)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.DoCtx(t.Context(), "POST", "/streams/v1/cycle", cycleBody(q, pa, group, sink,
				[]map[string]any{{"type": "upsert", "key": "k", "value": i}}))
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = r.Status
		}()
	}
	// Partition b commits while a's cycles wait.
	start := time.Now()
	if r := s.Post(t, "/streams/v1/cycle", cycleBody(q, pb, group, sink, nil)); r.Status != 200 {
		t.Fatalf("cycle on b: %d %s", r.Status, r.Body)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the cycle on b took %v behind a's", d)
	}
	if n := sinkCount(t, sink); n != 5 {
		t.Fatalf("sink holds %d while a's cycles wait, want b's 5", n)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	ok, refused := 0, 0
	for _, st := range statuses {
		switch st {
		case 200:
			ok++
		case http.StatusConflict:
			refused++
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("two cycles acking one batch answered %v, want one 200 and one 409", statuses)
	}
	if n := sinkCount(t, sink); n != 10 {
		t.Fatalf("sink holds %d, want 10 (one copy of a's 5 and b's 5)", n)
	}
}

// Issue 42 "bad input": a JSON 4xx naming the field (missing or malformed
// ids, an unknown op type, an oversized state value), never a 500 and never
// a database error text.
func TestStreams_BadInputIsA4xxNamingTheField(t *testing.T) {
	t.Parallel()
	s := shared(t)
	src := e2e.Unique(t, "bad-src")
	s.PushN(t, src, "p", 1)
	q := register(t, s, e2e.Unique(t, "bad-q"), src, "")
	pid := e2e.PartitionID(t, src, "p")
	big := strings.Repeat("x", 1<<20)
	for _, c := range []struct {
		path   string
		body   any
		status int
		field  string
	}{
		{"/streams/v1/queries", map[string]any{"source_queue": src, "config_hash": "h"}, 400, "name"},
		{"/streams/v1/queries", map[string]any{"name": "n", "config_hash": "h"}, 400, "source_queue"},
		{"/streams/v1/queries", map[string]any{"name": "n", "source_queue": src}, 400, "config_hash"},
		{"/streams/v1/queries", map[string]any{"name": 5, "source_queue": src, "config_hash": "h"}, 400, "name"},
		{"/streams/v1/queries", map[string]any{"name": "n", "source_queue": src, "config_hash": "h", "reset": "yes"}, 400, "reset"},
		{"/streams/v1/queries", []any{1}, 400, "object"},
		{"/streams/v1/state/get", map[string]any{"partition_id": pid}, 400, "query_id"},
		{"/streams/v1/state/get", map[string]any{"query_id": "nope", "partition_id": pid}, 400, "query_id"},
		{"/streams/v1/state/get", map[string]any{"query_id": q, "partition_id": 7}, 400, "partition_id"},
		{"/streams/v1/state/get", map[string]any{"query_id": q, "partition_id": pid, "keys": []any{1}}, 400, "keys[0]"},
		{"/streams/v1/cycle", map[string]any{"partition_id": pid}, 400, "query_id"},
		{"/streams/v1/cycle", map[string]any{"query_id": q}, 400, "partition_id"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": "x-y"}, 400, "partition_id"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid,
			"state_ops": []any{map[string]any{"type": "merge", "key": "k"}}}, 400, "state_ops[0].type"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid,
			"state_ops": []any{map[string]any{"type": "upsert"}}}, 400, "state_ops[0].key"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid,
			"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": big}}}, 413, "state_ops[0].value"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid,
			"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": "a\u0000b"}}}, 400, "state_ops[0].value"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid, "state_ops": "x"}, 400, "state_ops"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid, "push_items": []any{map[string]any{"payload": 1}}}, 400, "push_items[0]"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid, "ack": map[string]any{"leaseId": uuid.NewString()}}, 400, "ack.transactionId"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid, "ack": map[string]any{"transactionId": "t", "leaseId": "l"}}, 400, "ack.leaseId"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid, "ack": map[string]any{"transactionId": "t", "status": "maybe"}}, 400, "ack.status"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid, "release_lease": "no"}, 400, "release_lease"},
		// Well-formed ids nothing has: 404 naming what is missing.
		{"/streams/v1/cycle", map[string]any{"query_id": uuid.NewString(), "partition_id": pid}, 404, "query"},
		{"/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": uuid.NewString()}, 404, "partition"},
	} {
		r := s.Post(t, c.path, c.body)
		msg := e2e.WantError(t, r, c.status, c.field)
		if strings.Contains(strings.ToLower(msg), "sqlstate") || strings.Contains(strings.ToLower(msg), "database") {
			t.Errorf("%s %v: the error shows the database: %q", c.path, c.body, msg)
		}
	}
	// Nothing of the refused cycles reached the state.
	if rows := state(t, s, q, pid); len(rows) != 0 {
		t.Fatalf("state after refused cycles: %v", rows)
	}
}

// Issue 42 "register": the same name and hash answer the same query_id with
// fresh:false; a changed hash is 409 naming reset; reset:true wipes the
// state and takes the new hash.
func TestStreams_RegisterIsIdempotentAndAChangedHashNeedsReset(t *testing.T) {
	t.Parallel()
	s := shared(t)
	src, name := e2e.Unique(t, "reg-src"), e2e.Unique(t, "reg-q")
	s.PushN(t, src, "p", 1)
	reg := func(hash string, reset bool) (*e2e.Response, map[string]any) {
		r := s.Post(t, "/streams/v1/queries", map[string]any{"name": name, "source_queue": src, "config_hash": hash, "reset": reset})
		var a map[string]any
		r.JSON(t, &a)
		return r, a
	}
	r, a := reg("h1", false)
	if r.Status != 200 || a["fresh"] != true || a["reset"] != false || a["name"] != name || a["config_hash"] != "h1" {
		t.Fatalf("first registration: %d %s", r.Status, r.Body)
	}
	q := a["query_id"].(string)
	pid := e2e.PartitionID(t, src, "p")
	if r := s.Post(t, "/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid,
		"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}}}); r.Status != 200 {
		t.Fatalf("cycle: %d %s", r.Status, r.Body)
	}
	if r, a := reg("h1", false); r.Status != 200 || a["fresh"] != false || a["query_id"] != q {
		t.Fatalf("same hash: %d %s", r.Status, r.Body)
	}
	r, _ = reg("h2", false)
	wantCycleRefused(t, r, http.StatusConflict, "reset")
	if len(state(t, s, q, pid)) != 1 {
		t.Fatal("a refused registration touched the state")
	}
	if r, a := reg("h2", true); r.Status != 200 || a["reset"] != true || a["query_id"] != q {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	if rows := state(t, s, q, pid); len(rows) != 0 {
		t.Fatalf("state after reset: %v", rows)
	}
}

// Issue 42 "retention": deleting the consumer group a query's cycles ack
// with deletes the state it built from that group's partitions (the group
// starts over from the beginning, and so must the state); deleting the
// source queue deletes the state of its partitions and keeps the query.
func TestStreams_DeletingTheGroupOrTheSourceQueueDeletesTheirState(t *testing.T) {
	t.Parallel()
	s := shared(t)
	run := func(src, group string) (query, pid string) {
		s.PushN(t, src, "p", 2)
		query = register(t, s, e2e.Unique(t, "ret-q"), src, "")
		p := s.PopOK(t, e2e.PopQueue(src, "consumerGroup", group, "batch", "2", "wait", "false"))
		body := cycleBody(query, p, group, "", []map[string]any{{"type": "upsert", "key": "k", "value": 2}})
		delete(body, "push_items")
		if r := s.Post(t, "/streams/v1/cycle", body); r.Status != 200 {
			t.Fatalf("cycle: %d %s", r.Status, r.Body)
		}
		pid = p.Messages[0].PartitionID
		if len(state(t, s, query, pid)) != 1 {
			t.Fatal("the cycle wrote no state")
		}
		return query, pid
	}

	src, group := e2e.Unique(t, "ret-src"), e2e.Unique(t, "ret-group")
	q, pid := run(src, group)
	if r := s.Delete(t, "/api/v1/consumer-groups/"+group); r.Status != 200 {
		t.Fatalf("group delete: %d %s", r.Status, r.Body)
	}
	if rows := state(t, s, q, pid); len(rows) != 0 {
		t.Fatalf("state after the group's delete: %v", rows)
	}

	src2 := e2e.Unique(t, "ret-src")
	q2, pid2 := run(src2, e2e.Unique(t, "ret-group"))
	if r := s.Delete(t, "/api/v1/resources/queues/"+src2); r.Status != 200 {
		t.Fatalf("queue delete: %d %s", r.Status, r.Body)
	}
	if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen_streams.state WHERE query_id = $1`, q2); n != 0 {
		t.Fatalf("%d state rows of the deleted source queue's partition %s remain", n, pid2)
	}
	if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen_streams.queries WHERE id = $1`, q2); n != 1 {
		t.Fatal("the query went with its source queue")
	}
}

// Issue 42 "operators": GET /api/v1/streams lists the queries with source,
// sink, group, lag and state size, GET /api/v1/streams/:name shows one per
// source partition, POST /api/v1/streams/:name/reset deletes its state and
// keeps it registered; /metrics/prometheus counts cycles committed and
// refused.
func TestStreams_OperatorsSeeQueriesAndCycleCounters(t *testing.T) {
	t.Parallel()
	s := shared(t)
	counter := func(result string) float64 {
		v, _ := e2e.PromValue(s.Get(t, "/metrics/prometheus").Body, "queengo_stream_cycles_total", `result="`+result+`"`)
		return v
	}
	committed0, refused0 := counter("committed"), counter("refused")
	src, sink, name := e2e.Unique(t, "op-src"), e2e.Unique(t, "op-sink"), e2e.Unique(t, "op-q")
	s.PushN(t, src, "p", 3)
	q := register(t, s, name, src, sink)
	group := "streams-op"
	p := s.PopOK(t, e2e.PopQueue(src, "consumerGroup", group, "batch", "2", "wait", "false"))
	pid := p.Messages[0].PartitionID
	if r := s.Post(t, "/streams/v1/cycle", cycleBody(q, p, group, sink, []map[string]any{
		{"type": "upsert", "key": "a", "value": 1}, {"type": "upsert", "key": "b", "value": 2}})); r.Status != 200 {
		t.Fatalf("cycle: %d %s", r.Status, r.Body)
	}
	wantCycleRefused(t, s.Post(t, "/streams/v1/cycle", cycleBody(q, p, group, sink, nil)), http.StatusConflict, "lease")
	if c, r := counter("committed"), counter("refused"); c < committed0+1 || r < refused0+1 {
		t.Fatalf("cycle counters: committed %v -> %v, refused %v -> %v", committed0, c, refused0, r)
	}

	var list struct {
		Queries []map[string]any `json:"queries"`
	}
	s.Get(t, "/api/v1/streams").JSON(t, &list)
	var entry map[string]any
	for _, e := range list.Queries {
		if e["name"] == name {
			entry = e
		}
	}
	if entry == nil || entry["id"] != q || entry["sourceQueue"] != src || entry["sinkQueue"] != sink ||
		entry["consumerGroup"] != group || entry["stateRows"] != 2.0 || entry["statePartitions"] != 1.0 || entry["lag"] != 1.0 {
		t.Fatalf("the list's entry: %v", entry)
	}
	var show struct {
		Name       string `json:"name"`
		Partitions []struct {
			PartitionID string `json:"partitionId"`
			StateRows   int64  `json:"stateRows"`
			Lag         int64  `json:"lag"`
		} `json:"partitions"`
	}
	r := s.Get(t, "/api/v1/streams/"+name)
	r.JSON(t, &show)
	if show.Name != name || len(show.Partitions) != 1 || show.Partitions[0].PartitionID != pid ||
		show.Partitions[0].StateRows != 2 || show.Partitions[0].Lag != 1 {
		t.Fatalf("show: %s", r.Body)
	}
	e2e.WantError(t, s.Get(t, "/api/v1/streams/no-such-query"), 404, "not found")
	r = s.Post(t, "/api/v1/streams/"+name+"/reset", nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"deletedRows":2`) {
		t.Fatalf("reset: %d %s", r.Status, r.Body)
	}
	if rows := state(t, s, q, pid); len(rows) != 0 {
		t.Fatalf("state after reset: %v", rows)
	}
	if got := register(t, s, name, src, sink); got != q {
		t.Fatalf("after reset the query is %s, want %s still", got, q)
	}
}

// Issue 42 "all or nothing", the runtimes' idle window flush: a cycle
// without an ack emits the windows whose state it read and deletes them;
// when another cycle deleted one of those rows since (it emitted that
// window first), the flush is refused whole, so the window reaches the sink
// once.
func TestCycle_AFlushOfAWindowAnotherCycleClosedIsRefused(t *testing.T) {
	t.Parallel()
	s := shared(t)
	src, sink := e2e.Unique(t, "flush-src"), e2e.Unique(t, "flush-sink")
	s.PushN(t, src, "p", 1)
	q := register(t, s, e2e.Unique(t, "flush-q"), src, sink)
	pid := e2e.PartitionID(t, src, "p")
	cycle := func(ops ...map[string]any) *e2e.Response {
		return s.Post(t, "/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid, "state_ops": ops,
			"push_items": []any{map[string]any{"queue": sink, "partition": "p", "payload": map[string]any{"window": "w1"}}}, "ack": nil})
	}
	if r := s.Post(t, "/streams/v1/cycle", map[string]any{"query_id": q, "partition_id": pid,
		"state_ops": []any{map[string]any{"type": "upsert", "key": "w1", "value": 3}}}); r.Status != 200 {
		t.Fatalf("opening the window: %d %s", r.Status, r.Body)
	}
	if r := cycle(map[string]any{"type": "delete", "key": "w1"}); r.Status != 200 {
		t.Fatalf("the first flush: %d %s", r.Status, r.Body)
	}
	wantCycleRefused(t, cycle(map[string]any{"type": "delete", "key": "w1"}), http.StatusConflict, "gone")
	if n := sinkCount(t, sink); n != 1 {
		t.Fatalf("the sink holds the window %d times, want once", n)
	}
}
