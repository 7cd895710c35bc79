package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// PushItem is one item of a push request body.
type PushItem struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition,omitempty"`
	Payload       any    `json:"payload"`
	TransactionID string `json:"transactionId,omitempty"`
	TraceID       string `json:"traceId,omitempty"`
}

// PushResult is one element of a push answer.
type PushResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transaction_id"`
	Status        string  `json:"status"`
	MessageID     string  `json:"message_id"`
	PartitionID   string  `json:"partition_id"`
	TraceID       *string `json:"trace_id"`
	QueueName     string  `json:"queueName"`
	Error         string  `json:"error"`
}

// Push posts the items and requires a 201 with one result per item; it
// returns the results, whatever their status.
func (s *Server) Push(t testing.TB, items ...PushItem) []PushResult {
	t.Helper()
	var out []PushResult
	s.push(t, items, len(items), &out)
	return out
}

// PushJSON is Push for items that are any JSON objects (what PushItem cannot
// say), with the results as decoded objects.
func (s *Server) PushJSON(t testing.TB, items ...map[string]any) []map[string]any {
	t.Helper()
	if items == nil {
		items = []map[string]any{}
	}
	var out []map[string]any
	s.push(t, items, len(items), &out)
	return out
}

func (s *Server) push(t testing.TB, items any, n int, out any) {
	t.Helper()
	r := s.Post(t, "/api/v1/push", map[string]any{"items": items})
	if r.Status != 201 {
		t.Fatalf("push: status %d: %s", r.Status, r.Body)
	}
	var res []json.RawMessage
	r.JSON(t, &res)
	if len(res) != n {
		t.Fatalf("push: %d results for %d items: %s", len(res), n, clip(r.Body))
	}
	r.JSON(t, out)
}

// PushCtx is Push without a test, for goroutines: it returns the status and,
// for a 201, the results (an error when they are not one per item).
func (s *Server) PushCtx(ctx context.Context, items ...PushItem) (int, []PushResult, error) {
	r, err := s.DoCtx(ctx, "POST", "/api/v1/push", map[string]any{"items": items})
	if err != nil {
		return 0, nil, err
	}
	var out []PushResult
	if r.Status == 201 {
		if err := json.Unmarshal(r.Body, &out); err != nil {
			return r.Status, nil, fmt.Errorf("201 body is not a result array: %q", r.Body)
		}
		if len(out) != len(items) {
			return r.Status, nil, fmt.Errorf("%d results for %d items: %s", len(out), len(items), r.Body)
		}
	}
	return r.Status, out, nil
}

// PushedMessage is a message a test pushed and the broker queued.
type PushedMessage struct {
	Tx, MessageID, PartitionID string
	Payload                    any
}

// Pushed lists queued messages in push order.
type Pushed []PushedMessage

// TxIDs lists the transaction ids, in order.
func (ps Pushed) TxIDs() []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Tx
	}
	return out
}

// PushQueued pushes the items in one request and requires every one to be
// queued.
func (s *Server) PushQueued(t testing.TB, items ...PushItem) Pushed {
	t.Helper()
	res := s.Push(t, items...)
	out := make(Pushed, len(res))
	for i, r := range res {
		if r.Status != "queued" {
			t.Fatalf("push item %d: %+v", i, r)
		}
		out[i] = PushedMessage{Tx: r.TransactionID, MessageID: r.MessageID, PartitionID: r.PartitionID,
			Payload: items[i].Payload}
	}
	return out
}

// PushN pushes n messages to queue/partition ("": Default) in one request,
// requires every one to be queued and returns them in push order. Each
// transaction id is unique within the run (TxID) and each payload is
// {"tx": id, "n": k}.
func (s *Server) PushN(t testing.TB, queue, partition string, n int) Pushed {
	t.Helper()
	items := make([]PushItem, n)
	for k := range items {
		tx := TxID("tx")
		items[k] = PushItem{Queue: queue, Partition: partition, TransactionID: tx,
			Payload: map[string]any{"tx": tx, "n": float64(k)}}
	}
	return s.PushQueued(t, items...)
}

// Configured is a configure answer.
type Configured struct {
	Body    map[string]any // the whole answer
	Options map[string]any // its options object
}

var configuredKeys = []string{"configured", "namespace", "options", "partitionId", "queue", "queueId", "task"}

// ConfigureBody posts body to /api/v1/configure and requires a 200 of the
// documented shape: exactly the keys of docs/api.md, configured true, UUIDs
// for queueId and partitionId, an options object.
func (s *Server) ConfigureBody(t testing.TB, body any) Configured {
	t.Helper()
	r := s.Post(t, "/api/v1/configure", body)
	if r.Status != 200 {
		t.Fatalf("configure: status %d: %s", r.Status, r.Body)
	}
	var m map[string]any
	r.JSON(t, &m)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, configuredKeys) {
		t.Fatalf("configure response keys %v, want %v: %s", keys, configuredKeys, r.Body)
	}
	if m["configured"] != true {
		t.Fatalf("configured = %v", m["configured"])
	}
	for _, k := range []string{"queueId", "partitionId"} {
		if v, _ := m[k].(string); !IsUUID(v) {
			t.Fatalf("%s = %v, want a UUID", k, m[k])
		}
	}
	opts, ok := m["options"].(map[string]any)
	if !ok {
		t.Fatalf("options is not an object: %s", r.Body)
	}
	return Configured{Body: m, Options: opts}
}

// Configure creates or replaces queue with options (nil: none). Configure is
// a full replace, namespace and task included, so it sends the ones a push
// derives from the dotted name: the queue stays in its discovery scope.
func (s *Server) Configure(t testing.TB, queue string, options map[string]any) Configured {
	t.Helper()
	ns, rest, _ := strings.Cut(queue, ".")
	task, _, _ := strings.Cut(rest, ".")
	body := map[string]any{"queue": queue, "namespace": ns, "task": task}
	if options != nil {
		body["options"] = options
	}
	return s.ConfigureBody(t, body)
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// IsUUID reports whether s is a UUID in the broker's form: lower-case hex,
// hyphenated.
func IsUUID(s string) bool { return uuidRE.MatchString(s) }
