package messagetest

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/queengo/queengo/http/e2e"
)

type deleted struct {
	Success       bool   `json:"success"`
	PartitionID   string `json:"partitionId"`
	TransactionID string `json:"transactionId"`
	Message       string `json:"message"`
}

func deleteMessage(t testing.TB, s *e2e.Server, pid, tx string) {
	t.Helper()
	r := s.Delete(t, messagePath(pid, tx))
	if r.Status != 200 {
		t.Fatalf("DELETE %s: %d %s", tx, r.Status, r.Body)
	}
	var d deleted
	r.JSON(t, &d)
	if d != (deleted{true, pid, tx, "Message deleted successfully"}) {
		t.Fatalf("DELETE %s answered %s", tx, r.Body)
	}
}

type totals struct {
	Total, Pending, Processing, Completed, Failed, DeadLetter int64
}

func queueTotals(t testing.TB, s *e2e.Server, q string) totals {
	t.Helper()
	r := s.Get(t, "/api/v1/resources/queues/"+q)
	if r.Status != 200 {
		t.Fatalf("GET queue %s: %d %s", q, r.Status, r.Body)
	}
	var d struct {
		Totals totals `json:"totals"`
	}
	r.JSON(t, &d)
	return d.Totals
}

// A message deleted before any pop is never delivered: a pop takes the
// messages around it (its budget counts only delivered messages), the
// acks of those commit past it, and the figures count it as completed.
func TestDeleteMessage_BeforePopSkipped(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "delpre") + ".t.q"
	m := s.PushN(t, q, "", 4)
	tx, pid := m.TxIDs(), m[0].PartitionID
	deleteMessage(t, s, pid, tx[0])
	deleteMessage(t, s, pid, tx[2])
	if got := queueTotals(t, s, q); got != (totals{Total: 4, Pending: 2, Completed: 2}) {
		t.Fatalf("totals after deletes = %+v, want 2 pending, 2 completed", got)
	}
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2"))
	e2e.WantTxIDs(t, "pop", p, []string{tx[1], tx[3]})
	s.AckBatchOK(t, nil, e2e.AckItem(p.Messages[0], "completed"), e2e.AckItem(p.Messages[1], "completed"))
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != 4 || c.LeaseID != "" {
		t.Fatalf("cursor = %+v, want committed 4 and the lease ended", c)
	}
	if got := listMessages(t, s, "queue", q).txs(); !slices.Equal(got, []string{tx[3], tx[1]}) {
		t.Fatalf("list = %v, want the two not deleted", got)
	}
	if got := queueTotals(t, s, q); got != (totals{Total: 4, Completed: 4}) {
		t.Fatalf("totals = %+v, want 4 completed", got)
	}
}

// An autoAck pop skips a deleted message too, and commits past it.
func TestDeleteMessage_SkippedByAutoAckPop(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "delauto") + ".t.q"
	m := s.PushN(t, q, "", 3)
	deleteMessage(t, s, m[1].PartitionID, m[1].Tx)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "3", "autoAck", "true"))
	e2e.WantTxIDs(t, "autoAck pop", p, []string{m[0].Tx, m[2].Tx})
	if c := e2e.ReadCursor(t, m[0].PartitionID, ""); c.Committed != 3 || c.LeaseID != "" {
		t.Fatalf("cursor = %+v, want committed 3", c)
	}
}

// A pop that meets only deleted messages moves the cursor past them and
// delivers what follows; with nothing after them it answers 204.
func TestDeleteMessage_OnlyDeletedLeft(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "delall") + ".t.q"
	m := s.PushN(t, q, "", 2)
	for _, x := range m {
		deleteMessage(t, s, x.PartitionID, x.Tx)
	}
	s.PopEmpty(t, e2e.PopQueue(q, "consumerGroup", "g"))
	if c := e2e.ReadCursor(t, m[0].PartitionID, "g"); c.Committed != 2 || c.LeaseID != "" {
		t.Fatalf("cursor = %+v, want committed 2, no lease", c)
	}
	more := s.PushN(t, q, "", 1)
	e2e.WantTxIDs(t, "after", s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g")), more.TxIDs())
	// A first pop of another group skips the deleted ones too.
	e2e.WantTxIDs(t, "group h", s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "h", "batch", "5")), more.TxIDs())
}

// Deleting a message inside a live lease resolves it there: the lease's
// acks still work, committed advances past it, and deleting the last
// unresolved message ends the lease.
func TestDeleteMessage_DuringLease(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "dellease") + ".t.q"
	m := s.PushN(t, q, "", 3)
	pid := m[0].PartitionID
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "3"))
	deleteMessage(t, s, pid, m[1].Tx)
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != 0 || !slices.Equal(c.Acked, []int64{2}) || !c.Live {
		t.Fatalf("cursor = %+v, want committed 0, offset 2 resolved, lease live", c)
	}
	if got := queueTotals(t, s, q); got != (totals{Total: 3, Processing: 2, Completed: 1}) {
		t.Fatalf("totals = %+v, want 2 processing, 1 completed", got)
	}
	s.AckOK(t, p.Messages[0], "completed", "")
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != 2 {
		t.Fatalf("committed = %d after acking offset 1, want 2 (past the deleted one)", c.Committed)
	}
	r := s.AckOK(t, p.Messages[2], "completed", "")
	if !r.LeaseReleased {
		t.Fatalf("last ack did not release the lease: %+v", r)
	}

	// The delete of the last unresolved message of a span ends the lease.
	m2 := s.PushN(t, q, "", 2)
	p = s.PopOK(t, e2e.PopQueue(q, "batch", "2"))
	s.AckOK(t, p.Messages[0], "completed", "")
	deleteMessage(t, s, pid, m2[1].Tx)
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != 5 || c.LeaseID != "" {
		t.Fatalf("cursor = %+v, want committed 5 and no lease", c)
	}
	s.PopEmpty(t, e2e.PopQueue(q))
}

// An unknown message, and one deleted already, are 404 Message not found.
func TestDeleteMessage_Unknown404(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "del404") + ".t.q"
	m := s.PushN(t, q, "", 1)
	e2e.WantError(t, s.Delete(t, messagePath(m[0].PartitionID, "nope")), 404, "Message not found")
	e2e.WantError(t, s.Delete(t, messagePath(uuid.NewString(), m[0].Tx)), 404, "Message not found")
	deleteMessage(t, s, m[0].PartitionID, m[0].Tx)
	e2e.WantError(t, s.Delete(t, messagePath(m[0].PartitionID, m[0].Tx)), 404, "Message not found")
}

// The message view of a deleted message is 404 Message not found, as for a
// message that never existed: deleted is gone.
func TestDeleteMessage_ViewAnswers404(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "delget") + ".t.q"
	m := s.PushN(t, q, "", 1)
	deleteMessage(t, s, m[0].PartitionID, m[0].Tx)
	e2e.WantError(t, s.Get(t, messagePath(m[0].PartitionID, m[0].Tx)), 404, "Message not found")
}

type dlqEntry struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	ConsumerGroup string          `json:"consumerGroup"`
	ErrorMessage  *string         `json:"errorMessage"`
	Data          json.RawMessage `json:"data"`
}

func listDLQ(t testing.TB, s *e2e.Server, q string) []dlqEntry {
	t.Helper()
	r := s.Get(t, "/api/v1/dlq?queue="+q)
	if r.Status != 200 {
		t.Fatalf("GET dlq: %d %s", r.Status, r.Body)
	}
	var l struct {
		Messages []dlqEntry `json:"messages"`
	}
	r.JSON(t, &l)
	return l.Messages
}

// A move to the dead-letter queue dead-letters the message for every group
// that has not resolved it (the one holding it in a lease included, whose
// lease it ends), removes it from the queue, and a retry requeues it once:
// a new message with the same payload, and the dead letters are gone.
func TestMoveToDLQ_ThenRetryRoundTrip(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "mv") + ".t.q"
	m := s.PushN(t, q, "", 2)
	pid := m[0].PartitionID
	s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "A"))
	s.PopEmpty(t, e2e.PopQueue(q, "consumerGroup", "B", "subscriptionMode", "new"))
	pc := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "C"))
	s.AckOK(t, pc.Messages[0], "completed", "C")

	r := s.Post(t, messagePath(pid, m[0].Tx)+"/dlq", nil)
	if r.Status != 200 {
		t.Fatalf("dlq: %d %s", r.Status, r.Body)
	}
	var mv struct {
		Success        bool     `json:"success"`
		ConsumerGroups []string `json:"consumerGroups"`
	}
	r.JSON(t, &mv)
	// B started after the message (new), C consumed it: only A had it.
	if !mv.Success || !slices.Equal(mv.ConsumerGroups, []string{"A"}) {
		t.Fatalf("dlq answered %s, want consumerGroups [A]", r.Body)
	}
	if c := e2e.ReadCursor(t, pid, "A"); c.Committed != 1 || c.LeaseID != "" {
		t.Fatalf("A = %+v, want committed 1, lease ended", c)
	}
	d := listDLQ(t, s, q)
	if len(d) != 1 || d[0].TransactionID != m[0].Tx || d[0].ConsumerGroup != "A" || d[0].ErrorMessage == nil ||
		*d[0].ErrorMessage != "moved to DLQ by operator" {
		t.Fatalf("dead letters = %+v", d)
	}
	next := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "A"))
	e2e.WantTxIDs(t, "A next", next, []string{m[1].Tx})
	s.AckOK(t, next.Messages[0], "completed", "A")
	e2e.WantTxIDs(t, "D first", s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "D", "batch", "5")), []string{m[1].Tx})
	e2e.WantError(t, s.Post(t, messagePath(pid, m[0].Tx)+"/dlq", nil), 404, "Message not found")

	r = s.Post(t, messagePath(pid, m[0].Tx)+"/retry", nil)
	if r.Status != 200 {
		t.Fatalf("retry: %d %s", r.Status, r.Body)
	}
	var rt struct {
		Success  bool `json:"success"`
		Requeued *struct {
			MessageID      string   `json:"messageId"`
			TransactionID  string   `json:"transactionId"`
			ConsumerGroups []string `json:"consumerGroups"`
		} `json:"requeued"`
		Reset []string `json:"reset"`
	}
	r.JSON(t, &rt)
	if !rt.Success || rt.Requeued == nil || !slices.Equal(rt.Requeued.ConsumerGroups, []string{"A"}) || len(rt.Reset) != 0 {
		t.Fatalf("retry answered %s", r.Body)
	}
	if d := listDLQ(t, s, q); len(d) != 0 {
		t.Fatalf("dead letters left: %+v", d)
	}
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "A"))
	e2e.WantTxIDs(t, "requeued", p, []string{rt.Requeued.TransactionID})
	want, _ := json.Marshal(m[0].Payload)
	if string(p.Messages[0].RawData) != string(want) {
		t.Fatalf("requeued payload %s, want %s", p.Messages[0].RawData, want)
	}
}

// A move of a message every group resolved already changes nothing (409);
// a partition nobody consumes dead-letters it for queue mode.
func TestMoveToDLQ_ResolvedAndQueueMode(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "mv2") + ".t.q"
	m := s.PushN(t, q, "", 1)
	s.AckOK(t, s.PopOK(t, e2e.PopQueue(q)).Messages[0], "completed", "")
	e2e.WantError(t, s.Post(t, messagePath(m[0].PartitionID, m[0].Tx)+"/dlq", nil), 409, "already resolved")

	q2 := e2e.Unique(t, "mv3") + ".t.q"
	m2 := s.PushN(t, q2, "", 1)
	r := s.Post(t, messagePath(m2[0].PartitionID, m2[0].Tx)+"/dlq", nil)
	if r.Status != 200 {
		t.Fatalf("dlq: %d %s", r.Status, r.Body)
	}
	if d := listDLQ(t, s, q2); len(d) != 1 || d[0].ConsumerGroup != e2e.QueueMode {
		t.Fatalf("dead letters = %+v, want one for queue mode", d)
	}
	s.PopEmpty(t, e2e.PopQueue(q2))
}

// A retry of a failed message still pending removes its failure count and
// its retry delay: it is delivered now, with its full budget again.
func TestRetryMessage_FailedPendingDeliveredNow(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "rt") + ".t.q"
	s.Configure(t, q, map[string]any{"retryDelay": 600000, "retryLimit": 3})
	m := s.PushN(t, q, "", 1)
	pid := m[0].PartitionID
	s.AckOK(t, s.PopOK(t, e2e.PopQueue(q)).Messages[0], "failed", "")
	s.PopEmpty(t, e2e.PopQueue(q))
	if got := listMessages(t, s, "queue", q).Messages; len(got) != 1 || got[0].Status != "pending" {
		t.Fatalf("list = %+v, want it pending", got)
	}

	r := s.Post(t, messagePath(pid, m[0].Tx)+"/retry", nil)
	if r.Status != 200 {
		t.Fatalf("retry: %d %s", r.Status, r.Body)
	}
	var rt struct {
		Requeued *json.RawMessage `json:"requeued"`
		Reset    []string         `json:"reset"`
	}
	r.JSON(t, &rt)
	if rt.Requeued != nil || !slices.Equal(rt.Reset, []string{e2e.QueueMode}) {
		t.Fatalf("retry answered %s", r.Body)
	}
	if c := e2e.ReadCursor(t, pid, ""); c.Failures != 0 {
		t.Fatalf("failures = %d after retry, want 0", c.Failures)
	}
	e2e.WantTxIDs(t, "after retry", s.PopOK(t, e2e.PopQueue(q)), m.TxIDs())
}

// A retry of a message that neither failed nor was dead-lettered is 409;
// of an unknown or deleted one 404.
func TestRetryMessage_NotRetryable409Unknown404(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "rt2") + ".t.q"
	m := s.PushN(t, q, "", 2)
	e2e.WantError(t, s.Post(t, messagePath(m[0].PartitionID, m[0].Tx)+"/retry", nil), 409,
		"message is not failed or dead-lettered")
	e2e.WantError(t, s.Post(t, messagePath(m[0].PartitionID, "nope")+"/retry", nil), 404, "Message not found")
	deleteMessage(t, s, m[1].PartitionID, m[1].Tx)
	e2e.WantError(t, s.Post(t, messagePath(m[1].PartitionID, m[1].Tx)+"/retry", nil), 404, "Message not found")
}

// A message acked inside its group's live lease, past an offset still
// leased, counts as completed in the queue's figures and not as failed,
// though it failed once before (docs/api-admin.md "Resources": failed is a part of pending +
// processing). The message view says processing until the lease ends (D10,
// TestD10_AckBeyondPrefixIsNotCompleted).
func TestFigures_AckedInsideALiveLeaseIsNotFailed(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "acked-in-lease")
	s.Configure(t, q, map[string]any{"retryLimit": 3, "retryDelay": 0})
	s.PushN(t, q, "", 2)
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "2"))
	s.AckOK(t, p.Messages[1], "failed", "g")
	p = s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "2"))
	if len(p.Messages) != 2 {
		t.Fatalf("second pop %v", p.TxIDs())
	}
	s.AckOK(t, p.Messages[1], "completed", "g")
	if got := queueTotals(t, s, q); got.Completed != 1 || got.Processing != 1 || got.Failed != 0 {
		t.Fatalf("queue totals %+v, want completed 1, processing 1, failed 0", got)
	}
}
