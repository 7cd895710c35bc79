package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// AckResult is one element of an ack answer (docs/api.md, POST /api/v1/ack).
type AckResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	QueueName     *string `json:"queueName"`
	PartitionName *string `json:"partitionName"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
}

// ErrText is the error text, "<null>" for none.
func (r AckResult) ErrText() string {
	if r.Error == nil {
		return "<null>"
	}
	return *r.Error
}

// AckItem is the acknowledgement of a popped message under its own lease.
func AckItem(m Message, status string) map[string]any {
	return map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": status,
		"leaseId": m.LeaseID}
}

// AckBody is a single-ack body: AckItem in group (nil: the key is left out,
// queue mode).
func AckBody(m Message, status string, group any) map[string]any {
	b := AckItem(m, status)
	if group != nil {
		b["consumerGroup"] = group
	}
	return b
}

// Ack posts a single ack and requires a 200 with a one-element array.
func (s *Server) Ack(t testing.TB, body any) AckResult {
	t.Helper()
	r := s.Post(t, "/api/v1/ack", body)
	if r.Status != 200 {
		t.Fatalf("ack: status %d: %s", r.Status, r.Body)
	}
	var out []AckResult
	r.JSON(t, &out)
	if len(out) != 1 {
		t.Fatalf("ack: want one result, got %s", r.Body)
	}
	return out[0]
}

// AckMessage acknowledges a popped message with status in group ("": queue
// mode).
func (s *Server) AckMessage(t testing.TB, m Message, status, group string) AckResult {
	t.Helper()
	var g any
	if group != "" {
		g = group
	}
	return s.Ack(t, AckBody(m, status, g))
}

// AckOK is AckMessage for an ack that must succeed.
func (s *Server) AckOK(t testing.TB, m Message, status, group string) AckResult {
	t.Helper()
	r := s.AckMessage(t, m, status, group)
	if !r.Success {
		t.Fatalf("ack %s %s: %+v (error %s)", m.TransactionID, status, r, r.ErrText())
	}
	return r
}

// AckBatch posts a batch ack with the body-level group (nil: left out, queue
// mode) and requires a 200 with one result per item.
func (s *Server) AckBatch(t testing.TB, group any, items ...map[string]any) []AckResult {
	t.Helper()
	r := s.Post(t, "/api/v1/ack/batch", batchBody(group, items))
	if r.Status != 200 {
		t.Fatalf("batch ack: status %d: %s", r.Status, r.Body)
	}
	var out []AckResult
	r.JSON(t, &out)
	if len(out) != len(items) {
		t.Fatalf("batch ack: %d results for %d items: %s", len(out), len(items), r.Body)
	}
	return out
}

// AckBatchOK is AckBatch for a batch whose every item must succeed.
func (s *Server) AckBatchOK(t testing.TB, group any, items ...map[string]any) []AckResult {
	t.Helper()
	res := s.AckBatch(t, group, items...)
	for i, r := range res {
		if !r.Success {
			t.Fatalf("batch ack item %d: %+v (error %s)", i, r, r.ErrText())
		}
	}
	return res
}

// AckBatchCtx is AckBatch without a test, for goroutines.
func (s *Server) AckBatchCtx(ctx context.Context, group any, items []map[string]any) ([]AckResult, error) {
	r, err := s.DoCtx(ctx, "POST", "/api/v1/ack/batch", batchBody(group, items))
	if err != nil {
		return nil, err
	}
	if r.Status != 200 {
		return nil, fmt.Errorf("batch ack: %d %s", r.Status, r.Body)
	}
	var out []AckResult
	if err := json.Unmarshal(r.Body, &out); err != nil || len(out) != len(items) {
		return nil, fmt.Errorf("batch ack answer %q for %d items (%v)", r.Body, len(items), err)
	}
	return out, nil
}

func batchBody(group any, items []map[string]any) map[string]any {
	body := map[string]any{"acknowledgments": items}
	if group != nil {
		body["consumerGroup"] = group
	}
	return body
}

// WantAckFailure requires a per-item failure with the given error text.
func WantAckFailure(t testing.TB, r AckResult, text string) {
	t.Helper()
	if r.Success || r.Error == nil || *r.Error != text {
		t.Fatalf("want success:false error %q, got %+v (error %s)", text, r, r.ErrText())
	}
}
