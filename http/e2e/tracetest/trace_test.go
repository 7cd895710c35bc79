package tracetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// The round trip of docs/api.md "Traces": push, pop, record traces with names from
// the consumer, read them by message (oldest first, names sorted), by name
// (newest first, with queue, partition and the message's payload) and in the
// names list (trace and message counts, last seen).
func TestTraces_RoundTrip(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace-rt")
	ps := s.PushN(t, q, "p1", 2)
	p := s.PopOK(t, e2e.PopPartition(q, "p1", "batch", "2", "consumerGroup", "workers"))
	if len(p.Messages) != 2 {
		t.Fatalf("popped %d messages", len(p.Messages))
	}
	nameA, nameB := e2e.Unique(t, "order"), e2e.Unique(t, "flow")
	before := time.Now().UTC().Add(-time.Second)
	id1 := record(t, s, map[string]any{"transactionId": ps[0].Tx, "partitionId": ps[0].PartitionID,
		"consumerGroup": "workers", "eventType": "processing", "data": map[string]any{"step": 1},
		"traceNames": []string{nameB, nameA, nameB}})
	id2 := record(t, s, map[string]any{"transactionId": ps[0].Tx, "partitionId": ps[0].PartitionID,
		"consumerGroup": "workers", "eventType": "completed", "data": map[string]any{"step": 2},
		"traceNames": nameA})
	id3 := record(t, s, traceBody(ps[1], []int{1, 2, 3}, []string{nameA}))

	got := ofMessage(t, s, ps[0].PartitionID, ps[0].Tx)
	if len(got) != 2 || got[0].ID != id1 || got[1].ID != id2 {
		t.Fatalf("traces of the first message %+v, want %s then %s", got, id1, id2)
	}
	first := got[0]
	if first.EventType != "processing" || first.ConsumerGroup != "workers" || string(first.Data) != `{"step":1}` {
		t.Fatalf("first trace %+v", first)
	}
	if !slices.Equal(first.TraceNames, sorted(nameA, nameB)) {
		t.Fatalf("trace_names %v, want %v (sorted, distinct)", first.TraceNames, sorted(nameA, nameB))
	}
	if first.WorkerID == "" || first.TransactionID != nil || first.QueueName != nil {
		t.Fatalf("by-message trace fields %+v", first)
	}
	created, err := time.Parse("2006-01-02T15:04:05.000Z", first.CreatedAt)
	if err != nil || created.Before(before) || created.After(time.Now().UTC().Add(time.Second)) {
		t.Fatalf("created_at %q (%v)", first.CreatedAt, err)
	}

	a := ofName(t, s, nameA)
	if *a.Total != 3 || len(a.Traces) != 3 || a.Pagination.Limit != 100 || a.Pagination.Offset != 0 {
		t.Fatalf("by name %s: total %d, %d traces, pagination %+v", nameA, *a.Total, len(a.Traces), *a.Pagination)
	}
	if a.Traces[0].ID != id3 || a.Traces[1].ID != id2 || a.Traces[2].ID != id1 {
		t.Fatalf("by name order %s %s %s, want newest first %s %s %s", a.Traces[0].ID, a.Traces[1].ID, a.Traces[2].ID,
			id3, id2, id1)
	}
	last := a.Traces[0]
	if *last.TransactionID != ps[1].Tx || *last.PartitionID != ps[1].PartitionID || *last.QueueName != q ||
		*last.PartitionName != "p1" || last.ConsumerGroup != e2e.QueueMode || last.EventType != "info" ||
		string(last.Data) != "[1,2,3]" || !slices.Equal(last.TraceNames, []string{nameA}) {
		t.Fatalf("by-name trace %+v", last)
	}
	var payload map[string]any
	if err := json.Unmarshal(last.MessagePayload, &payload); err != nil || payload["tx"] != ps[1].Tx {
		t.Fatalf("message_payload %s, want the pushed payload of %s", last.MessagePayload, ps[1].Tx)
	}
	if b := ofName(t, s, nameB); *b.Total != 1 || len(b.Traces) != 1 || b.Traces[0].ID != id1 {
		t.Fatalf("by name %s: %+v", nameB, b)
	}

	n, ok := findName(t, s, nameA)
	if !ok || n.Traces != 3 || n.Messages != 2 {
		t.Fatalf("names list entry of %s: %+v (found %v), want 3 traces of 2 messages", nameA, n, ok)
	}
	if n.LastSeen != last.CreatedAt {
		t.Fatalf("last_seen %s, want the newest trace's created_at %s", n.LastSeen, last.CreatedAt)
	}
	if n, ok := findName(t, s, nameB); !ok || n.Traces != 1 || n.Messages != 1 {
		t.Fatalf("names list entry of %s: %+v (found %v)", nameB, n, ok)
	}
}

func sorted(v ...string) []string { return slices.Sorted(slices.Values(v)) }

// docs/api.md "Traces": consumerGroup defaults to __QUEUE_MODE__ and eventType to
// info (null and "" alike); traceNames may be null, one string or an array;
// data may be any JSON, null included, and is returned compacted.
func TestTraces_Defaults(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace-def")
	m := s.PushN(t, q, "", 1)[0]
	name := e2e.Unique(t, "def")
	record(t, s, map[string]any{"transactionId": m.Tx, "partitionId": m.PartitionID, "data": nil})
	record(t, s, map[string]any{"transactionId": m.Tx, "partitionId": m.PartitionID, "data": "text",
		"consumerGroup": nil, "eventType": nil, "traceNames": nil})
	record(t, s, map[string]any{"transactionId": m.Tx, "partitionId": m.PartitionID, "data": 7,
		"consumerGroup": "", "eventType": "", "traceNames": name})
	r := s.Post(t, "/api/v1/traces", `{"transactionId":"`+m.Tx+`","partitionId":"`+m.PartitionID+
		`","data": { "a" : [ 1, 2 ] ,"b":"x y"}, "traceNames": []}`)
	if r.Status != 201 {
		t.Fatalf("spaced data: %d %s", r.Status, r.Body)
	}
	// JSON the database's jsonb would refuse is kept as sent.
	r = s.Post(t, "/api/v1/traces", `{"transactionId":"`+m.Tx+`","partitionId":"`+m.PartitionID+
		`","data":{"nul":"x\u0000y","big":1e999}}`)
	if r.Status != 201 {
		t.Fatalf("data with \u0000: %d %s", r.Status, r.Body)
	}
	got := ofMessage(t, s, m.PartitionID, m.Tx)
	wantData := []string{"null", `"text"`, "7", `{"a":[1,2],"b":"x y"}`, `{"nul":"x\u0000y","big":1e999}`}
	if len(got) != len(wantData) {
		t.Fatalf("%d traces, want %d", len(got), len(wantData))
	}
	for i, tr := range got {
		if tr.ConsumerGroup != e2e.QueueMode || tr.EventType != "info" || string(tr.Data) != wantData[i] {
			t.Fatalf("trace %d: group %q, event %q, data %s; want %s, info, %s", i, tr.ConsumerGroup, tr.EventType,
				tr.Data, e2e.QueueMode, wantData[i])
		}
		wantNames := []string{}
		if i == 2 {
			wantNames = []string{name}
		}
		if !slices.Equal(tr.TraceNames, wantNames) || tr.TraceNames == nil {
			t.Fatalf("trace %d: trace_names %v, want %v", i, tr.TraceNames, wantNames)
		}
	}
}

// Bad input is a 400 with a clear text, and nothing is recorded.
func TestTraces_BadRequests(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace-bad")
	m := s.PushN(t, q, "", 1)[0]
	ok := func(extra string) string {
		return `{"transactionId":"` + m.Tx + `","partitionId":"` + m.PartitionID + `"` + extra + `}`
	}
	cases := []struct {
		name, body, want string
	}{
		{"empty body", ``, "Empty request body"},
		{"not JSON", `{"transactionId":`, "Invalid JSON"},
		{"not an object", `[1]`, "transactionId and partitionId are required"},
		{"no transactionId", `{"partitionId":"` + m.PartitionID + `","data":{}}`, "transactionId and partitionId are required"},
		{"no partitionId", `{"transactionId":"` + m.Tx + `","data":{}}`, "transactionId and partitionId are required"},
		{"transactionId not a string", `{"transactionId":5,"partitionId":"` + m.PartitionID + `","data":{}}`, "transactionId and partitionId are required"},
		{"empty transactionId", `{"transactionId":"","partitionId":"` + m.PartitionID + `","data":{}}`, "transactionId and partitionId are required"},
		{"partitionId not a UUID", `{"transactionId":"` + m.Tx + `","partitionId":"p1","data":{}}`, "partitionId must be a UUID"},
		{"no data", ok(``), "data is required"},
		{"data too large", ok(`,"data":"` + strings.Repeat("x", 64<<10) + `"`), "data must be at most 65536 bytes"},
		{"consumerGroup not a string", ok(`,"data":1,"consumerGroup":3`), "consumerGroup must be a string or null"},
		{"consumerGroup with a control character", ok(`,"data":1,"consumerGroup":"a\u0001b"`), "control characters"},
		{"eventType not a string", ok(`,"data":1,"eventType":{}`), "eventType must be a string or null"},
		{"eventType too long", ok(`,"data":1,"eventType":"` + strings.Repeat("e", 256) + `"`), "eventType must be at most 255 bytes"},
		{"eventType with NUL", ok(`,"data":1,"eventType":"a\u0000"`), "eventType must not contain NUL"},
		{"traceNames a number", ok(`,"data":1,"traceNames":5`), "traceNames must be a string, an array of strings or null"},
		{"traceNames with a non-string", ok(`,"data":1,"traceNames":["a",null]`), "traceNames must be a string, an array of strings or null"},
		{"empty trace name", ok(`,"data":1,"traceNames":[""]`), "trace name must not be empty"},
		{"trace name too long", ok(`,"data":1,"traceNames":"` + strings.Repeat("n", 256) + `"`), "trace name must be at most 255 bytes"},
		{"trace name with NUL", ok(`,"data":1,"traceNames":"a\u0000b"`), "must not contain NUL"},
		{"too many names", ok(`,"data":1,"traceNames":[` + strings.Repeat(`"n",`, 32) + `"n"]`), "at most 32 names"},
		{"invalid UTF-8 in data", ok(`,"data":"a` + "\xff" + `"`), "Invalid JSON"},
		{"trailing data", ok(`,"data":1`) + `x`, "Invalid JSON"},
	}
	for _, c := range cases {
		r := s.Post(t, "/api/v1/traces", c.body)
		if _, err := e2e.CheckError(r, 400, c.want); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if got := ofMessage(t, s, m.PartitionID, m.Tx); len(got) != 0 {
		t.Fatalf("bad requests recorded %d traces", len(got))
	}
	for _, path := range []string{
		"/api/v1/traces/not-a-uuid/tx",
		"/api/v1/traces/" + m.PartitionID + "/" + m.Tx + "?limit=0",
		"/api/v1/traces/by-name/x?limit=1001",
		"/api/v1/traces/by-name/x?offset=-1",
		"/api/v1/traces/by-name/a%00b",
		"/api/v1/traces/names?limit=abc",
	} {
		if _, err := e2e.CheckError(s.Get(t, path), 400, ""); err != nil {
			t.Errorf("GET %s: %v", path, err)
		}
	}
}

// A trace of a message that is not stored is 404 {"error":"Message not
// found"} (the reference's 500 with success:false, docs/api.md "Traces"); a
// message without traces, or unknown, reads as {"traces":[]}, what the
// SDKs expect.
func TestTraces_UnknownMessage(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace-404")
	m := s.PushN(t, q, "", 1)[0]
	for _, body := range []map[string]any{
		{"transactionId": "no-such-tx", "partitionId": m.PartitionID, "data": 1},
		{"transactionId": m.Tx, "partitionId": "00000000-0000-4000-8000-000000000000", "data": 1},
	} {
		r := s.Post(t, "/api/v1/traces", body)
		if msg := e2e.WantErrorBody(t, r, 404); msg != "Message not found" {
			t.Fatalf("unknown message: %q", msg)
		}
	}
	if got := ofMessage(t, s, m.PartitionID, "no-such-tx"); len(got) != 0 {
		t.Fatalf("unknown message has %d traces", len(got))
	}
	if got := ofMessage(t, s, m.PartitionID, m.Tx); len(got) != 0 {
		t.Fatalf("untraced message has %d traces", len(got))
	}
	if b := ofName(t, s, e2e.Unique(t, "never-used")); *b.Total != 0 || len(b.Traces) != 0 {
		t.Fatalf("unknown name: %+v", b)
	}
}

// Pagination: by name, limit and offset page the traces newest first with
// the total of all; by message, oldest first; the names list pages too.
func TestTraces_Pagination(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace-page")
	m := s.PushN(t, q, "", 1)[0]
	name := e2e.Unique(t, "page")
	var ids []string
	for i := range 5 {
		ids = append(ids, record(t, s, traceBody(m, i, name)))
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	var paged []string
	for off := 0; off < 6; off += 2 {
		b := ofName(t, s, name, "limit", "2", "offset", fmt.Sprint(off))
		if *b.Total != 5 || b.Pagination.Limit != 2 || b.Pagination.Offset != off {
			t.Fatalf("offset %d: total %d, pagination %+v", off, *b.Total, *b.Pagination)
		}
		for _, tr := range b.Traces {
			paged = append(paged, tr.ID)
		}
	}
	if !slices.Equal(paged, newest) {
		t.Fatalf("paged %v, want newest first %v", paged, newest)
	}
	r := s.Get(t, "/api/v1/traces/"+m.PartitionID+"/"+m.Tx+"?limit=2&offset=3")
	var page struct {
		Traces []trace `json:"traces"`
	}
	r.JSON(t, &page)
	if r.Status != 200 || len(page.Traces) != 2 || page.Traces[0].ID != ids[3] || page.Traces[1].ID != ids[4] {
		t.Fatalf("by message, limit 2 offset 3: %d %s", r.Status, r.Body)
	}

	all := names(t, s, "limit", "1000")
	if *all.Total < 1 || all.Pagination.Limit != 1000 || all.Pagination.Offset != 0 {
		t.Fatalf("names: total %d, pagination %+v", *all.Total, *all.Pagination)
	}
	if l := names(t, s); l.Pagination.Limit != 50 || len(l.Names) > 50 {
		t.Fatalf("names default page: pagination %+v, %d names", *l.Pagination, len(l.Names))
	}
	one := names(t, s, "limit", "1", "offset", "0")
	if len(one.Names) != 1 || *one.Total < 1 {
		t.Fatalf("names limit 1: %+v", one)
	}
	for i := 1; i < len(all.Names); i++ {
		if all.Names[i].LastSeen > all.Names[i-1].LastSeen {
			t.Fatalf("names not most recently seen first: %+v before %+v", all.Names[i-1], all.Names[i])
		}
	}
	// Far past the end: no names, and the total still counts the ones
	// there are (this test's at least: the tests running beside this one
	// add names and, deleting their queues, remove theirs).
	if past := names(t, s, "limit", "10", "offset", fmt.Sprint(*all.Total+100000)); len(past.Names) != 0 ||
		*past.Total < 1 {
		t.Fatalf("names past the end: %+v, total %d", past.Names, *past.Total)
	}
}

// Traces go with their partition (docs/api.md "Traces"), so deleting the queue
// removes its traces, their names and their counts.
func TestTraces_DeletedQueueTakesTraces(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace-del")
	ps := s.PushN(t, q, "", 2)
	name := e2e.Unique(t, "del")
	for _, m := range ps {
		record(t, s, traceBody(m, map[string]any{"k": m.Tx}, name))
	}
	if n, ok := findName(t, s, name); !ok || n.Traces != 2 || n.Messages != 2 {
		t.Fatalf("before the delete: %+v (found %v)", n, ok)
	}
	if r := s.Delete(t, "/api/v1/resources/queues/"+q); r.Status != 200 {
		t.Fatalf("delete queue: %d %s", r.Status, r.Body)
	}
	if b := ofName(t, s, name); *b.Total != 0 || len(b.Traces) != 0 {
		t.Fatalf("by name after the delete: %+v", b)
	}
	if n, ok := findName(t, s, name); ok {
		t.Fatalf("names list keeps %+v after the delete", n)
	}
	if got := ofMessage(t, s, ps[0].PartitionID, ps[0].Tx); len(got) != 0 {
		t.Fatalf("message traces after the delete: %+v", got)
	}
	left := e2e.QueryInt(t, e2e.DB, `SELECT (SELECT count(*) FROM queen.traces WHERE partition_id = $1)
 + (SELECT count(*) FROM queen.trace_names WHERE partition_id = $1)
 + (SELECT count(*) FROM queen.trace_name_stats WHERE partition_id = $1)`, ps[0].PartitionID)
	if left != 0 {
		t.Fatalf("%d trace rows left after the delete", left)
	}
}

// message_payload is the payload while the message is stored and null once
// its segment is gone (the trace itself stays: it follows the partition);
// a trace of the dropped message is then a 404.
func TestTraces_PayloadAfterSegmentDropped(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace-gone")
	m := s.PushN(t, q, "", 1)[0]
	name := e2e.Unique(t, "gone")
	record(t, s, traceBody(m, 1, name))
	if b := ofName(t, s, name); len(b.Traces) != 1 || string(b.Traces[0].MessagePayload) == "null" {
		t.Fatalf("while stored: %+v", b)
	}
	// What segment retention does to a dropped segment (see retentiontest
	// for the policy itself): the segment and its transaction ids go.
	if err := e2e.DB.Exec(`WITH s AS (DELETE FROM queen.segments WHERE partition_id = $1)
DELETE FROM queen.txids WHERE partition_id = $1`, m.PartitionID); err != nil {
		t.Fatal(err)
	}
	b := ofName(t, s, name)
	if len(b.Traces) != 1 || string(b.Traces[0].MessagePayload) != "null" {
		t.Fatalf("after the drop: %+v", b)
	}
	r := s.Post(t, "/api/v1/traces", traceBody(m, 2, nil))
	e2e.WantError(t, r, 404, "Message not found")
}

// A payload sealed at rest (encryptionEnabled) comes back opened in
// message_payload, as every other read returns it.
func TestTraces_SealedPayload(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace-sealed")
	s.Configure(t, q, map[string]any{"encryptionEnabled": true})
	m := s.PushN(t, q, "", 1)[0]
	name := e2e.Unique(t, "sealed")
	record(t, s, traceBody(m, 1, name))
	b := ofName(t, s, name)
	var payload map[string]any
	if len(b.Traces) != 1 || json.Unmarshal(b.Traces[0].MessagePayload, &payload) != nil || payload["tx"] != m.Tx {
		t.Fatalf("sealed message's payload: %+v", b)
	}
}

// Concurrent traces of one message with one name count the message once
// and every trace.
func TestTraces_ConcurrentCounts(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace-conc")
	ps := s.PushN(t, q, "", 2)
	name := e2e.Unique(t, "conc")
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for _, m := range ps {
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := s.DoCtx(t.Context(), "POST", "/api/v1/traces", traceBody(m, i, []string{name, name + "-x"}))
				if err == nil && r.Status != 201 {
					err = fmt.Errorf("%d %s", r.Status, r.Body)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, nm := range []string{name, name + "-x"} {
		if got, ok := findName(t, s, nm); !ok || got.Traces != 2*n || got.Messages != 2 {
			t.Fatalf("%s: %+v (found %v), want %d traces of 2 messages", nm, got, ok, 2*n)
		}
	}
}

// A deleted message (D10, a tombstone) keeps its traces, shows no payload
// and takes no new trace.
func TestTraces_DeletedMessage(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "trace-tomb")
	m := s.PushN(t, q, "", 1)[0]
	name := e2e.Unique(t, "tomb")
	record(t, s, traceBody(m, 1, name))
	if r := s.Delete(t, "/api/v1/messages/"+m.PartitionID+"/"+m.Tx); r.Status != 200 {
		t.Fatalf("delete message: %d %s", r.Status, r.Body)
	}
	b := ofName(t, s, name)
	if len(b.Traces) != 1 || string(b.Traces[0].MessagePayload) != "null" {
		t.Fatalf("after the delete: %+v", b)
	}
	e2e.WantError(t, s.Post(t, "/api/v1/traces", traceBody(m, 2, nil)), 404, "Message not found")
}
