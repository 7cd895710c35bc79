package acktest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/http/e2e"
)

// txAnswer is the answer of POST /api/v1/transaction (docs/api.md "POST /api/v1/transaction").
type txAnswer struct {
	TransactionID *string    `json:"transactionId"`
	Success       bool       `json:"success"`
	Error         *string    `json:"error"`
	Results       []txResult `json:"results"`
}

type txResult struct {
	Index         int     `json:"index"`
	Type          string  `json:"type"`
	Success       bool    `json:"success"`
	TransactionID string  `json:"transactionId"`
	Error         *string `json:"error"`
	DLQ           bool    `json:"dlq"`
	Status        string  `json:"status"`
	MessageID     string  `json:"messageId"`
	PartitionID   string  `json:"partitionId"`
	QueueName     string  `json:"queueName"`
}

// transact posts the operations and requires the given status and the
// answer shape {transactionId, success, results[]} (error when it failed).
func transact(t testing.TB, s *e2e.Server, status int, body any) txAnswer {
	t.Helper()
	r := s.Post(t, "/api/v1/transaction", body)
	if r.Status != status {
		t.Fatalf("transaction: status %d, want %d: %s", r.Status, status, r.Body)
	}
	var raw map[string]json.RawMessage
	r.JSON(t, &raw)
	keys := []string{"transactionId", "success", "results"}
	if status != 200 {
		keys = append(keys, "error")
	}
	for _, k := range keys {
		if _, ok := raw[k]; !ok {
			t.Fatalf("transaction answer lacks %q: %s", k, r.Body)
		}
	}
	var a txAnswer
	r.JSON(t, &a)
	if a.Success != (status == 200) {
		t.Fatalf("success %v with status %d: %s", a.Success, status, r.Body)
	}
	if status != 200 && (a.Error == nil || *a.Error == "") {
		t.Fatalf("failed transaction without an error text: %s", r.Body)
	}
	return a
}

func pushOp(items ...map[string]any) map[string]any {
	return map[string]any{"type": "push", "items": items}
}

func ackOp(m e2e.Message, status, group string) map[string]any {
	op := e2e.AckItem(m, status)
	op["type"] = "ack"
	if group != "" {
		op["consumerGroup"] = group
	}
	return op
}

// D7, X-1, X-2 and docs/api.md "POST /api/v1/transaction": pushes and acks commit together; the answer
// is {transactionId, success:true, results[]} with one result per ack and
// per push item, in order; the pushed messages are poppable, the ack moved
// the cursor.
func TestD7_TransactionCommitsPushesAndAcks(t *testing.T) {
	t.Parallel()
	s := shared(t)
	src, dst := e2e.Unique(t, "d7-src"), e2e.Unique(t, "d7-dst")
	ps := s.PushN(t, src, "", 1)
	p := s.PopOK(t, e2e.PopQueue(src))
	a := transact(t, s, 200, map[string]any{"operations": []any{
		ackOp(p.Messages[0], "completed", ""),
		pushOp(map[string]any{"queue": dst, "partition": "out", "payload": map[string]any{"k": 1.0}, "transactionId": "d7-a"},
			map[string]any{"queue": dst, "partition": "out", "payload": map[string]any{"k": 2.0}, "transactionId": "d7-b"}),
	}})
	if a.TransactionID == nil || *a.TransactionID == "" {
		t.Fatalf("no transactionId: %+v", a)
	}
	if len(a.Results) != 3 {
		t.Fatalf("results %+v, want 3 (one ack, two push items)", a.Results)
	}
	for i, r := range a.Results {
		if r.Index != i || !r.Success {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if r := a.Results[0]; r.Type != "ack" || r.TransactionID != ps[0].Tx || r.DLQ {
		t.Fatalf("ack result %+v", r)
	}
	for i, tx := range []string{"d7-a", "d7-b"} {
		r := a.Results[i+1]
		if r.Type != "push" || r.TransactionID != tx || r.QueueName != dst {
			t.Fatalf("push result %+v", r)
		}
		if _, err := uuid.Parse(r.MessageID); err != nil {
			t.Fatalf("push result messageId %q", r.MessageID)
		}
		if _, err := uuid.Parse(r.PartitionID); err != nil {
			t.Fatalf("push result partitionId %q", r.PartitionID)
		}
	}
	if c := e2e.ReadCursor(t, ps[0].PartitionID, ""); c.Committed != offsetOf(t, ps[0].PartitionID, ps[0].Tx) || c.LeaseID != "" {
		t.Fatalf("the ack did not commit: %+v", c)
	}
	got := s.PopUntil(t, e2e.PopPartition(dst, "out", "batch", "10"), 3*time.Second, 100*time.Millisecond)
	e2e.WantTxIDs(t, "the transaction's pushes", got, []string{"d7-a", "d7-b"})
	if got.Messages[0].ID != a.Results[1].MessageID || got.Messages[0].PartitionID != a.Results[1].PartitionID {
		t.Fatalf("popped %+v, push result %+v", got.Messages[0], a.Results[1])
	}
	if d, _ := got.Messages[1].Data.(map[string]any); d["k"] != 2.0 {
		t.Fatalf("payload %v", got.Messages[1].Data)
	}
}

// D7 and X-2: a failing ack (unknown message, stale lease) answers 409
// success:false with the reason and leaves nothing behind: the pushes of the
// transaction are not stored (not even in a partition that already exists),
// and the acks that came before the failing one did not move cursors.
func TestD7_TransactionAllOrNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, tc := range []struct {
		name, reason string
		bad          func(m e2e.Message) map[string]any
	}{
		{"unknown message", "Message not found", func(m e2e.Message) map[string]any {
			op := ackOp(m, "completed", "")
			op["transactionId"] = "never-pushed"
			return op
		}},
		{"stale lease", "Invalid or expired lease", func(m e2e.Message) map[string]any {
			op := ackOp(m, "completed", "")
			op["leaseId"] = uuid.NewString()
			return op
		}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			src, dst := e2e.Unique(t, "d7-src"), e2e.Unique(t, "d7-dst")
			ps := s.PushN(t, src, "", 3)
			pid := ps[0].PartitionID
			p := s.PopOK(t, e2e.PopQueue(src, "batch", "2", "leaseSeconds", "60"))
			before0 := e2e.QueueCounts(t, src)
			before := e2e.ReadCursor(t, pid, "")
			a := transact(t, s, 409, map[string]any{"operations": []any{
				pushOp(map[string]any{"queue": dst, "payload": map[string]any{"x": 1.0}, "transactionId": "gone-1"}),
				ackOp(p.Messages[0], "completed", ""),
				pushOp(map[string]any{"queue": src, "payload": map[string]any{"x": 2.0}, "transactionId": "gone-2"}),
				ackOp(p.Messages[1], "completed", ""),
				tc.bad(p.Messages[1]),
			}})
			if !strings.Contains(*a.Error, tc.reason) {
				t.Fatalf("error %q, want it to name %q", *a.Error, tc.reason)
			}
			if c := e2e.QueueCounts(t, dst); c.Segments != 0 || c.Txids != 0 || c.Heads != 0 {
				t.Fatalf("the rolled-back push to %s left %d segments, %d txids, heads %d", dst, c.Segments, c.Txids, c.Heads)
			}
			if c := e2e.QueueCounts(t, src); c.Segments != before0.Segments || c.Txids != before0.Txids || c.Heads != before0.Heads {
				t.Fatalf("the rolled-back push to %s left segments %d->%d txids %d->%d head %d->%d",
					src, before0.Segments, c.Segments, before0.Txids, c.Txids, before0.Heads, c.Heads)
			}
			after := e2e.ReadCursor(t, pid, "")
			if after.Committed != before.Committed || len(after.Acked) != 0 || !after.Live || after.LeaseID != p.LeaseID {
				t.Fatalf("the rolled-back acks moved the cursor: before %+v after %+v", before, after)
			}
			s.PopEmpty(t, e2e.PopQueue(dst))
			// The lease still acks outside the transaction.
			s.AckOK(t, p.Messages[0], "completed", "")
		})
	}
}

// X-1 and the target behaviour: a malformed transaction is 400 with
// success:false and an error, and nothing of it is applied.
func TestX1_MalformedTransactionIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "x1-bad")
	push := pushOp(map[string]any{"queue": q, "payload": 1.0})
	for _, tc := range []struct {
		name string
		body any
		text string
	}{
		{"no operations", map[string]any{}, "operations array required"},
		{"operations not an array", map[string]any{"operations": map[string]any{"type": "push"}}, "operations array required"},
		{"empty operations", map[string]any{"operations": []any{}}, "operations array cannot be empty"},
		{"unknown type", map[string]any{"operations": []any{push, map[string]any{"type": "frobnicate"}}}, "Unknown operation type: frobnicate"},
	} {
		a := transact(t, s, 400, tc.body)
		if *a.Error != tc.text {
			t.Errorf("%s: error %q, want %q", tc.name, *a.Error, tc.text)
		}
	}
	for _, body := range []string{"", `{"operations":[`} {
		r := s.Post(t, "/api/v1/transaction", body)
		if r.Status != 400 {
			t.Fatalf("body %q: status %d %s", body, r.Status, r.Body)
		}
		var a txAnswer
		r.JSON(t, &a)
		if a.Success || a.Error == nil || *a.Error == "" {
			t.Fatalf("body %q: %s", body, r.Body)
		}
	}
	if c := e2e.QueueCounts(t, q); c.Segments != 0 {
		t.Fatalf("a rejected transaction pushed %d segments", c.Segments)
	}
}

// D7: a duplicate push inside a transaction (against a stored message or an
// earlier item of the same transaction) is reported as duplicate and does
// not abort the transaction.
func TestD7_DuplicatePushInTransactionIsReported(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d7-dup")
	res := s.Push(t, e2e.PushItem{Queue: q, TransactionID: "stored-1", Payload: "first"})
	a := transact(t, s, 200, map[string]any{"operations": []any{
		pushOp(map[string]any{"queue": q, "transactionId": "stored-1", "payload": "again"},
			map[string]any{"queue": q, "transactionId": "fresh-1", "payload": "fresh"},
			map[string]any{"queue": q, "transactionId": "fresh-1", "payload": "fresh again"}),
	}})
	if len(a.Results) != 3 {
		t.Fatalf("results %+v", a.Results)
	}
	want := []string{"duplicate", "queued", "duplicate"}
	for i, r := range a.Results {
		if r.Status != want[i] {
			t.Fatalf("result %d status %q, want %q: %+v", i, r.Status, want[i], a.Results)
		}
	}
	if a.Results[0].MessageID != res[0].MessageID {
		t.Errorf("duplicate of the stored message reports %s, want the stored id %s", a.Results[0].MessageID, res[0].MessageID)
	}
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "10"))
	e2e.WantTxIDs(t, "the queue", p, []string{"stored-1", "fresh-1"})
	if p.Messages[0].Data != "first" || p.Messages[1].Data != "fresh" {
		t.Fatalf("payloads %v %v", p.Messages[0].Data, p.Messages[1].Data)
	}
}

// D7 (a failed ack inside a transaction behaves as on /api/v1/ack, unlike
// the reference's X-7): failed with budget left counts an attempt and ends
// the lease; the (retryLimit+1)-th failure dead-letters; retry ends the lease
// without budget.
func TestD7_FailedAckInTransactionBehavesAsAck(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d7-failed")
	s.Configure(t, q, map[string]any{"retryLimit": 1, "retryDelay": 0})
	ps := s.PushN(t, q, "", 1)
	pid := ps[0].PartitionID
	off := offsetOf(t, pid, ps[0].Tx)
	step := func(status string, wantDLQ bool, wantFailures int) {
		t.Helper()
		p := s.PopUntil(t, e2e.PopQueue(q), 3*time.Second, 100*time.Millisecond)
		if p.Messages[0].TransactionID != ps[0].Tx {
			t.Fatalf("before %s: %+v", status, p)
		}
		a := transact(t, s, 200, map[string]any{"operations": []any{ackOp(p.Messages[0], status, "")}})
		if len(a.Results) != 1 || !a.Results[0].Success || a.Results[0].DLQ != wantDLQ {
			t.Fatalf("%s in a transaction: %+v, want dlq %v", status, a.Results, wantDLQ)
		}
		if n := failures(t, pid, "", off); n < wantFailures || (!wantDLQ && n != wantFailures) {
			t.Fatalf("after %s: attempts %d, want %d", status, n, wantFailures)
		}
		if c := e2e.ReadCursor(t, pid, ""); c.LeaseID != "" {
			t.Fatalf("after %s the lease is still held: %+v", status, c)
		}
	}
	step("retry", false, 0)
	step("failed", false, 1)
	step("retry", false, 1)
	step("failed", true, 1)
	l := listDLQ(t, s, "queue", q)
	if *l.Total != 1 || l.Messages[0].TransactionID != ps[0].Tx {
		t.Fatalf("dead letters %+v", l.Messages)
	}
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != off {
		t.Fatalf("committed %d, want past the dead letter %d", c.Committed, off)
	}
}
