package resourcetest

import (
	"net/url"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

type clearAnswer struct {
	Success           bool    `json:"success"`
	Queue             string  `json:"queue"`
	Partition         *string `json:"partition"`
	ClearedPartitions int     `json:"clearedPartitions"`
	DeletedMessages   int64   `json:"deletedMessages"`
}

func clearQueue(t testing.TB, s *e2e.Server, q string, pairs ...string) clearAnswer {
	t.Helper()
	r := s.Delete(t, "/api/v1/queues/"+url.PathEscape(q)+"/clear"+e2e.Query(pairs...))
	if r.Status != 200 {
		t.Fatalf("clear %s: %d %s", q, r.Status, r.Body)
	}
	var a clearAnswer
	r.JSON(t, &a)
	return a
}

func offsetOf(t testing.TB, pid, tx string) int64 {
	t.Helper()
	return e2e.QueryInt(t, e2e.DB, `SELECT "offset" FROM queen.txids WHERE partition_id = $1 AND transaction_id = $2`,
		pid, tx)
}

// A clear drops every message of the queue and releases its leases; the
// queue, its partitions and settings stay; what is pushed after it is all a
// pop gets, at offsets that keep growing from the old head.
func TestClearQueue_ThenPushPopOnlyNew(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "clear") + ".t.q"
	s.Configure(t, q, map[string]any{"leaseTime": 77})
	old := s.PushN(t, q, "", 5)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2"))
	s.PopOK(t, e2e.PopQueue(q, "batch", "1", "consumerGroup", "g"))

	a := clearQueue(t, s, q)
	if !a.Success || a.Queue != q || a.Partition != nil || a.ClearedPartitions != 1 || a.DeletedMessages != 5 {
		t.Fatalf("clear = %+v, want 1 partition, 5 messages", a)
	}
	pid := old[0].PartitionID
	for _, g := range []string{"", "g"} {
		if c := e2e.ReadCursor(t, pid, g); c.Committed != 5 || c.LeaseID != "" {
			t.Fatalf("cursor %q after clear: %+v, want committed 5 (the head), no lease", g, c)
		}
	}
	if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.txids WHERE partition_id = $1`, pid); n != 0 {
		t.Fatalf("%d transaction ids left", n)
	}
	r := s.AckMessage(t, p.Messages[0], "completed", "")
	e2e.WantAckFailure(t, r, "Message not found")
	s.PopEmpty(t, e2e.PopQueue(q))

	d := getQueue(t, s, q)
	if d.Options["leaseTime"] != float64(77) || d.Totals != (counts{}) || d.PartitionCount != 1 {
		t.Fatalf("after clear: options %v totals %+v partitions %d", d.Options, d.Totals, d.PartitionCount)
	}
	fresh := s.PushN(t, q, "", 2)
	if off := offsetOf(t, pid, fresh[0].Tx); off != 6 {
		t.Fatalf("first offset after clear = %d, want 6 (never reused)", off)
	}
	for _, g := range []string{"", "g"} {
		got := s.PopOK(t, e2e.PopQueue(q, "batch", "10", "consumerGroup", g))
		e2e.WantTxIDs(t, "pop after clear ("+g+")", got, fresh.TxIDs())
	}
	// A group that never contacted the queue starts at what is retained.
	got := s.PopOK(t, e2e.PopQueue(q, "batch", "10", "consumerGroup", "late"))
	e2e.WantTxIDs(t, "new group after clear", got, fresh.TxIDs())
}

// A clear of one partition (?partition=, JS/Py clearQueue(name, partition))
// leaves the others alone; an unknown queue or partition is 404, an empty
// ?partition= is 400 (never the whole queue).
func TestClearQueue_OnePartitionAndUnknown404(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "clearp") + ".t.q"
	s.PushN(t, q, "a", 2)
	keep := s.PushN(t, q, "b", 3)
	a := clearQueue(t, s, q, "partition", "a")
	if a.Partition == nil || *a.Partition != "a" || a.ClearedPartitions != 1 || a.DeletedMessages != 2 {
		t.Fatalf("clear a = %+v", a)
	}
	s.PopEmpty(t, e2e.PopPartition(q, "a"))
	got := s.PopOK(t, e2e.PopPartition(q, "b", "batch", "10"))
	e2e.WantTxIDs(t, "partition b", got, keep.TxIDs())

	e2e.WantError(t, s.Delete(t, "/api/v1/queues/"+q+"/clear?partition=zzz"), 404, "partition not found")
	// Given but empty: refused, never the whole queue.
	e2e.WantError(t, s.Delete(t, "/api/v1/queues/"+q+"/clear?partition="), 400, "partition must not be empty")
	e2e.WantError(t, s.Delete(t, "/api/v1/queues/"+e2e.Unique(t, "none")+"/clear"), 404, "queue not found")
}
