package faulttest

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 8, defect 4: with PostgreSQL frozen, every request whose work needs
// the database answers within about the request timeout (DB_REQUEST_TIMEOUT_MS;
// /health within its own 2 s) with a 5xx and a JSON error, rather than waiting
// for the database: a push (including its wait for the shared commit), an
// ack, a batch ack, a transaction, a lease extension, a configure, a DLQ
// listing, a pop that does not wait, the message view, a queue deletion, the
// maintenance switch, a subscription rewrite. After the thaw everything works
// again within a few seconds, and the push that timed out, sent again with the
// same transaction ids, is stored exactly once.
func TestFrozenDatabase_EveryRequestAnswers5xxWithinTheRequestDeadline(t *testing.T) {
	s, p := startProxied(t, nil)
	q := e2e.Unique(t, "frozen")
	gone := e2e.Unique(t, "frozen-gone")
	s.Configure(t, q, map[string]any{"leaseTime": 300})
	var items []e2e.PushItem
	for k := range 4 {
		items = append(items, e2e.PushItem{Queue: q, Partition: "P", TransactionID: e2e.TxID("before"), Payload: k})
	}
	s.Push(t, items...)
	s.Push(t, e2e.PushItem{Queue: gone, Payload: 1})
	// One lease per group: each request below settles a lease of its own.
	pAck := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g-ack", "batch", "10"))
	pBatch := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g-batch", "batch", "10"))
	pTx := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g-tx", "batch", "10"))
	pExt := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g-extend", "batch", "10"))
	m0 := pAck.Messages[0]
	frozenPush := []e2e.PushItem{
		{Queue: q, Partition: "P", TransactionID: e2e.TxID("frozen-a"), Payload: "a"},
		{Queue: q, Partition: "P", TransactionID: e2e.TxID("frozen-b"), Payload: "b"},
	}
	batchAck := map[string]any{"consumerGroup": "g-batch", "acknowledgments": []any{
		e2e.AckBody(pBatch.Messages[0], "completed", "g-batch"), e2e.AckBody(pBatch.Messages[1], "completed", "g-batch")}}
	txAck := e2e.AckBody(pTx.Messages[0], "completed", "g-tx")
	txAck["type"] = "ack"
	transaction := map[string]any{"operations": []any{txAck, map[string]any{"type": "push", "items": []any{
		map[string]any{"queue": q, "partition": "P", "payload": "tx", "transactionId": e2e.TxID("frozen-tx")}}}}}
	messagePath := "/api/v1/messages/" + m0.PartitionID + "/" + url.PathEscape(m0.TransactionID)

	p.Freeze()
	frozenAt := time.Now()
	bound := requestTimeout + slack
	calls := []*call{
		{name: "push", method: "POST", path: "/api/v1/push", body: map[string]any{"items": frozenPush}},
		{name: "ack", method: "POST", path: "/api/v1/ack", body: e2e.AckBody(m0, "completed", "g-ack")},
		{name: "batch ack", method: "POST", path: "/api/v1/ack/batch", body: batchAck},
		{name: "transaction", method: "POST", path: "/api/v1/transaction", body: transaction},
		{name: "lease extend", method: "POST", path: "/api/v1/lease/" + pExt.LeaseID + "/extend", body: map[string]any{"seconds": 60}},
		{name: "configure", method: "POST", path: "/api/v1/configure", body: map[string]any{"queue": q, "options": map[string]any{"leaseTime": 300}}},
		{name: "DLQ list", method: "GET", path: "/api/v1/dlq" + e2e.Query("queue", q)},
		{name: "pop without wait", method: "GET", path: e2e.PopQueue(q, "consumerGroup", "g-pop", "batch", "1")},
		{name: "message view", method: "GET", path: messagePath},
		{name: "delete queue", method: "DELETE", path: "/api/v1/resources/queues/" + gone},
		{name: "maintenance get", method: "GET", path: "/api/v1/system/maintenance/pop"},
		{name: "subscription rewrite", method: "POST", path: "/api/v1/consumer-groups/g-sub/subscription",
			body: map[string]any{"subscriptionTimestamp": time.Now().UTC().Format(time.RFC3339)}},
		{name: "health", method: "GET", path: "/health", bound: healthTimeout + slack},
	}
	for _, c := range calls {
		if c.bound == 0 {
			c.bound = bound
		}
	}
	runAll(s, calls)
	for _, c := range calls {
		switch {
		case c.err != nil:
			t.Errorf("%s with the database frozen: no answer within %v (%v)", c.name, c.bound+5*time.Second, c.err)
			continue
		case c.elapsed > c.bound:
			t.Errorf("%s with the database frozen answered after %v, want within %v: %d %s",
				c.name, c.elapsed.Round(time.Millisecond), c.bound, c.resp.Status, c.resp.Body)
		}
		if c.name == "health" {
			if c.resp.Status != 503 {
				t.Errorf("/health with the database frozen: %d %s, want 503", c.resp.Status, c.resp.Body)
			}
			continue
		}
		if err := checkJSONError(c.resp); err != nil {
			t.Errorf("%s with the database frozen: %v", c.name, err)
		}
	}
	t.Logf("answers with the database frozen, %v after the freeze:", time.Since(frozenAt).Round(time.Millisecond))
	for _, c := range calls {
		if c.resp != nil {
			t.Logf("  %-20s %5v  %d %s", c.name, c.elapsed.Round(time.Millisecond), c.resp.Status, c.resp.Body)
		}
	}

	p.Thaw()
	// Everything works again within a few seconds.
	ctx := context.Background()
	err := e2e.Eventually(15*time.Second, 200*time.Millisecond, func() error {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		r, err := s.DoCtx(c, "POST", "/api/v1/push", map[string]any{"items": []e2e.PushItem{
			{Queue: q, Partition: "P", TransactionID: e2e.TxID("after"), Payload: "after"}}})
		switch {
		case err != nil:
			return err
		case r.Status != 201:
			return fmt.Errorf("%d %s", r.Status, r.Body)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("push after the thaw: %v", err)
	}
	// The push that timed out may have been stored when the database thawed
	// (its statement was on the wire), or not at all; sent again with the
	// same transaction ids it is stored once either way.
	for i, r := range s.Push(t, frozenPush...) {
		if r.Status != "queued" && r.Status != "duplicate" {
			t.Fatalf("frozen push sent again, item %d: %+v", i, r)
		}
	}
	for _, c := range []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"ack", "POST", "/api/v1/ack", e2e.AckBody(m0, "completed", "g-ack"), 200},
		{"batch ack", "POST", "/api/v1/ack/batch", batchAck, 200},
		{"lease extend", "POST", "/api/v1/lease/" + pExt.LeaseID + "/extend", map[string]any{"seconds": 60}, 200},
		{"configure", "POST", "/api/v1/configure", map[string]any{"queue": q, "options": map[string]any{"leaseTime": 300}}, 200},
		{"DLQ list", "GET", "/api/v1/dlq" + e2e.Query("queue", q), nil, 200},
		{"message view", "GET", messagePath, nil, 200},
		{"health", "GET", "/health", nil, 200},
	} {
		err := e2e.Eventually(5*time.Second, 200*time.Millisecond, func() error {
			r, err := s.DoCtx(ctx, c.method, c.path, c.body)
			switch {
			case err != nil:
				return err
			case r.Status != c.status:
				return fmt.Errorf("%d %s", r.Status, r.Body)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s after the thaw: %v, want %d", c.name, err, c.status)
		}
	}
	// A fresh group: the frozen pop's claim may have run when the database
	// thawed, leasing g-pop's messages to a client that was answered 500
	// (the broker ends that lease once the database answers:
	// TestD12_APopWhoseClaimAnswerWasLostFreesItsLease).
	if p := s.Pop(t, e2e.PopQueue(q, "consumerGroup", "g-pop-after", "batch", "1")); p == nil {
		t.Errorf("pop after the thaw: 204, want messages")
	}

	// Pop everything back in a new group: each transaction id once.
	seen := map[string]int{}
	for range 50 {
		r := s.Pop(t, e2e.PopQueue(q, "consumerGroup", "g-check", "subscriptionMode", "all", "batch", "100",
			"autoAck", "true"))
		if r == nil {
			break
		}
		for _, m := range r.Messages {
			seen[m.TransactionID]++
		}
	}
	for _, it := range frozenPush {
		if seen[it.TransactionID] != 1 {
			t.Errorf("transaction %s popped %d times, want once", it.TransactionID, seen[it.TransactionID])
		}
	}
	for _, it := range items {
		if seen[it.TransactionID] != 1 {
			t.Errorf("transaction %s (pushed before the freeze) popped %d times, want once", it.TransactionID, seen[it.TransactionID])
		}
	}
}
