package pushtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// txidRows returns the number of queen.txids rows of a transaction id in a
// queue (all partitions) and the message id of one of them.
func txidRows(t testing.TB, queue, tx string) (n int, msgID string) {
	t.Helper()
	err := e2e.DB.QueryRow(`SELECT count(*)::int, coalesce(min(x.message_id::text), '')
FROM queen.txids x JOIN queen.partitions p ON p.id = x.partition_id JOIN queen.queues q ON q.id = p.queue_id
WHERE q.name = $1 AND x.transaction_id = $2`, []any{queue, tx}, &n, &msgID)
	if err != nil {
		t.Fatal(err)
	}
	return n, msgID
}

// U-7 (within one batch): the first occurrence wins; a later item with the
// same (partition, transactionId) is a duplicate carrying the winner's id
// and does not overwrite its payload. The same id in another partition of
// the request is queued (U-4).
func TestU7_DedupeWithinRequest(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "dedupe-req")
	res := s.Push(t,
		e2e.PushItem{Queue: q, TransactionID: "x", Payload: "first"},
		e2e.PushItem{Queue: q, TransactionID: "y", Payload: "other"},
		e2e.PushItem{Queue: q, TransactionID: "x", Payload: "second"},
		e2e.PushItem{Queue: q, Partition: "p2", TransactionID: "x", Payload: "p2"},
		e2e.PushItem{Queue: q, TransactionID: "x", Payload: "third"})
	want := []string{"queued", "queued", "duplicate", "queued", "duplicate"}
	for i, r := range res {
		if r.Status != want[i] || r.Index != i || r.QueueName != q {
			t.Fatalf("result %d: %+v, want %s", i, r, want[i])
		}
	}
	if res[2].MessageID != res[0].MessageID || res[4].MessageID != res[0].MessageID || res[2].TransactionID != "x" {
		t.Fatalf("duplicates carry %s and %s, winner is %s", res[2].MessageID, res[4].MessageID, res[0].MessageID)
	}
	if res[3].MessageID == res[0].MessageID || res[3].PartitionID == res[0].PartitionID {
		t.Fatalf("the p2 item shares the Default item's ids: %+v %+v", res[3], res[0])
	}
	if n := e2e.QueueCounts(t, q); n.Txids != 3 || n.Heads != 3 {
		t.Fatalf("counts %+v, want 3 txids and heads summing to 3", n)
	}
	msgs := popAll(t, s, q+"/partition/Default", 10)
	if len(msgs) != 2 || msgs[0].TransactionID != "x" || compact(t, msgs[0].RawData) != `"first"` || msgs[1].TransactionID != "y" {
		t.Fatalf("Default holds %+v, want x=first then y", msgs)
	}
}

// U-7 (against stored messages): every later push of a stored
// (partition, transactionId) is a duplicate with the stored id, in a mixed
// request too, and the stored payload is kept.
func TestU7_DedupeAgainstStored(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "dedupe-stored")
	first := s.Push(t, e2e.PushItem{Queue: q, TransactionID: "x", Payload: "original"})
	if first[0].Status != "queued" {
		t.Fatalf("%+v", first)
	}
	res := s.Push(t,
		e2e.PushItem{Queue: q, TransactionID: "new1", Payload: 1},
		e2e.PushItem{Queue: q, TransactionID: "x", Payload: "changed"},
		e2e.PushItem{Queue: q, TransactionID: "x", Payload: "changed again"},
		e2e.PushItem{Queue: q, TransactionID: "new2", Payload: 2})
	want := []string{"queued", "duplicate", "duplicate", "queued"}
	for i, r := range res {
		if r.Status != want[i] {
			t.Fatalf("result %d: %+v, want %s", i, r, want[i])
		}
	}
	for _, i := range []int{1, 2} {
		if res[i].MessageID != first[0].MessageID || res[i].TransactionID != "x" {
			t.Fatalf("duplicate %d: %+v, want message_id %s", i, res[i], first[0].MessageID)
		}
	}
	// Only duplicates: still 201, nothing written.
	again := s.Push(t, e2e.PushItem{Queue: q, TransactionID: "x", Payload: "x"})
	if again[0].Status != "duplicate" || again[0].MessageID != first[0].MessageID {
		t.Fatalf("%+v", again)
	}
	if n := e2e.QueueCounts(t, q); n.Txids != 3 || n.Heads != 3 || n.Segments != 2 {
		t.Fatalf("counts %+v, want 3 txids, head 3, 2 segments", n)
	}
	msgs := popAll(t, s, q, 10)
	if len(msgs) != 3 || msgs[0].TransactionID != "x" || compact(t, msgs[0].RawData) != `"original"` ||
		msgs[0].ID != first[0].MessageID {
		t.Fatalf("popped %+v", msgs)
	}
}

// U-7 (concurrent) and U-4: 50 pushes of one transactionId to one partition
// at once give exactly one queued and 49 duplicates, all carrying the
// winner's id, and one queen.txids row. The same id in another partition or
// queue is queued.
func TestU7_DedupeConcurrent(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "dedupe-conc")
	const n = 50
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]e2e.PushResult, n)
		errs    = make([]error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			status, res, err := s.PushCtx(context.Background(),
				e2e.PushItem{Queue: q, TransactionID: "same", Payload: map[string]any{"g": i}})
			switch {
			case err != nil:
				errs[i] = err
			case status != 201:
				errs[i] = fmt.Errorf("status %d", status)
			default:
				results[i] = res[0]
			}
		}()
	}
	close(start)
	wg.Wait()
	var queued []int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("push %d: %v", i, errs[i])
		}
		if results[i].Status == "queued" {
			queued = append(queued, i)
		}
	}
	if len(queued) != 1 {
		t.Fatalf("%d pushes queued (%v), want exactly 1", len(queued), queued)
	}
	winner := results[queued[0]].MessageID
	dups := 0
	for i, r := range results {
		if r.MessageID != winner || r.TransactionID != "same" {
			t.Fatalf("push %d: %+v, want message_id %s", i, r, winner)
		}
		if r.Status == "duplicate" {
			dups++
		}
	}
	if dups != n-1 {
		t.Fatalf("%d duplicates, want %d", dups, n-1)
	}
	rows, id := txidRows(t, q, "same")
	if rows != 1 || id != winner {
		t.Fatalf("queen.txids: %d rows, message_id %s; want 1 row of %s", rows, id, winner)
	}
	if c := e2e.QueueCounts(t, q); c.Heads != 1 {
		t.Fatalf("partition head %d, want 1", c.Heads)
	}
	// U-4: dedupe is per partition.
	other := s.Push(t, e2e.PushItem{Queue: q, Partition: "other", TransactionID: "same", Payload: 1})
	q2 := e2e.Unique(t, "dedupe-conc-2")
	otherQ := s.Push(t, e2e.PushItem{Queue: q2, TransactionID: "same", Payload: 1})
	if other[0].Status != "queued" || otherQ[0].Status != "queued" || other[0].MessageID == winner {
		t.Fatalf("same transactionId elsewhere: %+v, %+v", other[0], otherQ[0])
	}
	if rows, _ := txidRows(t, q, "same"); rows != 2 {
		t.Fatalf("queen.txids rows for %q in %s: %d, want 2 (Default and other)", "same", q, rows)
	}
}

// U-7 (concurrent, many keys): concurrent requests each carrying several
// items, half of them keys shared with other requests, still store every key
// exactly once and answer each shared key with one id.
func TestU7_DedupeConcurrentOverlappingBatches(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "dedupe-overlap")
	const reqs, keys = 20, 10
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		ids   = map[string]map[string]bool{} // tx -> message ids answered
		qd    = map[string]int{}             // tx -> queued count
		fail  error
	)
	for r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var items []e2e.PushItem
			for k := range keys {
				items = append(items, e2e.PushItem{Queue: q, TransactionID: fmt.Sprintf("shared-%d", (k+r)%keys), Payload: r})
				items = append(items, e2e.PushItem{Queue: q, TransactionID: fmt.Sprintf("own-%d-%d", r, k), Payload: r})
			}
			<-start
			status, res, err := s.PushCtx(context.Background(), items...)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && status != 201 {
				err = fmt.Errorf("status %d", status)
			}
			if err != nil {
				fail = err
				return
			}
			for i, x := range res {
				if x.TransactionID != items[i].TransactionID {
					fail = fmt.Errorf("result %d is %s, item was %s", i, x.TransactionID, items[i].TransactionID)
				}
				if ids[x.TransactionID] == nil {
					ids[x.TransactionID] = map[string]bool{}
				}
				ids[x.TransactionID][x.MessageID] = true
				if x.Status == "queued" {
					qd[x.TransactionID]++
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if fail != nil {
		t.Fatal(fail)
	}
	if len(ids) != keys+reqs*keys {
		t.Fatalf("%d distinct transaction ids answered, want %d", len(ids), keys+reqs*keys)
	}
	for tx, m := range ids {
		if len(m) != 1 || qd[tx] != 1 {
			t.Fatalf("%s: %d message ids, queued %d times; want 1 and 1", tx, len(m), qd[tx])
		}
	}
	if c := e2e.QueueCounts(t, q); c.Txids != int64(len(ids)) || c.Heads != int64(len(ids)) {
		t.Fatalf("counts %+v, want %d txids and head", c, len(ids))
	}
}
