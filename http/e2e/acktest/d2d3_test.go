package acktest

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// D2: acks out of order inside a span are recorded per offset; committed
// advances only over the contiguous resolved prefix and never moves back.
// After the lease expires, delivery resumes just past committed.
func TestD2_CommittedAdvancesOverContiguousPrefix(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d2-prefix")
	ps := s.PushN(t, q, "", 5)
	pid := ps[0].PartitionID
	off := make([]int64, 5)
	for i, p := range ps {
		off[i] = offsetOf(t, pid, p.Tx)
	}
	// The lease outlives the four acks below on a loaded machine (a 3 s
	// lease once expired before the third ack's cursor read under -race).
	popped := time.Now()
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "5", "leaseSeconds", "8"))
	e2e.WantTxIDs(t, "pop", p, ps.TxIDs())
	m := p.Messages
	base := e2e.ReadCursor(t, pid, "").Committed
	if base != off[0]-1 {
		t.Fatalf("committed %d before any ack, want %d", base, off[0]-1)
	}
	step := func(k int, want int64) {
		t.Helper()
		r := s.AckOK(t, m[k], "completed", "")
		if r.LeaseReleased {
			t.Fatalf("ack of m%d released the lease with the span unresolved", k+1)
		}
		if c := e2e.ReadCursor(t, pid, ""); c.Committed != want || !c.Live {
			t.Fatalf("after ack of m%d: committed %d (live %v), want %d", k+1, c.Committed, c.Live, want)
		}
	}
	step(2, base)   // m3: a hole before it
	step(0, off[0]) // m1: prefix m1
	step(1, off[2]) // m2: prefix m1..m3
	step(4, off[2]) // m5: m4 still open
	// A repeated ack of an offset at or below committed fails and moves
	// nothing back.
	e2e.WantAckFailure(t, s.AckMessage(t, m[0], "completed", ""), "Invalid or expired lease")
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != off[2] {
		t.Fatalf("committed moved to %d", c.Committed)
	}

	// The lease expires with m4 open: delivery resumes at m4, never before.
	time.Sleep(time.Until(popped.Add(8100 * time.Millisecond)))
	p2 := s.PopUntil(t, e2e.PopQueue(q, "batch", "10"), 3*time.Second, 100*time.Millisecond)
	got := p2.TxIDs()
	if got[0] != ps[3].Tx {
		t.Fatalf("redelivery %v, want it to start at m4 %s", got, ps[3].Tx)
	}
	for _, done := range ps[:3] {
		if slices.Contains(got, done.Tx) {
			t.Fatalf("committed message %s redelivered: %v", done.Tx, got)
		}
	}
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != off[2] {
		t.Fatalf("committed %d after the re-claim, want %d", c.Committed, off[2])
	}
	var last e2e.AckResult
	for _, mm := range p2.Messages {
		last = s.AckOK(t, mm, "completed", "")
	}
	if !last.LeaseReleased {
		t.Fatalf("last ack of the span did not release the lease: %+v", last)
	}
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != off[4] || c.LeaseID != "" {
		t.Fatalf("final cursor %+v", c)
	}
}

// D2: the lease ends when every offset of the span is resolved:
// leaseReleased is true on the ack that resolves the last one, and the next
// pop gets the following messages at once.
func TestD2_LeaseEndsWhenSpanResolved(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d2-release")
	ps := s.PushN(t, q, "", 6)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "3", "leaseSeconds", "60"))
	e2e.WantTxIDs(t, "pop", p, ps[:3].TxIDs())
	// Held: nothing else of this single partition is delivered.
	s.PopEmpty(t, e2e.PopQueue(q, "batch", "3"))
	for i, k := range []int{1, 2, 0} {
		r := s.AckOK(t, p.Messages[k], "completed", "")
		if r.LeaseReleased != (i == 2) {
			t.Fatalf("ack %d (m%d): leaseReleased %v", i, k+1, r.LeaseReleased)
		}
	}
	c := e2e.ReadCursor(t, ps[0].PartitionID, "")
	if c.LeaseID != "" || c.LeaseEnd != nil || c.Committed != offsetOf(t, ps[0].PartitionID, ps[2].Tx) {
		t.Fatalf("cursor after the span resolved: %+v", c)
	}
	p2 := s.PopOK(t, e2e.PopQueue(q, "batch", "3"))
	e2e.WantTxIDs(t, "next pop", p2, ps[3:].TxIDs())
}

// D2: acking an offset outside the live span (past its end, or with a
// leaseId that is no longer the live one) is the per-item failure "Invalid
// or expired lease"; the live lease still acks.
func TestD2_AckOutsideLiveSpanFails(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d2-outside")
	ps := s.PushN(t, q, "", 4)
	pid := ps[0].PartitionID
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "leaseSeconds", "1"))
	e2e.WantTxIDs(t, "pop", p, ps[:2].TxIDs())
	// m3 exists but lies past the span.
	beyond := e2e.Message{TransactionID: ps[2].Tx, PartitionID: pid, LeaseID: p.LeaseID}
	e2e.WantAckFailure(t, s.AckMessage(t, beyond, "completed", ""), "Invalid or expired lease")
	beyond.LeaseID = ""
	e2e.WantAckFailure(t, s.AckMessage(t, beyond, "completed", ""), "Invalid or expired lease")
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != 0 || len(c.Acked) != 0 {
		t.Fatalf("cursor changed: %+v", c)
	}
	// The lease expires and the span is claimed again under a new lease.
	time.Sleep(1100 * time.Millisecond)
	e2e.WantAckFailure(t, s.AckMessage(t, p.Messages[0], "completed", ""), "Invalid or expired lease")
	p2 := s.PopUntil(t, e2e.PopQueue(q, "batch", "2", "leaseSeconds", "30"), 3*time.Second, 100*time.Millisecond)
	if p2.LeaseID == p.LeaseID || p2.Messages[0].TransactionID != ps[0].Tx {
		t.Fatalf("re-claim %+v", p2)
	}
	// The stale lease fails even though the offset is inside the new span.
	e2e.WantAckFailure(t, s.AckMessage(t, p.Messages[0], "completed", ""), "Invalid or expired lease")
	res := s.AckBatch(t, nil, e2e.AckItem(p.Messages[1], "completed"))
	e2e.WantAckFailure(t, res[0], "Invalid or expired lease")
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != 0 || len(c.Acked) != 0 {
		t.Fatalf("a stale lease moved the cursor: %+v", c)
	}
	s.AckOK(t, p2.Messages[0], "completed", "")
	if c := e2e.ReadCursor(t, pid, ""); c.Committed != offsetOf(t, pid, ps[0].Tx) {
		t.Fatalf("cursor %+v", c)
	}
}

// D3: a failed ack with budget left counts one failure, ends the lease at
// once (leaseReleased), keeps the resolved prefix, and makes the rest
// claimable again no sooner than retryDelay; offsets acked beyond the
// failed one are delivered again.
func TestD3_FailedEndsLeaseAndWaitsRetryDelay(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d3-failed")
	// retryDelay 4 s: long enough that the two empty pops below land inside
	// it even on a loaded machine running the whole suite.
	s.Configure(t, q, map[string]any{"retryLimit": 3, "retryDelay": 4000, "leaseTime": 60})
	ps := s.PushN(t, q, "", 3)
	pid := ps[0].PartitionID
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "3"))
	m := p.Messages
	s.AckOK(t, m[0], "completed", "")
	s.AckOK(t, m[2], "completed", "") // beyond the one that will fail
	sent := time.Now()
	r := s.AckOK(t, m[1], "failed", "")
	if !r.LeaseReleased || r.DLQ {
		t.Fatalf("failed ack: %+v", r)
	}
	// Not before retryDelay. The pops come first: the checks of the
	// database below open connections of their own, which took more than a
	// second each with the package's tests running in parallel.
	s.PopEmpty(t, e2e.PopQueue(q, "batch", "3"))
	s.PopEmpty(t, e2e.PopPartition(q, "Default", "batch", "3"))
	c := e2e.ReadCursor(t, pid, "")
	if c.LeaseID != "" || c.Live || c.Committed != offsetOf(t, pid, ps[0].Tx) {
		t.Fatalf("cursor after the failed ack: %+v", c)
	}
	if n := failures(t, pid, "", offsetOf(t, pid, ps[1].Tx)); n != 1 {
		t.Fatalf("attempts %d, want 1", n)
	}
	p2 := s.PopUntil(t, e2e.PopQueue(q, "batch", "3"), 10*time.Second, 100*time.Millisecond)
	waited := time.Since(sent)
	if waited < 3950*time.Millisecond {
		t.Fatalf("redelivered after %v, before retryDelay 4000 ms", waited)
	}
	e2e.WantTxIDs(t, "redelivery of m2 and m3", p2, ps[1:].TxIDs())
}

// D3: status retry ends the lease at once without consuming budget; with
// retryLimit 1 any number of retries leaves the message one failure of
// budget, and only the second failed ack dead-letters it.
func TestD3_RetryEndsLeaseWithoutBudget(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d3-retry")
	s.Configure(t, q, map[string]any{"retryLimit": 1, "retryDelay": 0, "leaseTime": 60})
	ps := s.PushN(t, q, "", 2)
	pid := ps[0].PartitionID
	off := offsetOf(t, pid, ps[0].Tx)
	for i := range 3 {
		p := s.PopOK(t, e2e.PopQueue(q))
		if p.Messages[0].TransactionID != ps[0].Tx {
			t.Fatalf("round %d: got %v", i, p.TxIDs())
		}
		r := s.AckOK(t, p.Messages[0], "retry", "")
		if !r.LeaseReleased || r.DLQ {
			t.Fatalf("retry: %+v", r)
		}
		if c := e2e.ReadCursor(t, pid, ""); c.LeaseID != "" || c.Committed != off-1 {
			t.Fatalf("cursor after retry: %+v", c)
		}
		if n := failures(t, pid, "", off); n != 0 {
			t.Fatalf("retry consumed budget: attempts %d", n)
		}
	}
	p := s.PopOK(t, e2e.PopQueue(q))
	if r := s.AckOK(t, p.Messages[0], "failed", ""); r.DLQ {
		t.Fatalf("first failure dead-lettered after retries: %+v", r)
	}
	p = s.PopUntil(t, e2e.PopQueue(q), 3*time.Second, 100*time.Millisecond)
	if p.Messages[0].TransactionID != ps[0].Tx {
		t.Fatalf("after one failure: %+v", p)
	}
	if r := s.AckOK(t, p.Messages[0], "failed", ""); !r.DLQ {
		t.Fatalf("second failure with retryLimit 1 not dead-lettered: %+v", r)
	}
	p = s.PopUntil(t, e2e.PopQueue(q), 3*time.Second, 100*time.Millisecond)
	if p.Messages[0].TransactionID != ps[1].Tx {
		t.Fatalf("after the dead letter: %+v", p)
	}
}

// D3 and A-10: status dlq dead-letters the message at once (no budget
// needed), with the given error text; committed moves past it.
func TestD3_DlqStatusDeadLettersAtOnce(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d3-dlq")
	s.Configure(t, q, map[string]any{"retryLimit": 5})
	ps := s.PushN(t, q, "", 2)
	pid := ps[0].PartitionID
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "consumerGroup", "g"))
	b := e2e.AckBody(p.Messages[0], "dlq", "g")
	b["error"] = "poison pill"
	r := s.Ack(t, b)
	if !r.Success || !r.DLQ || r.LeaseReleased {
		t.Fatalf("dlq ack: %+v %s", r, r.ErrText())
	}
	c := e2e.ReadCursor(t, pid, "g")
	if c.Committed != offsetOf(t, pid, ps[0].Tx) || !c.Live {
		t.Fatalf("cursor %+v", c)
	}
	l := listDLQ(t, s, "queue", q)
	if *l.Total != 1 || len(l.Messages) != 1 {
		t.Fatalf("dead letters %+v", l)
	}
	d := l.Messages[0]
	if d.TransactionID != ps[0].Tx || d.ConsumerGroup != "g" || d.ErrorMessage == nil || *d.ErrorMessage != "poison pill" {
		t.Fatalf("entry %+v", d)
	}
	// Only the group that dead-lettered it moved: queue mode still gets it.
	pq := s.PopOK(t, e2e.PopQueue(q))
	if pq.Messages[0].TransactionID != ps[0].Tx {
		t.Fatalf("queue mode got %v", pq.TxIDs())
	}
	if r := s.AckOK(t, p.Messages[1], "completed", "g"); !r.LeaseReleased {
		t.Fatalf("span not released after the last offset: %+v", r)
	}
}

// docs/api.md "POST /api/v1/ack" (failed beyond retryLimit): without an error text the dead
// letter says "Retries exhausted".
func TestA10_DeadLetterWithoutErrorTextSaysRetriesExhausted(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "a10-text")
	s.Configure(t, q, map[string]any{"retryLimit": 0, "retryDelay": 0})
	s.PushN(t, q, "", 1)
	p := s.PopOK(t, e2e.PopQueue(q))
	b := e2e.AckBody(p.Messages[0], "failed", nil)
	b["error"] = nil
	if r := s.Ack(t, b); !r.Success || !r.DLQ {
		t.Fatalf("failed with retryLimit 0: %+v %s", r, r.ErrText())
	}
	l := listDLQ(t, s, "queue", q)
	if len(l.Messages) != 1 || l.Messages[0].ErrorMessage == nil || *l.Messages[0].ErrorMessage != "Retries exhausted" {
		t.Fatalf("dead letters %+v", l.Messages)
	}
}

// D2 and D5: a dead-lettered offset is resolved. When it lies beyond the
// contiguous prefix and the lease expires, the group must not have to
// resolve it again: once the offsets before it are acked, committed passes
// it and the lease ends.
func TestD5_DeadLetterBeyondPrefixStaysResolved(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d5-resolved")
	s.Configure(t, q, map[string]any{"retryLimit": 0, "retryDelay": 0})
	ps := s.PushN(t, q, "", 2)
	pid := ps[0].PartitionID
	// The dead-letter ack must land inside the lease on a loaded machine.
	popped := time.Now()
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "leaseSeconds", "3"))
	if r := s.AckOK(t, p.Messages[1], "dlq", ""); !r.DLQ {
		t.Fatalf("dlq ack %+v", r)
	}
	time.Sleep(time.Until(popped.Add(3100 * time.Millisecond)))
	p2 := s.PopUntil(t, e2e.PopQueue(q, "batch", "2", "leaseSeconds", "30"), 3*time.Second, 100*time.Millisecond)
	if p2.Messages[0].TransactionID != ps[0].Tx {
		t.Fatalf("re-claim %+v", p2)
	}
	r := s.AckOK(t, p2.Messages[0], "completed", "")
	c := e2e.ReadCursor(t, pid, "")
	if c.Committed != offsetOf(t, pid, ps[1].Tx) || !r.LeaseReleased {
		t.Errorf("after acking m1: committed %d (want %d, past the dead-lettered m2), leaseReleased %v; redelivered %v",
			c.Committed, offsetOf(t, pid, ps[1].Tx), r.LeaseReleased, p2.TxIDs())
	}
	if l := listDLQ(t, s, "queue", q); *l.Total != 1 {
		t.Errorf("dead letters %d, want 1", *l.Total)
	}
}

// D5: a dead letter taken off the dead-letter queue (DELETE /api/v1/dlq/:id,
// its requeue, POST /api/v1/messages/:p/:t/retry) leaves its offset
// resolved for its group, also past a prefix a failed ack kept: the group
// never meets the original again (a requeue and a retry deliver their new
// copy, once).
func TestD5_RemovingADeadLetterKeepsItsOffsetResolved(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, how := range []string{"delete", "requeue", "retry"} {
		t.Run(how, func(t *testing.T) {
			q := e2e.Unique(t, "d5-removed")
			s.Configure(t, q, map[string]any{"retryLimit": 3, "retryDelay": 0})
			ps := s.PushN(t, q, "", 3)
			p := s.PopOK(t, e2e.PopQueue(q, "batch", "3", "leaseSeconds", "60"))
			if r := s.AckOK(t, p.Messages[1], "dlq", ""); !r.DLQ {
				t.Fatalf("dlq ack of m2 %+v", r)
			}
			if r := s.AckOK(t, p.Messages[0], "failed", ""); !r.LeaseReleased {
				t.Fatalf("failed ack of m1 %+v", r)
			}
			l := listDLQ(t, s, "queue", q)
			if *l.Total != 1 {
				t.Fatalf("dead letters %+v", l.Messages)
			}
			var r *e2e.Response
			switch how {
			case "delete":
				r = s.Delete(t, "/api/v1/dlq/"+l.Messages[0].ID)
			case "requeue":
				r = s.Post(t, "/api/v1/dlq/"+l.Messages[0].ID+"/requeue", nil)
			case "retry":
				r = s.Post(t, "/api/v1/messages/"+ps[1].PartitionID+"/"+ps[1].Tx+"/retry", nil)
			}
			if r.Status != 200 {
				t.Fatalf("%s: %d %s", how, r.Status, r.Body)
			}
			if l := listDLQ(t, s, "queue", q); *l.Total != 0 {
				t.Fatalf("after %s the dead-letter queue lists %+v", how, l.Messages)
			}
			got := s.PopOK(t, e2e.PopQueue(q, "batch", "10", "leaseSeconds", "60"))
			want := 2
			if how != "delete" {
				want = 3 // and the copy, under a new transaction id
			}
			if len(got.TxIDs()) != want || got.TxIDs()[0] != ps[0].Tx || got.TxIDs()[1] != ps[2].Tx {
				t.Fatalf("after %s the group got %v, want %s, %s and %d more (never the dead-lettered %s)",
					how, got.TxIDs(), ps[0].Tx, ps[2].Tx, want-2, ps[1].Tx)
			}
			if how != "delete" {
				return
			}
			// A seek back before it makes the group meet it again, as
			// with a listed dead letter.
			for _, m := range got.Messages {
				s.AckOK(t, m, "completed", "")
			}
			seek := "/api/v1/consumer-groups/" + url.PathEscape(e2e.QueueMode) + "/queues/" + url.PathEscape(q) + "/seek"
			if r := s.Post(t, seek, map[string]any{"timestamp": "2020-01-01T00:00:00.000Z"}); r.Status != 200 {
				t.Fatalf("seek: %d %s", r.Status, r.Body)
			}
			again := s.PopOK(t, e2e.PopQueue(q, "batch", "10")).TxIDs()
			if len(again) != 3 || again[1] != ps[1].Tx {
				t.Fatalf("after a seek back the group got %v, want all three, %s among them", again, ps[1].Tx)
			}
		})
	}
}

// D5: a lease that ends on a failure keeps only its resolved prefix, so an
// offset the group dead-lettered beyond it is found again by the next
// claims. It stays resolved: the claim passes over it rather than lease a
// span that delivers nothing and that no ack could ever end, which stopped
// the partition for a batch-1 consumer.
func TestD5_DeadLetterPastAFailedPrefixIsPassedOver(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "d5-passed")
	s.Configure(t, q, map[string]any{"retryLimit": 3, "retryDelay": 0})
	ps := s.PushN(t, q, "", 4)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "3", "leaseSeconds", "60"))
	if len(p.Messages) != 3 {
		t.Fatalf("first pop %v", p.TxIDs())
	}
	if r := s.AckOK(t, p.Messages[2], "dlq", ""); !r.DLQ {
		t.Fatalf("dlq ack of m3 %+v", r)
	}
	if r := s.AckOK(t, p.Messages[0], "failed", ""); !r.LeaseReleased {
		t.Fatalf("failed ack of m1 %+v", r)
	}
	for _, want := range []string{ps[0].Tx, ps[1].Tx, ps[3].Tx} {
		p := s.PopOK(t, e2e.PopQueue(q, "batch", "1", "leaseSeconds", "60"))
		if got := p.TxIDs(); len(got) != 1 || got[0] != want {
			t.Fatalf("batch-1 pop delivered %v, want %s (m3 is dead-lettered)", got, want)
		}
		s.AckOK(t, p.Messages[0], "completed", "")
	}
	c := e2e.ReadCursor(t, ps[0].PartitionID, "")
	if want := offsetOf(t, ps[0].PartitionID, ps[3].Tx); c.Committed != want {
		t.Errorf("committed %d, want %d: every offset is resolved", c.Committed, want)
	}
}
