package poptest

import (
	"context"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// popLeasing sends a pop that must deliver and asserts the live lease it left
// on (queue, partition, group) lasts secs: the lease began while the pop was
// in flight (the box has one clock), so it ends within secs of the pop's
// sending and answer, however slow the box.
func popLeasing(t *testing.T, s *e2e.Server, path, queue, partition, group string, secs float64) {
	t.Helper()
	const tolerance = 250 * time.Millisecond // timestamps rounded to microseconds, clock reads
	lease := time.Duration(secs * float64(time.Second))
	sent := time.Now()
	s.PopOK(t, path)
	answered := time.Now()
	c := cursorOf(t, queue, partition, group)
	if c.LeaseID == "" || c.Expires == nil {
		t.Fatalf("%s: no lease: %+v", path, c)
	}
	from, to := c.Expires.Sub(sent)-lease, c.Expires.Sub(answered)-lease
	if from < -tolerance || to > tolerance {
		t.Fatalf("%s: lease %q expires %v after the pop was sent and %v after it was answered, want %.0fs from a moment in between",
			path, c.LeaseID, c.Expires.Sub(sent), c.Expires.Sub(answered), secs)
	}
}

// TestPop_LeaseSecondsOverridesQueueLease: leaseSeconds replaces the queue's
// lease for the call; without it the queue's applies: 60 s for a queue a push
// created, 300 s for one configure created without leaseTime, its leaseTime
// otherwise.
func TestPop_LeaseSecondsOverridesQueueLease(t *testing.T) {
	t.Parallel()
	s := shared(t)
	implicit := e2e.Unique(t, "lease-implicit")
	configured := e2e.Unique(t, "lease-configured")
	leaseTime := e2e.Unique(t, "lease-45")
	s.Configure(t, configured, nil)
	s.Configure(t, leaseTime, map[string]any{"leaseTime": 45})
	for _, q := range []string{implicit, configured, leaseTime} {
		s.PushN(t, q, "p", 1)
	}
	for _, tc := range []struct {
		queue, group, lease string
		single              bool
		want                float64
	}{
		{implicit, "absent", "", false, 60},
		{implicit, "n17", "17", false, 17},
		{implicit, "single-n9", "9", true, 9},
		{configured, "absent", "", false, 300},
		{configured, "n17", "17", false, 17},
		{configured, "single-absent", "", true, 300},
		{leaseTime, "absent", "", false, 45},
		{leaseTime, "n400", "400", false, 400},
	} {
		path := e2e.PopQueue(tc.queue, "consumerGroup", tc.group)
		if tc.single {
			path = e2e.PopPartition(tc.queue, "p", "consumerGroup", tc.group)
		}
		if tc.lease != "" {
			path += "&leaseSeconds=" + tc.lease
		}
		popLeasing(t, s, path, tc.queue, "p", tc.group, tc.want)
	}
}

// TestPop_LeaseSecondsZeroOrNegativeIsAbsent: leaseSeconds of 0 or less is
// treated as absent, so the queue's lease applies.
func TestPop_LeaseSecondsZeroOrNegativeIsAbsent(t *testing.T) {
	t.Parallel()
	s := shared(t)
	implicit := e2e.Unique(t, "lease0-implicit")
	configured := e2e.Unique(t, "lease0-configured")
	s.Configure(t, configured, nil)
	s.PushN(t, implicit, "p", 1)
	s.PushN(t, configured, "p", 1)
	for _, tc := range []struct {
		queue, group, lease string
		want                float64
	}{
		{implicit, "zero", "0", 60},
		{implicit, "neg", "-5", 60},
		{configured, "zero", "0", 300},
		{configured, "neg", "-1", 300},
	} {
		path := e2e.PopQueue(tc.queue, "consumerGroup", tc.group, "leaseSeconds", tc.lease)
		popLeasing(t, s, path, tc.queue, "p", tc.group, tc.want)
	}
}

// TestPop_OneLiveLeasePerPartitionGroup: a (partition, group) has exactly one
// live leased batch: while it lives, every other pop of that group on that
// partition gets nothing; other groups are not affected (O-27).
func TestPop_OneLiveLeasePerPartitionGroup(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "onelease")
	txs := s.PushN(t, q, "p", 3).TxIDs()
	p := s.PopOK(t, e2e.PopPartition(q, "p", "consumerGroup", "g", "batch", "1"))
	e2e.WantTxIDs(t, "first pop", p, txs[:1])
	for _, path := range []string{
		e2e.PopPartition(q, "p", "consumerGroup", "g", "batch", "10"),
		e2e.PopQueue(q, "consumerGroup", "g", "batch", "10"),
		e2e.PopQueue(q, "consumerGroup", "g", "autoAck", "true"),
		e2e.PopPartition(q, "p", "consumerGroup", "g", "leaseSeconds", "5"),
	} {
		s.PopEmpty(t, path)
	}
	c := cursorOf(t, q, "p", "g")
	if c.LeaseID != p.LeaseID || c.Committed != 0 {
		t.Fatalf("cursor %+v, want the first pop's lease %s over an uncommitted span", c, p.LeaseID)
	}
	// Cursors and leases are per group.
	e2e.WantTxIDs(t, "another group", s.PopOK(t, e2e.PopPartition(q, "p", "consumerGroup", "h", "batch", "1")), txs[:1])
	e2e.WantTxIDs(t, "queue mode", s.PopOK(t, e2e.PopPartition(q, "p", "batch", "1")), txs[:1])
}

// TestPop_PollersSkipLeasedPartitions: a poller that meets a leased partition
// skips it and looks elsewhere, so wildcard pops with partitions=1 spread over
// the partitions.
func TestPop_PollersSkipLeasedPartitions(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "skip")
	backlog := map[string][]string{"a": s.PushN(t, q, "a", 2).TxIDs(), "b": s.PushN(t, q, "b", 2).TxIDs()}
	path := e2e.PopQueue(q, "consumerGroup", "g", "batch", "10", "partitions", "1")
	p1 := s.PopOK(t, path)
	p2 := s.PopOK(t, path)
	if p1.Partition == p2.Partition {
		t.Fatalf("both pops got partition %s", p1.Partition)
	}
	e2e.WantTxIDs(t, "first", p1, backlog[p1.Partition])
	e2e.WantTxIDs(t, "second", p2, backlog[p2.Partition])
	s.PopEmpty(t, path)

	// Concurrent pollers of a fresh group spread the same way.
	path = e2e.PopQueue(q, "consumerGroup", "h", "batch", "10", "partitions", "1")
	c1, c2 := async(context.Background(), s, path), async(context.Background(), s, path)
	o1, o2 := await(t, c1, 10*time.Second), await(t, c2, 10*time.Second)
	if o1.r.Status != 200 || o2.r.Status != 200 {
		t.Fatalf("concurrent pops: %d %q, %d %q", o1.r.Status, o1.r.Body, o2.r.Status, o2.r.Body)
	}
	if o1.r.Pop.Partition == o2.r.Pop.Partition {
		t.Fatalf("concurrent pops both got partition %s", o1.r.Pop.Partition)
	}
}

// TestPop_LeaseExpiryRedeliversWithoutRetryBudget: when a lease expires
// without an ack the span becomes claimable again and the same messages
// redeliver; expiry does not consume retry budget (D4). The leases last 3 s
// so that the check inside one is made before it ends on a loaded box.
func TestPop_LeaseExpiryRedeliversWithoutRetryBudget(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "expiry")
	txs := s.PushN(t, q, "p", 2).TxIDs()
	for _, tc := range []struct{ name, path string }{
		{"wildcard", e2e.PopQueue(q, "consumerGroup", "g", "batch", "2", "leaseSeconds", "3")},
		{"single", e2e.PopPartition(q, "p", "consumerGroup", "h", "batch", "2", "leaseSeconds", "3")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			group := "g"
			if tc.name == "single" {
				group = "h"
			}
			first := s.PopOK(t, tc.path)
			e2e.WantTxIDs(t, "first delivery", first, txs)
			expiry := leaseExpiresAt(t, q, "p", group)
			// While the lease lives the span is not claimable. An answer that
			// came after the lease ended may have been decided after it
			// too: then a redelivery is right as well.
			r := s.TryPop(t, tc.path)
			if time.Now().Before(expiry) {
				if err := r.Bare204(); err != nil {
					t.Fatalf("pop during the lease: %v", err)
				}
			} else if _, err := r.Delivered(); err != nil {
				t.Fatalf("pop at the end of the lease: %v", err)
			}
			prev := first
			for round := 0; round < 2; round++ {
				again := s.PopUntil(t, tc.path, 15*time.Second, 50*time.Millisecond)
				at := time.Now()
				if early := expiry.Sub(at); early > 50*time.Millisecond {
					t.Fatalf("round %d: redelivered %v before the 3s lease expired", round, early)
				}
				e2e.WantTxIDs(t, "redelivery", again, txs)
				for i, m := range again.Messages {
					if m.ID != first.Messages[i].ID {
						t.Fatalf("redelivered message %d has id %s, first delivery %s", i, m.ID, first.Messages[i].ID)
					}
				}
				if again.LeaseID == prev.LeaseID {
					t.Fatalf("redelivery under the expired lease id %s", again.LeaseID)
				}
				prev = again
				expiry = leaseExpiresAt(t, q, "p", group)
			}
			n := e2e.QueryInt(t, e2e.DB, `SELECT coalesce(sum(a.failures), 0)::bigint FROM queen.attempts a
  JOIN queen.partitions p ON p.id = a.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 AND a.consumer_group = $2`, q, group)
			if n != 0 {
				t.Fatalf("lease expiry recorded %d failures in queen.attempts", n)
			}
		})
	}
}

// TestPop_AutoAckCommitsInsidePop: autoAck=true commits the cursor inside the
// pop, before the response, leaves no lease and answers an empty leaseId at
// the top level and per message; the next pop gets the next messages.
func TestPop_AutoAckCommitsInsidePop(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "autoack")
	txs := s.PushN(t, q, "p", 5).TxIDs()
	wantNoLease := func(p *e2e.PopResponse) {
		t.Helper()
		if p.LeaseID != "" {
			t.Fatalf("autoAck pop answered leaseId %q", p.LeaseID)
		}
		for _, m := range p.Messages {
			if m.LeaseID != "" {
				t.Fatalf("autoAck message %s carries leaseId %q", m.TransactionID, m.LeaseID)
			}
		}
	}
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "2", "autoAck", "true"))
	e2e.WantTxIDs(t, "autoAck pop", p, txs[:2])
	wantNoLease(p)
	if c := cursorOf(t, q, "p", "g"); c.Committed != 2 || c.LeaseID != "" || c.Expires != nil {
		t.Fatalf("after the autoAck pop answered: cursor %+v, want committed 2 and no lease", c)
	}
	p = s.PopOK(t, e2e.PopPartition(q, "p", "consumerGroup", "g", "batch", "1", "autoAck", "true"))
	e2e.WantTxIDs(t, "single-route autoAck pop", p, txs[2:3])
	wantNoLease(p)
	if c := cursorOf(t, q, "p", "g"); c.Committed != 3 || c.LeaseID != "" {
		t.Fatalf("cursor %+v, want committed 3 and no lease", c)
	}
	leased := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "2"))
	e2e.WantTxIDs(t, "leased pop after the autoAck pops", leased, txs[3:])
	if leased.LeaseID == "" {
		t.Fatal("a pop without autoAck answered an empty leaseId")
	}

	// Several partitions in one autoAck pop: all committed, none leased.
	q2 := e2e.Unique(t, "autoack-multi")
	a, b := s.PushN(t, q2, "a", 2).TxIDs(), s.PushN(t, q2, "b", 3).TxIDs()
	p = s.PopOK(t, e2e.PopQueue(q2, "consumerGroup", "g", "batch", "100", "partitions", "0", "autoAck", "true"))
	wantNoLease(p)
	if len(p.Messages) != 5 {
		t.Fatalf("multi-partition autoAck pop: %v", p.TxIDs())
	}
	for part, want := range map[string]int64{"a": int64(len(a)), "b": int64(len(b))} {
		if c := cursorOf(t, q2, part, "g"); c.Committed != want || c.LeaseID != "" {
			t.Fatalf("partition %s: cursor %+v, want committed %d and no lease", part, c, want)
		}
	}
	s.PopEmpty(t, e2e.PopQueue(q2, "consumerGroup", "g", "autoAck", "true"))
}
