package pushtest

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 41, defect 4: concurrent pushes to one partition are coalesced into
// a segment only up to its ceilings (SEGMENT_MAX_ITEMS here), so that one
// push's commit does not carry, and wait for, an unbounded pile of its
// neighbours; every push is stored.
func TestPush_SegmentIsCutAtItsCeiling(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t, "SEGMENT_MAX_ITEMS=2")
	q := e2e.Unique(t, "ceiling")
	s.Push(t, e2e.PushItem{Queue: q, Partition: "P", Payload: 0})
	const pushes = 60
	var wg sync.WaitGroup
	errs := make(chan error, pushes)
	for i := range pushes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, res, err := s.PushCtx(context.Background(), e2e.PushItem{Queue: q, Partition: "P", TransactionID: e2e.TxID("c"), Payload: i})
			if err == nil && (st != 201 || res[0].Status != "queued") {
				t.Errorf("push %d: %d %+v", i, st, res)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	pid := e2e.PartitionID(t, q, "P")
	most := e2e.QueryInt(t, e2e.DB, `SELECT max(last_offset - first_offset + 1) FROM queen.segments WHERE partition_id = $1`, pid)
	total := e2e.QueryInt(t, e2e.DB, `SELECT sum(last_offset - first_offset + 1) FROM queen.segments WHERE partition_id = $1`, pid)
	segments := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.segments WHERE partition_id = $1`, pid)
	t.Logf("%d messages in %d segments, the largest of %d", total, segments, most)
	if most > 2 {
		t.Errorf("a segment of %d messages, over SEGMENT_MAX_ITEMS=2", most)
	}
	if total != pushes+1 {
		t.Errorf("%d messages stored, want %d", total, pushes+1)
	}
}

// Issue 41, defect 4: the byte ceiling (SEGMENT_MAX_BYTES): concurrent
// pushes whose payloads together pass it are not merged into one segment;
// a segment holds pushes up to the ceiling, or one push alone.
func TestPush_SegmentIsCutAtItsByteCeiling(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t, "SEGMENT_MAX_BYTES=1000")
	q := e2e.Unique(t, "bytes")
	s.Push(t, e2e.PushItem{Queue: q, Partition: "P", Payload: 0})
	pad := strings.Repeat("x", 600) // one push per segment: two are over 1000 bytes
	const pushes = 30
	var wg sync.WaitGroup
	for i := range pushes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, res, err := s.PushCtx(context.Background(), e2e.PushItem{Queue: q, Partition: "P", TransactionID: e2e.TxID("b"),
				Payload: map[string]any{"i": i, "pad": pad}})
			if err != nil || st != 201 || res[0].Status != "queued" {
				t.Errorf("push %d: %d %+v %v", i, st, res, err)
			}
		}()
	}
	wg.Wait()
	pid := e2e.PartitionID(t, q, "P")
	most := e2e.QueryInt(t, e2e.DB, `SELECT max(last_offset - first_offset + 1) FROM queen.segments
 WHERE partition_id = $1 AND first_offset > 0`, pid)
	total := e2e.QueryInt(t, e2e.DB, `SELECT sum(last_offset - first_offset + 1) FROM queen.segments WHERE partition_id = $1`, pid)
	if most > 1 {
		t.Errorf("a segment of %d pushes of 600 bytes, over SEGMENT_MAX_BYTES=1000", most)
	}
	if total != pushes+1 {
		t.Errorf("%d messages stored, want %d", total, pushes+1)
	}
}
