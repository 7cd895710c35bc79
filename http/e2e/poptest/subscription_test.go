package poptest

import (
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// subscriptions counts the durable subscription records of (queue, group).
func subscriptions(t *testing.T, queue, group string) int64 {
	t.Helper()
	return e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.subscriptions s JOIN queen.queues q ON q.id = s.queue_id
 WHERE q.name = $1 AND s.consumer_group = $2`, queue, group)
}

// TestO3_QueueModeSharedCursor: a pop without consumerGroup is queue mode, the
// reserved group __QUEUE_MODE__ (in the response and in queen.cursors): an
// ordinary cursor, shared by every consumer that omits the group, and
// independent of named groups.
func TestO3_QueueModeSharedCursor(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "qmode")
	txs := s.PushN(t, q, "p", 4).TxIDs()

	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "autoAck", "true"))
	e2e.WantTxIDs(t, "first consumer", p, txs[:2])
	if p.ConsumerGroup != e2e.QueueMode {
		t.Fatalf("top-level consumerGroup %q, want %s", p.ConsumerGroup, e2e.QueueMode)
	}
	for _, m := range p.Messages {
		if m.ConsumerGroup != e2e.QueueMode {
			t.Fatalf("message consumerGroup %q, want %s", m.ConsumerGroup, e2e.QueueMode)
		}
	}
	if c := cursorOf(t, q, "p", e2e.QueueMode); !c.Found || c.Committed != 2 {
		t.Fatalf("queen.cursors row of %s: %+v, want committed 2", e2e.QueueMode, c)
	}
	// Another consumer omitting the group, on another route: the same cursor.
	e2e.WantTxIDs(t, "second consumer", s.PopOK(t, e2e.PopPartition(q, "p", "batch", "2", "autoAck", "true")), txs[2:])
	s.PopEmpty(t, e2e.PopQueue(q))
	// Named groups have cursors of their own.
	e2e.WantTxIDs(t, "named group", s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "10")), txs)
	if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1`, q); n != 2 {
		t.Fatalf("%d cursors, want 2 (queue mode and g)", n)
	}

	// The shared cursor carries one lease for all queue-mode consumers.
	more := s.PushN(t, q, "p", 1).TxIDs()
	leased := s.PopOK(t, e2e.PopQueue(q))
	e2e.WantTxIDs(t, "leased", leased, more)
	if c := cursorOf(t, q, "p", e2e.QueueMode); c.LeaseID != leased.LeaseID {
		t.Fatalf("queue-mode cursor lease %q, the pop answered %q", c.LeaseID, leased.LeaseID)
	}
	s.PopEmpty(t, e2e.PopPartition(q, "p"))
}

// TestO3_QueueModeNeverSeeded: queue mode is excluded from subscription
// seeding: with subscriptionMode=new or any subscriptionFrom it still gets the
// backlog, and no durable subscription is recorded for it.
func TestO3_QueueModeNeverSeeded(t *testing.T) {
	t.Parallel()
	s := shared(t)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	for _, tc := range []struct{ name, k, v string }{
		{"new", "subscriptionMode", "new"},
		{"new-only", "subscriptionMode", "new-only"},
		{"from-now", "subscriptionFrom", "now"},
		{"from-future", "subscriptionFrom", future},
	} {
		q := e2e.Unique(t, "qmode-seed")
		txs := s.PushN(t, q, "p", 3).TxIDs()
		e2e.WantTxIDs(t, tc.name+" (wildcard)",
			s.PopOK(t, e2e.PopQueue(q, tc.k, tc.v, "batch", "10", "autoAck", "true")), txs)
		q2 := e2e.Unique(t, "qmode-seed")
		txs2 := s.PushN(t, q2, "p", 3).TxIDs()
		e2e.WantTxIDs(t, tc.name+" (single)",
			s.PopOK(t, e2e.PopPartition(q2, "p", tc.k, tc.v, "batch", "10", "autoAck", "true")), txs2)
		if n := subscriptions(t, q, e2e.QueueMode) + subscriptions(t, q2, e2e.QueueMode); n != 0 {
			t.Fatalf("%s: %d subscription records for queue mode", tc.name, n)
		}
	}
}

// TestD6_SubscriptionModeAllIsDefault: a new group starts at the oldest
// retained message, with subscriptionMode=all or without a mode.
func TestD6_SubscriptionModeAllIsDefault(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "suball")
	txs := s.PushN(t, q, "p", 3).TxIDs()
	e2e.WantTxIDs(t, "no mode", s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "none", "batch", "10")), txs)
	e2e.WantTxIDs(t, "all",
		s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "all", "subscriptionMode", "all", "batch", "10")), txs)
	e2e.WantTxIDs(t, "all, single route",
		s.PopOK(t, e2e.PopPartition(q, "p", "consumerGroup", "all-single", "subscriptionMode", "all", "batch", "10")), txs)
}

// TestD6_SubscriptionModeNewSkipsBacklog: subscriptionMode=new (and new-only,
// its alias) skips the existing backlog of a new group; what is pushed after
// is delivered. The pop records the group's durable subscription.
func TestD6_SubscriptionModeNewSkipsBacklog(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, mode := range []string{"new", "new-only"} {
		for _, route := range []string{"wildcard", "single"} {
			q := e2e.Unique(t, "subnew")
			s.PushN(t, q, "p", 3)
			path := e2e.PopQueue(q, "consumerGroup", "g", "subscriptionMode", mode, "batch", "10")
			if route == "single" {
				path = e2e.PopPartition(q, "p", "consumerGroup", "g", "subscriptionMode", mode, "batch", "10")
			}
			s.PopEmpty(t, path)
			after := s.PushN(t, q, "p", 2).TxIDs()
			e2e.WantTxIDs(t, mode+" "+route+": after the backlog", s.PopOK(t, path), after)
			if n := subscriptions(t, q, "g"); n != 1 {
				t.Fatalf("%s %s: %d subscription records, want 1", mode, route, n)
			}
		}
	}
}

// TestD6_SubscriptionFromNow: subscriptionFrom=now skips the backlog of a new
// group like subscriptionMode=new.
func TestD6_SubscriptionFromNow(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "subnow")
	s.PushN(t, q, "p", 3)
	path := e2e.PopQueue(q, "consumerGroup", "g", "subscriptionFrom", "now", "batch", "10")
	s.PopEmpty(t, path)
	after := s.PushN(t, q, "p", 2).TxIDs()
	e2e.WantTxIDs(t, "after the backlog", s.PopOK(t, path), after)
	if n := subscriptions(t, q, "g"); n != 1 {
		t.Fatalf("%d subscription records, want 1", n)
	}
}

// TestD6_SubscriptionFromTimestamp: subscriptionFrom=<ISO-8601> starts a new
// group after the last segment created before that time.
func TestD6_SubscriptionFromTimestamp(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "subts")
	s.PushN(t, q, "p", 2)
	time.Sleep(100 * time.Millisecond)
	at := time.Now().UTC()
	time.Sleep(100 * time.Millisecond)
	later := s.PushN(t, q, "p", 2).TxIDs()
	for group, from := range map[string]string{
		"rfc3339-z":      at.Format(time.RFC3339Nano),
		"rfc3339-offset": at.In(time.FixedZone("", 2*3600)).Format("2006-01-02T15:04:05.000000-07:00"),
	} {
		e2e.WantTxIDs(t, "from "+from,
			s.PopOK(t, e2e.PopQueue(q, "consumerGroup", group, "subscriptionFrom", from, "batch", "10")), later)
	}
	// A time before everything gets everything.
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	if p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "old", "subscriptionFrom", old, "batch", "10")); len(p.Messages) != 4 {
		t.Fatalf("from an hour ago: %v, want all 4", p.TxIDs())
	}
}

// TestD6_SubscriptionFromUnparseableIgnored: an unparseable subscriptionFrom
// is ignored: the group starts as if it carried none (all), and nothing is
// recorded for it.
func TestD6_SubscriptionFromUnparseableIgnored(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "subbad")
	txs := s.PushN(t, q, "p", 3).TxIDs()
	for _, from := range []string{"not-a-time", "2026-13-45T99:99:99Z", "yesterday"} {
		group := "g-" + from
		e2e.WantTxIDs(t, "from "+from,
			s.PopOK(t, e2e.PopQueue(q, "consumerGroup", group, "subscriptionFrom", from, "batch", "10")), txs)
		if n := subscriptions(t, q, group); n != 0 {
			t.Fatalf("from %s: %d subscription records, want none", from, n)
		}
	}
}

// TestD6_SubscriptionIgnoredForContactedPartition: once a (partition, group)
// has been contacted, subscriptionMode and subscriptionFrom are ignored for it.
func TestD6_SubscriptionIgnoredForContactedPartition(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "subcontacted")
	txs := s.PushN(t, q, "a", 3).TxIDs()
	e2e.WantTxIDs(t, "first contact",
		s.PopOK(t, e2e.PopPartition(q, "a", "consumerGroup", "g", "batch", "1", "autoAck", "true")), txs[:1])
	e2e.WantTxIDs(t, "mode new afterwards",
		s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "subscriptionMode", "new", "batch", "10", "autoAck", "true")), txs[1:])
	more := s.PushN(t, q, "a", 2).TxIDs()
	e2e.WantTxIDs(t, "from now afterwards",
		s.PopOK(t, e2e.PopPartition(q, "a", "consumerGroup", "g", "subscriptionFrom", "now", "batch", "10")), more)
	if n := subscriptions(t, q, "g"); n != 0 {
		t.Fatalf("%d subscription records for a group whose first pop carried no mode", n)
	}
}

// TestD6_SubscriptionSeedsUncontactedPartition: the intent a pop carries seeds
// the cursors that do not exist yet, partition by partition, even for a group
// that has contacted other partitions (and recorded no durable subscription).
func TestD6_SubscriptionSeedsUncontactedPartition(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "subuncontacted")
	a := s.PushN(t, q, "a", 2).TxIDs()
	e2e.WantTxIDs(t, "first contact",
		s.PopOK(t, e2e.PopPartition(q, "a", "consumerGroup", "g", "batch", "10", "autoAck", "true")), a)
	s.PushN(t, q, "b", 2).TxIDs() // a partition the group has never contacted
	a2 := s.PushN(t, q, "a", 1).TxIDs()
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "subscriptionMode", "new", "batch", "10", "partitions", "0",
		"autoAck", "true"))
	e2e.WantTxIDs(t, "mode new: a's rest, none of b's backlog", p, a2)
	b2 := s.PushN(t, q, "b", 1).TxIDs()
	e2e.WantTxIDs(t, "b after its seeding",
		s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "10", "partitions", "0")), b2)
}

// TestD6_DurableSubscriptionWinsOverLaterPop: the record written by the first
// pop of a new group that carried a mode wins over what a later pop carries,
// for every partition the group had not contacted yet.
func TestD6_DurableSubscriptionWinsOverLaterPop(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "durable")
	s.PushN(t, q, "a", 1)
	s.PushN(t, q, "b", 1).TxIDs() // b: backlog older than the subscription, not contacted yet
	s.PopEmpty(t, e2e.PopPartition(q, "a", "consumerGroup", "g", "subscriptionMode", "new"))
	if n := subscriptions(t, q, "g"); n != 1 {
		t.Fatalf("%d subscription records after the first pop with mode new, want 1", n)
	}
	a2, b2 := s.PushN(t, q, "a", 1).TxIDs(), s.PushN(t, q, "b", 1).TxIDs()
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "subscriptionMode", "all", "batch", "10", "partitions", "0",
		"autoAck", "true"))
	got := map[string]bool{}
	for _, tx := range p.TxIDs() {
		got[tx] = true
	}
	if len(p.Messages) != 2 || !got[a2[0]] || !got[b2[0]] {
		t.Fatalf("later pop with mode all delivered %v, want only %v and %v (the record's new wins)", p.TxIDs(), a2, b2)
	}
}

// TestD6_DurableSubscriptionAppliesToLaterPartitions: the durable record also
// seeds partitions created after it, whatever the later pop carries.
func TestD6_DurableSubscriptionAppliesToLaterPartitions(t *testing.T) {
	t.Parallel()
	s := shared(t)
	t.Run("timestamp record", func(t *testing.T) {
		t.Parallel()
		// The record's time must fall between two pushes to a partition
		// created after it. On a loaded machine a push can outlast the
		// margin; then the premise did not hold, and the round is repeated
		// with a wider one.
		for margin := 1500 * time.Millisecond; ; margin *= 2 {
			q := e2e.Unique(t, "durable-ts")
			s.PushN(t, q, "a", 1)
			at := time.Now().Add(margin).UTC()
			s.PopEmpty(t, e2e.PopQueue(q, "consumerGroup", "g", "subscriptionFrom", at.Format(time.RFC3339Nano)))
			if n := subscriptions(t, q, "g"); n != 1 {
				t.Fatalf("%d subscription records, want 1", n)
			}
			s.PushN(t, q, "c", 1).TxIDs() // a new partition, written before the record's time
			if time.Now().After(at) {
				if margin > 10*time.Second {
					t.Fatalf("pushes take longer than %v on this machine", margin)
				}
				continue
			}
			time.Sleep(time.Until(at) + 100*time.Millisecond)
			c2, a2 := s.PushN(t, q, "c", 1).TxIDs(), s.PushN(t, q, "a", 1).TxIDs()
			p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "subscriptionMode", "all", "batch", "10", "partitions", "0"))
			got := map[string]bool{}
			for _, tx := range p.TxIDs() {
				got[tx] = true
			}
			if len(p.Messages) != 2 || !got[c2[0]] || !got[a2[0]] {
				t.Fatalf("delivered %v, want only %v and %v (written after the recorded time)", p.TxIDs(), c2, a2)
			}
			return
		}
	})
	t.Run("all record", func(t *testing.T) {
		t.Parallel()
		q := e2e.Unique(t, "durable-all")
		a := s.PushN(t, q, "a", 1).TxIDs()
		e2e.WantTxIDs(t, "first pop, mode all",
			s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "subscriptionMode", "all", "autoAck", "true")), a)
		if n := subscriptions(t, q, "g"); n != 1 {
			t.Fatalf("%d subscription records, want 1", n)
		}
		c := s.PushN(t, q, "c", 2).TxIDs()
		e2e.WantTxIDs(t, "new partition, later pop with mode new",
			s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "subscriptionMode", "new", "batch", "10")), c)
	})
}
