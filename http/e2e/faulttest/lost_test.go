package faulttest

import (
	"context"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// TestD12_APopWhoseClaimAnswerWasLostFreesItsLease: a pop whose claim the
// database ran and committed, but whose answer did not come back within the
// request deadline, fails (503, retryable), and nobody holds the lease its claim took;
// once the database answers again the broker ends that lease, and the
// message goes to the next pop of the group, not when the lease (300 s here)
// runs out. The proxy holds only the database's answers, so the claim does
// commit.
func TestD12_APopWhoseClaimAnswerWasLostFreesItsLease(t *testing.T) {
	s, p := startProxied(t, nil)
	q := e2e.Unique(t, "lost")
	s.Configure(t, q, map[string]any{"leaseTime": 300})
	// The group's cursor exists before the freeze: the lost round is one
	// claim statement.
	first := s.PushN(t, q, "Default", 1).TxIDs()
	m := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g"))
	e2e.WantTxIDs(t, "first pop", m, first)
	s.AckOK(t, m.Messages[0], "completed", "g")
	txs := s.PushN(t, q, "Default", 1).TxIDs()
	pid := e2e.PartitionID(t, q, "Default")

	p.FreezeReplies()
	r, err := s.PopCtx(context.Background(), e2e.PopQueue(q, "consumerGroup", "g"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 503 {
		t.Fatalf("pop with the answers held: %d %s, want 503", r.Status, r.Body)
	}
	// Its claim committed: the cursor carries a lease nobody was given (ended
	// or not yet: the broker's first attempt may run before the thaw).
	if c := e2e.ReadCursor(t, pid, "g"); c.LeaseID == "" {
		t.Fatalf("the claim did not commit: %+v", c)
	}
	p.Thaw()

	r, err = s.PopCtx(context.Background(), e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "15000"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 200 {
		t.Fatalf("the next pop of the group got %d %q: the message is still leased to the failed pop", r.Status, r.Body)
	}
	e2e.WantTxIDs(t, "next pop", r.Pop, txs)
}
