package pushtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// D1 and coalescing (issue 2, item 6): 20 goroutines push 50 messages each,
// one per request, to one partition. The segments then cover offsets
// 1..1000 exactly once, head is 1000, queen.txids has 1000 rows with
// distinct offsets 1..1000, far fewer segments than requests were written,
// and a pop returns every transactionId exactly once in offset order.
func TestD1_ContiguousOffsetsUnderConcurrency(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "offsets")
	const writers, each = 20, 50
	const total = writers * each
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make(chan error, total)
		ids   sync.Map // transactionId -> message_id
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				tx := fmt.Sprintf("w%02d-%03d", w, i)
				status, res, err := s.PushCtx(ctx, e2e.PushItem{Queue: q, TransactionID: tx, Payload: map[string]any{"w": w, "i": i}})
				if err == nil && status != 201 {
					err = fmt.Errorf("status %d", status)
				}
				if err == nil && res[0].Status != "queued" {
					err = fmt.Errorf("%s: %+v", tx, res[0])
				}
				if err != nil {
					errs <- err
					return
				}
				ids.Store(tx, res[0].MessageID)
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(began)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	var first, last []int64
	var head int64
	if err := e2e.DB.QueryRow(`SELECT coalesce(array_agg(s.first_offset ORDER BY s.first_offset), '{}'),
       coalesce(array_agg(s.last_offset ORDER BY s.first_offset), '{}'), max(p.head)
FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id LEFT JOIN queen.segments s ON s.partition_id = p.id
WHERE q.name = $1`, []any{q}, &first, &last, &head); err != nil {
		t.Fatal(err)
	}
	next := int64(1)
	for i := range first {
		if first[i] != next || last[i] < first[i] {
			t.Fatalf("segment %d covers %d..%d, want it to start at %d (gap or overlap)", i, first[i], last[i], next)
		}
		next = last[i] + 1
	}
	if next != total+1 || head != total {
		t.Fatalf("segments cover 1..%d and head is %d, want 1..%d and %d", next-1, head, total, total)
	}
	var rows, distinct, lo, hi int64
	if err := e2e.DB.QueryRow(`SELECT count(*), count(DISTINCT x."offset"), min(x."offset"), max(x."offset")
FROM queen.txids x JOIN queen.partitions p ON p.id = x.partition_id JOIN queen.queues q ON q.id = p.queue_id
WHERE q.name = $1`, []any{q}, &rows, &distinct, &lo, &hi); err != nil {
		t.Fatal(err)
	}
	if rows != total || distinct != total || lo != 1 || hi != total {
		t.Fatalf("queen.txids: %d rows, %d distinct offsets, %d..%d; want %d, %d, 1..%d", rows, distinct, lo, hi, total, total, total)
	}

	// Coalescing: concurrent pushes to one partition share segments.
	segs := len(first)
	t.Logf("%d requests in %v -> %d segments (%.1f requests per segment)", total, elapsed.Round(time.Millisecond), segs, float64(total)/float64(segs))
	if segs >= total {
		t.Fatalf("%d segments for %d concurrent requests: pushes were not coalesced", segs, total)
	}

	// Every message comes back once, in offset order.
	var offsets map[string]int64
	offsets = txidOffsets(t, q)
	msgs := popAll(t, s, q, total)
	seen := map[string]bool{}
	prev := int64(0)
	for _, m := range msgs {
		if seen[m.TransactionID] {
			t.Fatalf("%s delivered twice", m.TransactionID)
		}
		seen[m.TransactionID] = true
		if id, ok := ids.Load(m.TransactionID); !ok || id != m.ID {
			t.Fatalf("%s: id %s, push answered %v", m.TransactionID, m.ID, id)
		}
		off := offsets[m.TransactionID]
		if off <= prev {
			t.Fatalf("%s at offset %d delivered after offset %d", m.TransactionID, off, prev)
		}
		prev = off
	}
	if len(seen) != total {
		t.Fatalf("popped %d distinct messages, want %d", len(seen), total)
	}
}

// txidOffsets maps each transaction id of the queue to its offset.
func txidOffsets(t testing.TB, q string) map[string]int64 {
	t.Helper()
	var txs []string
	var offs []int64
	if err := e2e.DB.QueryRow(`SELECT coalesce(array_agg(x.transaction_id::text ORDER BY x."offset"), '{}'),
       coalesce(array_agg(x."offset" ORDER BY x."offset"), '{}')
FROM queen.txids x JOIN queen.partitions p ON p.id = x.partition_id JOIN queen.queues q ON q.id = p.queue_id
WHERE q.name = $1`, []any{q}, &txs, &offs); err != nil {
		t.Fatal(err)
	}
	m := make(map[string]int64, len(txs))
	for i := range txs {
		m[txs[i]] = offs[i]
	}
	return m
}

// checkContiguous requires every partition of the queue to hold offsets
// 1..head exactly once in its segments and its txids.
func checkContiguous(t testing.TB, q string, wantTotal int64) {
	t.Helper()
	var parts, badSegs, badTx, total int64
	if err := e2e.DB.QueryRow(`WITH p AS (
  SELECT p.id, p.head FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1),
s AS (SELECT s.partition_id, s.first_offset, s.last_offset,
             lag(s.last_offset, 1, 0::bigint) OVER (PARTITION BY s.partition_id ORDER BY s.first_offset) AS prev_last
        FROM queen.segments s WHERE s.partition_id IN (SELECT id FROM p))
SELECT (SELECT count(*) FROM p),
       (SELECT count(*) FROM s WHERE s.first_offset <> s.prev_last + 1 OR s.last_offset < s.first_offset)
     + (SELECT count(*) FROM p WHERE p.head <> coalesce((SELECT max(last_offset) FROM s WHERE s.partition_id = p.id), 0)),
       (SELECT count(*) FROM p WHERE (SELECT count(DISTINCT x."offset") FILTER (WHERE x."offset" BETWEEN 1 AND p.head)
                                      FROM queen.txids x WHERE x.partition_id = p.id) <> p.head
                                 OR (SELECT count(*) FROM queen.txids x WHERE x.partition_id = p.id) <> p.head),
       (SELECT coalesce(sum(head), 0)::bigint FROM p)`, []any{q}, &parts, &badSegs, &badTx, &total); err != nil {
		t.Fatal(err)
	}
	if badSegs != 0 || badTx != 0 || total != wantTotal {
		t.Fatalf("%s: %d partitions, %d segment gaps/overlaps or wrong heads, %d partitions whose txids are not 1..head; %d messages, want %d",
			q, parts, badSegs, badTx, total, wantTotal)
	}
}

// D1 across partitions: concurrent requests whose items spread over several
// partitions of one queue (committed together by the queue actor) leave
// every partition contiguous from 1, with head equal to its message count.
func TestD1_ContiguousOffsetsPerPartition(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "offsets-parts")
	const writers, each, parts = 10, 20, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var items []e2e.PushItem
				for p := range parts {
					if (w+i+p)%3 == 0 {
						continue // not every request touches every partition
					}
					items = append(items, e2e.PushItem{Queue: q, Partition: fmt.Sprintf("p%d", p),
						TransactionID: fmt.Sprintf("w%d-%d-%d", w, i, p), Payload: i})
				}
				status, res, err := s.PushCtx(context.Background(), items...)
				if err == nil && status != 201 {
					err = fmt.Errorf("status %d", status)
				}
				for _, r := range res {
					if err == nil && r.Status != "queued" {
						err = fmt.Errorf("%+v", r)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var want int64
	for w := range writers {
		for i := range each {
			for p := range parts {
				if (w+i+p)%3 != 0 {
					want++
				}
			}
		}
	}
	checkContiguous(t, q, want)
}

// D1 and U-7 with two broker processes on one database: offsets stay
// contiguous when both write to one partition at once, and one
// transactionId pushed through both at once is queued exactly once.
func TestD1_ContiguousOffsetsTwoProcesses(t *testing.T) {
	t.Parallel()
	a, b := shared(t), e2e.Start(t)
	q := e2e.Unique(t, "offsets-2proc")
	const writers, each = 10, 30
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		errs   = make(chan error, 2*writers)
		mu     sync.Mutex
		queued = map[string]int{}
		ids    = map[string]map[string]bool{}
	)
	for w := range 2 * writers {
		srv := a
		if w%2 == 1 {
			srv = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				items := []e2e.PushItem{
					{Queue: q, TransactionID: fmt.Sprintf("w%d-%d", w, i), Payload: i},
					// Both processes push shared-<i> at about the same time.
					{Queue: q, TransactionID: fmt.Sprintf("shared-%d", i), Payload: w},
				}
				status, res, err := srv.PushCtx(context.Background(), items...)
				if err == nil && status != 201 {
					err = fmt.Errorf("status %d", status)
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, r := range res {
					if r.Status == "queued" {
						queued[r.TransactionID]++
					}
					if ids[r.TransactionID] == nil {
						ids[r.TransactionID] = map[string]bool{}
					}
					ids[r.TransactionID][r.MessageID] = true
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for tx, m := range ids {
		if queued[tx] != 1 || len(m) != 1 {
			t.Fatalf("%s: queued %d times with %d message ids; want 1 and 1", tx, queued[tx], len(m))
		}
	}
	want := int64(2*writers*each + each)
	if int64(len(ids)) != want {
		t.Fatalf("%d distinct transaction ids answered, want %d", len(ids), want)
	}
	checkContiguous(t, q, want)
}
