package poptest

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

var (
	topKeys = []string{"success", "queue", "partition", "partitionId", "leaseId", "consumerGroup", "messages", "partitionsClaimed"}
	msgKeys = []string{"id", "transactionId", "traceId", "data", "producerSub", "createdAt", "partitionId", "partition", "leaseId", "consumerGroup"}
)

func sameKeys(got map[string]any, want []string) bool {
	return slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(slices.Values(want)))
}

// TestPop_ResponseShape: a 200 carries exactly the top-level fields of
// docs/pop-routes.md and, per message, exactly its per-message fields: no offset,
// attempt count, lease expiry, queue, headers or status. The same on all
// three routes.
func TestPop_ResponseShape(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "shape")
	q := ns + ".t.q"
	s.PushN(t, q, "p1", 2)
	for _, tc := range []struct{ name, path, queue string }{
		{"single", e2e.PopPartition(q, "p1", "consumerGroup", "single", "batch", "2"), q},
		{"wildcard", e2e.PopQueue(q, "consumerGroup", "wildcard", "batch", "2"), q},
		{"discovery", e2e.PopDiscovery("namespace", ns, "consumerGroup", "discovery", "batch", "2"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.TryPop(t, tc.path)
			if r.Status != 200 {
				t.Fatalf("status %d %q", r.Status, r.Body)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			var top map[string]any
			if err := json.Unmarshal(r.Body, &top); err != nil {
				t.Fatal(err)
			}
			if !sameKeys(top, topKeys) {
				t.Fatalf("top-level keys %v, want exactly %v", slices.Sorted(maps.Keys(top)), topKeys)
			}
			if top["success"] != true || top["queue"] != tc.queue || top["consumerGroup"] != tc.name ||
				top["partition"] != "p1" || top["partitionsClaimed"] != 1.0 {
				t.Fatalf("top level %s", r.Body)
			}
			msgs, _ := top["messages"].([]any)
			if len(msgs) != 2 {
				t.Fatalf("messages %s", r.Body)
			}
			for _, m := range msgs {
				mm, _ := m.(map[string]any)
				if !sameKeys(mm, msgKeys) {
					t.Fatalf("message keys %v, want exactly %v", slices.Sorted(maps.Keys(mm)), msgKeys)
				}
				if mm["partition"] != "p1" || mm["consumerGroup"] != tc.name || mm["leaseId"] != top["leaseId"] ||
					mm["partitionId"] != top["partitionId"] {
					t.Fatalf("message %v disagrees with top level %s", mm, r.Body)
				}
			}
		})
	}
}

// TestPop_MessageFields: each message carries the pushed values: id and
// transactionId, traceId (null when absent), data as pushed whatever its JSON
// type, producerSub (null), its own partition and partitionId, the lease id
// and the group.
func TestPop_MessageFields(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "fields")
	trace := "0198f2c1-4d3a-7c10-9f2b-6a1e5d0c7b83"
	payloads := []any{map[string]any{"orderId": 8891.0, "total": 4200.0, "nested": map[string]any{"a": []any{1.0, "x"}}},
		"a string", 42.5, nil, []any{1.0, 2.0}, true}
	items := make([]e2e.PushItem, len(payloads))
	for i, p := range payloads {
		items[i] = e2e.PushItem{Queue: q, Partition: "p", Payload: p, TransactionID: "fields-" + string(rune('a'+i))}
	}
	items[0].TraceID = trace
	res := s.Push(t, items...)

	r := s.TryPop(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "100"))
	if r.Status != 200 {
		t.Fatalf("status %d %q", r.Status, r.Body)
	}
	var top struct {
		LeaseID  string           `json:"leaseId"`
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(r.Body, &top); err != nil {
		t.Fatal(err)
	}
	if len(top.Messages) != len(items) {
		t.Fatalf("%d messages, want %d: %s", len(top.Messages), len(items), r.Body)
	}
	for i, m := range top.Messages {
		if m["id"] != res[i].MessageID || m["transactionId"] != items[i].TransactionID {
			t.Fatalf("message %d: id %v tx %v, pushed %s %s", i, m["id"], m["transactionId"], res[i].MessageID, items[i].TransactionID)
		}
		if !reflect.DeepEqual(m["data"], payloads[i]) {
			t.Fatalf("message %d: data %#v, pushed %#v", i, m["data"], payloads[i])
		}
		wantTrace := any(nil)
		if i == 0 {
			wantTrace = trace
		}
		if m["traceId"] != wantTrace {
			t.Fatalf("message %d: traceId %#v, want %#v", i, m["traceId"], wantTrace)
		}
		if v, ok := m["producerSub"]; !ok || v != nil {
			t.Fatalf("message %d: producerSub %#v, want null", i, v)
		}
		if m["partitionId"] != res[i].PartitionID || m["partition"] != "p" || m["leaseId"] != top.LeaseID ||
			m["consumerGroup"] != "g" {
			t.Fatalf("message %d: %v", i, m)
		}
	}
}

// TestPop_CreatedAtIsSegmentTime: createdAt is the segment's creation time,
// formatted by PostgreSQL with microseconds and a literal Z, identical for
// the messages written by one push, in UTC and close to now.
func TestPop_CreatedAtIsSegmentTime(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "created")
	before := time.Now().UTC()
	first := s.PushN(t, q, "p", 3).TxIDs()
	time.Sleep(20 * time.Millisecond)
	second := s.PushN(t, q, "p", 2).TxIDs()
	after := time.Now().UTC()

	p := s.PopOK(t, e2e.PopQueue(q, "batch", "5", "autoAck", "true"))
	e2e.WantTxIDs(t, "two pushes", p, slices.Concat(first, second))
	for _, m := range p.Messages {
		if !e2e.CreatedAtRE.MatchString(m.CreatedAt) {
			t.Fatalf("createdAt %q does not match %s", m.CreatedAt, e2e.CreatedAtRE)
		}
		ts, err := time.Parse(time.RFC3339Nano, m.CreatedAt)
		if err != nil {
			t.Fatal(err)
		}
		if ts.Before(before.Add(-2*time.Second)) || ts.After(after.Add(2*time.Second)) {
			t.Fatalf("createdAt %s is not between %s and %s (UTC)", m.CreatedAt, before, after)
		}
	}
	for i := 1; i < 3; i++ {
		if p.Messages[i].CreatedAt != p.Messages[0].CreatedAt {
			t.Fatalf("one push, two createdAt: %q %q", p.Messages[0].CreatedAt, p.Messages[i].CreatedAt)
		}
	}
	if p.Messages[3].CreatedAt != p.Messages[4].CreatedAt {
		t.Fatalf("one push, two createdAt: %q %q", p.Messages[3].CreatedAt, p.Messages[4].CreatedAt)
	}
	if !(p.Messages[3].CreatedAt > p.Messages[0].CreatedAt) {
		t.Fatalf("the later push's segment is not later: %q then %q", p.Messages[0].CreatedAt, p.Messages[3].CreatedAt)
	}
	// It is the segments' own time, as PostgreSQL holds it.
	var segs []string
	for _, off := range []int{1, 4} {
		var v string
		err := e2e.DB.QueryRow(`SELECT to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
  FROM queen.segments s JOIN queen.partitions p ON p.id = s.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 AND p.name = 'p' AND s.first_offset <= $2 AND s.last_offset >= $2`, []any{q, off}, &v)
		if err != nil {
			t.Fatal(err)
		}
		segs = append(segs, v)
	}
	if segs[0] != p.Messages[0].CreatedAt || segs[1] != p.Messages[3].CreatedAt {
		t.Fatalf("createdAt %q, %q; segments' created_at in UTC %q, %q", p.Messages[0].CreatedAt, p.Messages[3].CreatedAt, segs[0], segs[1])
	}
}

// TestPop_EmptyIsBare204: when nothing is delivered the answer is 204 with no
// body and no Content-Type: nothing available (on every route, for a known
// queue and an empty one) and a long poll that timed out. (Pop maintenance:
// TestD11_PopMaintenance.)
func TestPop_EmptyIsBare204(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "empty")
	q := ns + ".t.q"
	s.PushN(t, q, "p", 1)
	s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "autoAck", "true"))
	for _, path := range []string{
		e2e.PopPartition(q, "p", "consumerGroup", "g"),
		e2e.PopQueue(q, "consumerGroup", "g"),
		e2e.PopDiscovery("namespace", ns, "consumerGroup", "g"),
		e2e.PopPartition(q, "nosuch"),
		e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "300"),
		e2e.PopPartition(q, "p", "consumerGroup", "g", "wait", "true", "timeout", "300"),
		e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "wait", "true", "timeout", "300"),
	} {
		r := s.PopEmpty(t, path)
		if strings.Contains(path, "wait=true") && r.Elapsed < 300*time.Millisecond {
			t.Fatalf("%s answered after %v, before its timeout", path, r.Elapsed)
		}
	}
}
