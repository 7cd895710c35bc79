// Package streamtest holds the black-box HTTP tests of the streams routes
// (docs/api.md "Streams", issue 42): POST /streams/v1/queries,
// /streams/v1/state/get and /streams/v1/cycle. Each test is named after the
// rule of the issue it checks. The tests drive the routes as the SDKs'
// runtimes do: pop a batch of the source with a consumer group, read the
// state, commit a cycle with the state ops, the sink pushes and the ack of
// the batch's last message.
package streamtest

import (
	"encoding/json"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "stream") }

// shared returns the package's one broker (e2e.Shared).
func shared(t testing.TB) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "DB_POOL_SIZE=8")
}

// register registers a query and returns its query_id.
func register(t testing.TB, s *e2e.Server, name, source, sink string) string {
	t.Helper()
	r := s.Post(t, "/streams/v1/queries", map[string]any{"name": name, "source_queue": source, "sink_queue": sink, "config_hash": "h1"})
	if r.Status != 200 {
		t.Fatalf("register %s: %d %s", name, r.Status, r.Body)
	}
	var a struct {
		Success bool   `json:"success"`
		QueryID string `json:"query_id"`
	}
	r.JSON(t, &a)
	if !a.Success || !e2e.IsUUID(a.QueryID) {
		t.Fatalf("register %s: %s", name, r.Body)
	}
	return a.QueryID
}

// state reads the state rows of (query, partition) as key -> value.
func state(t testing.TB, s *e2e.Server, query, partition string) map[string]json.RawMessage {
	t.Helper()
	r := s.Post(t, "/streams/v1/state/get", map[string]any{"query_id": query, "partition_id": partition, "keys": []string{}})
	if r.Status != 200 {
		t.Fatalf("state/get: %d %s", r.Status, r.Body)
	}
	var a struct {
		Success bool `json:"success"`
		Rows    []struct {
			Key       string          `json:"key"`
			Value     json.RawMessage `json:"value"`
			UpdatedAt string          `json:"updated_at"`
		} `json:"rows"`
	}
	r.JSON(t, &a)
	if !a.Success {
		t.Fatalf("state/get: %s", r.Body)
	}
	out := map[string]json.RawMessage{}
	for _, row := range a.Rows {
		out[row.Key] = row.Value
	}
	return out
}

// cycleBody is a cycle for the popped batch p of query: the state ops, one
// sink item per message (payload {"src": its transaction id}) and the ack
// of the batch's last message under its lease.
func cycleBody(query string, p *e2e.PopResponse, group, sink string, ops []map[string]any) map[string]any {
	var items []map[string]any
	for _, m := range p.Messages {
		items = append(items, map[string]any{"queue": sink, "partition": m.Partition, "payload": map[string]any{"src": m.TransactionID}})
	}
	last := p.Messages[len(p.Messages)-1]
	lease := last.LeaseID
	if lease == "" {
		lease = p.LeaseID
	}
	return map[string]any{
		"query_id": query, "partition_id": last.PartitionID, "consumer_group": group,
		"state_ops": ops, "push_items": items,
		"ack": map[string]any{"transactionId": last.TransactionID, "leaseId": lease, "status": "completed", "count": len(p.Messages)},
	}
}

// sinkCount is how many messages the queue holds.
func sinkCount(t testing.TB, queue string) int64 {
	t.Helper()
	return e2e.QueryInt(t, e2e.DB, `SELECT coalesce(sum(p.head), 0) FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1`, queue)
}

// committed is the committed offset of the group on a partition.
func committed(t testing.TB, partitionID, group string) int64 {
	t.Helper()
	return e2e.ReadCursor(t, partitionID, group).Committed
}

// wantCycleRefused requires a refused cycle: status, the streams envelope
// {"success":false,"error":...} naming want.
func wantCycleRefused(t testing.TB, r *e2e.Response, status int, want string) {
	t.Helper()
	e2e.WantError(t, r, status, want)
	var a map[string]any
	r.JSON(t, &a)
	if a["success"] != false {
		t.Fatalf("refused cycle without success:false: %s", r.Body)
	}
}
