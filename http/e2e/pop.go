package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"testing"
	"time"
)

// Message is one popped message.
type Message struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	TraceID       *string         `json:"traceId"`
	Data          any             `json:"data"`
	RawData       json.RawMessage `json:"-"` // data as the broker sent it; nil when the key is absent
	ProducerSub   *string         `json:"producerSub"`
	CreatedAt     string          `json:"createdAt"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	LeaseID       string          `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
}

// UnmarshalJSON keeps data both decoded and as sent, so payloads can be
// compared byte for byte.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message
	var v struct {
		plain
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*m = Message(v.plain)
	m.RawData = v.Data
	if v.Data != nil {
		return json.Unmarshal(v.Data, &m.Data)
	}
	return nil
}

// PopResponse is a 200 pop answer.
type PopResponse struct {
	Success           bool      `json:"success"`
	Queue             string    `json:"queue"`
	Partition         string    `json:"partition"`
	PartitionID       string    `json:"partitionId"`
	LeaseID           string    `json:"leaseId"`
	ConsumerGroup     string    `json:"consumerGroup"`
	Messages          []Message `json:"messages"`
	PartitionsClaimed int       `json:"partitionsClaimed"`
}

// TxIDs lists the transaction ids of the delivered messages in order; none
// for a nil p (a 204).
func (p *PopResponse) TxIDs() []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(p.Messages))
	for i, m := range p.Messages {
		out[i] = m.TransactionID
	}
	return out
}

// WantTxIDs requires the pop p (nil: a 204) to have delivered exactly want,
// in order.
func WantTxIDs(t testing.TB, what string, p *PopResponse, want []string) {
	t.Helper()
	if got := p.TxIDs(); !slices.Equal(got, want) {
		t.Fatalf("%s: delivered %v, want %v", what, got, want)
	}
}

// PopQueue is the path of GET /api/v1/pop/queue/:queue with a query.
func PopQueue(queue string, pairs ...string) string {
	return "/api/v1/pop/queue/" + url.PathEscape(queue) + Query(pairs...)
}

// PopPartition is the path of GET /api/v1/pop/queue/:queue/partition/:partition.
func PopPartition(queue, partition string, pairs ...string) string {
	return "/api/v1/pop/queue/" + url.PathEscape(queue) + "/partition/" + url.PathEscape(partition) + Query(pairs...)
}

// PopDiscovery is the path of the discovery route GET /api/v1/pop with a
// query (namespace, task, ...).
func PopDiscovery(pairs ...string) string { return "/api/v1/pop" + Query(pairs...) }

// PopResult is the answer to a pop, whatever its status.
type PopResult struct {
	*Response
	Pop *PopResponse // the decoded body of a 200; nil otherwise
}

// PopCtx sends a pop without a test, for goroutines. It returns an error
// when no answer comes or a 200 is not a pop answer.
func (s *Server) PopCtx(ctx context.Context, path string) (*PopResult, error) {
	r, err := s.DoCtx(ctx, "GET", path, nil)
	if err != nil {
		return nil, err
	}
	res := &PopResult{Response: r}
	if r.Status == 200 {
		var p PopResponse
		if err := json.Unmarshal(r.Body, &p); err != nil {
			return res, fmt.Errorf("200 that is not a pop response (%v): %q", err, r.Body)
		}
		res.Pop = &p
	}
	return res, nil
}

// TryPop sends a pop and returns its answer, whatever the status; no answer,
// or a 200 that is not a pop answer, fails the test.
func (s *Server) TryPop(t testing.TB, path string) *PopResult {
	t.Helper()
	r, err := s.PopCtx(context.Background(), path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return r
}

// Bare204 reports what is wrong with r as the empty pop of docs/pop-routes.md: a
// 204 with no body and no Content-Type.
func (r *Response) Bare204() error {
	if r.Status != 204 {
		return fmt.Errorf("want a bare 204, got %d %q", r.Status, clip(r.Body))
	}
	if len(r.Body) != 0 {
		return fmt.Errorf("204 with a body: %q", r.Body)
	}
	if ct := r.Header.Values("Content-Type"); len(ct) != 0 {
		return fmt.Errorf("204 with Content-Type %q", ct)
	}
	return nil
}

// Delivered returns the body of a 200 that delivered messages, nil for a
// bare 204, and an error for anything else (a 200 without messages
// included).
func (r *PopResult) Delivered() (*PopResponse, error) {
	switch r.Status {
	case 204:
		return nil, r.Bare204()
	case 200:
		if len(r.Pop.Messages) == 0 {
			return nil, fmt.Errorf("200 without messages: %s", clip(r.Body))
		}
		return r.Pop, nil
	}
	return nil, fmt.Errorf("status %d: %s", r.Status, clip(r.Body))
}

// Pop sends a pop and returns what it delivered, nil for a bare 204;
// anything else fails the test.
func (s *Server) Pop(t testing.TB, path string) *PopResponse {
	t.Helper()
	p, err := s.TryPop(t, path).Delivered()
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return p
}

// PopOK is Pop for a pop that must deliver.
func (s *Server) PopOK(t testing.TB, path string) *PopResponse {
	t.Helper()
	p := s.Pop(t, path)
	if p == nil {
		t.Fatalf("GET %s: want messages, got a bare 204", path)
	}
	return p
}

// PopEmpty sends a pop that must answer a bare 204 and returns the answer.
func (s *Server) PopEmpty(t testing.TB, path string) *PopResult {
	t.Helper()
	r := s.TryPop(t, path)
	if err := r.Bare204(); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return r
}

var errNothing = errors.New("nothing delivered")

// PopUntil pops every interval until a pop delivers, for at most d, and
// returns the delivery; nothing within d fails the test, as does an answer
// that is neither a delivery nor a bare 204.
func (s *Server) PopUntil(t testing.TB, path string, d, interval time.Duration) *PopResponse {
	t.Helper()
	var p *PopResponse
	err := Eventually(d, interval, func() error {
		var err error
		if p, err = s.TryPop(t, path).Delivered(); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if p == nil {
			return errNothing
		}
		return nil
	})
	if err != nil {
		t.Fatalf("GET %s delivered nothing within %v", path, d)
	}
	return p
}

// CreatedAtRE is the createdAt format of docs/pop-routes.md: microseconds and a
// literal Z.
var CreatedAtRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)
