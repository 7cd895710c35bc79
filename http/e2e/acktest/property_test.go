package acktest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// allCommitted reports whether every (partition, group) of the queue has a
// cursor at the partition's head, and how many pairs are.
func allCommitted(queue string, groups []string, pairs int) (bool, int, error) {
	var done, n int
	err := e2e.DB.QueryRow(`SELECT count(*) FILTER (WHERE c.committed = p.head AND c.lease_id IS NULL), count(*)
  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
  JOIN queen.cursors c ON c.partition_id = p.id
 WHERE q.name = $1 AND c.consumer_group = ANY($2::text[]) AND p.head > 0`, []any{queue, groups}, &done, &n)
	return err == nil && n == pairs && done == pairs, done, err
}

// cursorsReport describes the cursors of a queue for a failure message.
func cursorsReport(t testing.TB, queue string) string {
	var js string
	err := e2e.DB.QueryRow(`SELECT coalesce(json_agg(json_build_object('partition', p.name, 'group', c.consumer_group,
       'head', p.head, 'committed', c.committed, 'consumed', c.total_consumed, 'lease_end', c.lease_end,
       'expires', c.lease_expires_at, 'not_before', c.not_before, 'acked', c.acked) ORDER BY p.name, c.consumer_group), '[]')::text
  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
  LEFT JOIN queen.cursors c ON c.partition_id = p.id WHERE q.name = $1`, []any{queue}, &js)
	if err != nil {
		return err.Error()
	}
	return js
}

// Property 1 (issue 4): 4 consumers per group, 2 groups, 8 partitions pop
// through the wildcard route (wait=true, short timeout, batch 1..10,
// leaseSeconds 1 or 2) and randomly ack completed / failed / retry or let the
// lease expire; the queue has retryLimit 2 and retryDelay 0; some messages
// are poison (always failed). When every (partition, group) has committed
// its head: per group every pushed message is either completed or
// dead-lettered, exactly once, none missing (D2-D5); poison messages are
// dead-lettered; committed advanced exactly head times (no offset committed
// twice); and per partition the first delivery of each message happened in
// offset (push) order.
func TestProperty_ConsumersEndCompletedOrDeadLetteredExactlyOnce(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "prop1")
	s.Configure(t, q, map[string]any{"retryLimit": 2, "retryDelay": 0, "leaseTime": 60})
	const (
		nParts    = 8
		perPart   = 50
		rounds    = 5
		consumers = 4
	)
	groups := []string{"ga", "gb"}
	parts := make([]string, nParts)
	for i := range parts {
		parts[i] = fmt.Sprintf("p%d", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var mu sync.Mutex
	pushOrder := map[string][]string{} // partition name -> txids in push order
	poison := map[string]bool{}
	partOf := map[string]string{}  // txid -> partition id
	pidName := map[string]string{} // partition id -> name
	first := map[string][]string{} // group/partitionId -> txids in first-delivery order
	seen := map[string]bool{}      // group/txid delivered
	// Successful acks per group/txid. Responses of concurrent consumers are
	// recorded in the order the test goroutines get to them, not the order
	// the broker applied them, so the checks below use what happened at
	// all, never which ack came last.
	completedAck := map[string]bool{}
	dlqAck := map[string]bool{}
	deliveries := map[string]int{} // group -> messages delivered
	ackErrors := map[string]int{}  // error text -> count
	var errs []string
	fail := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 20 {
			errs = append(errs, fmt.Sprintf(format, a...))
		}
	}

	// The producer: 5 rounds of 10 messages to each partition.
	pushDone := make(chan struct{})
	go func() {
		defer close(pushDone)
		rng := rand.New(rand.NewPCG(1, 2))
		for r := range rounds {
			for _, part := range parts {
				items := make([]e2e.PushItem, perPart/rounds)
				for k := range items {
					tx := fmt.Sprintf("%s-%s-%d", q, part, r*len(items)+k)
					bad := rng.IntN(25) == 0
					items[k] = e2e.PushItem{Queue: q, Partition: part, TransactionID: tx,
						Payload: map[string]any{"tx": tx, "poison": bad}}
					mu.Lock()
					pushOrder[part] = append(pushOrder[part], tx)
					poison[tx] = bad
					mu.Unlock()
				}
				resp, err := s.DoCtx(ctx, "POST", "/api/v1/push", map[string]any{"items": items})
				if err != nil || resp.Status != 201 {
					fail("push: %v %v", err, resp)
					return
				}
				var res []e2e.PushResult
				_ = json.Unmarshal(resp.Body, &res)
				mu.Lock()
				for k, x := range res {
					if x.Status != "queued" {
						errs = append(errs, fmt.Sprintf("push item %s: %+v", items[k].TransactionID, x))
					}
					partOf[x.TransactionID], pidName[x.PartitionID] = x.PartitionID, part
				}
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	consume := func(group string, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 7))
		for ctx.Err() == nil {
			lease := 1 + rng.IntN(2)
			capParts := []string{"1", "2", "0"}[rng.IntN(3)]
			path := e2e.PopQueue(q, "consumerGroup", group, "batch", fmt.Sprint(1+rng.IntN(10)), "partitions", capParts,
				"wait", "true", "timeout", "400", "leaseSeconds", fmt.Sprint(lease))
			r, err := s.PopCtx(ctx, path)
			var p *e2e.PopResponse
			if err == nil {
				p, err = r.Delivered()
			}
			if err != nil {
				if ctx.Err() == nil {
					fail("%s pop: %v", group, err)
				}
				return
			}
			if p == nil {
				continue
			}
			mu.Lock()
			deliveries[group] += len(p.Messages)
			for _, m := range p.Messages {
				k := group + "/" + m.TransactionID
				if !seen[k] {
					seen[k] = true
					first[group+"/"+m.PartitionID] = append(first[group+"/"+m.PartitionID], m.TransactionID)
				}
				if m.LeaseID != p.LeaseID || m.ConsumerGroup != group {
					errs = append(errs, fmt.Sprintf("message %+v of lease %s", m, p.LeaseID))
				}
			}
			mu.Unlock()
			statusOf := func(m e2e.Message) string {
				if d, _ := m.Data.(map[string]any); d["poison"] == true {
					return "failed"
				}
				switch x := rng.IntN(100); {
				case x < 85:
					return "completed"
				case x < 94:
					return "failed"
				default:
					return "retry"
				}
			}
			var items []map[string]any
			switch x := rng.IntN(100); {
			case x < 12: // do nothing: the lease expires
			case x < 24: // a random subset, one by one; the rest expires
				for _, m := range p.Messages {
					if rng.IntN(2) == 0 {
						items = append(items, e2e.AckItem(m, statusOf(m)))
					}
				}
				rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
			default: // everything, in one batch
				for _, m := range p.Messages {
					items = append(items, e2e.AckItem(m, statusOf(m)))
				}
			}
			if len(items) == 0 {
				continue
			}
			var chunks [][]map[string]any
			if len(items) == len(p.Messages) {
				chunks = [][]map[string]any{items}
			} else {
				for _, it := range items {
					chunks = append(chunks, []map[string]any{it})
				}
			}
			for _, c := range chunks {
				res, err := s.AckBatchCtx(ctx, group, c)
				if err != nil {
					if ctx.Err() == nil {
						fail("%s ack: %v", group, err)
					}
					return
				}
				mu.Lock()
				for i, r := range res {
					k := group + "/" + c[i]["transactionId"].(string)
					switch {
					case !r.Success:
						ackErrors[r.ErrText()]++
						if r.ErrText() != "Invalid or expired lease" {
							errs = append(errs, fmt.Sprintf("ack %s: %+v %s", k, r, r.ErrText()))
						}
					case r.DLQ:
						dlqAck[k] = true
					case c[i]["status"] == "completed":
						completedAck[k] = true
					}
				}
				mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	for gi, g := range groups {
		for c := range consumers {
			wg.Go(func() { consume(g, uint64(100*gi+c+1)) })
		}
	}

	// Run until every (partition, group) committed its head.
	reached := false
	<-pushDone
	for ctx.Err() == nil {
		ok, _, err := allCommitted(q, groups, nParts*len(groups))
		if err != nil {
			fail("checking cursors: %v", err)
		}
		if ok {
			reached = true
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
	cancel()
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if !reached {
		t.Fatalf("not every message was completed or dead-lettered within 60 s; delivered %v; cursors %s",
			deliveries, cursorsReport(t, q))
	}
	t.Logf("delivered %v; ack failures %v", deliveries, ackErrors)

	// Heads, and committed moved exactly head times per (partition, group).
	var js string
	if err := e2e.DB.QueryRow(`SELECT coalesce(json_agg(json_build_object('p', p.name, 'g', c.consumer_group,
       'head', p.head, 'committed', c.committed, 'consumed', c.total_consumed)), '[]')::text
  FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id JOIN queen.cursors c ON c.partition_id = p.id
 WHERE q.name = $1 AND p.name <> 'Default'`, []any{q}, &js); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		P, G                      string
		Head, Committed, Consumed int64
	}
	if err := json.Unmarshal([]byte(js), &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Head != perPart || r.Committed != r.Head || r.Consumed != r.Head {
			t.Errorf("%s/%s: head %d committed %d advanced %d times, want %d each", r.P, r.G, r.Head, r.Committed,
				r.Consumed, perPart)
		}
	}

	// Offsets follow push order.
	for _, part := range parts {
		txList := pushOrder[part]
		for i, tx := range txList {
			if off := offsetOf(t, partOf[tx], tx); off != int64(i+1) {
				t.Fatalf("%s: %s has offset %d, pushed %d-th", part, tx, off, i+1)
			}
		}
	}

	for _, g := range groups {
		// Dead letters of the group, each message at most once.
		l := listDLQ(t, s, "queue", q, "consumerGroup", g, "limit", "1000")
		inDLQ := map[string]bool{}
		for _, d := range l.Messages {
			if inDLQ[d.TransactionID] {
				t.Errorf("%s: %s dead-lettered twice", g, d.TransactionID)
			}
			inDLQ[d.TransactionID] = true
		}
		if *l.Total != len(l.Messages) {
			t.Errorf("%s: total %d for %d entries", g, *l.Total, len(l.Messages))
		}
		// Every message is resolved (committed == head above): by a dead
		// letter, which a dlq-reporting ack must have made, or else by a
		// completed ack, which a poison message never gets.
		var missing, lost, poisonDone []string
		completed, dead := 0, 0
		for _, part := range parts {
			for _, tx := range pushOrder[part] {
				k := g + "/" + tx
				switch {
				case inDLQ[tx] && !dlqAck[k]:
					missing = append(missing, tx+" (dead letter no ack reported)")
				case inDLQ[tx]:
					dead++
				case dlqAck[k]:
					lost = append(lost, tx)
				case completedAck[k]:
					completed++
					if poison[tx] {
						poisonDone = append(poisonDone, tx)
					}
				default:
					missing = append(missing, tx+" (never acked completed)")
				}
			}
		}
		if len(inDLQ) != dead {
			t.Errorf("%s: %d dead letters, %d accounted for", g, len(inDLQ), dead)
		}
		if len(missing)+len(lost)+len(poisonDone) > 0 {
			t.Errorf("%s: neither completed nor dead-lettered %v; dlq acks without entry %v; poison completed %v",
				g, missing, lost, poisonDone)
		}
		t.Logf("%s: %d completed, %d dead-lettered", g, completed, dead)

		// First deliveries in offset order per partition.
		for pid, name := range pidName {
			got := first[g+"/"+pid]
			if !slices.Equal(got, pushOrder[name]) {
				t.Errorf("%s/%s: first deliveries out of push order (or missing):\n got %v\nwant %v", g, name, got,
					pushOrder[name])
			}
		}
	}
}

// Property 2 (issue 4): acks and lease expiry race on the same spans.
// Several consumers pop with leaseSeconds=1 and ack right around the expiry
// (0.8 to 1.2 s after the pop answered), as one batch or one by one in random
// order, while other consumers park to claim the expired span. No offset is
// committed twice or lost: every message is delivered, committed reaches the
// head having advanced exactly head times, and no ack succeeds for a lease
// after another lease was granted the same offset (a pop that started after
// the first lease's pop answered and answered before the ack was sent).
func TestProperty_AckRacingLeaseExpiryNeverDoubleCommits(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "prop2")
	const (
		nParts    = 4
		perPart   = 12
		consumers = 8
	)
	var all e2e.Pushed
	for i := range nParts {
		all = append(all, s.PushN(t, q, fmt.Sprintf("r%d", i), perPart)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	type popRec struct {
		lease      string
		sent, recv time.Time
		txs        []string
	}
	type ackRec struct {
		lease, tx string
		sent      time.Time
	}
	var (
		mu      sync.Mutex
		pops    []popRec
		acked   []ackRec // successful acks
		rounds  int
		lateOK  int // acks that succeeded after 1 s
		errs    []string
		results = map[string]int{}
	)
	consume := func(seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 11))
		for ctx.Err() == nil {
			path := e2e.PopQueue(q, "batch", fmt.Sprint(1+rng.IntN(4)), "wait", "true", "timeout", "400", "leaseSeconds", "1")
			sent := time.Now()
			r, err := s.PopCtx(ctx, path)
			var p *e2e.PopResponse
			if err == nil {
				p, err = r.Delivered()
			}
			recv := time.Now()
			if err != nil {
				if ctx.Err() == nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
				}
				return
			}
			if p == nil {
				continue
			}
			mu.Lock()
			pops = append(pops, popRec{lease: p.LeaseID, sent: sent, recv: recv, txs: p.TxIDs()})
			rounds++
			mu.Unlock()
			delay := 800*time.Millisecond + time.Duration(rng.IntN(400))*time.Millisecond
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(recv.Add(delay))):
			}
			items := make([]map[string]any, len(p.Messages))
			for i, m := range p.Messages {
				items[i] = e2e.AckItem(m, "completed")
			}
			var chunks [][]map[string]any
			if rng.IntN(2) == 0 {
				chunks = [][]map[string]any{items}
			} else {
				rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
				for _, it := range items {
					chunks = append(chunks, []map[string]any{it})
				}
			}
			for _, c := range chunks {
				at := time.Now()
				res, err := s.AckBatchCtx(ctx, nil, c)
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						errs = append(errs, err.Error())
						mu.Unlock()
					}
					return
				}
				mu.Lock()
				for i, r := range res {
					results[fmt.Sprintf("success=%v error=%s", r.Success, r.ErrText())]++
					if r.Success {
						acked = append(acked, ackRec{lease: p.LeaseID, tx: c[i]["transactionId"].(string), sent: at})
						if at.Sub(recv) > time.Second {
							lateOK++
						}
					} else if r.ErrText() != "Invalid or expired lease" {
						errs = append(errs, fmt.Sprintf("ack: %+v %s", r, r.ErrText()))
					}
				}
				mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	for c := range consumers {
		wg.Go(func() { consume(uint64(c + 1)) })
	}
	reached := false
	for ctx.Err() == nil {
		ok, _, err := allCommitted(q, []string{e2e.QueueMode}, nParts)
		if err != nil {
			t.Errorf("checking cursors: %v", err)
		}
		if ok {
			reached = true
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	cancel()
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if !reached {
		t.Fatalf("not everything committed within 45 s (%d pops, acks %v): %s", rounds, results, cursorsReport(t, q))
	}
	t.Logf("%d pops; ack results %v; %d acks succeeded more than 1 s after their pop", rounds, results, lateOK)

	for i := range nParts {
		pid := all[i*perPart].PartitionID
		c := e2e.ReadCursor(t, pid, "")
		if c.Committed != perPart || c.Consumed != perPart {
			t.Errorf("partition r%d: committed %d, advanced %d times, want %d both", i, c.Committed, c.Consumed, perPart)
		}
	}
	delivered := map[string][]popRec{}
	for _, p := range pops {
		for _, tx := range p.txs {
			delivered[tx] = append(delivered[tx], p)
		}
	}
	for _, m := range all {
		if len(delivered[m.Tx]) == 0 {
			t.Errorf("%s never delivered", m.Tx)
		}
	}
	popOf := map[string]popRec{}
	for _, p := range pops {
		popOf[p.lease] = p
	}
	var violations []string
	for _, a := range acked {
		mine := popOf[a.lease]
		for _, other := range delivered[a.tx] {
			if other.lease != a.lease && other.sent.After(mine.recv) && other.recv.Before(a.sent) {
				violations = append(violations, fmt.Sprintf("%s acked with lease %s at %s after lease %s got it (pop %s..%s)",
					a.tx, a.lease, a.sent.Format("15:04:05.000"), other.lease, other.sent.Format("15:04:05.000"),
					other.recv.Format("15:04:05.000")))
			}
		}
	}
	sort.Strings(violations)
	if len(violations) > 0 {
		t.Errorf("%d acks succeeded for a lease another popper held for the same offsets:\n%s", len(violations),
			strings.Join(violations, "\n"))
	}
}
