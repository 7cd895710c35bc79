package poptest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// pushParts pushes n messages to each named partition of queue and returns
// their transaction ids per partition, in push order.
func pushParts(t *testing.T, s *e2e.Server, queue string, n int, parts ...string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, p := range parts {
		out[p] = s.PushN(t, queue, p, n).TxIDs()
	}
	return out
}

// checkRuns asserts that every stretch of a delivery is the prefix of the
// named partition's backlog (it starts at the cursor and keeps push order),
// that no partition appears twice, and returns the stretches.
func checkRuns(t *testing.T, p *e2e.PopResponse, backlog map[string][]string) []run {
	t.Helper()
	rs := runs(p)
	seen := map[string]bool{}
	for _, r := range rs {
		if seen[r.partition] {
			t.Fatalf("partition %s appears in two stretches of one delivery: %v", r.partition, p.TxIDs())
		}
		seen[r.partition] = true
		want := backlog[r.partition]
		if len(r.txs) > len(want) || !slices.Equal(r.txs, want[:len(r.txs)]) {
			t.Fatalf("partition %s delivered %v, want a prefix of %v", r.partition, r.txs, want)
		}
	}
	return rs
}

// TestPop_BatchIsOneBudget: batch is the total message budget of the call,
// shared across every partition it touches, consumed partition by partition.
func TestPop_BatchIsOneBudget(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "budget")
	backlog := pushParts(t, s, q, 4, "a", "b", "c")

	// 6 out of 3x4: the first partition gives all it has (4), the second
	// the rest of the budget (2), the third nothing.
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g6", "batch", "6", "partitions", "0"))
	rs := checkRuns(t, p, backlog)
	if len(p.Messages) != 6 || len(rs) != 2 || len(rs[0].txs) != 4 || len(rs[1].txs) != 2 {
		t.Fatalf("batch=6: want 4 from one partition then 2 from another, got %v", p.TxIDs())
	}
	if p.PartitionsClaimed != 2 {
		t.Fatalf("batch=6: partitionsClaimed %d, want 2", p.PartitionsClaimed)
	}

	// A budget smaller than one partition's backlog stays in that partition.
	p = s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g3", "batch", "3", "partitions", "0"))
	rs = checkRuns(t, p, backlog)
	if len(p.Messages) != 3 || len(rs) != 1 || p.PartitionsClaimed != 1 {
		t.Fatalf("batch=3: want 3 messages of one partition, got %v (claimed %d)", p.TxIDs(), p.PartitionsClaimed)
	}

	// A budget larger than everything takes everything, and no more.
	p = s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g100", "batch", "100", "partitions", "0"))
	rs = checkRuns(t, p, backlog)
	if len(p.Messages) != 12 || len(rs) != 3 || p.PartitionsClaimed != 3 {
		t.Fatalf("batch=100: want all 12 messages of 3 partitions, got %v (claimed %d)", p.TxIDs(), p.PartitionsClaimed)
	}
	for _, r := range rs {
		if len(r.txs) != 4 {
			t.Fatalf("batch=100: partition %s gave %d of its 4", r.partition, len(r.txs))
		}
	}

	// The single-partition route spends the same budget on its one partition.
	p = s.PopOK(t, e2e.PopPartition(q, "b", "consumerGroup", "gs", "batch", "3"))
	e2e.WantTxIDs(t, "single route batch=3", p, backlog["b"][:3])
}

// TestPop_PartitionsCapsClaimedPartitions: partitions caps how many
// partitions one call may claim.
func TestPop_PartitionsCapsClaimedPartitions(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "cap")
	backlog := pushParts(t, s, q, 2, "a", "b", "c", "d")
	for _, tc := range []struct {
		parts string
		want  int
	}{{"1", 1}, {"2", 2}, {"3", 3}} {
		p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "cap"+tc.parts, "batch", "100", "partitions", tc.parts))
		rs := checkRuns(t, p, backlog)
		if len(rs) != tc.want || p.PartitionsClaimed != tc.want || len(p.Messages) != 2*tc.want {
			t.Fatalf("partitions=%s: got %d partitions (claimed %d), %d messages, want %d partitions of 2",
				tc.parts, len(rs), p.PartitionsClaimed, len(p.Messages), tc.want)
		}
	}
}

// TestPop_PartitionsNoCapWhenZeroOrNegative: 0 or a negative value means no
// cap.
func TestPop_PartitionsNoCapWhenZeroOrNegative(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "nocap")
	backlog := pushParts(t, s, q, 2, "a", "b", "c", "d", "e")
	for _, parts := range []string{"0", "-1", "-100"} {
		p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "nocap"+parts, "batch", "100", "partitions", parts))
		rs := checkRuns(t, p, backlog)
		if len(rs) != 5 || p.PartitionsClaimed != 5 || len(p.Messages) != 10 {
			t.Fatalf("partitions=%s: got %d partitions (claimed %d), %d messages, want all 5 partitions, 10 messages",
				parts, len(rs), p.PartitionsClaimed, len(p.Messages))
		}
	}
}

// TestPop_PartitionsIgnoredOnSinglePartitionRoute: the single-partition route
// claims its one partition whatever partitions says.
func TestPop_PartitionsIgnoredOnSinglePartitionRoute(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "ignored")
	backlog := pushParts(t, s, q, 2, "a", "b", "c")
	for _, parts := range []string{"3", "0", "-1"} {
		p := s.PopOK(t, e2e.PopPartition(q, "b", "consumerGroup", "ign"+parts, "batch", "100", "partitions", parts))
		e2e.WantTxIDs(t, "single route partitions="+parts, p, backlog["b"])
		if p.PartitionsClaimed != 1 || p.Partition != "b" {
			t.Fatalf("partitions=%s: claimed %d, partition %q; want 1, b", parts, p.PartitionsClaimed, p.Partition)
		}
	}
}

// TestPop_ConcurrentPartitionRoutePopsEachGetTheirPartition: pops of one
// group on the single-partition route, sent at once (so that rounds carry
// several of them), each get their own partition's backlog, whole and in
// order, and nothing of another's.
func TestPop_ConcurrentPartitionRoutePopsEachGetTheirPartition(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "pinned")
	parts := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}
	backlog := pushParts(t, s, q, 3, parts...)
	chs := make([]<-chan outcome, len(parts))
	for i, p := range parts {
		chs[i] = async(context.Background(), s, e2e.PopPartition(q, p, "consumerGroup", "g", "batch", "10",
			"wait", "true", "timeout", "5000"))
	}
	for i, p := range parts {
		o := await(t, chs[i], 10*time.Second)
		if o.r.Status != 200 {
			t.Fatalf("pop of %s: %d %q", p, o.r.Status, o.r.Body)
		}
		if o.r.Pop.Partition != p {
			t.Fatalf("pop of %s answered from %s", p, o.r.Pop.Partition)
		}
		e2e.WantTxIDs(t, "pop of "+p, o.r.Pop, backlog[p])
	}
}

// TestPop_PartitionRouteFindsAPartitionCreatedAgain: a partition removed
// (as idle cleanup removes one) and created again by a push under a new id
// is served by the single-partition route of the same broker at once.
func TestPop_PartitionRouteFindsAPartitionCreatedAgain(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "again")
	first := s.PushN(t, q, "p", 1)
	s.PopOK(t, e2e.PopPartition(q, "p", "autoAck", "true"))
	if err := e2e.DB.Exec(`DELETE FROM queen.partitions WHERE id = $1`, first[0].PartitionID); err != nil {
		t.Fatal(err)
	}
	again := s.PushN(t, q, "p", 1)
	if again[0].PartitionID == first[0].PartitionID {
		t.Fatalf("the push went to the removed partition %s", first[0].PartitionID)
	}
	p := s.PopOK(t, e2e.PopPartition(q, "p", "autoAck", "true"))
	e2e.WantTxIDs(t, "pop after the partition was created again", p, again.TxIDs())
}

// TestPop_MultiPartitionClaimsShareOneLeaseID: every partition a pop claims is
// leased under the one lease id the pop minted: per message and top level
// alike, and in queen.cursors.
func TestPop_MultiPartitionClaimsShareOneLeaseID(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "lease1")
	q := ns + ".t.q"
	pushParts(t, s, q, 2, "a", "b", "c")
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "100", "partitions", "0"))
	if len(runs(p)) != 3 {
		t.Fatalf("want 3 partitions, got %v", p.TxIDs())
	}
	if !e2e.IsUUID(p.LeaseID) {
		t.Fatalf("top-level leaseId %q is not a UUID", p.LeaseID)
	}
	for _, m := range p.Messages {
		if m.LeaseID != p.LeaseID {
			t.Fatalf("message %s of partition %s has leaseId %q, top level %q", m.TransactionID, m.Partition, m.LeaseID, p.LeaseID)
		}
	}
	for _, part := range []string{"a", "b", "c"} {
		if c := cursorOf(t, q, part, "g"); c.LeaseID != p.LeaseID {
			t.Fatalf("cursor of %s carries lease %q, the pop answered %q", part, c.LeaseID, p.LeaseID)
		}
	}

	// Discovery claims across queues share it too.
	q2 := ns + ".t.q2"
	pushParts(t, s, q2, 1, "x")
	d := s.PopOK(t, e2e.PopDiscovery("namespace", ns, "consumerGroup", "d", "batch", "100", "partitions", "0"))
	if len(runs(d)) != 4 {
		t.Fatalf("discovery: want 4 partitions of 2 queues, got %v", d.TxIDs())
	}
	for _, m := range d.Messages {
		if m.LeaseID != d.LeaseID || d.LeaseID == "" {
			t.Fatalf("discovery: message %s leaseId %q, top level %q", m.TransactionID, m.LeaseID, d.LeaseID)
		}
	}
	if c := cursorOf(t, q2, "x", "d"); c.LeaseID != d.LeaseID {
		t.Fatalf("discovery: cursor of %s/x carries lease %q, the pop answered %q", q2, c.LeaseID, d.LeaseID)
	}
}

// TestPop_TopLevelPartitionIsFirstClaimed: the top-level partition and
// partitionId describe only the first claimed partition; each message's own
// fields are authoritative.
func TestPop_TopLevelPartitionIsFirstClaimed(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "first")
	pushParts(t, s, q, 2, "a", "b", "c")
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "100", "partitions", "0"))
	first := p.Messages[0]
	if p.Partition != first.Partition || p.PartitionID != first.PartitionID {
		t.Fatalf("top level %s/%s, first message %s/%s", p.Partition, p.PartitionID, first.Partition, first.PartitionID)
	}
	if id := e2e.PartitionID(t, q, p.Partition); p.PartitionID != id {
		t.Fatalf("top-level partitionId %s, partition %s has id %s", p.PartitionID, p.Partition, id)
	}
	others := 0
	for _, m := range p.Messages {
		if id := e2e.PartitionID(t, q, m.Partition); m.PartitionID != id {
			t.Fatalf("message %s: partitionId %s, partition %s has id %s", m.TransactionID, m.PartitionID, m.Partition, id)
		}
		if m.Partition != p.Partition {
			others++
		}
	}
	if others != 4 {
		t.Fatalf("%d messages of other partitions than the top-level one, want 4", others)
	}
}

// TestPop_PartitionsClaimed counts the partitions the call claimed.
func TestPop_PartitionsClaimed(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "claimed")
	pushParts(t, s, q, 3, "a", "b", "c")
	for _, tc := range []struct {
		batch, parts string
		want         int
	}{{"1", "0", 1}, {"3", "0", 1}, {"4", "0", 2}, {"7", "0", 3}, {"9", "2", 2}} {
		p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "c"+tc.batch+"-"+tc.parts, "batch", tc.batch, "partitions", tc.parts))
		if p.PartitionsClaimed != tc.want || len(runs(p)) != tc.want {
			t.Fatalf("batch=%s partitions=%s: partitionsClaimed %d over %d partitions, want %d",
				tc.batch, tc.parts, p.PartitionsClaimed, len(runs(p)), tc.want)
		}
	}
	p := s.PopOK(t, e2e.PopPartition(q, "a", "consumerGroup", "single", "batch", "100"))
	if p.PartitionsClaimed != 1 {
		t.Fatalf("single route: partitionsClaimed %d", p.PartitionsClaimed)
	}
}
