package messagetest

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// The list gives each message its status for the consumerGroup asked for
// (D10: completed at or below committed or acked in the live lease,
// processing in the live lease, pending beyond), and filters on it; newest
// first.
func TestMessageList_StatusPerGroup(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "lst") + ".t.q"
	m := s.PushN(t, q, "", 4)
	tx := m.TxIDs()
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "consumerGroup", "A"))
	s.AckOK(t, p.Messages[0], "completed", "A")

	l := listMessages(t, s, "queue", q, "consumerGroup", "A")
	if !slices.Equal(l.txs(), reversed(tx)) {
		t.Fatalf("list = %v, want %v (newest first)", l.txs(), reversed(tx))
	}
	want := map[string]string{tx[0]: "completed", tx[1]: "processing", tx[2]: "pending", tx[3]: "pending"}
	for _, e := range l.Messages {
		if e.Status != want[e.TransactionID] {
			t.Fatalf("%s: status %s, want %s", e.TransactionID, e.Status, want[e.TransactionID])
		}
		if (e.Status == "processing") != (e.LeaseExpiresAt != nil) {
			t.Fatalf("%s: status %s with leaseExpiresAt %v", e.TransactionID, e.Status, e.LeaseExpiresAt)
		}
		if e.Queue != q || e.Partition != "Default" || e.QueuePath != q+"/Default" || e.PartitionID != m[0].PartitionID ||
			!e2e.IsUUID(e.ID) || e.QueueStatus != nil || e.BusStatus.TotalGroups != 1 {
			t.Fatalf("entry %+v", e)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.CreatedAt); err != nil {
			t.Fatalf("createdAt %q: %v", e.CreatedAt, err)
		}
	}
	if l.Mode.Type != "bus" || l.Mode.HasQueueMode || l.Mode.BusGroupsCount != 1 {
		t.Fatalf("mode = %+v, want bus with 1 group", l.Mode)
	}
	for status, txs := range map[string][]string{
		"completed": {tx[0]}, "processing": {tx[1]}, "pending": {tx[3], tx[2]}, "dead_letter": {},
	} {
		got := listMessages(t, s, "queue", q, "consumerGroup", "A", "status", status).txs()
		if !slices.Equal(got, txs) {
			t.Fatalf("status %s: %v, want %v", status, got, txs)
		}
	}
	// A group with no cursor there has every message pending.
	if got := listMessages(t, s, "queue", q, "consumerGroup", "B", "status", "pending").txs(); len(got) != 4 {
		t.Fatalf("group B pending: %v, want all 4", got)
	}
}

// Without consumerGroup the status is queue mode's, reported as queueStatus
// too; busStatus counts the named groups that completed the message.
func TestMessageList_QueueModeAndBusStatus(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "hyb") + ".t.q"
	tx := s.PushN(t, q, "", 2).TxIDs()
	p := s.PopOK(t, e2e.PopQueue(q))
	s.AckOK(t, p.Messages[0], "completed", "")
	p = s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "G", "batch", "2"))
	s.AckOK(t, p.Messages[0], "completed", "G")

	l := listMessages(t, s, "queue", q)
	if l.Mode.Type != "hybrid" || !l.Mode.HasQueueMode || l.Mode.BusGroupsCount != 1 {
		t.Fatalf("mode = %+v, want hybrid", l.Mode)
	}
	byTx := map[string]entry{}
	for _, e := range l.Messages {
		byTx[e.TransactionID] = e
	}
	first, second := byTx[tx[0]], byTx[tx[1]]
	if first.Status != "completed" || first.QueueStatus == nil || *first.QueueStatus != "completed" ||
		first.BusStatus.ConsumedBy != 1 || first.BusStatus.TotalGroups != 1 {
		t.Fatalf("first = %+v", first)
	}
	if second.Status != "pending" || second.QueueStatus == nil || *second.QueueStatus != "pending" ||
		second.BusStatus.ConsumedBy != 0 {
		t.Fatalf("second = %+v", second)
	}
}

// A failed ack past the retry budget makes the message dead_letter for that
// group.
func TestMessageList_DeadLetterStatus(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "dls") + ".t.q"
	s.Configure(t, q, map[string]any{"retryLimit": 0})
	tx := s.PushN(t, q, "", 2).TxIDs()
	p := s.PopOK(t, e2e.PopQueue(q))
	if r := s.AckOK(t, p.Messages[0], "failed", ""); !r.DLQ {
		t.Fatalf("failure with retryLimit 0 did not dead-letter: %+v", r)
	}
	got := listMessages(t, s, "queue", q, "status", "dead_letter").txs()
	if !slices.Equal(got, []string{tx[0]}) {
		t.Fatalf("dead_letter: %v, want [%s]", got, tx[0])
	}
}

// Filters: partition, namespace (ns or namespace), task, the time window
// (from, to), and limit/offset pages.
func TestMessageList_FiltersAndPagination(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "flt")
	q := ns + ".tk.q"
	a := s.PushN(t, q, "a", 5).TxIDs()
	b := s.PushN(t, q, "b", 2).TxIDs()
	if got := listMessages(t, s, "queue", q, "partition", "a").txs(); !slices.Equal(got, reversed(a)) {
		t.Fatalf("partition a: %v", got)
	}
	if got := listMessages(t, s, "ns", ns, "partition", "b").txs(); !slices.Equal(got, reversed(b)) {
		t.Fatalf("ns + partition b: %v", got)
	}
	if got := listMessages(t, s, "namespace", ns, "task", "tk").txs(); len(got) != 7 {
		t.Fatalf("namespace + task: %d messages, want 7", len(got))
	}
	if got := listMessages(t, s, "ns", ns, "task", "other").txs(); len(got) != 0 {
		t.Fatalf("another task: %v", got)
	}
	l := listMessages(t, s, "queue", q, "partition", "a", "limit", "2", "offset", "1")
	if !slices.Equal(l.txs(), reversed(a)[1:3]) || l.Pagination.Limit != 2 || l.Pagination.Offset != 1 {
		t.Fatalf("page: %v %+v, want %v", l.txs(), l.Pagination, reversed(a)[1:3])
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if got := listMessages(t, s, "queue", q, "from", future, "to", future).txs(); len(got) != 0 {
		t.Fatalf("a window in the future: %v", got)
	}
	past := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	if got := listMessages(t, s, "queue", q, "from", past, "to", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)).txs(); len(got) != 0 {
		t.Fatalf("a window before the pushes: %v", got)
	}
	if got := listMessages(t, s, "queue", q, "from", past).txs(); len(got) != 7 {
		t.Fatalf("from 2 h ago: %d messages, want 7", len(got))
	}
	e2e.WantError(t, s.Get(t, "/api/v1/messages?queue="+e2e.Unique(t, "none")), 404, "queue not found")
}

// Bad parameters answer 400: an unknown status, a time that is not
// ISO-8601, from after to, limits outside 1..1000, bad names; and on the
// per-message routes a partitionId that is not a UUID.
func TestMessageParams_BadInput400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	now := time.Now().UTC()
	for _, path := range []string{
		"/api/v1/messages?status=failed",
		"/api/v1/messages?from=yesterday",
		"/api/v1/messages?to=2026-13-40",
		"/api/v1/messages?from=" + url.QueryEscape(now.Format(time.RFC3339)) + "&to=" +
			url.QueryEscape(now.Add(-time.Hour).Format(time.RFC3339)),
		"/api/v1/messages?limit=0",
		"/api/v1/messages?limit=1001",
		"/api/v1/messages?offset=-1",
		"/api/v1/messages?consumerGroup=" + url.QueryEscape("g\x01"),
		"/api/v1/messages?queue=" + url.QueryEscape("q\x00"),
	} {
		e2e.WantErrorBody(t, s.Get(t, path), 400)
	}
	for _, c := range []struct{ method, path string }{
		{"DELETE", "/api/v1/messages/not-a-uuid/tx"},
		{"POST", "/api/v1/messages/not-a-uuid/tx/retry"},
		{"POST", "/api/v1/messages/not-a-uuid/tx/dlq"},
	} {
		e2e.WantError(t, s.Do(t, c.method, c.path, nil), 400, "partitionId must be a UUID")
	}
}
