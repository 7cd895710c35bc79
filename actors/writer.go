package actors

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// appendReq is one push request's items for one partition.
type appendReq struct {
	partition string
	idx       []int // positions in the push request
	frames    []queengo.Frame
	reply     chan<- pushDone
}

// pushDone answers an appendReq, item by item; err is set (and every item
// failed) when the database was unavailable or timed out.
type pushDone struct {
	idx     []int
	results []queengo.PushResult
	err     error
}

// partitionReady carries the ids a writer looked up or created.
type partitionReady struct {
	q   queengo.Queue
	pid uuid.UUID
	err error
}

// segmentReady is a writer's coalesced segment, handed to its queue actor,
// which commits the segments of several partitions together.
type segmentReady struct {
	writer *actor.PID
	queue  queengo.Queue
	seg    queengo.Segment
}

// segmentDone is the outcome of a segmentReady's commit.
type segmentDone struct {
	dups []uuid.UUID
	err  error
}

// resetPartition drops the writer's cached ids after its queue was deleted.
type resetPartition struct{}

// writer is a partition writer: every push that arrives while the previous
// segment of its partition is being committed is coalesced into the next
// segment (group commit in the broker). It keeps one segment in flight, so a
// partition's segments commit in order.
type writer struct {
	b        *Broker
	queue    string
	name     string
	q        queengo.Queue
	pid      uuid.UUID
	ensuring bool
	pending  []*appendReq

	// The segment being committed.
	reqs    []*appendReq
	frames  []queengo.Frame
	owner   []int // per item: index into frames, or -1-j for a duplicate of frames[j]
	retried bool
}

func (w *writer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *appendReq:
		w.pending = append(w.pending, m)
	case *partitionReady:
		w.ensuring = false
		if m.err != nil {
			w.b.log.Error("creating partition failed", "queue", w.queue, "partition", w.name, "err", m.err)
			reqs := w.pending
			w.pending = nil
			w.fail(reqs, m.err)
			return
		}
		w.q, w.pid = m.q, m.pid
	case *segmentDone:
		w.finish(m)
	case *resetPartition:
		w.pid = uuid.Nil
	default:
		return
	}
	w.kick(ctx)
}

// kick hands the pending pushes to the queue actor as one segment, unless a
// segment is already in flight.
func (w *writer) kick(ctx actor.Context) {
	if w.reqs != nil || w.ensuring || len(w.pending) == 0 {
		return
	}
	if w.pid == uuid.Nil {
		w.ensuring = true
		self, root, store, queue, name := ctx.Self(), ctx.ActorSystem().Root, w.b.cfg.Store, w.queue, w.name
		timeout := w.b.cfg.RequestTimeout
		go func() {
			c, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			r := &partitionReady{}
			if r.q, r.err = store.EnsureQueue(c, queue); r.err == nil {
				r.pid, r.err = store.EnsurePartition(c, r.q.ID, name)
			}
			root.Send(self, r)
		}()
		return
	}
	w.reqs, w.pending = w.pending, nil
	n := 0
	for _, r := range w.reqs {
		n += len(r.frames)
	}
	// Dedupe inside the segment: the first occurrence of a transaction id
	// wins, later ones are duplicates of it.
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
	ctx.Send(ctx.Parent(), &segmentReady{writer: ctx.Self(), queue: w.q,
		seg: queengo.Segment{Partition: w.pid, Frames: w.frames}})
}

func (w *writer) finish(d *segmentDone) {
	reqs := w.reqs
	w.reqs = nil
	if errors.Is(d.err, queengo.ErrNotFound) && !w.retried {
		// The partition vanished under us (its queue was deleted, maybe by
		// another process): recreate it once, as a push to an unknown queue
		// does.
		w.retried, w.pid = true, uuid.Nil
		w.pending = append(reqs, w.pending...)
		return
	}
	w.retried = false
	if d.err != nil {
		w.pid = uuid.Nil
		w.b.log.Error("segment write failed", "queue", w.queue, "partition", w.name, "err", d.err)
		w.fail(reqs, d.err)
		return
	}
	k := 0
	for _, r := range reqs {
		out := pushDone{idx: r.idx, results: make([]queengo.PushResult, len(r.frames))}
		for i := range r.frames {
			f := &r.frames[i]
			res := &out.results[i]
			res.TransactionID, res.PartitionID, res.TraceID = f.TransactionID, w.pid, f.TraceID
			o := w.owner[k]
			k++
			switch {
			case o < 0:
				j := -1 - o
				res.Status, res.MessageID = queengo.PushDuplicate, w.frames[j].ID
				if d.dups[j] != uuid.Nil {
					res.MessageID = d.dups[j]
				}
			case d.dups[o] != uuid.Nil:
				res.Status, res.MessageID = queengo.PushDuplicate, d.dups[o]
			default:
				res.Status, res.MessageID = queengo.PushQueued, f.ID
			}
		}
		r.reply <- out
	}
}

func (w *writer) fail(reqs []*appendReq, err error) {
	for _, r := range reqs {
		out := pushDone{idx: r.idx, results: make([]queengo.PushResult, len(r.frames))}
		if databaseDown(err) {
			out.err = err
		}
		for i := range r.frames {
			out.results[i] = queengo.PushResult{Status: queengo.PushFailed, TransactionID: r.frames[i].TransactionID,
				TraceID: r.frames[i].TraceID, Error: errText(err)}
		}
		r.reply <- out
	}
}
