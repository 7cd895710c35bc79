package acktest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/http/e2e"
)

// messageView is the answer of GET /api/v1/messages/:partitionId/:transactionId
// (docs/api-admin.md "Messages", D10).
type messageView struct {
	ID             string          `json:"id"`
	TransactionID  string          `json:"transactionId"`
	PartitionID    string          `json:"partitionId"`
	Queue          string          `json:"queue"`
	Partition      string          `json:"partition"`
	Status         string          `json:"status"`
	Payload        json.RawMessage `json:"payload"`
	CreatedAt      string          `json:"createdAt"`
	RetryCount     int             `json:"retryCount"`
	ConsumerGroups []struct {
		Name     string `json:"name"`
		Status   string `json:"status"`
		Attempts int    `json:"attempts"`
	} `json:"consumerGroups"`
}

func getMessage(t testing.TB, s *e2e.Server, pid, tx string) messageView {
	t.Helper()
	r := s.Get(t, "/api/v1/messages/"+pid+"/"+tx)
	if r.Status != 200 {
		t.Fatalf("GET message %s: %d %s", tx, r.Status, r.Body)
	}
	var v messageView
	r.JSON(t, &v)
	return v
}

// groupState returns the status and attempts the view reports for a group
// ("" when the group is not listed).
func (v messageView) groupState(group string) (string, int) {
	for _, g := range v.ConsumerGroups {
		if g.Name == group {
			return g.Status, g.Attempts
		}
	}
	return "", 0
}

// D10 and docs/api-admin.md "Messages": the per-message route shows the payload, createdAt,
// the status per group (completed at or below committed, processing inside
// a live lease, dead_letter, else pending) and the attempt counts; an unknown
// message is 404 {"error":"Message not found"}.
func TestD10_MessageStatusPerGroup(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d10-view")
	s.Configure(t, q, map[string]any{"retryLimit": 3, "retryDelay": 60000})
	ps := s.PushN(t, q, "", 3)
	pid, m1 := ps[0].PartitionID, ps[0].Tx

	v := getMessage(t, s, pid, m1)
	if v.TransactionID != m1 || v.PartitionID != pid || v.ID != ps[0].MessageID || v.Queue != q || v.Partition != "Default" {
		t.Fatalf("view %+v", v)
	}
	if v.Status != "pending" {
		t.Fatalf("status before any pop %q, want pending", v.Status)
	}
	var payload map[string]any
	if err := json.Unmarshal(v.Payload, &payload); err != nil || payload["tx"] != m1 {
		t.Fatalf("payload %s", v.Payload)
	}

	// g1 completes m1; g2 holds m1..m2 under a live lease; g3 dead-letters
	// m1; queue mode fails m1 once (retryDelay keeps it waiting).
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g1"))
	s.AckOK(t, p.Messages[0], "completed", "g1")
	s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g2", "batch", "2", "leaseSeconds", "60"))
	p = s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g3"))
	s.AckOK(t, p.Messages[0], "dlq", "g3")
	p = s.PopOK(t, e2e.PopQueue(q))
	createdAt := p.Messages[0].CreatedAt
	if r := s.AckOK(t, p.Messages[0], "failed", ""); r.DLQ {
		t.Fatalf("%+v", r)
	}

	v = getMessage(t, s, pid, m1)
	if c, pc := parseTS(t, v.CreatedAt), parseTS(t, createdAt); !near(c, pc, time.Millisecond) {
		t.Fatalf("createdAt %s, want the pop's %s", v.CreatedAt, createdAt)
	}
	for _, want := range []struct {
		group, status string
		attempts      int
	}{{"g1", "completed", 0}, {"g2", "processing", 0}, {"g3", "dead_letter", 0}, {e2e.QueueMode, "pending", 1}} {
		st, n := v.groupState(want.group)
		if st != want.status || n != want.attempts {
			t.Errorf("m1 group %s: status %q attempts %d, want %q %d (view %+v)", want.group, st, n, want.status,
				want.attempts, v.ConsumerGroups)
		}
	}
	if v.Status != "pending" || v.RetryCount < 1 {
		t.Errorf("top level (queue mode): status %q retryCount %d", v.Status, v.RetryCount)
	}
	// m2: g1 has not reached it, g2 holds it; m3: outside g2's span.
	v2 := getMessage(t, s, pid, ps[1].Tx)
	if st, _ := v2.groupState("g1"); st != "pending" {
		t.Errorf("m2 g1 %q, want pending", st)
	}
	if st, _ := v2.groupState("g2"); st != "processing" {
		t.Errorf("m2 g2 %q, want processing", st)
	}
	v3 := getMessage(t, s, pid, ps[2].Tx)
	if st, _ := v3.groupState("g2"); st != "pending" {
		t.Errorf("m3 g2 %q, want pending", st)
	}

	for _, path := range []string{"/api/v1/messages/" + pid + "/no-such-tx", "/api/v1/messages/" + uuid.NewString() + "/" + m1} {
		r := s.Get(t, path)
		if e := e2e.WantErrorBody(t, r, 404); e != "Message not found" {
			t.Errorf("%s: error %q", path, e)
		}
	}
}

// D10 with D2: an ack recorded beyond the contiguous prefix is not a
// commit: while the lease lives the message is processing (inside a live
// lease, above committed); after the lease expires it is pending again, as
// it will be delivered again.
func TestD10_AckBeyondPrefixIsNotCompleted(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d10-beyond")
	ps := s.PushN(t, q, "", 2)
	pid := ps[0].PartitionID
	// 4 s: the ack and the read below fit inside the lease on a loaded
	// machine. The lease runs from the claim's start, which is before the
	// answer arrived, so it has expired 4 s after the answer, however slow
	// the pop.
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "leaseSeconds", "4"))
	popped := time.Now()
	s.AckOK(t, p.Messages[1], "completed", "")
	if v := getMessage(t, s, pid, ps[1].Tx); v.Status != "processing" {
		t.Errorf("m2 acked beyond the prefix inside a live lease: status %q, want processing", v.Status)
	}
	time.Sleep(time.Until(popped.Add(4100 * time.Millisecond)))
	if v := getMessage(t, s, pid, ps[1].Tx); v.Status != "pending" {
		t.Errorf("m2 after its lease expired: status %q, want pending (committed %d < its offset %d)", v.Status,
			e2e.ReadCursor(t, pid, "").Committed, offsetOf(t, pid, ps[1].Tx))
	}
	p2 := s.PopUntil(t, e2e.PopQueue(q, "batch", "2"), 3*time.Second, 100*time.Millisecond)
	if p2.Messages[0].TransactionID != ps[0].Tx {
		t.Fatalf("redelivery %+v", p2)
	}
}
