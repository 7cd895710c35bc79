package poptest

import (
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// TestD6_DurableRecordSeedsPartitionsContactedLater: a group's first pop
// carrying subscriptionMode=new on partition p1 writes the durable record,
// also when p1 holds nothing yet (it has never been written to); a later pop
// of the group carrying subscriptionMode=all on a partition p2 it contacts
// for the first time is seeded by the record, at p2's head (p2's backlog is
// older than the record), not by the later pop's intent. What p2 gets
// afterwards is delivered.
func TestD6_DurableRecordSeedsPartitionsContactedLater(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, tc := range []struct {
		name     string
		p1Exists bool
		wildcard bool // the later pop's route
	}{
		{"p1 never written, single-partition route", false, false},
		{"p1 never written, wildcard route", false, true},
		{"p1 written, single-partition route", true, false},
	} {
		q := e2e.Unique(t, "d6record")
		if tc.p1Exists {
			s.PushN(t, q, "p1", 1)
		}
		s.PushN(t, q, "p2", 3) // p2's backlog, older than the record
		s.PopEmpty(t, e2e.PopPartition(q, "p1", "consumerGroup", "g", "subscriptionMode", "new"))
		if n := subscriptions(t, q, "g"); n != 1 {
			t.Fatalf("%s: %d subscription records after the group's first pop with mode new, want 1", tc.name, n)
		}
		later := e2e.PopPartition(q, "p2", "consumerGroup", "g", "subscriptionMode", "all", "batch", "10")
		if tc.wildcard {
			later = e2e.PopQueue(q, "consumerGroup", "g", "subscriptionMode", "all", "batch", "10", "partitions", "0")
		}
		s.PopEmpty(t, later)
		after := s.PushN(t, q, "p2", 2).TxIDs()
		e2e.WantTxIDs(t, tc.name+": what p2 got after the record", s.PopOK(t, later), after)
	}
}
