package acktest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/http/e2e"
)

// A-3, docs/api.md "POST /api/v1/ack": a single ack answers 200 with an array of one element
// carrying index, transactionId, success, error, queueName, partitionName,
// leaseReleased and dlq.
func TestA3_SingleAckAnswersOneElementArray(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "a3-single")
	s.PushN(t, q, "", 1)
	p := s.PopOK(t, e2e.PopQueue(q))
	m := p.Messages[0]
	r := s.Post(t, "/api/v1/ack", e2e.AckBody(m, "completed", nil))
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
	var raw []map[string]json.RawMessage
	r.JSON(t, &raw)
	if len(raw) != 1 {
		t.Fatalf("want a one-element array, got %s", r.Body)
	}
	for _, k := range []string{"index", "transactionId", "success", "error", "leaseReleased", "dlq"} {
		if _, ok := raw[0][k]; !ok {
			t.Fatalf("result lacks %q: %s", k, r.Body)
		}
	}
	var res []e2e.AckResult
	r.JSON(t, &res)
	got := res[0]
	if got.Index != 0 || got.TransactionID != m.TransactionID || !got.Success || got.Error != nil ||
		!got.LeaseReleased || got.DLQ {
		t.Fatalf("result %s", r.Body)
	}
	if got.QueueName == nil || *got.QueueName != q || got.PartitionName == nil || *got.PartitionName != "Default" {
		t.Fatalf("queueName/partitionName: %s", r.Body)
	}
}

// A-1 and docs/api.md "POST /api/v1/ack": consumerGroup missing or null means queue mode.
func TestA1_MissingOrNullGroupIsQueueMode(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "a1-qmode")
	ps := s.PushN(t, q, "", 2)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2"))
	if len(p.Messages) != 2 {
		t.Fatalf("pop: %v", p.TxIDs())
	}
	// Missing consumerGroup.
	if r := s.Ack(t, e2e.AckBody(p.Messages[0], "completed", nil)); !r.Success {
		t.Fatalf("missing group: %+v %s", r, r.ErrText())
	}
	// consumerGroup null.
	b := e2e.AckBody(p.Messages[1], "completed", nil)
	b["consumerGroup"] = nil
	r := s.Ack(t, b)
	if !r.Success || !r.LeaseReleased {
		t.Fatalf("null group: %+v %s", r, r.ErrText())
	}
	c := e2e.ReadCursor(t, ps[0].PartitionID, "")
	if c.Committed != offsetOf(t, ps[0].PartitionID, ps[1].Tx) || c.LeaseID != "" {
		t.Fatalf("queue-mode cursor %+v", c)
	}
}

// D2 with A-1: a group that holds no lease on the partition cannot ack; the
// group's own cursor is untouched.
func TestD2_AckForAnotherGroupIsInvalidLease(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d2-othergroup")
	ps := s.PushN(t, q, "", 1)
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g1"))
	m := p.Messages[0]
	e2e.WantAckFailure(t, s.AckMessage(t, m, "completed", "g2"), "Invalid or expired lease")
	e2e.WantAckFailure(t, s.AckMessage(t, m, "completed", ""), "Invalid or expired lease")
	// Without a leaseId too.
	b := e2e.AckBody(m, "completed", "g2")
	delete(b, "leaseId")
	e2e.WantAckFailure(t, s.Ack(t, b), "Invalid or expired lease")
	if c := e2e.ReadCursor(t, ps[0].PartitionID, "g1"); c.Committed != 0 || !c.Live {
		t.Fatalf("g1 cursor moved: %+v", c)
	}
	s.AckOK(t, m, "completed", "g1")
}

// in a batch ack the body-level consumerGroup applies to every item,
// overriding an item's own; without one the batch is in queue mode.
func TestA2_BatchBodyGroupAppliesToEveryItem(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "a2-batchgroup")
	ps := s.PushN(t, q, "", 2)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "consumerGroup", "g1"))
	items := []map[string]any{e2e.AckItem(p.Messages[0], "completed"), e2e.AckItem(p.Messages[1], "completed")}
	for _, it := range items {
		it["consumerGroup"] = "elsewhere"
	}
	// No body group: queue mode, which holds no lease here.
	for i, r := range s.AckBatch(t, nil, items...) {
		if r.Success {
			t.Fatalf("item %d acked in queue mode: %+v", i, r)
		}
	}
	if c := e2e.ReadCursor(t, ps[0].PartitionID, "g1"); c.Committed != 0 {
		t.Fatalf("g1 cursor moved by a queue-mode batch: %+v", c)
	}
	s.AckBatchOK(t, "g1", items...)
	if c := e2e.ReadCursor(t, ps[0].PartitionID, "g1"); c.Committed != offsetOf(t, ps[0].PartitionID, ps[1].Tx) {
		t.Fatalf("g1 cursor %+v", c)
	}
	if c := e2e.ReadCursor(t, ps[0].PartitionID, "elsewhere"); c.Found {
		t.Fatalf("the item group was used: %+v", c)
	}
}

// A-3 and docs/api.md "POST /api/v1/ack/batch": a batch answers one element per ack in request order
// (index and transactionId follow the request), per-item failures inside a
// 200; the lease ends with the ack that resolves the last offset of the span.
func TestA3_BatchResultsInRequestOrder(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "a3-batchorder")
	ps := s.PushN(t, q, "", 3)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "3"))
	e2e.WantTxIDs(t, "pop", p, ps.TxIDs())
	m := p.Messages
	unknown := map[string]any{"transactionId": "no-such-tx", "partitionId": m[0].PartitionID, "leaseId": m[0].LeaseID}
	items := []map[string]any{e2e.AckItem(m[2], "completed"), unknown, e2e.AckItem(m[0], "success"),
		e2e.AckItem(m[1], "completed")}
	res := s.AckBatch(t, nil, items...)
	want := []string{m[2].TransactionID, "no-such-tx", m[0].TransactionID, m[1].TransactionID}
	released := 0
	for i, r := range res {
		if r.Index != i || r.TransactionID != want[i] {
			t.Fatalf("result %d: index %d transactionId %q, want %d %q", i, r.Index, r.TransactionID, i, want[i])
		}
		if r.LeaseReleased {
			released++
		}
	}
	e2e.WantAckFailure(t, res[1], "Message not found")
	for _, i := range []int{0, 2, 3} {
		if !res[i].Success || res[i].DLQ {
			t.Fatalf("result %d: %+v %s", i, res[i], res[i].ErrText())
		}
	}
	if released != 1 {
		t.Fatalf("%d results with leaseReleased, want exactly 1: %+v", released, res)
	}
	c := e2e.ReadCursor(t, ps[0].PartitionID, "")
	if c.Committed != offsetOf(t, ps[0].PartitionID, ps[2].Tx) || c.LeaseID != "" {
		t.Fatalf("cursor %+v", c)
	}
}

// A-4 and D2: an unknown transactionId, or a known one in another partition,
// is the per-item failure "Message not found".
func TestA4_UnknownMessageIsItemFailure(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "a4-notfound")
	ps := s.PushN(t, q, "", 1)
	p := s.PopOK(t, e2e.PopQueue(q))
	m := p.Messages[0]
	b := e2e.AckBody(m, "completed", nil)
	b["transactionId"] = "never-pushed"
	e2e.WantAckFailure(t, s.Ack(t, b), "Message not found")
	b = e2e.AckBody(m, "completed", nil)
	b["partitionId"] = uuid.NewString()
	e2e.WantAckFailure(t, s.Ack(t, b), "Message not found")
	if c := e2e.ReadCursor(t, ps[0].PartitionID, ""); c.Committed != 0 || !c.Live {
		t.Fatalf("cursor changed: %+v", c)
	}
}

// an unknown status is success:false with error null, and changes
// nothing.
func TestA12_UnknownStatusIsItemFailure(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "a12-status")
	ps := s.PushN(t, q, "", 1)
	p := s.PopOK(t, e2e.PopQueue(q))
	m := p.Messages[0]
	before := e2e.ReadCursor(t, ps[0].PartitionID, "")
	r := s.AckMessage(t, m, "frobnicated", "")
	if r.Success || r.Error != nil || r.DLQ {
		t.Fatalf("want success:false error:null, got %+v %s", r, r.ErrText())
	}
	res := s.AckBatch(t, nil, e2e.AckItem(m, "bogus"))
	if res[0].Success || res[0].Error != nil {
		t.Fatalf("batch: %+v", res[0])
	}
	after := e2e.ReadCursor(t, ps[0].PartitionID, "")
	if after.Committed != before.Committed || !after.Live || after.LeaseID != before.LeaseID ||
		len(after.Acked) != 0 || failures(t, ps[0].PartitionID, "", offsetOf(t, ps[0].PartitionID, m.TransactionID)) != 0 {
		t.Fatalf("cursor changed: before %+v after %+v", before, after)
	}
	if n := listDLQ(t, s, "queue", q); *n.Total != 0 {
		t.Fatalf("dead letters: %+v", n)
	}
	s.AckOK(t, m, "completed", "")
}

// status success is the same as completed; a missing status is
// completed.
func TestA6_SuccessAndMissingStatusAreCompleted(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "a6-success")
	ps := s.PushN(t, q, "", 2)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2"))
	if r := s.AckOK(t, p.Messages[0], "success", ""); r.LeaseReleased || r.DLQ {
		t.Fatalf("%+v", r)
	}
	b := e2e.AckBody(p.Messages[1], "completed", nil)
	delete(b, "status")
	if r := s.Ack(t, b); !r.Success || !r.LeaseReleased {
		t.Fatalf("missing status: %+v %s", r, r.ErrText())
	}
	if c := e2e.ReadCursor(t, ps[0].PartitionID, ""); c.Committed != offsetOf(t, ps[0].PartitionID, ps[1].Tx) {
		t.Fatalf("cursor %+v", c)
	}
}

// docs/api.md "POST /api/v1/ack" and "POST /api/v1/ack/batch": malformed requests are
// 400 {"error":...} for the whole request, and nothing is applied.
func TestA1_MalformedAckIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "a1-malformed")
	ps := s.PushN(t, q, "", 1)
	p := s.PopOK(t, e2e.PopQueue(q))
	m := p.Messages[0]
	good := e2e.AckItem(m, "completed")
	with := func(k string, v any) map[string]any {
		b := map[string]any{}
		for kk, vv := range good {
			b[kk] = vv
		}
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	cases := []struct {
		name, path string
		body       any
		text       string
	}{
		{"single empty body", "/api/v1/ack", "", ""},
		{"single invalid JSON", "/api/v1/ack", `{"transactionId":`, ""},
		{"single no transactionId", "/api/v1/ack", with("transactionId", nil), "transactionId is required"},
		{"single non-string transactionId", "/api/v1/ack", with("transactionId", 7), "transactionId is required"},
		{"single no partitionId", "/api/v1/ack", with("partitionId", nil), "partitionId is required to ensure message uniqueness"},
		{"single non-UUID partitionId", "/api/v1/ack", with("partitionId", "not-a-uuid"), ""},
		{"batch empty body", "/api/v1/ack/batch", "", ""},
		{"batch invalid JSON", "/api/v1/ack/batch", `{"acknowledgments":[`, ""},
		{"batch no acknowledgments", "/api/v1/ack/batch", map[string]any{}, "acknowledgments array is required"},
		{"batch acknowledgments object", "/api/v1/ack/batch", map[string]any{"acknowledgments": good}, "acknowledgments array is required"},
		{"batch acknowledgments string", "/api/v1/ack/batch", map[string]any{"acknowledgments": "x"}, "acknowledgments array is required"},
		{"batch item no transactionId", "/api/v1/ack/batch",
			map[string]any{"acknowledgments": []any{good, with("transactionId", nil)}},
			"Each acknowledgment must have a valid transactionId string"},
		{"batch item no partitionId", "/api/v1/ack/batch",
			map[string]any{"acknowledgments": []any{good, with("partitionId", nil)}},
			"Each acknowledgment must have a valid partitionId string to ensure message uniqueness"},
		{"batch item non-UUID partitionId", "/api/v1/ack/batch",
			map[string]any{"acknowledgments": []any{good, with("partitionId", "nope")}}, ""},
	}
	for _, c := range cases {
		r := s.Post(t, c.path, c.body)
		e := e2e.WantErrorBody(t, r, 400)
		if c.text != "" && e != c.text {
			t.Errorf("%s: error %q, want %q", c.name, e, c.text)
		}
	}
	// The good item of the rejected batches was not applied.
	if c := e2e.ReadCursor(t, ps[0].PartitionID, ""); c.Committed != 0 || !c.Live || len(c.Acked) != 0 {
		t.Fatalf("a rejected request changed the cursor: %+v", c)
	}
}

// docs/api.md "POST /api/v1/ack/batch": an empty acknowledgments array answers 200 [] at
// once.
func TestA2_EmptyBatchAnswersEmptyArray(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	r, err := s.DoCtx(ctx, "POST", "/api/v1/ack/batch", `{"acknowledgments":[]}`)
	if err != nil {
		t.Fatalf("empty batch did not answer: %v", err)
	}
	if r.Status != 200 || strings.TrimSpace(string(r.Body)) != "[]" {
		t.Fatalf("want 200 [], got %d %q", r.Status, r.Body)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v", d)
	}
	r, err = s.DoCtx(ctx, "POST", "/api/v1/ack/batch", `{"acknowledgments":[],"consumerGroup":"g"}`)
	if err != nil || r.Status != 200 || strings.TrimSpace(string(r.Body)) != "[]" {
		t.Fatalf("with a group: %v %+v", err, r)
	}
}

// A-15 and D2: a leaseId that is not the live lease of the (partition,
// group), including one that is not a UUID, is the per-item failure
// "Invalid or expired lease"; the live one still works afterwards.
func TestA15_WrongLeaseIsItemFailure(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "a15-lease")
	ps := s.PushN(t, q, "", 1)
	p := s.PopOK(t, e2e.PopQueue(q))
	m := p.Messages[0]
	for _, lease := range []string{uuid.NewString(), "not-a-uuid"} {
		b := e2e.AckBody(m, "completed", nil)
		b["leaseId"] = lease
		e2e.WantAckFailure(t, s.Ack(t, b), "Invalid or expired lease")
		res := s.AckBatch(t, nil, b)
		e2e.WantAckFailure(t, res[0], "Invalid or expired lease")
	}
	if c := e2e.ReadCursor(t, ps[0].PartitionID, ""); c.Committed != 0 || !c.Live {
		t.Fatalf("cursor changed: %+v", c)
	}
	// leaseId null or "" means no lease check against the live lease.
	b := e2e.AckBody(m, "completed", nil)
	b["leaseId"] = nil
	if r := s.Ack(t, b); !r.Success || !r.LeaseReleased {
		t.Fatalf("null leaseId: %+v %s", r, r.ErrText())
	}
	// Acking again after the span was resolved: outside any live span.
	e2e.WantAckFailure(t, s.AckMessage(t, m, "completed", ""), "Invalid or expired lease")
}
