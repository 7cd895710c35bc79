package acktest

import (
	"bytes"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/http/e2e"
)

// D4: with retryLimit N a message is dead-lettered on its (N+1)-th failed
// ack, not earlier; each failure before that counts one attempt and the
// message comes back.
func TestD4_DeadLetteredOnRetryLimitPlusOneFailure(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d4-limit")
	s.Configure(t, q, map[string]any{"retryLimit": 2, "retryDelay": 0})
	ps := s.PushN(t, q, "", 2)
	pid := ps[0].PartitionID
	off := offsetOf(t, pid, ps[0].Tx)
	for i := 1; i <= 3; i++ {
		p := s.PopUntil(t, e2e.PopQueue(q), 3*time.Second, 100*time.Millisecond)
		if p.Messages[0].TransactionID != ps[0].Tx {
			t.Fatalf("delivery %d: %+v", i, p)
		}
		r := s.AckOK(t, p.Messages[0], "failed", "")
		if r.DLQ != (i == 3) {
			t.Fatalf("failed ack %d with retryLimit 2: dlq %v", i, r.DLQ)
		}
		if i < 3 {
			if n := failures(t, pid, "", off); n != i {
				t.Fatalf("attempts %d after %d failures", n, i)
			}
			if l := listDLQ(t, s, "queue", q); *l.Total != 0 {
				t.Fatalf("dead-lettered after %d failures", i)
			}
		}
	}
	l := listDLQ(t, s, "queue", q)
	if *l.Total != 1 || l.Messages[0].TransactionID != ps[0].Tx {
		t.Fatalf("dead letters %+v", l.Messages)
	}
	if l.Messages[0].RetryCount < 2 {
		t.Fatalf("retryCount %d, want the failures counted (2 or 3)", l.Messages[0].RetryCount)
	}
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != off {
		t.Fatalf("committed %d, want it past the dead letter %d", c.Committed, off)
	}
	p := s.PopUntil(t, e2e.PopQueue(q), 3*time.Second, 100*time.Millisecond)
	if p.Messages[0].TransactionID != ps[1].Tx {
		t.Fatalf("after the dead letter: %+v", p)
	}
}

// D4 and L-4: lease expiry never consumes retry budget. A message whose
// short lease expired three times still takes retryLimit+1 failed acks to
// reach the DLQ.
func TestD4_LeaseExpiryNeverConsumesBudget(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d4-expiry")
	s.Configure(t, q, map[string]any{"retryLimit": 1, "retryDelay": 0})
	ps := s.PushN(t, q, "", 1)
	pid := ps[0].PartitionID
	off := offsetOf(t, pid, ps[0].Tx)
	for i := range 3 {
		p := s.PopUntil(t, e2e.PopQueue(q, "leaseSeconds", "1"), 3*time.Second, 100*time.Millisecond)
		if p.Messages[0].TransactionID != ps[0].Tx {
			t.Fatalf("delivery %d: %+v", i, p)
		}
		time.Sleep(1050 * time.Millisecond) // let it expire
	}
	if n := failures(t, pid, "", off); n != 0 {
		t.Fatalf("lease expiry counted %d failures", n)
	}
	p := s.PopUntil(t, e2e.PopQueue(q, "leaseSeconds", "30"), 3*time.Second, 100*time.Millisecond)
	if r := s.AckOK(t, p.Messages[0], "failed", ""); r.DLQ {
		t.Fatalf("the first failed ack after 3 expiries dead-lettered with retryLimit 1")
	}
	p = s.PopUntil(t, e2e.PopQueue(q, "leaseSeconds", "30"), 3*time.Second, 100*time.Millisecond)
	if r := s.AckOK(t, p.Messages[0], "failed", ""); !r.DLQ {
		t.Fatalf("second failed ack with retryLimit 1 not dead-lettered: %+v", r)
	}
}

// D5 and docs/api.md "Dead letters": a dead letter keeps a copy of the frame (payload,
// transactionId, the message's original createdAt), the group and the error
// text, with the fields of docs/api.md "Dead letters", and outlives the segment that held
// the frame.
func TestD5_DeadLetterKeepsFrameCopy(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d5-copy")
	s.Configure(t, q, map[string]any{"retryLimit": 0, "retryDelay": 0})
	payload := map[string]any{"order": 42.0, "lines": []any{"a", "b"}, "nested": map[string]any{"ok": true}}
	trace := uuid.NewString()
	res := s.Push(t, e2e.PushItem{Queue: q, Partition: "p1", Payload: payload, TransactionID: "dl-copy-1", TraceID: trace})
	pid := res[0].PartitionID
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "billing"))
	m := p.Messages[0]
	b := e2e.AckBody(m, "failed", "billing")
	b["error"] = "card declined"
	if r := s.Ack(t, b); !r.DLQ {
		t.Fatalf("ack %+v", r)
	}
	// The frame's segment goes away (as retention would drop it).
	if err := e2e.DB.Exec(`DELETE FROM queen.segments WHERE partition_id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	r := s.Get(t, "/api/v1/dlq"+e2e.Query("queue", q))
	if r.Status != 200 {
		t.Fatalf("dlq: %d %s", r.Status, r.Body)
	}
	var raw struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	r.JSON(t, &raw)
	if len(raw.Messages) != 1 {
		t.Fatalf("dlq %s", r.Body)
	}
	for _, k := range []string{"id", "transactionId", "partitionId", "queue", "partition", "consumerGroup",
		"errorMessage", "retryCount", "data", "producerSub", "createdAt", "failedAt"} {
		if _, ok := raw.Messages[0][k]; !ok {
			t.Errorf("dead letter lacks %q: %s", k, r.Body)
		}
	}
	l := listDLQ(t, s, "queue", q)
	d := l.Messages[0]
	if _, err := uuid.Parse(d.ID); err != nil {
		t.Errorf("id %q", d.ID)
	}
	if d.TransactionID != "dl-copy-1" || d.PartitionID != pid || d.Queue != q || d.Partition != "p1" ||
		d.ConsumerGroup != "billing" || d.ErrorMessage == nil || *d.ErrorMessage != "card declined" {
		t.Errorf("entry %+v", d)
	}
	want, _ := json.Marshal(payload)
	var got any
	if err := json.Unmarshal(d.Data, &got); err != nil {
		t.Fatalf("data %q", d.Data)
	}
	if g, _ := json.Marshal(got); !bytes.Equal(g, want) {
		t.Errorf("data %s, want %s", g, want)
	}
	created, popped := parseTS(t, d.CreatedAt), parseTS(t, m.CreatedAt)
	if diff := created.Sub(popped); diff < -time.Millisecond || diff > time.Millisecond {
		t.Errorf("createdAt %s, want the message's %s", d.CreatedAt, m.CreatedAt)
	}
	failed := parseTS(t, d.FailedAt)
	if failed.Before(popped.Add(-time.Millisecond)) || time.Since(failed) > time.Minute {
		t.Errorf("failedAt %s (created %s)", d.FailedAt, m.CreatedAt)
	}
}

// D5, and D-4 with the target behaviour: GET /api/v1/dlq filters by queue,
// consumerGroup, partition, from and to (failedAt), pages with limit and
// offset (pagination echoes them), total counts every match, newest failure
// first.
func TestD5_DLQListFiltersAndPages(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d4-list")
	s.Configure(t, q, map[string]any{"retryLimit": 0, "retryDelay": 0})
	pa := s.PushN(t, q, "pa", 3)
	pb := s.PushN(t, q, "pb", 2)
	deadLetter := func(part, group string, n int) {
		t.Helper()
		p := s.PopOK(t, e2e.PopPartition(q, part, "consumerGroup", group, "batch", "10"))
		if len(p.Messages) != n {
			t.Fatalf("%s/%s: popped %d, want %d", part, group, len(p.Messages), n)
		}
		items := make([]map[string]any, len(p.Messages))
		for i, m := range p.Messages {
			items[i] = e2e.AckItem(m, "dlq")
		}
		for i, r := range s.AckBatch(t, group, items...) {
			if !r.DLQ {
				t.Fatalf("item %d: %+v %s", i, r, r.ErrText())
			}
		}
	}
	deadLetter("pa", "g1", 3)
	deadLetter("pa", "g2", 3)
	time.Sleep(400 * time.Millisecond)
	deadLetter("pb", "g1", 2)
	_ = pb

	count := func(want int, pairs ...string) []dlqEntry {
		t.Helper()
		l := listDLQ(t, s, append([]string{"queue", q}, pairs...)...)
		if *l.Total != want || len(l.Messages) != want {
			t.Fatalf("filter %v: total %d, %d messages, want %d", pairs, *l.Total, len(l.Messages), want)
		}
		return l.Messages
	}
	all := count(8)
	for i := 1; i < len(all); i++ {
		if parseTS(t, all[i].FailedAt).After(parseTS(t, all[i-1].FailedAt)) {
			t.Fatalf("not newest first: %s after %s", all[i].FailedAt, all[i-1].FailedAt)
		}
	}
	for _, d := range count(5, "consumerGroup", "g1") {
		if d.ConsumerGroup != "g1" {
			t.Fatalf("group filter let %+v through", d)
		}
	}
	for _, d := range count(6, "partition", "pa") {
		if d.Partition != "pa" || d.PartitionID != pa[0].PartitionID {
			t.Fatalf("partition filter let %+v through", d)
		}
	}
	count(3, "partition", "pa", "consumerGroup", "g2")
	count(0, "consumerGroup", "nobody")
	if l := listDLQ(t, s, "queue", e2e.Unique(t, "d4-none")); *l.Total != 0 || len(l.Messages) != 0 {
		t.Fatalf("unknown queue: %+v", l)
	}

	// from / to on failedAt: the pb dead letters came 400 ms after the rest.
	var early, late []time.Time
	for _, d := range all {
		ts := parseTS(t, d.FailedAt)
		if d.Partition == "pb" {
			late = append(late, ts)
		} else {
			early = append(early, ts)
		}
	}
	sort.Slice(early, func(i, j int) bool { return early[i].Before(early[j]) })
	sort.Slice(late, func(i, j int) bool { return late[i].Before(late[j]) })
	cut := early[len(early)-1].Add(late[0].Sub(early[len(early)-1]) / 2)
	for _, d := range count(2, "from", cut.UTC().Format(time.RFC3339Nano)) {
		if d.Partition != "pb" {
			t.Fatalf("from let %+v through", d)
		}
	}
	for _, d := range count(6, "to", cut.UTC().Format(time.RFC3339Nano)) {
		if d.Partition != "pa" {
			t.Fatalf("to let %+v through", d)
		}
	}
	count(0, "from", time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano))

	// Paging: limit 3 walks all 8 once, in the same order; total stays 8.
	seen := map[string]bool{}
	var order []string
	for off := 0; off < 12; off += 3 {
		l := listDLQ(t, s, "queue", q, "limit", "3", "offset", itoa(off))
		if *l.Total != 8 {
			t.Fatalf("offset %d: total %d", off, *l.Total)
		}
		if l.Pagination.Limit != 3 || l.Pagination.Offset != off {
			t.Fatalf("pagination %+v at offset %d", l.Pagination, off)
		}
		want := min(3, max(0, 8-off))
		if len(l.Messages) != want {
			t.Fatalf("offset %d: %d messages, want %d", off, len(l.Messages), want)
		}
		for _, d := range l.Messages {
			if seen[d.ID] {
				t.Fatalf("entry %s on two pages", d.ID)
			}
			seen[d.ID] = true
			order = append(order, d.ID)
		}
	}
	for i, d := range all {
		if order[i] != d.ID {
			t.Fatalf("pages do not follow the list order at %d", i)
		}
	}
	if l := listDLQ(t, s, "queue", q); l.Pagination.Limit != 100 || l.Pagination.Offset != 0 {
		t.Fatalf("default pagination %+v, want limit 100 offset 0", l.Pagination)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// D5 and the target behaviour: POST /api/v1/dlq/:id/requeue pushes the dead
// letter's payload again to the same partition as a new message and removes
// the entry; the requeued message can be popped (by the group that
// dead-lettered it too). DELETE /api/v1/dlq/:id removes an entry. Unknown
// ids are 404 {"error":...}.
func TestD5_RequeueAndDeleteDeadLetters(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d5-requeue")
	s.Configure(t, q, map[string]any{"retryLimit": 0, "retryDelay": 0})
	ps := s.PushN(t, q, "px", 2)
	pid := ps[0].PartitionID
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "consumerGroup", "g"))
	for i, r := range s.AckBatch(t, "g", e2e.AckItem(p.Messages[0], "dlq"), e2e.AckItem(p.Messages[1], "dlq")) {
		if !r.DLQ || !r.Success {
			t.Fatalf("item %d: %+v", i, r)
		}
	}
	l := listDLQ(t, s, "queue", q)
	if *l.Total != 2 {
		t.Fatalf("dead letters %+v", l)
	}
	byTx := map[string]dlqEntry{}
	for _, d := range l.Messages {
		byTx[d.TransactionID] = d
	}
	first, second := byTx[ps[0].Tx], byTx[ps[1].Tx]
	headBefore := e2e.QueryInt(t, e2e.DB, `SELECT head FROM queen.partitions WHERE id = $1`, pid)

	r := s.Post(t, "/api/v1/dlq/"+first.ID+"/requeue", nil)
	if r.Status != 200 {
		t.Fatalf("requeue: %d %s", r.Status, r.Body)
	}
	l = listDLQ(t, s, "queue", q)
	if *l.Total != 1 || l.Messages[0].ID != second.ID {
		t.Fatalf("after requeue: %+v", l.Messages)
	}
	if h := e2e.QueryInt(t, e2e.DB, `SELECT head FROM queen.partitions WHERE id = $1`, pid); h != headBefore+1 {
		t.Fatalf("head %d after requeue, want %d (one new message)", h, headBefore+1)
	}
	for _, group := range []string{"g", ""} {
		args := []string{"batch", "10"}
		if group != "" {
			args = append(args, "consumerGroup", group)
		}
		pr := s.PopUntil(t, e2e.PopQueue(q, args...), 3*time.Second, 100*time.Millisecond)
		got := pr.Messages[len(pr.Messages)-1]
		if got.PartitionID != pid || got.Partition != "px" {
			t.Fatalf("group %q: requeued to %s/%s", group, got.Partition, got.PartitionID)
		}
		if got.ID == ps[0].MessageID {
			t.Fatalf("group %q: requeued message kept the old id %s", group, got.ID)
		}
		want, _ := json.Marshal(ps[0].Payload)
		if g, _ := json.Marshal(got.Data); !bytes.Equal(g, want) {
			t.Fatalf("group %q: payload %s, want %s", group, g, want)
		}
		if group == "g" && len(pr.Messages) != 1 {
			t.Fatalf("group g got %v, want only the requeued message", pr.TxIDs())
		}
	}
	// Requeueing the same entry again: it is gone.
	e2e.WantErrorBody(t, s.Post(t, "/api/v1/dlq/"+first.ID+"/requeue", nil), 404)

	r = s.Delete(t, "/api/v1/dlq/"+second.ID)
	if r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if l := listDLQ(t, s, "queue", q); *l.Total != 0 {
		t.Fatalf("after delete: %+v", l.Messages)
	}
	if h := e2e.QueryInt(t, e2e.DB, `SELECT head FROM queen.partitions WHERE id = $1`, pid); h != headBefore+1 {
		t.Fatalf("delete pushed something: head %d", h)
	}
	e2e.WantErrorBody(t, s.Delete(t, "/api/v1/dlq/"+second.ID), 404)
	e2e.WantErrorBody(t, s.Delete(t, "/api/v1/dlq/"+uuid.NewString()), 404)
	e2e.WantErrorBody(t, s.Post(t, "/api/v1/dlq/"+uuid.NewString()+"/requeue", nil), 404)
}
