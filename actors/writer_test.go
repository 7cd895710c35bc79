package actors

import (
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// push is an appendReq of frames with the given transaction ids.
func push(txids ...string) (*appendReq, chan pushDone) {
	ch := make(chan pushDone, 1)
	r := &appendReq{reply: ch}
	for i, tx := range txids {
		r.idx = append(r.idx, i)
		r.frames = append(r.frames, queengo.Frame{ID: uuid.New(), TransactionID: tx})
	}
	return r, ch
}

// TestPartitionWriter_FirstOccurrenceWinsInASegment: pushes that arrive
// while no segment is in flight are coalesced into one; inside it the first
// occurrence of a transaction id is written and later ones are its
// duplicates, and an id the store already had is a duplicate of the stored
// message.
func TestPartitionWriter_FirstOccurrenceWinsInASegment(t *testing.T) {
	t.Parallel()
	w := &partitionWriter{name: "p", pid: uuid.New()}
	a, ach := push("x", "y")
	b, bch := push("x", "z")
	w.pending = append(w.pending, a, b)
	if !w.cut() || len(w.frames) != 3 {
		t.Fatalf("segment of %d frames, want x, y, z", len(w.frames))
	}
	c, _ := push("later")
	w.pending = append(w.pending, c)
	if w.cut() {
		t.Fatal("a second segment cut while one is in flight")
	}
	stored := uuid.New()
	if err := w.finish([]uuid.UUID{uuid.Nil, uuid.Nil, stored}, nil); err != nil {
		t.Fatal(err)
	}
	ra, rb := <-ach, <-bch
	if ra.results[0].Status != queengo.PushQueued || ra.results[1].Status != queengo.PushQueued {
		t.Fatalf("first push: %+v", ra.results)
	}
	if rb.results[0].Status != queengo.PushDuplicate || rb.results[0].MessageID != a.frames[0].ID {
		t.Fatalf("x again in the same segment: %+v, want a duplicate of the first x", rb.results[0])
	}
	if rb.results[1].Status != queengo.PushDuplicate || rb.results[1].MessageID != stored {
		t.Fatalf("z the store had: %+v, want a duplicate of %v", rb.results[1], stored)
	}
	if !w.cut() || len(w.frames) != 1 {
		t.Fatal("the push that waited was not cut after the commit")
	}
}

// TestPartitionWriter_AnAnsweredSegmentKeepsNoPayload: once its pushers are
// answered, whether the commit landed or failed, the writer holds nothing of
// the segment: the frames' payloads point into the request bodies.
func TestPartitionWriter_AnAnsweredSegmentKeepsNoPayload(t *testing.T) {
	t.Parallel()
	w := &partitionWriter{name: "p", pid: uuid.New()}
	for _, err := range []error{nil, errors.New("commit failed")} {
		w.pid = uuid.New()
		r, ch := push("x", "y")
		w.pending = append(w.pending, r)
		if !w.cut() {
			t.Fatal("no segment cut")
		}
		if got := w.finish(make([]uuid.UUID, 2), err); !errors.Is(got, err) {
			t.Fatalf("finish: %v, want %v", got, err)
		}
		<-ch
		if w.frames != nil || w.owner != nil || w.reqs != nil {
			t.Fatalf("after a commit (err %v) the writer still holds %d frames", err, len(w.frames))
		}
	}
	r, _ := push("z")
	w.pid = uuid.New()
	w.pending = append(w.pending, r)
	w.cut()
	w.failAll(queengo.ErrActorFailed)
	if w.frames != nil || w.owner != nil {
		t.Fatal("a failed actor's writer still holds its segment")
	}
}

// TestPartitionWriter_VanishedPartitionIsRetriedOnce: a segment whose
// partition vanished (its queue was deleted) goes back to pending once, for
// the recreated partition; a second failure answers the pushers.
func TestPartitionWriter_VanishedPartitionIsRetriedOnce(t *testing.T) {
	t.Parallel()
	w := &partitionWriter{name: "p", pid: uuid.New()}
	r, ch := push("x")
	w.pending = append(w.pending, r)
	w.cut()
	if err := w.finish(nil, queengo.ErrNotFound); err != nil || !w.needsPartition() {
		t.Fatalf("first ErrNotFound: %v, needs the partition %v", err, w.needsPartition())
	}
	w.ready(&partitionReady{pid: uuid.New()})
	w.cut()
	if err := w.finish(nil, queengo.ErrNotFound); !errors.Is(err, queengo.ErrNotFound) {
		t.Fatalf("second ErrNotFound: %v", err)
	}
	if d := <-ch; d.results[0].Status != queengo.PushFailed {
		t.Fatalf("after the retry: %+v, want failed", d.results[0])
	}
}

// TestPartitionWriter_SealsAfterEncryptionTurnedOn: the segment of a queue
// with encryptionEnabled asks to be sealed; one refused with
// ErrQueueChanged (the writer's queue row predates encryptionEnabled) goes
// back to pending once, and is cut again sealed after the lookup brings the
// new settings.
func TestPartitionWriter_SealsAfterEncryptionTurnedOn(t *testing.T) {
	t.Parallel()
	w := &partitionWriter{name: "p", pid: uuid.New()}
	r, ch := push("x")
	w.pending = append(w.pending, r)
	w.cut()
	if w.segment().Seal {
		t.Fatal("a segment of a queue without encryptionEnabled asks to be sealed")
	}
	if err := w.finish(nil, queengo.ErrQueueChanged); err != nil || !w.needsPartition() {
		t.Fatalf("ErrQueueChanged: %v, needs the partition %v", err, w.needsPartition())
	}
	q := queengo.Queue{ID: uuid.New(), Options: queengo.QueueOptions{EncryptionEnabled: true}}
	w.ready(&partitionReady{q: q, pid: uuid.New()})
	if !w.cut() || !w.segment().Seal {
		t.Fatal("the retried segment does not ask to be sealed")
	}
	if err := w.finish([]uuid.UUID{uuid.Nil}, nil); err != nil {
		t.Fatal(err)
	}
	if d := <-ch; d.results[0].Status != queengo.PushQueued {
		t.Fatalf("after the retry: %+v, want queued", d.results[0])
	}
}

// TestPartitionWriter_SegmentIsCutAtItsCeilings (issue 41, defect 4): the
// pending pushes are coalesced only up to the segment's byte and item
// ceilings, in order; the rest make the next segments, and a push over a
// ceiling goes alone.
func TestPartitionWriter_SegmentIsCutAtItsCeilings(t *testing.T) {
	t.Parallel()
	sized := func(n, size int) *appendReq {
		r, _ := push(make([]string, n)...)
		for i := range r.frames {
			r.frames[i].TransactionID = uuid.NewString()
			r.frames[i].Payload = make([]byte, size)
		}
		return r
	}
	w := &partitionWriter{name: "p", pid: uuid.New(), maxBytes: 100, maxItems: 4}
	w.pending = append(w.pending, sized(1, 60), sized(1, 30), sized(1, 20), sized(1, 500), sized(3, 1), sized(2, 1))
	var segments []int
	for w.cut() {
		segments = append(segments, len(w.frames))
		n := len(w.frames)
		if err := w.finish(make([]uuid.UUID, n), nil); err != nil {
			t.Fatal(err)
		}
	}
	// 60+30 fit 100 bytes; 20 waits; 500 goes alone; 3 items, then 2 (5 > 4).
	if want := []int{2, 1, 1, 3, 2}; !slices.Equal(segments, want) {
		t.Fatalf("segments of %v frames, want %v", segments, want)
	}
}
