package pg

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// frameHead reads the ids and producerSub of a frame from a prefix that
// ends anywhere after them, as the message list reads it (listHeadMax).
func TestFrameHead_FromPrefix(t *testing.T) {
	for _, f := range []queengo.Frame{
		{ID: uuid.New(), TransactionID: "tx-1", Payload: []byte(`{"a":1}`)},
		{ID: uuid.New(), TraceID: uuid.New(), TransactionID: "tx-2", ProducerSub: "alice", Payload: []byte(`"` + string(make([]byte, 100)) + `"`)},
	} {
		b := appendFrame(nil, &f, nil)
		cut := len(b) - len(f.Payload) // the payload cut off
		var got queengo.Frame
		if err := frameHead(b[:cut], &got); err != nil {
			t.Fatalf("frameHead: %v", err)
		}
		if got.ID != f.ID || got.TraceID != f.TraceID || got.TransactionID != f.TransactionID || got.ProducerSub != f.ProducerSub {
			t.Fatalf("head = %+v, want %+v", got, f)
		}
	}
	if err := frameHead(make([]byte, 10), &queengo.Frame{}); err == nil {
		t.Fatal("a 10-byte head decoded")
	}
}

// The list's statuses (D10) per group and overall.
func TestListEntry_Statuses(t *testing.T) {
	exp := time.Now().Add(time.Minute)
	p := listPartition{queueMode: -1, busGroups: 2, dead: map[int64][]string{4: {"B"}}, cursors: []listCursor{
		{group: "A", committed: 2, live: true, leaseEnd: 5, acked: []int64{4}, expires: exp},
		{group: "B", committed: 3},
	}}
	for _, c := range []struct {
		off           int64
		group, status string
		consumedBy    int
	}{
		{1, "A", "completed", 2},
		{3, "A", "processing", 1},
		{3, "B", "completed", 1},
		{4, "A", "completed", 1}, // acked in the live lease
		{4, "B", "dead_letter", 1},
		{6, "A", "pending", 0},
		{6, "C", "pending", 0}, // no cursor
		{1, "", "completed", 2},
		{3, "", "processing", 1},
		{4, "", "dead_letter", 1},
		{5, "", "processing", 0},
		{6, "", "pending", 0},
	} {
		e := p.entry(c.off, c.group)
		if e.Status != c.status || e.ConsumedBy != c.consumedBy || e.TotalGroups != 2 || e.QueueStatus != "" {
			t.Fatalf("offset %d group %q: %+v, want %s consumed by %d", c.off, c.group, e, c.status, c.consumedBy)
		}
		if (e.Status == "processing") != !e.LeaseExpiresAt.IsZero() {
			t.Fatalf("offset %d group %q: lease expiry %v for %s", c.off, c.group, e.LeaseExpiresAt, e.Status)
		}
	}
	// With a queue-mode cursor, the status without a group is queue mode's.
	p.cursors = append(p.cursors, listCursor{group: queengo.QueueModeGroup, committed: 0})
	p.queueMode = 2
	if e := p.entry(1, ""); e.Status != "pending" || e.QueueStatus != "pending" || e.ConsumedBy != 2 {
		t.Fatalf("queue mode: %+v", e)
	}
}

// The walk skips deleted messages, applies the status filter and the
// offset, fills the page newest first, and stops at its cap.
func TestWalkMessages_PageAndCap(t *testing.T) {
	p := listPartition{queueMode: -1, lo: 0, hi: 10, tomb: map[int64]bool{9: true}, dead: map[int64][]string{},
		cursors: []listCursor{{group: "A", committed: 5}}}
	p.busGroups = 1
	pick, truncated := walkMessages([]listPartition{p}, queengo.MessageFilter{Status: "pending", Limit: 2, Offset: 1})
	if truncated || len(pick) != 2 || pick[0].off != 8 || pick[1].off != 7 {
		t.Fatalf("page = %+v truncated %v, want offsets 8, 7", pick, truncated)
	}
	big := listPartition{queueMode: -1, lo: 0, hi: listExamineMax + 10, tomb: map[int64]bool{}, dead: map[int64][]string{}}
	pick, truncated = walkMessages([]listPartition{big}, queengo.MessageFilter{Status: "completed", Limit: 10})
	if !truncated || len(pick) != 0 {
		t.Fatalf("cap: %d picked, truncated %v", len(pick), truncated)
	}
}
