package pg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TestTraces_PayloadFromItsSegment: TracesByName cuts each trace's message
// out of the segment that holds it (the last one starting at or before its
// offset), whichever of several segments that is; a message that is not
// stored refuses a trace with ErrNotFound.
func TestTraces_PayloadFromItsSegment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, err := b.s.EnsureQueue(ctx, "pgtest.traces")
	if err != nil {
		t.Fatal(err)
	}
	pid := b.partition(t, q, "p1")
	for _, seg := range [][]string{{"t1", "t2"}, {"t3", "t4", "t5"}, {"t6"}} {
		b.append(t, segOf(pid, seg...))
	}
	name := "pg-" + uuid.NewString()
	for _, tx := range []string{"t1", "t4", "t6"} {
		if _, err := b.s.RecordTrace(ctx, queengo.NewTrace{PartitionID: pid, TransactionID: tx, Group: "g",
			EventType: "info", Data: []byte(`{"x":1}`), Names: []string{name}, WorkerID: "w"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.s.RecordTrace(ctx, queengo.NewTrace{PartitionID: pid, TransactionID: "nope", Data: []byte(`1`),
		Names: []string{}}); !errors.Is(err, queengo.ErrNotFound) {
		t.Fatalf("trace of a message not stored: %v, want ErrNotFound", err)
	}
	list, total, err := b.s.TracesByName(ctx, name, 10, 0)
	if err != nil || total != 3 || len(list) != 3 {
		t.Fatalf("by name: %d traces, total %d, %v", len(list), total, err)
	}
	for i, tx := range []string{"t6", "t4", "t1"} {
		if list[i].TransactionID != tx || string(list[i].Payload) != `{"tx":"`+tx+`"}` ||
			list[i].Queue != "pgtest.traces" || list[i].Partition != "p1" {
			t.Fatalf("trace %d: %+v, want the message %s with its payload", i, list[i], tx)
		}
	}
	names, n, err := b.s.TraceNames(ctx, 1000, 0)
	if err != nil || n < 1 {
		t.Fatalf("names: %d, %v", n, err)
	}
	found := false
	for _, tn := range names {
		if tn.Name == name {
			found = true
			if tn.Traces != 3 || tn.Messages != 3 {
				t.Fatalf("counts of %s: %+v", name, tn)
			}
		}
	}
	if !found {
		t.Fatalf("%s is not in the names list", name)
	}
}
