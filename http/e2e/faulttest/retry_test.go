package faulttest

import (
	"context"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 41, defect 5: with the database down, pops answer the retryable 503
// with Retry-After that pushes and acks answer, on every pop route and with
// wait=true too, not a 500 that an SDK takes for final and ends its consume
// loop on.
func TestCutDatabase_PopsAnswer503WithRetryAfter(t *testing.T) {
	s, p := startProxied(t, nil)
	q := e2e.Unique(t, "retry")
	s.Push(t, e2e.PushItem{Queue: q, Partition: "P", TransactionID: e2e.TxID("before"), Payload: 1})
	m := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "10"))

	p.Cut()
	for _, c := range []struct {
		name, method, path string
		body               any
	}{
		{"pop queue", "GET", e2e.PopQueue(q, "consumerGroup", "g2"), nil},
		{"pop partition", "GET", e2e.PopPartition(q, "P", "consumerGroup", "g3"), nil},
		{"pop discovery", "GET", e2e.PopDiscovery("namespace", q, "consumerGroup", "g4"), nil},
		{"pop wait", "GET", e2e.PopQueue(q, "consumerGroup", "g5", "wait", "true", "timeout", "2000"), nil},
		{"push", "POST", "/api/v1/push", map[string]any{"items": []e2e.PushItem{
			{Queue: q, Partition: "P", TransactionID: e2e.TxID("cut"), Payload: 2}}}},
		{"ack", "POST", "/api/v1/ack", e2e.AckBody(m.Messages[0], "completed", "g")},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout+slack+5*time.Second)
		r, err := s.DoCtx(ctx, c.method, c.path, c.body)
		cancel()
		if err != nil {
			t.Errorf("%s with the database down: %v", c.name, err)
			continue
		}
		if r.Status != 503 || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s with the database down: %d %s (Retry-After %q), want 503 with Retry-After",
				c.name, r.Status, r.Body, r.Header.Get("Retry-After"))
		}
		if _, err := e2e.CheckError(r, 503, ""); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		t.Logf("%-14s %d %s Retry-After=%s", c.name, r.Status, r.Body, r.Header.Get("Retry-After"))
	}
}
