package edgetest

import (
	"fmt"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// Contract B: strings that reach PostgreSQL are valid UTF-8 without NUL, and
// JSON strings hold no lone surrogate; anything else is a 400 naming the
// field, found at parse time, and nothing of the request is applied.

// ---------------------------------------------------------------- ack

// leasedBatch pushes n messages to a fresh queue and pops them in group
// with one lease; it returns the messages and the cursor as the pop left
// it.
func leasedBatch(t testing.TB, s *e2e.Server, prefix, group string, n int) ([]e2e.Message, e2e.Cursor) {
	t.Helper()
	q := e2e.Unique(t, prefix)
	s.PushN(t, q, "", n)
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", group, "batch", fmt.Sprint(n)))
	if len(p.Messages) != n {
		t.Fatalf("pop delivered %d messages, want %d", len(p.Messages), n)
	}
	c := e2e.ReadCursor(t, p.Messages[0].PartitionID, group)
	if !c.Found || c.LeaseID != p.LeaseID || c.ExpiresIn <= 0 {
		t.Fatalf("cursor after the pop: %+v", c)
	}
	return p.Messages, c
}

// unchanged requires the cursor of (partition, group) to be as the pop left
// it: nothing committed, the same live lease, no failure counted.
func unchanged(t testing.TB, partitionID, group string, before e2e.Cursor) {
	t.Helper()
	c := e2e.ReadCursor(t, partitionID, group)
	if c.Committed != before.Committed || c.LeaseID != before.LeaseID || c.ExpiresIn <= 0 || c.Failures != before.Failures {
		t.Fatalf("a rejected ack was applied: cursor %+v, before %+v", c, before)
	}
}

// Contract B: /api/v1/ack with a NUL in transactionId, consumerGroup or
// error is a 400 naming the field, and the message stays leased; a correct
// ack then succeeds.
func TestAckWithNULTransactionIdIs400AndAppliesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ms, before := leasedBatch(t, s, "edge-ack-nul-tx", "g", 1)
	b := e2e.AckItem(ms[0], "completed")
	b["consumerGroup"] = "g"
	b["transactionId"] = ms[0].TransactionID + "\x00"
	e2e.WantError(t, s.Post(t, "/api/v1/ack", b), 400, "transactionId")
	b["transactionId"] = "\x00" + ms[0].TransactionID
	e2e.WantError(t, s.Post(t, "/api/v1/ack", b), 400, "transactionId")
	unchanged(t, ms[0].PartitionID, "g", before)
	s.AckOK(t, ms[0], "completed", "g")
}

func TestAckWithNULConsumerGroupIs400AndAppliesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ms, before := leasedBatch(t, s, "edge-ack-nul-group", "g", 1)
	b := e2e.AckItem(ms[0], "completed")
	b["consumerGroup"] = "g\x00"
	e2e.WantError(t, s.Post(t, "/api/v1/ack", b), 400, "consumerGroup")
	unchanged(t, ms[0].PartitionID, "g", before)
	s.AckOK(t, ms[0], "completed", "g")
}

func TestAckWithNULErrorIs400AndAppliesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ms, before := leasedBatch(t, s, "edge-ack-nul-error", "g", 1)
	for _, status := range []string{"failed", "dlq", "completed"} {
		b := e2e.AckItem(ms[0], status)
		b["consumerGroup"] = "g"
		b["error"] = "boom\x00after"
		e2e.WantError(t, s.Post(t, "/api/v1/ack", b), 400, "error")
		unchanged(t, ms[0].PartitionID, "g", before)
	}
	s.AckOK(t, ms[0], "completed", "g")
}

// Contract B: a lone surrogate in an ack's transactionId or consumerGroup
// is a 400 naming the field (not a U+FFFD that names another message or
// group).
func TestAckWithLoneSurrogateIs400AndAppliesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ms, before := leasedBatch(t, s, "edge-ack-surrogate", "g", 1)
	m := ms[0]
	for field, body := range map[string]string{
		"transactionId": fmt.Sprintf(`{"transactionId":"%s\ud800","partitionId":%q,"leaseId":%q,"consumerGroup":"g"}`,
			m.TransactionID, m.PartitionID, m.LeaseID),
		"consumerGroup": fmt.Sprintf(`{"transactionId":%q,"partitionId":%q,"leaseId":%q,"consumerGroup":"g\udc00"}`,
			m.TransactionID, m.PartitionID, m.LeaseID),
	} {
		if _, err := e2e.CheckError(s.Post(t, "/api/v1/ack", body), 400, field); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	unchanged(t, m.PartitionID, "g", before)
	s.AckOK(t, m, "completed", "g")
}

// Contract B: in /api/v1/ack/batch one item with a NUL makes the whole
// request a 400 naming the field, and none of its valid items (placed before
// the bad one) is applied: the batch's messages stay leased, and the corrected
// batch then succeeds item by item.
func TestAckBatchWithNULTransactionIdIs400AndAppliesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ms, before := leasedBatch(t, s, "edge-batch-nul-tx", "g", 3)
	items := []map[string]any{e2e.AckItem(ms[0], "completed"), e2e.AckItem(ms[1], "completed"),
		e2e.AckItem(ms[2], "completed")}
	items[2]["transactionId"] = ms[2].TransactionID + "\x00"
	e2e.WantError(t, s.Post(t, "/api/v1/ack/batch", map[string]any{"consumerGroup": "g", "acknowledgments": items}),
		400, "transactionId")
	unchanged(t, ms[0].PartitionID, "g", before)
	items[2]["transactionId"] = ms[2].TransactionID
	s.AckBatchOK(t, "g", items...)
	if c := e2e.ReadCursor(t, ms[0].PartitionID, "g"); c.LeaseID != "" {
		t.Fatalf("the corrected batch left the lease: %+v", c)
	}
}

func TestAckBatchWithNULErrorIs400AndAppliesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ms, before := leasedBatch(t, s, "edge-batch-nul-error", "g", 2)
	items := []map[string]any{e2e.AckItem(ms[0], "completed"), e2e.AckItem(ms[1], "failed")}
	items[1]["error"] = "boom\x00"
	e2e.WantError(t, s.Post(t, "/api/v1/ack/batch", map[string]any{"consumerGroup": "g", "acknowledgments": items}),
		400, "error")
	unchanged(t, ms[0].PartitionID, "g", before)
	items[1]["error"] = "boom"
	s.AckBatchOK(t, "g", items...)
	if c := e2e.ReadCursor(t, ms[0].PartitionID, "g"); c.Failures != 1 {
		t.Fatalf("the corrected failed ack counted %d failures, want 1: %+v", c.Failures, c)
	}
}

func TestAckBatchWithNULConsumerGroupIs400AndAppliesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ms, before := leasedBatch(t, s, "edge-batch-nul-group", "g", 2)
	items := []map[string]any{e2e.AckItem(ms[0], "completed"), e2e.AckItem(ms[1], "completed")}
	e2e.WantError(t, s.Post(t, "/api/v1/ack/batch", map[string]any{"consumerGroup": "g\x00", "acknowledgments": items}),
		400, "consumerGroup")
	unchanged(t, ms[0].PartitionID, "g", before)
	s.AckBatchOK(t, "g", items...)
}

// Contract B: after a rejected batch the valid item's message is redelivered
// once its lease expires, like any unacknowledged message (and not before).
func TestAckBatchWithNULLeavesValidItemToRedeliver(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-batch-nul-redeliver")
	s.PushN(t, q, "", 2)
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "2", "leaseSeconds", "2"))
	items := []map[string]any{e2e.AckItem(p.Messages[0], "completed"), e2e.AckItem(p.Messages[1], "completed")}
	items[1]["transactionId"] = "bad\x00"
	e2e.WantError(t, s.Post(t, "/api/v1/ack/batch", map[string]any{"consumerGroup": "g", "acknowledgments": items}),
		400, "transactionId")
	// Bounded: the lease is 2 s; poll for up to 15 s.
	var again *e2e.PopResponse
	for i := 0; i < 60 && again == nil; i++ {
		again = s.Pop(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "2", "wait", "true", "timeout", "250"))
	}
	if again == nil || len(again.Messages) == 0 || again.Messages[0].TransactionID != p.Messages[0].TransactionID {
		t.Fatalf("after the lease expired the first message was not redelivered: %+v", again)
	}
}

// ---------------------------------------------------------------- push

// Contract B: a NUL byte is not the end of a body: the routes that read
// their body in one pass (push, ack, ack/batch, traces) answer a body with
// anything but spaces after its JSON, a NUL first, 400 Invalid JSON, as the
// others do, and apply nothing.
func TestBodyWithNULAfterItsJSONIs400AndAppliesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ms, before := leasedBatch(t, s, "edge-nul-body", "g", 1)
	m := ms[0]
	q := e2e.Unique(t, "edge-nul-push")
	bodies := map[string]string{
		"/api/v1/push": `{"items":[{"queue":"` + q + `","payload":1}]}`,
		"/api/v1/ack": `{"transactionId":"` + m.TransactionID + `","partitionId":"` + m.PartitionID +
			`","leaseId":"` + m.LeaseID + `","status":"completed","consumerGroup":"g"}`,
		"/api/v1/ack/batch": `{"consumerGroup":"g","acknowledgments":[{"transactionId":"` + m.TransactionID +
			`","partitionId":"` + m.PartitionID + `","leaseId":"` + m.LeaseID + `","status":"completed"}]}`,
		"/api/v1/traces": `{"transactionId":"` + m.TransactionID + `","partitionId":"` + m.PartitionID +
			`","eventType":"info","data":{}}`,
	}
	for path, body := range bodies {
		for _, bad := range []string{body + "\x00garbage", body + "\x00", " \x00" + body} {
			e2e.WantError(t, s.Post(t, path, bad), 400, "Invalid JSON")
		}
	}
	unchanged(t, m.PartitionID, "g", before)
	if c := e2e.QueueCounts(t, q); c.Queues != 0 {
		t.Fatalf("a rejected push was written: %+v", c)
	}
	if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.traces WHERE transaction_id = $1`, m.TransactionID); n != 0 {
		t.Fatalf("a rejected trace was recorded: %d", n)
	}
	s.AckOK(t, m, "completed", "g")
}

// Contract B: a transaction's push payload with invalid UTF-8 in a string is
// refused as on the push route (400 Invalid JSON), and nothing of the
// transaction is written: its messages would go out as JSON that is not
// UTF-8.
func TestTransactionPayloadWithInvalidUTF8Is400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-tx-utf8")
	for _, payload := range []string{"\"a\xffb\"", "{\"k\":[\"ok\",\"\xc3\"]}"} {
		body := `{"operations":[{"type":"push","items":[{"queue":"` + q + `","payload":` + payload + `}]}]}`
		e2e.WantError(t, s.Post(t, "/api/v1/transaction", body), 400, "Invalid JSON")
		e2e.WantError(t, s.Post(t, "/api/v1/push", `{"items":[{"queue":"`+q+`","payload":`+payload+`}]}`), 400, "Invalid JSON")
	}
	if c := e2e.QueueCounts(t, q); c.Queues != 0 {
		t.Fatalf("a rejected transaction was written: %+v", c)
	}
}

// Contract B: a push transactionId with a lone surrogate is a 400 naming
// transactionId, and nothing of the request is written. Today it silently
// becomes U+FFFD, so two distinct ids ("\ud800", "\udbff") collide.
func TestPushLoneSurrogateTransactionIdIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, tx := range []string{`\ud800`, `\udc00`, `\udbff`, `a\ud800b`, `\ud800\u0041`, `\ude00\ud83d`, `\ud800\ud800`} {
		q := e2e.Unique(t, "edge-push-surrogate")
		body := fmt.Sprintf(`{"items":[{"queue":%q,"payload":1,"transactionId":"ok-1"},{"queue":%q,"payload":2,"transactionId":"%s"}]}`,
			q, q, tx)
		if _, err := e2e.CheckError(s.Post(t, "/api/v1/push", body), 400, "transactionId"); err != nil {
			t.Errorf("transactionId %q: %v", tx, err)
		}
		if n := e2e.QueueCounts(t, q).Queues; n != 0 {
			t.Errorf("transactionId %q: the rejected push created the queue", tx)
		}
	}
}

func TestPushDistinctLoneSurrogateIdsDoNotCollide(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-push-collide")
	body := fmt.Sprintf(`{"items":[{"queue":%q,"payload":1,"transactionId":"\ud800"},{"queue":%q,"payload":2,"transactionId":"\udbff"}]}`, q, q)
	e2e.WantError(t, s.Post(t, "/api/v1/push", body), 400, "transactionId")
	if n := e2e.QueueCounts(t, q).Txids; n != 0 {
		t.Fatalf("%d messages written", n)
	}
}

// Contract B: a valid surrogate pair is a character like any other.
func TestPushSurrogatePairTransactionIdRoundTrips(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-push-pair")
	tx := e2e.TxID("pair")
	body := fmt.Sprintf(`{"items":[{"queue":%q,"payload":1,"transactionId":"%s\ud83d\ude00"}]}`, q, tx)
	r := s.Post(t, "/api/v1/push", body)
	if r.Status != 201 {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	var res []e2e.PushResult
	r.JSON(t, &res)
	if len(res) != 1 || res[0].TransactionID != tx+"😀" || res[0].Status != "queued" {
		t.Fatalf("push answer %s", r.Body)
	}
	p := s.PopOK(t, e2e.PopQueue(q))
	if p.Messages[0].TransactionID != tx+"😀" {
		t.Fatalf("popped transactionId %q", p.Messages[0].TransactionID)
	}
}

// Contract B: raw invalid UTF-8 (a 0xFF byte) inside the JSON string of
// queue, partition or transactionId, and a lone surrogate in queue or
// partition, are a 400 naming the field; nothing is written.
func TestPushInvalidUTF8InQueuePartitionTransactionIdIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, c := range []struct{ field, queue, partition, tx string }{
		{"queue", "\xff", "", ""},
		{"queue", "\xc3", "", ""}, // a truncated sequence
		{"queue", `\ud800`, "", ""},
		{"partition", "", "p\xff", ""},
		{"partition", "", `p\udfff`, ""},
		{"transactionId", "", "", "t\xff"},
		{"transactionId", "", "", "t\xed\xa0\x80"}, // a surrogate encoded as UTF-8
	} {
		q := e2e.Unique(t, "edge-push-utf8")
		body := fmt.Sprintf(`{"items":[{"queue":"%s%s","partition":"P%s","transactionId":"T%s","payload":{"k":"v"}}]}`,
			q, c.queue, c.partition, c.tx)
		if _, err := e2e.CheckError(s.Post(t, "/api/v1/push", []byte(body)), 400, c.field); err != nil {
			t.Errorf("%s %q: %v", c.field, body, err)
		}
		if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.queues WHERE starts_with(name, $1)`, q); n != 0 {
			t.Errorf("%s %q: the rejected push created a queue", c.field, body)
		}
	}
}

// ---------------------------------------------------------------- configure

// Contract B: configure with a NUL (or a lone surrogate) in namespace or task
// is a 400 naming the field and creates nothing.
func TestConfigureNULInNamespaceOrTaskIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, c := range []struct{ field, value string }{
		{"namespace", `a\u0000b`}, {"namespace", `\u0000`}, {"task", `t\u0000`},
		{"namespace", `\ud800`}, {"task", `x\udc00`},
	} {
		q := e2e.Unique(t, "edge-conf-nul")
		body := fmt.Sprintf(`{"queue":%q,"%s":"%s"}`, q, c.field, c.value)
		if _, err := e2e.CheckError(s.Post(t, "/api/v1/configure", body), 400, c.field); err != nil {
			t.Errorf("%s: %v", body, err)
		}
		if n := e2e.QueueCounts(t, q).Queues; n != 0 {
			t.Errorf("%s: the rejected configure created the queue", body)
		}
	}
}

// Contract B: a namespace or task that is neither a string nor null is a 400
// naming it (today 42 is stored as ""), and creates nothing.
func TestConfigureNonStringNamespaceIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, c := range []struct{ field, value string }{
		{"namespace", `42`}, {"namespace", `true`}, {"namespace", `{}`}, {"namespace", `["a"]`},
		{"task", `42`}, {"task", `false`},
	} {
		q := e2e.Unique(t, "edge-conf-type")
		body := fmt.Sprintf(`{"queue":%q,"%s":%s}`, q, c.field, c.value)
		if _, err := e2e.CheckError(s.Post(t, "/api/v1/configure", body), 400, c.field); err != nil {
			t.Errorf("%s: %v", body, err)
		}
		if n := e2e.QueueCounts(t, q).Queues; n != 0 {
			t.Errorf("%s: the rejected configure created the queue", body)
		}
	}
}

// Contract B: null namespace and task stay accepted (the SDKs send them) and
// configure them as "".
func TestConfigureNullNamespaceIsAccepted(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-conf-null")
	r := s.Post(t, "/api/v1/configure", fmt.Sprintf(`{"queue":%q,"namespace":null,"task":null}`, q))
	if r.Status != 200 {
		t.Fatalf("configure: %d %s", r.Status, r.Body)
	}
	var out struct {
		Namespace *string `json:"namespace"`
		Task      *string `json:"task"`
	}
	r.JSON(t, &out)
	if out.Namespace == nil || *out.Namespace != "" || out.Task == nil || *out.Task != "" {
		t.Fatalf("answer %s", r.Body)
	}
}

// ---------------------------------------------------------------- query strings

// Contract B: a query parameter that reaches the database must be valid UTF-8
// without NUL: the discovery scope, the DLQ filters, a pop's consumerGroup.
func TestDiscoveryNamespaceNULOrTaskInvalidUTF8Is400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, c := range []struct{ query, field string }{
		{"namespace=%00", "namespace"},
		{"namespace=a%00b", "namespace"},
		{"namespace=%FF", "namespace"},
		{"task=%FF", "task"},
		{"task=%00", "task"},
		{"namespace=ok&task=%C3", "task"},
	} {
		for _, wait := range []string{"", "&wait=true&timeout=2000"} {
			path := "/api/v1/pop?" + c.query + wait
			if _, err := e2e.CheckError(s.Get(t, path), 400, c.field); err != nil {
				t.Errorf("GET %s: %v", path, err)
			}
		}
	}
}

func TestDLQQueryNULOrInvalidUTF8Is400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, c := range []struct{ query, field string }{
		{"queue=%00", "queue"},
		{"queue=q%FF", "queue"},
		{"consumerGroup=%00", "consumerGroup"},
		{"partition=%FF", "partition"},
		{"partition=p%00", "partition"},
	} {
		path := "/api/v1/dlq?" + c.query
		if _, err := e2e.CheckError(s.Get(t, path), 400, c.field); err != nil {
			t.Errorf("GET %s: %v", path, err)
		}
	}
}

func TestPopConsumerGroupNULOrInvalidUTF8Is400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-pop-group")
	s.PushN(t, q, "", 1)
	for _, bad := range []string{"%00", "g%00", "%FF", "g%C3"} {
		for name, path := range map[string]string{
			"queue":     e2e.PopQueue(q) + "?consumerGroup=" + bad,
			"partition": e2e.PopPartition(q, "Default") + "?consumerGroup=" + bad,
			"discovery": e2e.PopDiscovery("namespace", q) + "&consumerGroup=" + bad,
		} {
			if _, err := e2e.CheckError(s.Get(t, path), 400, "consumerGroup"); err != nil {
				t.Errorf("%s route, GET %s: %v", name, path, err)
			}
		}
	}
	// The message was not leased by any of them.
	s.PopOK(t, e2e.PopQueue(q))
}

// Contract B: a configure whose queue name holds a lone surrogate is a 400
// naming queue (encoding/json would turn it into U+FFFD, a valid name) and
// creates nothing.
func TestConfigureLoneSurrogateQueueIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-conf-surrogate")
	e2e.WantError(t, s.Post(t, "/api/v1/configure", fmt.Sprintf(`{"queue":"%s\ud800"}`, q)), 400, "queue")
	if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.queues WHERE starts_with(name, $1)`, q); n != 0 {
		t.Fatalf("the rejected configure created a queue")
	}
}

// Contract B on GET /api/v1/messages/:partitionId/:transactionId: a
// transactionId that decodes to a NUL or to invalid UTF-8 is a 400 naming
// it, not a database error.
func TestMessageRouteTransactionIdNULOrInvalidUTF8Is400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-msg-route")
	ps := s.PushN(t, q, "", 1)
	for _, tx := range []string{"a%00b", "%00", "a%FFb", "%ED%A0%80"} {
		path := "/api/v1/messages/" + ps[0].PartitionID + "/" + tx
		if _, err := e2e.CheckError(s.Get(t, path), 400, "transactionId"); err != nil {
			t.Errorf("GET %s: %v", path, err)
		}
	}
}

// Contract B on POST /api/v1/transaction, which reads its body with another
// decoder: a push item's transactionId with a lone surrogate, and an ack's
// consumerGroup or error with a NUL, are a 400 naming the field, and nothing
// of the transaction is applied.
func TestTransactionRouteNULOrLoneSurrogateIs400AndAppliesNothing(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ms, before := leasedBatch(t, s, "edge-txn", "g", 1)
	m := ms[0]
	target := e2e.Unique(t, "edge-txn-target")
	ack := func(extra string) string {
		return fmt.Sprintf(`{"type":"ack","transactionId":%q,"partitionId":%q,"leaseId":%q%s}`,
			m.TransactionID, m.PartitionID, m.LeaseID, extra)
	}
	push := func(tx string) string {
		return fmt.Sprintf(`{"type":"push","items":[{"queue":%q,"payload":1,"transactionId":"%s"}]}`, target, tx)
	}
	for _, c := range []struct{ field, ops string }{
		{"transactionId", push(`\ud800`) + "," + ack(`,"consumerGroup":"g"`)},
		{"transactionId", ack(`,"consumerGroup":"g"`) + "," + push(`x\udc00`)},
		{"consumerGroup", push("ok-1") + "," + ack(`,"consumerGroup":"g\u0000"`)},
		{"error", push("ok-2") + "," + ack(`,"consumerGroup":"g","status":"failed","error":"boom\u0000"`)},
	} {
		body := `{"operations":[` + c.ops + `]}`
		if _, err := e2e.CheckError(s.Post(t, "/api/v1/transaction", body), 400, c.field); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
	if n := e2e.QueueCounts(t, target).Queues; n != 0 {
		t.Errorf("a rejected transaction pushed (queue %q created)", target)
	}
	unchanged(t, m.PartitionID, "g", before)
	s.AckOK(t, m, "completed", "g")
}
