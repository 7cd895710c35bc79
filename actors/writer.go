package actors

import (
	"errors"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// partitionWriter coalesces the pushes to one partition into segments (group
// commit in the broker): every push that arrives while the partition's
// previous segment is being committed joins the next one. It keeps one
// segment in flight, so a partition's segments commit in order.
//
// It is not an actor: its queue actor owns it and calls it on its own
// goroutine, because the queue actor commits the cut segments of all its
// partitions together anyway (commitPacer), and a writer actor only added
// three mailbox hops to every segment.
type partitionWriter struct {
	name     string
	q        queengo.Queue // the queue row, as the partition lookup found it
	pid      uuid.UUID     // uuid.Nil until looked up, and after a failed commit
	ensuring bool          // a lookup of the partition is running
	pending  []*appendReq  // the pushes for the next segment
	// maxBytes and maxItems cap the payload bytes and items of a segment
	// (0: no cap); a push over either goes alone.
	maxBytes, maxItems int

	// The segment cut for commit; reqs, frames and owner are nil when there
	// is none (the frames' payloads point into the pushers' request bodies).
	reqs    []*appendReq
	segPID  uuid.UUID // the partition it goes to: pid when it was cut
	frames  []queengo.Frame
	owner   []int // per item: index into frames, or -1-j for a duplicate of frames[j]
	retried bool  // the segment is on its second try after ErrNotFound

	// used: a push came since the queue actor's previous idle check
	// (queueActor.pruneWriters).
	used bool
}

// needsPartition reports whether pushes wait for the partition's id, which
// no running lookup will bring: the caller starts one and calls ready.
func (w *partitionWriter) needsPartition() bool {
	return w.pid == uuid.Nil && !w.ensuring && w.reqs == nil && len(w.pending) > 0
}

// ready records the outcome of the partition lookup; on failure it fails the
// pushes waiting for it.
func (w *partitionWriter) ready(m *partitionReady) {
	w.ensuring = false
	if m.err != nil {
		reqs := w.pending
		w.pending = nil
		failPushes(reqs, m.err)
		return
	}
	w.q, w.pid = m.q, m.pid
}

// cut turns the pending pushes into the next segment, unless one is in
// flight or the partition is not known yet, and reports whether it did. The
// segment takes the pending pushes in order while they fit the ceilings
// (maxBytes, maxItems), at least one; the others wait for the next. Inside a
// segment the first occurrence of a transaction id wins; later ones are
// duplicates of it.
func (w *partitionWriter) cut() bool {
	if w.reqs != nil || w.ensuring || w.pid == uuid.Nil || len(w.pending) == 0 {
		return false
	}
	take, n, size := 0, 0, 0
	for _, r := range w.pending {
		rn, rsize := len(r.frames), 0
		for i := range r.frames {
			rsize += len(r.frames[i].Payload)
		}
		if take > 0 && (w.maxItems > 0 && n+rn > w.maxItems || w.maxBytes > 0 && size+rsize > w.maxBytes) {
			break
		}
		take, n, size = take+1, n+rn, size+rsize
	}
	// The segment's slice is capped: finish's append to it (a retry) must
	// not write over the pushes still pending behind it.
	w.reqs, w.segPID = w.pending[:take:take], w.pid
	if w.pending = w.pending[take:]; len(w.pending) == 0 {
		w.pending = nil
	}
	w.frames = make([]queengo.Frame, 0, n)
	w.owner = make([]int, 0, n)
	first := make(map[string]int, n)
	for _, r := range w.reqs {
		for i := range r.frames {
			f := &r.frames[i]
			if j, ok := first[f.TransactionID]; ok {
				w.owner = append(w.owner, -1-j)
				continue
			}
			first[f.TransactionID] = len(w.frames)
			w.owner = append(w.owner, len(w.frames))
			w.frames = append(w.frames, *f)
		}
	}
	return true
}

// segment is the cut segment, as the store appends it: sealed when the queue
// has encryptionEnabled.
func (w *partitionWriter) segment() queengo.Segment {
	return queengo.Segment{Partition: w.segPID, Frames: w.frames, Seal: w.q.Options.EncryptionEnabled}
}

// finish answers the pushers of the committed segment, item by item, from
// the commit's outcome (dups: per frame, the id of the message it
// duplicates, uuid.Nil, or queengo.QueueFullMark for a frame maxSize
// refused; Store.Append). A segment whose partition vanished (its queue
// was deleted, maybe by another process) or whose queue turned
// encryptionEnabled on (ErrQueueChanged) goes back to pending once, to be
// written after the partition and the queue's settings are looked up again.
// It returns the error the pushers were failed with, if any.
func (w *partitionWriter) finish(dups []uuid.UUID, err error) error {
	reqs, frames, owner := w.reqs, w.frames, w.owner
	w.reqs, w.frames, w.owner = nil, nil, nil
	if (errors.Is(err, queengo.ErrNotFound) || errors.Is(err, queengo.ErrQueueChanged)) && !w.retried {
		w.retried, w.pid = true, uuid.Nil
		w.pending = append(reqs, w.pending...)
		return nil
	}
	w.retried = false
	if err != nil {
		w.pid = uuid.Nil
		failPushes(reqs, err)
		return err
	}
	k := 0
	for _, r := range reqs {
		out := pushDone{idx: r.idx, results: make([]queengo.PushResult, len(r.frames))}
		for i := range r.frames {
			f := &r.frames[i]
			res := &out.results[i]
			res.TransactionID, res.PartitionID, res.TraceID = f.TransactionID, w.segPID, f.TraceID
			o := owner[k]
			k++
			switch {
			case o >= 0 && dups[o] == queengo.QueueFullMark, o < 0 && dups[-1-o] == queengo.QueueFullMark:
				// maxSize: the queue was full (a later occurrence of a
				// refused transaction id is refused with it).
				res.Status, res.Err = queengo.PushFailed, queengo.ErrQueueFull
			case o < 0:
				j := -1 - o
				res.Status, res.MessageID = queengo.PushDuplicate, frames[j].ID
				if dups[j] != uuid.Nil {
					res.MessageID = dups[j]
				}
			case dups[o] != uuid.Nil:
				res.Status, res.MessageID = queengo.PushDuplicate, dups[o]
			default:
				res.Status, res.MessageID = queengo.PushQueued, f.ID
			}
		}
		r.answer(out)
	}
	return nil
}

// failPushes answers reqs with err: per item when it is the operation's own
// failure, as the request's error when the database is down or the actor
// failed.
func failPushes(reqs []*appendReq, err error) {
	for _, r := range reqs {
		out := pushDone{idx: r.idx, results: make([]queengo.PushResult, len(r.frames))}
		if queengo.DatabaseDown(err) || errors.Is(err, queengo.ErrActorFailed) {
			out.err = err
		}
		for i := range r.frames {
			out.results[i] = queengo.PushResult{Status: queengo.PushFailed, TransactionID: r.frames[i].TransactionID,
				TraceID: r.frames[i].TraceID, Err: err}
		}
		r.answer(out)
	}
}

// failAll answers every push the writer holds with err: its queue actor
// failed.
func (w *partitionWriter) failAll(err error) {
	failPushes(w.reqs, err)
	failPushes(w.pending, err)
	w.reqs, w.frames, w.owner, w.pending = nil, nil, nil, nil
}

// idle reports whether the writer holds no push.
func (w *partitionWriter) idle() bool { return w.reqs == nil && len(w.pending) == 0 && !w.ensuring }

// answer replies to the pusher once.
func (r *appendReq) answer(d pushDone) {
	if r.answered {
		return
	}
	r.answered = true
	r.reply <- d
}
