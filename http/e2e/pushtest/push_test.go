package pushtest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// U-6: one result per item in input order, with index, transaction_id,
// status, message_id, partition_id, trace_id and queueName; items may name
// different queues and partitions in one request.
func TestU6_PushResultsInInputOrder(t *testing.T) {
	t.Parallel()
	s := shared(t)
	qa, qb := e2e.Unique(t, "order-a"), e2e.Unique(t, "order-b")
	type in struct{ queue, partition, tx string }
	items := []in{{qa, "", "t0"}, {qb, "p1", "t1"}, {qa, "p2", "t2"}, {qb, "", "t3"}, {qa, "", "t4"}, {qa, "p2", "t5"}}
	var body []map[string]any
	for i, it := range items {
		m := map[string]any{"queue": it.queue, "transactionId": it.tx, "payload": map[string]any{"i": i}}
		if it.partition != "" {
			m["partition"] = it.partition
		}
		body = append(body, m)
	}
	res := s.PushJSON(t, body...)
	partOf := map[string]string{} // queue/partition -> partition_id
	ids := map[string]bool{}
	for i, r := range res {
		it := items[i]
		if r["index"] != float64(i) || r["transaction_id"] != it.tx || r["status"] != "queued" || r["queueName"] != it.queue {
			t.Fatalf("result %d = %v, want index %d, transaction_id %s, queued, queueName %s", i, r, i, it.tx, it.queue)
		}
		if v, ok := r["trace_id"]; !ok || v != nil {
			t.Fatalf("result %d: trace_id %v (present %v), want null", i, v, ok)
		}
		mid, _ := r["message_id"].(string)
		pid, _ := r["partition_id"].(string)
		if !e2e.IsUUID(mid) || !e2e.IsUUID(pid) || ids[mid] {
			t.Fatalf("result %d: message_id %q partition_id %q (ids must be distinct UUIDs)", i, mid, pid)
		}
		ids[mid] = true
		part := it.partition
		if part == "" {
			part = "Default"
		}
		key := it.queue + "/" + part
		if prev, ok := partOf[key]; ok && prev != pid {
			t.Fatalf("result %d: partition_id %s, earlier item of %s had %s", i, pid, key, prev)
		}
		partOf[key] = pid
		// The partition id is the row of queen.partitions of that name.
		var dbPid string
		if err := e2e.DB.QueryRow(`SELECT p.id::text FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE q.name = $1 AND p.name = $2`, []any{it.queue, part}, &dbPid); err != nil || dbPid != pid {
			t.Fatalf("result %d: partition_id %s, queen.partitions has %q (%v)", i, pid, dbPid, err)
		}
	}
	if len(partOf) != 4 {
		t.Fatalf("%d distinct partitions, want 4", len(partOf))
	}
	// The messages of qa/p2 come back in input order, with their ids.
	p := s.Pop(t, "/api/v1/pop/queue/"+qa+"/partition/p2?batch=10")
	if p == nil || len(p.Messages) != 2 || p.Messages[0].TransactionID != "t2" || p.Messages[1].TransactionID != "t5" ||
		p.Messages[0].ID != res[2]["message_id"] || p.Messages[1].ID != res[5]["message_id"] {
		t.Fatalf("pop of %s/p2: %+v", qa, p)
	}
}

// U-2: items [] answers 201 [] at once and writes nothing.
func TestU2_EmptyItems(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, body := range []string{`{"items":[]}`, `{"items":[],"bufferMs":5}`, " {\"items\" : [ ] } "} {
		r := s.Post(t, "/api/v1/push", body)
		if r.Status != 201 || string(r.Body) != "[]" {
			t.Fatalf("%s: status %d body %q, want 201 []", body, r.Status, r.Body)
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("Content-Type %q", ct)
		}
	}
}

// U-3, U-5: a missing or empty transactionId gets a generated one (a UUID),
// different per item, and the pop returns it.
func TestU5_GeneratedTransactionID(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "gen-tx")
	res := s.PushJSON(t,
		map[string]any{"queue": q, "payload": 1},
		map[string]any{"queue": q, "payload": 2, "transactionId": ""},
		map[string]any{"queue": q, "payload": 3, "transactionId": nil},
		map[string]any{"queue": q, "payload": 4})
	seen := map[string]bool{}
	for i, r := range res {
		tx, _ := r["transaction_id"].(string)
		if !e2e.IsUUID(tx) || seen[tx] || r["status"] != "queued" {
			t.Fatalf("result %d: %v, want queued with a fresh UUID transaction_id", i, r)
		}
		seen[tx] = true
	}
	msgs := popAll(t, s, q, 10)
	if len(msgs) != 4 {
		t.Fatalf("popped %d, want 4", len(msgs))
	}
	for i, m := range msgs {
		if m.TransactionID != res[i]["transaction_id"] || m.ID != res[i]["message_id"] {
			t.Fatalf("message %d: transactionId %s id %s, push answered %v", i, m.TransactionID, m.ID, res[i])
		}
	}
}

// U-3: the payload is any JSON value, stored as given; a missing payload is
// null. Each round-trips through a pop exactly.
func TestU3_PayloadRoundTrip(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "payload")
	payloads := []string{
		`null`, `"a string"`, `""`, `42`, `-3.25e-7`, `9007199254740993`, `true`, `false`,
		`[1,"two",null,{"three":3}]`, `[]`, `{}`,
		`{"nested":{"deep":[1,2,{"x":null}]},"unicode":"héllo ✓ \u2028 \"quoted\" \\ \n","n":1.5}`,
		`{"b":1,"a":2}`,
	}
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i, p := range payloads {
		fmt.Fprintf(&b, `{"queue":%q,"transactionId":"p%d","payload":%s},`, q, i, p)
	}
	fmt.Fprintf(&b, `{"queue":%q,"transactionId":"missing"}]}`, q)
	r := s.Post(t, "/api/v1/push", b.String())
	if r.Status != 201 {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	want := append(payloads, `null`)
	msgs := popAll(t, s, q, 100)
	if len(msgs) != len(want) {
		t.Fatalf("popped %d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		tx := fmt.Sprintf("p%d", i)
		if i == len(payloads) {
			tx = "missing"
		}
		if m.TransactionID != tx {
			t.Fatalf("message %d is %s, want %s", i, m.TransactionID, tx)
		}
		if m.RawData == nil {
			t.Fatalf("message %s has no data key", tx)
		}
		if got, w := compact(t, m.RawData), compact(t, []byte(want[i])); got != w {
			t.Fatalf("message %s: data %s, want %s", tx, got, w)
		}
	}
}

// U-8: a UUID traceId round-trips through push and pop; an absent or empty
// one is null.
func TestU8_TraceIDRoundTrip(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace")
	v4, v7 := "3b241101-e2bb-4255-8caf-4136c566a962", "01890a5d-ac96-774b-bcce-b302099a8057"
	res := s.PushJSON(t,
		map[string]any{"queue": q, "transactionId": "a", "traceId": v4},
		map[string]any{"queue": q, "transactionId": "b", "traceId": v7},
		map[string]any{"queue": q, "transactionId": "c"},
		map[string]any{"queue": q, "transactionId": "d", "traceId": ""},
		map[string]any{"queue": q, "transactionId": "e", "traceId": nil})
	want := []any{v4, v7, nil, nil, nil}
	for i, r := range res {
		if v, ok := r["trace_id"]; !ok || v != want[i] {
			t.Fatalf("result %d: trace_id %v (present %v), want %v", i, v, ok, want[i])
		}
	}
	msgs := popAll(t, s, q, 10)
	if len(msgs) != 5 {
		t.Fatalf("popped %d", len(msgs))
	}
	for i, m := range msgs {
		var got any
		if m.TraceID != nil {
			got = *m.TraceID
		}
		if got != want[i] {
			t.Fatalf("message %s: traceId %v, want %v", m.TransactionID, got, want[i])
		}
	}
}

// docs/pop-routes.md, U-10: messages written by one push to one partition share
// createdAt (the segment's time), formatted with microseconds and a literal
// Z, in UTC; a later push's createdAt is not earlier.
func TestCreatedAt_SharedPerPushAndFormat(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "created")
	before := time.Now().UTC()
	var items []e2e.PushItem
	for i := range 5 {
		items = append(items, e2e.PushItem{Queue: q, TransactionID: fmt.Sprintf("first-%d", i), Payload: i})
	}
	s.Push(t, items...)
	time.Sleep(5 * time.Millisecond)
	s.Push(t, e2e.PushItem{Queue: q, TransactionID: "second", Payload: 5})
	after := time.Now().UTC()
	msgs := popAll(t, s, q, 10)
	if len(msgs) != 6 {
		t.Fatalf("popped %d", len(msgs))
	}
	for _, m := range msgs {
		if !e2e.CreatedAtRE.MatchString(m.CreatedAt) {
			t.Fatalf("createdAt %q does not match %s", m.CreatedAt, e2e.CreatedAtRE)
		}
		ts, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		// The Z must be true: the value is UTC, close to the push.
		if ts.Before(before.Add(-time.Minute)) || ts.After(after.Add(time.Minute)) {
			t.Fatalf("createdAt %s is not between %s and %s (time zone?)", m.CreatedAt, before, after)
		}
	}
	for _, m := range msgs[1:5] {
		if m.CreatedAt != msgs[0].CreatedAt {
			t.Fatalf("messages of one push have createdAt %s and %s", msgs[0].CreatedAt, m.CreatedAt)
		}
	}
	if msgs[5].CreatedAt < msgs[0].CreatedAt {
		t.Fatalf("later push has an earlier createdAt: %s < %s", msgs[5].CreatedAt, msgs[0].CreatedAt)
	}
	// One push, one segment.
	if n := e2e.QueueCounts(t, q); n.Segments != 2 || n.Txids != 6 || n.Heads != 6 {
		t.Fatalf("counts %+v, want 2 segments, 6 txids, head 6", n)
	}
}

// docs/api.md conventions: every allowed name character works, and names of
// exactly 255 bytes are accepted for queue and partition.
func TestNames_AllowedCharactersAndMaxLength(t *testing.T) {
	t.Parallel()
	s := shared(t)
	u := e2e.Unique(t, "Az09_.:-")
	long := u + strings.Repeat("x", 255-len(u))
	longPart := strings.Repeat("P", 255)
	res := s.Push(t,
		e2e.PushItem{Queue: u, Partition: "p_1.x:y-Z", Payload: 1},
		e2e.PushItem{Queue: long, Partition: longPart, Payload: 2})
	for i, r := range res {
		if r.Status != "queued" {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if res[1].QueueName != long {
		t.Fatalf("queueName %q", res[1].QueueName)
	}
	if n := e2e.QueueCounts(t, u, long); n.Queues != 2 || n.Partitions != 2 || n.Txids != 2 {
		t.Fatalf("counts %+v", n)
	}
	p := s.Pop(t, "/api/v1/pop/queue/"+long+"/partition/"+longPart+"?autoAck=true")
	if p == nil || len(p.Messages) != 1 || p.Messages[0].Partition != longPart {
		t.Fatalf("pop of the 255-byte names: %+v", p)
	}
}
