package poptest

import (
	"context"
	"testing"
	"time"

	"github.com/queengo/queengo/http/apitest"
)

// wantLease asserts the live lease of (queue, partition, group) ends about
// secs from now.
func wantLease(t *testing.T, what, queue, partition, group string, secs float64) {
	t.Helper()
	c := readCursor(t, apitest.DB, queue, partition, group)
	if c.LeaseID == "" || c.ExpiresIn < secs-5 || c.ExpiresIn > secs+0.5 {
		t.Fatalf("%s: lease %q expires in %.1fs, want about %.0fs", what, c.LeaseID, c.ExpiresIn, secs)
	}
}

// TestPop_LeaseSecondsOverridesQueueLease: leaseSeconds replaces the queue's
// lease for the call; without it the queue's applies: 60 s for a queue a push
// created, 300 s for one configure created without leaseTime, its leaseTime
// otherwise.
func TestPop_LeaseSecondsOverridesQueueLease(t *testing.T) {
	t.Parallel()
	s := shared(t)
	implicit := apitest.Unique(t, "lease-implicit")
	configured := apitest.Unique(t, "lease-configured")
	leaseTime := apitest.Unique(t, "lease-45")
	configure(t, s, configured, nil)
	configure(t, s, leaseTime, map[string]any{"leaseTime": 45})
	for _, q := range []string{implicit, configured, leaseTime} {
		pushN(t, s, q, "p", 1)
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
		path := wildcard(tc.queue, "consumerGroup", tc.group)
		if tc.single {
			path = single(tc.queue, "p", "consumerGroup", tc.group)
		}
		if tc.lease != "" {
			path += "&leaseSeconds=" + tc.lease
		}
		popOK(t, s, path)
		wantLease(t, path, tc.queue, "p", tc.group, tc.want)
	}
}

// TestPop_LeaseSecondsZeroOrNegativeIsAbsent: leaseSeconds of 0 or less is
// treated as absent, so the queue's lease applies.
func TestPop_LeaseSecondsZeroOrNegativeIsAbsent(t *testing.T) {
	t.Parallel()
	s := shared(t)
	implicit := apitest.Unique(t, "lease0-implicit")
	configured := apitest.Unique(t, "lease0-configured")
	configure(t, s, configured, nil)
	pushN(t, s, implicit, "p", 1)
	pushN(t, s, configured, "p", 1)
	for _, tc := range []struct {
		queue, group, lease string
		want                float64
	}{
		{implicit, "zero", "0", 60},
		{implicit, "neg", "-5", 60},
		{configured, "zero", "0", 300},
		{configured, "neg", "-1", 300},
	} {
		path := wildcard(tc.queue, "consumerGroup", tc.group, "leaseSeconds", tc.lease)
		popOK(t, s, path)
		wantLease(t, path, tc.queue, "p", tc.group, tc.want)
	}
}

// TestPop_OneLiveLeasePerPartitionGroup: a (partition, group) has exactly one
// live leased batch: while it lives, every other pop of that group on that
// partition gets nothing; other groups are not affected (O-27).
func TestPop_OneLiveLeasePerPartitionGroup(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := apitest.Unique(t, "onelease")
	txs := pushN(t, s, q, "p", 3)
	p := popOK(t, s, single(q, "p", "consumerGroup", "g", "batch", "1"))
	wantTx(t, "first pop", p, txs[:1])
	for _, path := range []string{
		single(q, "p", "consumerGroup", "g", "batch", "10"),
		wildcard(q, "consumerGroup", "g", "batch", "10"),
		wildcard(q, "consumerGroup", "g", "autoAck", "true"),
		single(q, "p", "consumerGroup", "g", "leaseSeconds", "5"),
	} {
		popEmpty(t, s, path)
	}
	c := readCursor(t, apitest.DB, q, "p", "g")
	if c.LeaseID != p.LeaseID || c.Committed != 0 {
		t.Fatalf("cursor %+v, want the first pop's lease %s over an uncommitted span", c, p.LeaseID)
	}
	// Cursors and leases are per group.
	wantTx(t, "another group", popOK(t, s, single(q, "p", "consumerGroup", "h", "batch", "1")), txs[:1])
	wantTx(t, "queue mode", popOK(t, s, single(q, "p", "batch", "1")), txs[:1])
}

// TestPop_PollersSkipLeasedPartitions: a poller that meets a leased partition
// skips it and looks elsewhere, so wildcard pops with partitions=1 spread over
// the partitions.
func TestPop_PollersSkipLeasedPartitions(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := apitest.Unique(t, "skip")
	backlog := map[string][]string{"a": pushN(t, s, q, "a", 2), "b": pushN(t, s, q, "b", 2)}
	path := wildcard(q, "consumerGroup", "g", "batch", "10", "partitions", "1")
	p1 := popOK(t, s, path)
	p2 := popOK(t, s, path)
	if p1.Partition == p2.Partition {
		t.Fatalf("both pops got partition %s", p1.Partition)
	}
	wantTx(t, "first", p1, backlog[p1.Partition])
	wantTx(t, "second", p2, backlog[p2.Partition])
	popEmpty(t, s, path)

	// Concurrent pollers of a fresh group spread the same way.
	path = wildcard(q, "consumerGroup", "h", "batch", "10", "partitions", "1")
	c1, c2 := async(context.Background(), nil, s, path), async(context.Background(), nil, s, path)
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
// redeliver; expiry does not consume retry budget (D4).
func TestPop_LeaseExpiryRedeliversWithoutRetryBudget(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := apitest.Unique(t, "expiry")
	txs := pushN(t, s, q, "p", 2)
	for _, tc := range []struct{ name, path string }{
		{"wildcard", wildcard(q, "consumerGroup", "g", "batch", "2", "leaseSeconds", "1")},
		{"single", single(q, "p", "consumerGroup", "h", "batch", "2", "leaseSeconds", "1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := "g"
			if tc.name == "single" {
				group = "h"
			}
			first := popOK(t, s, tc.path)
			wantTx(t, "first delivery", first, txs)
			expiry := leaseExpiresAt(t, apitest.DB, q, "p", group)
			// While the lease lives the span is not claimable (on a slow box
			// the lease may be gone by the time this pop is sent: then a
			// redelivery is right).
			sent := time.Now()
			if r := get(t, s, tc.path); sent.Before(expiry) || r.Status != 200 {
				if err := bare204(r); err != nil {
					t.Fatalf("pop during the lease: %v", err)
				}
			}
			prev := first
			for round := 0; round < 2; round++ {
				var again *apitest.PopResponse
				var at time.Time
				ok := waitFor(5*time.Second, func() bool {
					r := get(t, s, tc.path)
					if r.Status == 200 {
						again, at = r.Pop, time.Now()
						return true
					}
					if err := bare204(r); err != nil {
						t.Fatal(err)
					}
					return false
				})
				if !ok {
					t.Fatalf("round %d: not redelivered within 5s of the expiry", round)
				}
				if early := expiry.Sub(at); early > 50*time.Millisecond {
					t.Fatalf("round %d: redelivered %v before the 1s lease expired", round, early)
				}
				wantTx(t, "redelivery", again, txs)
				for i, m := range again.Messages {
					if m.ID != first.Messages[i].ID {
						t.Fatalf("redelivered message %d has id %s, first delivery %s", i, m.ID, first.Messages[i].ID)
					}
				}
				if again.LeaseID == prev.LeaseID {
					t.Fatalf("redelivery under the expired lease id %s", again.LeaseID)
				}
				prev = again
				expiry = leaseExpiresAt(t, apitest.DB, q, "p", group)
			}
			n := count(t, apitest.DB, `SELECT coalesce(sum(a.failures), 0)::bigint FROM queen.attempts a
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
	q := apitest.Unique(t, "autoack")
	txs := pushN(t, s, q, "p", 5)
	wantNoLease := func(p *apitest.PopResponse) {
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
	p := popOK(t, s, wildcard(q, "consumerGroup", "g", "batch", "2", "autoAck", "true"))
	wantTx(t, "autoAck pop", p, txs[:2])
	wantNoLease(p)
	if c := readCursor(t, apitest.DB, q, "p", "g"); c.Committed != 2 || c.LeaseID != "" || c.ExpiresIn != -1e9 {
		t.Fatalf("after the autoAck pop answered: cursor %+v, want committed 2 and no lease", c)
	}
	p = popOK(t, s, single(q, "p", "consumerGroup", "g", "batch", "1", "autoAck", "true"))
	wantTx(t, "single-route autoAck pop", p, txs[2:3])
	wantNoLease(p)
	if c := readCursor(t, apitest.DB, q, "p", "g"); c.Committed != 3 || c.LeaseID != "" {
		t.Fatalf("cursor %+v, want committed 3 and no lease", c)
	}
	leased := popOK(t, s, wildcard(q, "consumerGroup", "g", "batch", "2"))
	wantTx(t, "leased pop after the autoAck pops", leased, txs[3:])
	if leased.LeaseID == "" {
		t.Fatal("a pop without autoAck answered an empty leaseId")
	}

	// Several partitions in one autoAck pop: all committed, none leased.
	q2 := apitest.Unique(t, "autoack-multi")
	a, b := pushN(t, s, q2, "a", 2), pushN(t, s, q2, "b", 3)
	p = popOK(t, s, wildcard(q2, "consumerGroup", "g", "batch", "100", "partitions", "0", "autoAck", "true"))
	wantNoLease(p)
	if len(p.Messages) != 5 {
		t.Fatalf("multi-partition autoAck pop: %v", txids(p))
	}
	for part, want := range map[string]int64{"a": int64(len(a)), "b": int64(len(b))} {
		if c := readCursor(t, apitest.DB, q2, part, "g"); c.Committed != want || c.LeaseID != "" {
			t.Fatalf("partition %s: cursor %+v, want committed %d and no lease", part, c, want)
		}
	}
	popEmpty(t, s, wildcard(q2, "consumerGroup", "g", "autoAck", "true"))
}
