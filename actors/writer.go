package actors

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// writeTimeout bounds one segment write; a write that cannot commit in this
// long fails its items rather than holding their pushers forever.
const writeTimeout = 30 * time.Second

// appendReq is one push request's items for one partition.
type appendReq struct {
	partition string
	idx       []int // positions in the push request
	frames    []queengo.Frame
	reply     chan<- pushDone
}

// pushDone answers an appendReq, item by item.
type pushDone struct {
	idx     []int
	results []queengo.PushResult
}

// writeDone is a finished segment write, back on the writer's mailbox.
type writeDone struct {
	reqs      []*appendReq
	queue     queengo.Queue
	partition uuid.UUID
	frames    []queengo.Frame
	owner     []int // frame -> first frame with the same transaction id
	dups      []uuid.UUID
	err       error
}

// committed tells the queue actor that a segment is durable.
type committed struct {
	queue     queengo.Queue
	partition uuid.UUID
}

// resetPartition drops the writer's cached ids after its queue was deleted.
type resetPartition struct{}

// writer is a partition writer: every push that arrives while its previous
// write is in flight is coalesced into the next segment, so one commit
// carries all of them (group commit in the broker).
type writer struct {
	b        *Broker
	queue    string
	name     string
	q        queengo.Queue
	pid      uuid.UUID
	pending  []*appendReq
	inflight bool
}

func (w *writer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *appendReq:
		w.pending = append(w.pending, m)
		if !w.inflight {
			w.start(ctx)
		}
	case *writeDone:
		w.finish(ctx, m)
		if len(w.pending) > 0 {
			w.start(ctx)
		}
	case *resetPartition:
		w.pid = uuid.Nil
	}
}

func (w *writer) start(ctx actor.Context) {
	reqs := w.pending
	w.pending = nil
	w.inflight = true
	n := 0
	for _, r := range reqs {
		n += len(r.frames)
	}
	// Dedupe inside the coalesced batch: the first occurrence of a
	// transaction id wins, the later ones are duplicates of it.
	frames := make([]queengo.Frame, 0, n)
	owner := make([]int, 0, n)
	first := make(map[string]int, n)
	for _, r := range reqs {
		for i := range r.frames {
			f := &r.frames[i]
			if j, ok := first[f.TransactionID]; ok {
				owner = append(owner, -1-j)
				continue
			}
			first[f.TransactionID] = len(frames)
			owner = append(owner, len(frames))
			frames = append(frames, *f)
		}
	}
	self, root, store := ctx.Self(), ctx.ActorSystem().Root, w.b.cfg.Store
	q, pid, queue, name := w.q, w.pid, w.queue, w.name
	go func() {
		c, cancel := context.WithTimeout(context.Background(), writeTimeout)
		defer cancel()
		d := &writeDone{reqs: reqs, frames: frames, owner: owner}
		var err error
		for attempt := 0; attempt < 2; attempt++ {
			if pid == uuid.Nil {
				if q, err = store.EnsureQueue(c, queue); err != nil {
					break
				}
				if pid, err = store.EnsurePartition(c, q.ID, name); err != nil {
					break
				}
			}
			d.dups, err = store.Append(c, pid, frames)
			// The partition vanished under us (its queue was deleted,
			// maybe by another process): recreate it once, as a push to
			// an unknown queue does.
			if errors.Is(err, queengo.ErrNotFound) {
				pid = uuid.Nil
				continue
			}
			break
		}
		d.queue, d.partition, d.err = q, pid, err
		root.Send(self, d)
	}()
}

func (w *writer) finish(ctx actor.Context, d *writeDone) {
	w.inflight = false
	if d.err == nil {
		w.q, w.pid = d.queue, d.partition
		// Tell the queue actor before any pusher hears back, so a pop that
		// follows the push's answer finds the partition marked ready.
		ctx.Send(ctx.Parent(), &committed{queue: d.queue, partition: d.partition})
	} else {
		w.pid = uuid.Nil
		w.b.log.Error("segment write failed", "queue", w.queue, "partition", w.name, "err", d.err)
	}
	k := 0
	for _, r := range d.reqs {
		out := pushDone{idx: r.idx, results: make([]queengo.PushResult, len(r.frames))}
		for i := range r.frames {
			f := &r.frames[i]
			res := &out.results[i]
			res.TransactionID, res.PartitionID, res.TraceID = f.TransactionID, d.partition, f.TraceID
			o := d.owner[k]
			k++
			switch {
			case d.err != nil:
				res.Status, res.Error = queengo.PushFailed, errText(d.err)
			case o < 0:
				j := -1 - o
				res.Status, res.MessageID = queengo.PushDuplicate, d.frames[j].ID
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
