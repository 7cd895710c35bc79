package pg_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/pg"
)

// TestClaimRound_PopsOfOneRoundTakeDistinctPartitions: the pops of one round
// (partitions=1) each lease a partition of their own, in claim order, and
// the one left over reports the partitions still claimable.
func TestClaimRound_PopsOfOneRoundTakeDistinctPartitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q, _ := b.countedQueue(t, 2, 2, 2, 2)
	res := b.claimOK(t, pops(q, 3, queengo.ClaimParams{Group: "g", Batch: 5, MaxParts: 1}))
	seen := map[uuid.UUID]bool{}
	for i, r := range res {
		if len(r.Spans) != 1 || len(r.Messages) != 2 || r.Taken != 2 {
			t.Fatalf("pop %d: %d spans, %d messages, taken %d; want one partition's 2", i, len(r.Spans), len(r.Messages), r.Taken)
		}
		if seen[r.Spans[0].PartitionID] {
			t.Fatalf("pop %d got a partition another pop of the round got", i)
		}
		seen[r.Spans[0].PartitionID] = true
	}
	if n := len(res[0].Ready) + len(res[1].Ready) + len(res[2].Ready); n != 1 {
		t.Fatalf("%d partitions reported ready, want the 1 left", n)
	}
}

// TestClaimRound_BudgetSpansPartitions: a pop without a cap takes messages
// partition after partition until its budget runs out; a partition it
// leased in part is not claimable for another pop of the group.
func TestClaimRound_BudgetSpansPartitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q, _ := b.countedQueue(t, 2, 2, 2)
	res := b.claimOK(t, pops(q, 2, queengo.ClaimParams{Group: "g", Batch: 5}))
	if got := len(res[0].Messages); got != 5 || len(res[0].Spans) != 3 || res[0].Taken != 5 {
		t.Fatalf("first pop: %d messages in %d spans, taken %d; want 5 in 3", got, len(res[0].Spans), res[0].Taken)
	}
	if last := res[0].Spans[2]; last.To-last.From != 0 {
		t.Fatalf("last span %d..%d, want one message", last.From, last.To)
	}
	if len(res[1].Messages) != 0 {
		t.Fatalf("second pop got %d messages from partitions the first one leases", len(res[1].Messages))
	}
}

// TestClaimRound_UncappedPopsSharePartitionsInOrder: pops without a cap in
// one round take partitions in claim order, each until its budget is spent
// (the partition that fills it given whole to it), the next pop going on
// from the next partition; partitions past the last budget are not locked
// and are reported ready.
func TestClaimRound_UncappedPopsSharePartitionsInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		name   string
		counts []int
		pops   int
		batch  int
		got    []int // messages per pop
		ready  int
	}{
		{"backlog", []int{10, 10, 10, 10}, 3, 4, []int{4, 4, 4}, 1},
		{"small partitions", []int{3, 3, 3, 3, 3}, 2, 4, []int{4, 4}, 1},
		{"one pop", []int{10, 10, 10, 10, 10}, 1, 5, []int{5}, 4},
		{"short", []int{1, 1, 1}, 2, 5, []int{3, 0}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, _ := b.countedQueue(t, c.counts...)
			res := b.claimOK(t, pops(q, c.pops, queengo.ClaimParams{Group: "g", Batch: c.batch}))
			seen, ready := map[uuid.UUID]bool{}, 0
			for i, r := range res {
				if len(r.Messages) != c.got[i] || r.Taken != c.got[i] {
					t.Fatalf("pop %d: %d messages, taken %d; want %d", i, len(r.Messages), r.Taken, c.got[i])
				}
				for _, sp := range r.Spans {
					if seen[sp.PartitionID] {
						t.Fatalf("pop %d got a partition another pop of the round got", i)
					}
					seen[sp.PartitionID] = true
				}
				ready += len(r.Ready)
			}
			if ready != c.ready {
				t.Fatalf("%d partitions reported ready, want %d", ready, c.ready)
			}
		})
	}
}

// TestClaimRound_PopsOfTheSinglePartitionRouteTakeOnlyTheirPartition: pops
// restricted to one partition each, served together in one round, each get
// their own partition's messages; one whose partition a concurrent
// transaction holds gets nothing, and its partition goes to no other pop.
func TestClaimRound_PopsOfTheSinglePartitionRouteTakeOnlyTheirPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, ids := b.countedQueue(t, 2, 2, 2)
	c := b.conn(t)
	if _, err := c.Exec(ctx, `INSERT INTO queen.cursors (partition_id, consumer_group, committed)
		SELECT unnest($1::uuid[]), 'g', 0`, []string{ids[0].String(), ids[1].String(), ids[2].String()}); err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM queen.cursors WHERE partition_id = $1 AND consumer_group = 'g' FOR UPDATE`,
		ids[0].String()); err != nil {
		t.Fatal(err)
	}
	pinned := func(parts ...uuid.UUID) []queengo.ClaimParams {
		claims := pops(q, len(parts), queengo.ClaimParams{Group: "g", Batch: 5})
		for i, pid := range parts {
			claims[i].Partition = pid
		}
		return claims
	}
	res := b.claimOK(t, pinned(ids[0], ids[1], ids[2]))
	want := [][]string{nil, {"p1-0", "p1-1"}, {"p2-0", "p2-1"}}
	for i, r := range res {
		if got := delivered(r); !slices.Equal(got, want[i]) {
			t.Fatalf("pop restricted to p%d got %v, want %v", i, got, want[i])
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res = b.claimOK(t, pinned(ids[0], ids[1]))
	if got := delivered(res[0]); !slices.Equal(got, []string{"p0-0", "p0-1"}) {
		t.Fatalf("pop restricted to p0, once free, got %v", got)
	}
	if got := delivered(res[1]); len(got) != 0 {
		t.Fatalf("pop restricted to the leased p1 got %v", got)
	}
}

// TestClaimRound_PinnedPopsMeetTheirPartitionsInTheirFirstRound: pops of
// the single-partition route on partitions their group never contacted get
// the messages in their first round (the cursors are made in it), seeded by
// the group's intent (subscriptionMode=new: nothing of the backlog); a
// second pop on the same partition gets nothing, and a pop on a partition
// that no longer exists gets nothing, without an error.
func TestClaimRound_PinnedPopsMeetTheirPartitionsInTheirFirstRound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q, ids := b.countedQueue(t, 2, 1)
	pinned := func(group, mode string, parts ...uuid.UUID) []queengo.ClaimParams {
		claims := pops(q, len(parts), queengo.ClaimParams{Group: group, Batch: 5, MaxParts: 1, SubMode: mode})
		for i, pid := range parts {
			claims[i].Partition = pid
		}
		return claims
	}
	res := b.claimOK(t, pinned("g", "", ids[0], ids[0], ids[1], uuid.New()))
	want := [][]string{{"p0-0", "p0-1"}, nil, {"p1-0"}, nil}
	for i, r := range res {
		if got := delivered(r); !slices.Equal(got, want[i]) {
			t.Fatalf("pinned pop %d got %v, want %v", i, got, want[i])
		}
	}
	res = b.claimOK(t, pinned("h", queengo.SubscriptionNew, ids[0]))
	if got := delivered(res[0]); len(got) != 0 {
		t.Fatalf("a new group's pop with subscriptionMode=new got the backlog %v", got)
	}
	b.append(t, segOf(ids[0], "later"))
	res = b.claimOK(t, pinned("h", "", ids[0]))
	if got := delivered(res[0]); !slices.Equal(got, []string{"later"}) {
		t.Fatalf("after a push the new group's pop got %v, want the pushed message", got)
	}
}

// TestClaimRound_ASubscribeOnlyClaimTakesNoPartition: the claim of a
// single-partition pop whose partition does not exist yet records its
// group's intent and takes nothing, whatever the other pops of its group in
// the round take: neither a partition a wildcard pop could take nor the
// partition another single-partition pop names, which that pop gets.
func TestClaimRound_ASubscribeOnlyClaimTakesNoPartition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q, ids := b.countedQueue(t, 2, 2)
	only := func(group, mode string) queengo.ClaimParams {
		return pops(q, 1, queengo.ClaimParams{Group: group, Batch: 1, MaxParts: 1, SubMode: mode, SubscribeOnly: true})[0]
	}
	wildcard := pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 1, MaxParts: 1})[0]
	res := b.claimOK(t, []queengo.ClaimParams{only("g", queengo.SubscriptionAll), wildcard})
	if got := delivered(res[0]); len(got) != 0 {
		t.Fatalf("beside a wildcard pop, the subscribe-only claim got %v", got)
	}
	if got := delivered(res[1]); len(got) != 1 {
		t.Fatalf("the wildcard pop got %v, want one message", got)
	}
	pinned := pops(q, 1, queengo.ClaimParams{Group: "h", Batch: 1, MaxParts: 1, Partition: ids[1]})[0]
	res = b.claimOK(t, []queengo.ClaimParams{only("h", queengo.SubscriptionNew), pinned})
	if got := delivered(res[0]); len(got) != 0 {
		t.Fatalf("beside a pop of p1, the subscribe-only claim got %v", got)
	}
	// h's record says new: its first contact with p1 (in this round) is
	// seeded at p1's head, so the pop of p1 finds nothing of the backlog.
	if got := delivered(res[1]); len(got) != 0 {
		t.Fatalf("the pop of p1 got %v past group h's record (subscriptionMode=new)", got)
	}
	b.append(t, segOf(ids[1], "p1-new"))
	res = b.claimOK(t, []queengo.ClaimParams{only("h", ""), pinned})
	if got := delivered(res[1]); !slices.Equal(got, []string{"p1-new"}) {
		t.Fatalf("the pop of p1 got %v, want p1-new", got)
	}
}

// TestClaimRound_FirstContactDoesNotWaitForAnIdlePop: a partition the group
// never contacted gets its cursor in the round that meets it, even when the
// round's pops are served by other partitions, and is reported ready, so the
// next claim takes it.
func TestClaimRound_FirstContactDoesNotWaitForAnIdlePop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, ids := b.countedQueue(t, 3)
	first := b.claimOK(t, pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 1, MaxParts: 1, AutoAck: true}))
	if len(first[0].Messages) != 1 {
		t.Fatalf("first claim: %d messages", len(first[0].Messages))
	}
	p1 := b.partition(t, q, "new")
	b.append(t, segOf(p1, "new-0"))
	// p0 still has 2 messages and the new partition sorts first (never
	// consumed): the pop is served by p0, the new partition is contacted.
	res := b.claimOK(t, pops(q, 1, queengo.ClaimParams{Group: "g", Batch: 1, MaxParts: 1, AutoAck: true}))
	if len(res[0].Spans) != 1 || res[0].Spans[0].PartitionID != ids[0] {
		t.Fatalf("second claim: %+v, want p0", res[0].Spans)
	}
	if len(res[0].Ready) != 1 || res[0].Ready[0] != p1 {
		t.Fatalf("ready %v, want the new partition %v", res[0].Ready, p1)
	}
	c := b.conn(t)
	var cursors int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM queen.cursors WHERE partition_id = $1 AND consumer_group = 'g'`,
		p1.String()).Scan(&cursors); err != nil || cursors != 1 {
		t.Fatalf("cursors of g on the new partition after the round that met it: %d, %v", cursors, err)
	}
	next := b.claimOK(t, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: "g", Batch: 1, MaxParts: 1,
		AutoAck: true, Candidates: res[0].Ready}})
	if len(next[0].Messages) != 1 || next[0].Messages[0].TransactionID != "new-0" {
		t.Fatalf("claim of the ready partition: %+v", next[0].Messages)
	}
}

// TestClaimRound_AFailedLaterPassDeliversNothingOfIt: a round's second
// claim_take pass (here the one after a new group's first contact) that
// fails at its commit delivers nothing of what it read, lease or autoAck:
// its transaction rolled back, so those messages go to the next pop, once.
// A deferred trigger on the group's cursors stands in for any failure of
// the pass's commit; it lives in a database of its own.
func TestClaimRound_AFailedLaterPassDeliversNothingOfIt(t *testing.T) {
	t.Parallel()
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("autoAck=%v", auto), func(t *testing.T) {
			t.Parallel()
			b := setupFresh(t, "claimpass", pg.Config{})
			b.migrate(t)
			q, _ := b.countedQueue(t, 3)
			if err := b.db.Exec(`CREATE FUNCTION queen.fail_claim() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF NEW.consumer_group = 'g' AND (NEW.committed <> OLD.committed OR NEW.lease_id IS NOT NULL) THEN
						RAISE EXCEPTION 'the pass fails at commit';
					END IF;
					RETURN NEW;
				END $$`); err != nil {
				t.Fatal(err)
			}
			if err := b.db.Exec(`CREATE CONSTRAINT TRIGGER fail_claim AFTER UPDATE ON queen.cursors
				DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION queen.fail_claim()`); err != nil {
				t.Fatal(err)
			}
			pop := queengo.ClaimParams{Group: "g", Batch: 3, MaxParts: 1, AutoAck: auto}
			if got := delivered(b.claimOK(t, pops(q, 1, pop))[0]); len(got) != 0 {
				t.Fatalf("the failed pass delivered %v", got)
			}
			if err := b.db.Exec(`DROP TRIGGER fail_claim ON queen.cursors`); err != nil {
				t.Fatal(err)
			}
			if got := delivered(b.claimOK(t, pops(q, 1, pop))[0]); !slices.Equal(got, []string{"p0-0", "p0-1", "p0-2"}) {
				t.Fatalf("the next pop got %v, want the messages the failed pass read", got)
			}
		})
	}
}

// TestClaimRound_ConcurrentRoundsDeliverEachMessageOnce: rounds running at
// once never lease one partition twice, and together they deliver every
// message exactly once (autoAck), however their pops collide.
func TestClaimRound_ConcurrentRoundsDeliverEachMessageOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	counts := make([]int, 8)
	total := 0
	for i := range counts {
		counts[i] = 20 + i
		total += counts[i]
	}
	q, _ := b.countedQueue(t, counts...)
	var mu sync.Mutex
	got := map[string]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				p := queengo.ClaimParams{Group: "g", Batch: 1 + w, MaxParts: w % 2, AutoAck: true}
				res, err := b.s.Claim(context.Background(), pops(q, 3, p))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, r := range res {
					if r.Err != nil {
						t.Error(r.Err)
					}
					for _, m := range r.Messages {
						got[m.TransactionID]++
					}
				}
				done := len(got) == total
				mu.Unlock()
				if done {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(got) != total {
		t.Fatalf("%d of %d messages delivered", len(got), total)
	}
	for tx, n := range got {
		if n != 1 {
			t.Fatalf("%s delivered %d times", tx, n)
		}
	}
}

// TestClaimPlans: claim_take reaches every cursor row by its primary key,
// never through cursors_group (every cursor of the group, once per
// partition), on a database that was never analyzed: the statistics a
// broker's generic plans see when it starts on a young database. The
// statements run inside PL/pgSQL, so auto_explain sends their plans.
func TestClaimPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupFresh(t, "pgclaimplan", pg.Config{PoolSize: 1, AcquireTimeout: 5 * time.Second})
	b.migrate(t)
	c := b.explain(t)
	// 100 partitions of 10 messages, a cursor of group g on each.
	for _, q := range []string{
		`INSERT INTO queen.queues (name) VALUES ('plan')`,
		`INSERT INTO queen.partitions (queue_id, name, head, last_write_at)
		  SELECT q.id, 'p' || j, 10, now() - interval '1 minute' FROM queen.queues q, generate_series(1, 100) j`,
		`INSERT INTO queen.segments (partition_id, first_offset, last_offset, created_at, ends, frames)
		  SELECT p.id, 1, 10, now(), '{1,2,3,4,5,6,7,8,9,10}', '\x00010203040506070809'::bytea FROM queen.partitions p`,
		`INSERT INTO queen.cursors (partition_id, consumer_group, committed) SELECT p.id, 'g', 0 FROM queen.partitions p`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	c.take()
	// Five pops of a lease each, in a transaction rolled back.
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var rows int
	err = tx.QueryRow(ctx, `SELECT count(*) FROM queen.claim_take(ARRAY(SELECT id FROM queen.queues), 'g', false,
		ARRAY(SELECT id FROM queen.partitions), NULL, '{1,2,3,4,5}', '{1,1,1,1,1}', '{0,0,0,0,0}', '{0,0,0,0,0}',
		'{f,f,f,f,f}', ARRAY[gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid()])`).Scan(&rows)
	if err != nil {
		t.Fatal(err)
	}
	plans := c.take()
	text := strings.Join(plans, "\n\n")
	// 5 taken rows and their 5 segments, then the 95 partitions left.
	if rows != 105 {
		t.Fatalf("claim_take returned %d rows, want 105", rows)
	}
	if !strings.Contains(text, "cursors") {
		t.Fatalf("no plan of claim_take's statement was sent:\n%s", text)
	}
	t.Logf("%d plans\n%s", len(plans), text)
	if strings.Contains(text, "cursors_group") {
		t.Errorf("claim_take reads cursors through cursors_group:\n%s", text)
	}
}
