package authtest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// popped is the part of a popped message these tests read.
type popped struct {
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	LeaseID       string  `json:"leaseId"`
	ProducerSub   *string `json:"producerSub"`
}

// popOne pops queue for group and requires exactly one message.
func popOne(t *testing.T, s *e2e.Server, authz, queue, group string) popped {
	t.Helper()
	r := call(t, s, "GET", e2e.PopQueue(queue, "consumerGroup", group), authz, nil)
	var p struct {
		Messages []popped `json:"messages"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &p) != nil || len(p.Messages) != 1 {
		t.Fatalf("pop %s: %d %s, want one message", queue, r.status, r.body)
	}
	return p.Messages[0]
}

func sub(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

// pushForged pushes one message whose body claims producerSub "forged".
func pushForged(t *testing.T, s *e2e.Server, authz, queue, tx string) {
	t.Helper()
	r := call(t, s, "POST", "/api/v1/push", authz, map[string]any{"items": []map[string]any{
		{"queue": queue, "transactionId": tx, "payload": map[string]any{"n": 1}, "producerSub": "forged"}}})
	if r.status != http.StatusCreated {
		t.Fatalf("push: %d %s", r.status, r.body)
	}
}

// §1.2: the token's sub is stamped on every pushed message as producerSub,
// over a producerSub the body sends, and returned by pop, by the DLQ and
// by the message view.
func TestPushStampsTheTokensSubAsProducerSub(t *testing.T) {
	t.Parallel()
	s := hsBroker(t)
	producer := bearer(hs256(t, claims("svc-a", "read-write")))
	reader := bearer(hs256(t, claims("dashboard", "read-only")))
	q, tx := e2e.Unique(t, "sub"), e2e.Unique(t, "tx")
	pushForged(t, s, producer, q, tx)

	m := popOne(t, s, producer, q, "g")
	if sub(m.ProducerSub) != "svc-a" {
		t.Fatalf("pop: producerSub %s, want svc-a", sub(m.ProducerSub))
	}
	ack := map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID,
		"consumerGroup": "g", "status": "dlq"}
	if r := call(t, s, "POST", "/api/v1/ack", producer, ack); r.status != http.StatusOK {
		t.Fatalf("ack: %d %s", r.status, r.body)
	}

	r := call(t, s, "GET", "/api/v1/dlq"+e2e.Query("queue", q), reader, nil)
	var dlq struct {
		Messages []popped `json:"messages"`
	}
	if r.status != http.StatusOK || json.Unmarshal(r.body, &dlq) != nil || len(dlq.Messages) != 1 {
		t.Fatalf("dlq: %d %s", r.status, r.body)
	}
	if sub(dlq.Messages[0].ProducerSub) != "svc-a" {
		t.Fatalf("dlq: producerSub %s, want svc-a", sub(dlq.Messages[0].ProducerSub))
	}

	r = call(t, s, "GET", "/api/v1/messages/"+m.PartitionID+"/"+url.PathEscape(tx), reader, nil)
	var view popped
	if r.status != http.StatusOK || json.Unmarshal(r.body, &view) != nil {
		t.Fatalf("message view: %d %s", r.status, r.body)
	}
	if sub(view.ProducerSub) != "svc-a" {
		t.Fatalf("message view: producerSub %s, want svc-a", sub(view.ProducerSub))
	}
}

// §1.2: a transaction's push operations are stamped as a push is.
func TestTransactionPushStampsTheTokensSub(t *testing.T) {
	t.Parallel()
	s := hsBroker(t)
	producer := bearer(hs256(t, claims("svc-b", "read-write")))
	q := e2e.Unique(t, "txsub")
	r := call(t, s, "POST", "/api/v1/transaction", producer, map[string]any{"operations": []map[string]any{
		{"type": "push", "items": []map[string]any{{"queue": q, "payload": 1, "producerSub": "forged"}}}}})
	if r.status != http.StatusOK {
		t.Fatalf("transaction: %d %s", r.status, r.body)
	}
	if m := popOne(t, s, producer, q, "g"); sub(m.ProducerSub) != "svc-b" {
		t.Fatalf("pop: producerSub %s, want svc-b", sub(m.ProducerSub))
	}
}

// A token without sub stamps nothing: producerSub is null, whatever the
// body says.
func TestTokenWithoutSubLeavesProducerSubNull(t *testing.T) {
	t.Parallel()
	s := hsBroker(t)
	producer := bearer(hs256(t, claims("", "read-write")))
	q := e2e.Unique(t, "nosub")
	pushForged(t, s, producer, q, e2e.Unique(t, "tx"))
	if m := popOne(t, s, producer, q, "g"); m.ProducerSub != nil {
		t.Fatalf("producerSub %s, want null", *m.ProducerSub)
	}
}

// §1.2: a producerSub in the body is ignored with authentication off too.
func TestBodyProducerSubIsIgnoredWithAuthOff(t *testing.T) {
	t.Parallel()
	s := e2e.Shared(t)
	q := e2e.Unique(t, "offsub")
	pushForged(t, s, "", q, e2e.Unique(t, "tx"))
	if m := popOne(t, s, "", q, "g"); m.ProducerSub != nil {
		t.Fatalf("producerSub %s, want null", *m.ProducerSub)
	}
}
