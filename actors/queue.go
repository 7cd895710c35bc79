package actors

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// queueActor supervises one queue: its partition writers and the commit
// pacing of their segments (push), and its pops: claim rounds, the ready set
// of partitions per consumer group, parked long polls and minPopWaitTime
// holds (popScheduler). Its database work runs on goroutines of its own and
// comes back as messages; it never blocks in Receive. Every field is only
// used by the actor's goroutine.
type queueActor struct {
	d    *deps
	h    *handle
	name string

	q       *queengo.Queue // nil until loaded, and after queueChanged
	loaded  partRef        // q's id and when it was read; kept while q is reloaded
	loading bool
	parts   map[string]partRef // partition ids of the single-partition route

	writers map[string]*partitionWriter
	pacer   commitPacer

	pops    popScheduler
	ready   readySets
	expired []string // scratch for tick
	// acks are handed-off acks (Broker.handOff) waiting for the next claim
	// round, which applies them first.
	acks []*ackRequest

	retired  bool // passivated: the registry stops it
	failedOn any  // the message Receive panicked on
}

func newQueueActor(d *deps, h *handle, name string) *queueActor {
	a := &queueActor{d: d, h: h, name: name, parts: map[string]partRef{},
		writers: map[string]*partitionWriter{}, pacer: commitPacer{max: d.commitsInFlight},
		pops: newPopScheduler(d), ready: newReadySets()}
	a.pops.lot.queue = &h.parked
	return a
}

func (a *queueActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	defer func() {
		if r := recover(); r != nil {
			a.failedOn = msg
			a.d.log.Error("queue actor failed", "queue", a.name, "message", fmt.Sprintf("%T", msg), "panic", r,
				"stack", string(debug.Stack()))
			panic(r) // the registry decides (registry.HandleFailure)
		}
	}()
	switch m := msg.(type) {
	case *appendReq:
		a.h.received++
		w := a.writers[m.partition]
		if w == nil {
			w = &partitionWriter{name: m.partition, maxBytes: a.d.segmentMaxBytes, maxItems: a.d.segmentMaxItems}
			a.writers[m.partition] = w
		}
		w.used = true
		w.pending = append(w.pending, m)
		a.kick(ctx, w)
		a.commit(ctx)
		return
	case *partitionReady:
		if m.by != a {
			return
		}
		if m.err != nil {
			a.d.log.Error("creating partition failed", "queue", a.name, "partition", m.partition, "err", m.err)
		}
		w := a.writers[m.partition]
		w.ready(m)
		a.kick(ctx, w)
		a.commit(ctx)
		return
	case *commitDone:
		if m.by != a {
			return
		}
		a.committed(ctx, m, true)
	case *waiter:
		a.h.received++
		a.pops.add(m, a.d.clock.Now())
	case *cancelPop:
		a.pops.cancel(m.w)
	case *ackRequest:
		a.h.received++
		a.handedOff(m)
	case *partitionFreed:
		if m.partition == uuid.Nil {
			a.ready.unknown(m.group)
		} else {
			a.ready.offer(m.partition, m.group)
		}
		// One pop of the group, or of every group for a write.
		n := 1
		if m.group == "" {
			n = max(len(a.ready.groups), 1)
		}
		a.pops.wake(a.d.clock.Now(), n, []freedPartition{{group: m.group, pid: m.partition}})
		if m.group == "" && a.q != nil {
			tellScopes(ctx, a.q)
		}
	case *tick:
		a.pops.ticked()
		a.tick()
	case *queueLoaded:
		if m.by != a {
			return
		}
		a.loading = false
		if m.err != nil {
			a.d.log.Error("loading queue failed", "queue", a.name, "err", m.err)
			for _, w := range a.pops.pending {
				answer(w, popReply{err: m.err})
			}
			clear(a.pops.pending)
			a.pops.pending = a.pops.pending[:0]
			for _, r := range a.acks {
				r.answer(ackOutcome{err: m.err})
			}
			a.acks = nil
		} else {
			q := m.q
			a.q = &q
			if a.loaded.id != uuid.Nil && a.loaded.id != q.ID {
				// Deleted and created again, maybe by another process:
				// nothing looked up under the old id holds.
				a.parts = map[string]partRef{}
				a.ready.reset()
			}
			a.loaded = partRef{id: q.ID, at: a.d.clock.Now()}
		}
	case *queueChanged:
		a.q = nil
		if m.deleted {
			a.parts = map[string]partRef{}
			a.ready.reset()
		}
		// The writers look the partition and the queue up again before
		// their next segment: it may have to be sealed now.
		for _, w := range a.writers {
			w.pid = uuid.Nil
		}
	case *claimRound:
		if !a.pops.finished(m) {
			return
		}
		a.onRound(m)
		if m.commit != nil {
			// Its pops first: a pop the claims left empty parks before the
			// commit wakes the lot, and a commit the claims saw wakes none.
			a.committed(ctx, m.commit, !m.seen)
		}
	case *releaseAll:
		a.pops.releaseAll()
		ctx.Send(ctx.Parent(), &released{from: ctx.Self()})
	case *checkIdle:
		a.checkIdle(ctx)
		return
	case *actor.Restarting:
		a.fail(queengo.ErrActorFailed)
		return
	default:
		return
	}
	a.run(ctx)
}

// kick moves a writer on: it starts the lookup of its partition, or cuts its
// pending pushes into a segment for the next commit.
func (a *queueActor) kick(ctx actor.Context, w *partitionWriter) {
	if w.needsPartition() {
		w.ensuring = true
		self, root, d, queue, name := ctx.Self(), ctx.ActorSystem().Root, a.d, a.name, w.name
		go func() {
			c, cancel := context.WithTimeout(context.Background(), d.timeout)
			defer cancel()
			r := &partitionReady{by: a, partition: name}
			if r.q, r.err = d.store.EnsureQueue(c, queue); r.err == nil {
				d.loadedQueue()
				r.pid, r.err = d.store.EnsurePartition(c, r.q.ID, name)
			}
			root.Send(self, r)
		}()
		return
	}
	if w.cut() {
		a.pacer.add(w)
	}
}

// commit starts the commits of the ready segments the pacer lets start.
func (a *queueActor) commit(ctx actor.Context) {
	for batch := a.pacer.next(); batch != nil; batch = a.pacer.next() {
		a.commitBatch(ctx, batch)
	}
}

// commitBatch commits the segments of batch in one Append, or, when pops
// wait for a claim round that may start now, in the transaction of that
// round (commitRound).
func (a *queueActor) commitBatch(ctx actor.Context, batch []*partitionWriter) {
	segs := make([]queengo.Segment, len(batch))
	n := 0
	for i, w := range batch {
		segs[i] = w.segment()
		n += len(w.frames)
	}
	a.d.metrics.commitMessages.Update(float64(n))
	if r := a.commitRound(batch); r != nil {
		a.d.metrics.commitClaims.Inc()
		r.commit, r.segs = &commitDone{by: a, writers: batch}, segs
		a.pops.started(r)
		r.start(ctx, a.d)
		return
	}
	self, root, d := ctx.Self(), ctx.ActorSystem().Root, a.d
	d.warm.Go(func() {
		// The commit is shared by every pusher whose items ride in it; each
		// of them stops waiting at its own deadline (Broker.Push).
		c, cancel := context.WithTimeout(context.Background(), d.timeout)
		defer cancel()
		defer d.metrics.commitDuration.UpdateDuration(time.Now())
		dups, err := d.store.Append(c, segs)
		root.Send(self, &commitDone{by: a, writers: batch, dups: dups, err: err})
	})
}

// commitRound returns the claim round that carries the commit of batch, or
// nil when it goes alone. With pops pending or parked and room for a round,
// the segments' partitions are offered to the ready sets and the lot woken
// now, as the commit would when it lands, and the round's claims run after
// the write in its transaction: a pop parked for a push gets its messages
// with the push's commit, not in a round that waits for the commit and for
// the round in flight. Handed-off acks go in rounds of their own (one lead
// per round).
func (a *queueActor) commitRound(batch []*partitionWriter) *claimRound {
	if a.q == nil || a.q.ID != batch[0].q.ID || len(a.acks) > 0 || a.pops.closing || !a.pops.canStart() ||
		(len(a.pops.pending) == 0 && a.pops.lot.empty()) {
		return nil
	}
	now := a.d.clock.Now()
	a.offerWritten(batch, now)
	if r := a.newRound(a.pops.take(), now); len(r.ws) > 0 {
		return r
	}
	return nil
}

// offerWritten marks the partitions the writers' segments went to ready for
// every group and wakes the pops in scope: each written partition may serve
// one pop of every group.
func (a *queueActor) offerWritten(ws []*partitionWriter, now time.Time) {
	freed := make([]freedPartition, len(ws))
	for i, w := range ws {
		a.ready.offer(w.segPID, "")
		freed[i] = freedPartition{pid: w.segPID, name: w.name}
	}
	a.pops.wake(now, len(ws)*max(len(a.ready.groups), 1), freed)
}

// committed marks the written partitions ready and wakes the parked pops in
// scope (unless wake is false: a claim round that carried the commit served
// them after the write) before the writers answer their pushers, so a pop
// that follows a push's answer finds the partition ready; then the writers
// cut their next segments, which the next commit carries.
func (a *queueActor) committed(ctx actor.Context, m *commitDone, wake bool) {
	a.pacer.done()
	if m.err == nil {
		q := m.writers[0].q
		if a.q != nil && a.q.ID != q.ID {
			a.q = nil // recreated by another process: reload
		}
		now := a.d.clock.Now()
		for _, w := range m.writers {
			if ref, ok := a.parts[w.name]; ok && ref.id != w.segPID {
				a.parts[w.name] = partRef{id: w.segPID, at: now} // created again
			}
			if a.d.announce != nil {
				a.d.announce(a.name, w.segPID)
			}
		}
		if wake {
			a.offerWritten(m.writers, now)
		}
		tellScopes(ctx, &q)
	}
	for i, w := range m.writers {
		var dups []uuid.UUID
		if m.err == nil {
			dups = m.dups[i]
		}
		if err := w.finish(dups, m.err); err != nil {
			a.d.log.Error("segment write failed", "queue", a.name, "partition", w.name, "err", err)
		}
		a.kick(ctx, w)
	}
	a.commit(ctx)
}

// handedOff takes acks the Broker handed off: their partitions are offered
// to their groups, and one parked pop per partition looks again in the next
// round, which applies the acks first (so it finds a partition whose lease
// they end claimable). An ack that ends no lease costs such a pop one
// empty look.
func (a *queueActor) handedOff(r *ackRequest) {
	a.acks = append(a.acks, r)
	seen := make(map[leaseKey]bool, 1)
	var freed []freedPartition
	for _, it := range r.items {
		if k := (leaseKey{group: it.Group, pid: it.PartitionID}); !seen[k] {
			seen[k] = true
			freed = append(freed, freedPartition{group: it.Group, pid: it.PartitionID})
			a.ready.offer(it.PartitionID, it.Group)
		}
	}
	a.pops.wake(a.d.clock.Now(), len(freed), freed)
}

// run starts claim rounds for the pending pops and handed-off acks, and
// re-arms the timer.
func (a *queueActor) run(ctx actor.Context) {
	if (len(a.pops.pending) > 0 || len(a.acks) > 0) && !a.ensureLoaded(ctx) {
		a.pops.arm(ctx, a.ready.next())
		return
	}
	for a.pops.canStart() {
		ws := a.pops.take()
		if ws == nil && len(a.acks) == 0 {
			break
		}
		a.startRound(ctx, ws)
	}
	a.pops.arm(ctx, a.ready.next())
}

// ensureLoaded reports whether the queue row is known, and starts loading it
// (creating it for a pop on an unknown queue) when it is not.
func (a *queueActor) ensureLoaded(ctx actor.Context) bool {
	if a.q != nil {
		return true
	}
	if !a.loading {
		a.loading = true
		self, root, d, name := ctx.Self(), ctx.ActorSystem().Root, a.d, a.name
		go func() {
			c, cancel := context.WithTimeout(context.Background(), d.timeout)
			defer cancel()
			q, err := d.store.EnsureQueue(c, name)
			if err == nil {
				d.loadedQueue()
			}
			root.Send(self, &queueLoaded{by: a, q: q, err: err})
		}()
	}
	return false
}

// startRound runs the claims of ws as one round, with the handed-off acks
// first.
func (a *queueActor) startRound(ctx actor.Context, ws []*waiter) {
	r := a.newRound(ws, a.d.clock.Now())
	if len(a.acks) > 0 {
		// As many as one ack commit carries (ackCoalescer).
		r.acks, a.acks, _ = nextBatch(a.acks)
	}
	if len(r.ws) == 0 && len(r.acks) == 0 {
		return
	}
	a.pops.started(r)
	r.start(ctx, a.d)
}

// newRound builds the claims of ws into a round; a pop the ready set
// answers without a claim finds nothing at once.
func (a *queueActor) newRound(ws []*waiter, now time.Time) *claimRound {
	a.ready.roundStarts()
	r := &claimRound{queue: a.q.ID, since: a.ready.since(),
		hold: time.Duration(a.q.Options.MinPopWaitTime) * time.Millisecond}
	for _, w := range ws {
		if w.cancelled {
			continue
		}
		p, skip := a.claim(w, now)
		if skip {
			a.pops.empty(w, now)
			continue
		}
		r.ws = append(r.ws, w)
		r.params = append(r.params, p)
	}
	return r
}

// claim builds the claim of one pop. skip reports that the ready set says
// nothing is claimable and a full scan ran too recently to repeat.
func (a *queueActor) claim(w *waiter, now time.Time) (queengo.ClaimParams, bool) {
	r := w.req
	p := claimOf(w)
	p.QueueIDs = []uuid.UUID{a.q.ID}
	if r.Partition != "" {
		p.MaxParts = 1
		if ref, ok := a.parts[r.Partition]; ok {
			p.Partition, p.Candidates = ref.id, []uuid.UUID{ref.id}
		}
		return p, false
	}
	if a.holds(w) && !w.noHold && (w.holdUntil.IsZero() || now.Before(w.holdUntil)) {
		p.Min = r.Batch
	}
	need := r.Partitions
	if need <= 0 {
		need = r.Batch
	}
	cands, skip := a.ready.candidates(r.Group, need, now)
	p.Candidates = cands
	return p, skip
}

// holds reports whether minPopWaitTime applies to the pop: the wildcard
// route, wait=true, batch > 1 and the option set.
func (a *queueActor) holds(w *waiter) bool {
	return a.q.Options.MinPopWaitTime > 0 && w.req.Partition == "" && w.req.Wait && w.req.Batch > 1
}

// onRound answers, holds or parks the pops of a round that came back, and
// updates the ready set with what the claims saw.
func (a *queueActor) onRound(r *claimRound) {
	now := a.d.clock.Now()
	for name, pid := range r.parts {
		a.parts[name] = partRef{id: pid, at: now}
	}
	for i, w := range r.ws {
		o := r.outcome(i)
		if o == outcomeFailed {
			answer(w, r.failedClaim(a.d, i, now))
			continue
		}
		p, res := &r.params[i], &r.res[i]
		if w.req.Partition == "" {
			a.ready.learn(p, res, r.since, now)
		}
		switch {
		case w.cancelled:
			if o == outcomeDelivered {
				a.d.leases.bookDelivered(w, res, now)
				a.d.abandoned(w)
			}
		case o == outcomeDelivered:
			a.d.leases.bookDelivered(w, res, now)
			answer(w, popReply{res: r.delivered(i)})
			// The claim left claimable partitions untaken: as many
			// key-mates as there are of them look now.
			if n := len(res.Ready); n > 0 {
				a.pops.pending = a.pops.lot.releaseN(w.key, n, a.pops.pending)
			}
		case o == outcomeHeld:
			if w.holdUntil.IsZero() {
				w.holdUntil = now.Add(r.hold)
				if w.holdUntil.After(w.deadline) {
					w.holdUntil = w.deadline
				}
			}
			a.pops.hold(r, w)
		default:
			if p.Min > 0 {
				w.noHold = true
			}
			w.pid = p.Partition
			a.forgetStale(w.req.Partition, now)
			a.pops.emptyAfter(r, w, now)
		}
	}
}

// partRef is a partition id of the single-partition route and when the
// actor looked it up.
type partRef struct {
	id uuid.UUID
	at time.Time
}

// lookupRecheck is how long the queue's row and a partition id the actor
// looked up serve pops that find nothing before the next such pop looks
// them up again: the partition may have been removed (idle, or its queue
// deleted) and created again under a new id. The actor learns of that from
// its own commits and from the other processes' announcements
// (crossProcess), which a process that started a moment ago may not have
// sent. One indexed lookup per 10 s of an idle poll, against pops that
// would find nothing forever.
const lookupRecheck = 10 * time.Second

// forgetStale drops the queue's row and the cached id of partition (the
// single-partition route; "" for the others) when they are older than
// lookupRecheck: a pop found nothing.
func (a *queueActor) forgetStale(partition string, now time.Time) {
	if ref, ok := a.parts[partition]; ok && now.Sub(ref.at) >= lookupRecheck {
		delete(a.parts, partition)
	}
	if a.q != nil && now.Sub(a.loaded.at) >= lookupRecheck {
		a.q = nil
	}
}

// tick handles the timer: due re-checks and deadlines, ended holds, and
// expired leases: one wildcard pop of the lease's group looks at once per
// partition whose lease ended (a partition serves one pop of a group).
func (a *queueActor) tick() {
	now := a.d.clock.Now()
	a.pops.due(now)
	a.pops.pending = a.pops.lot.holdsDue(now, a.pops.pending)
	a.expired = a.ready.expire(now, a.expired[:0])
	for _, g := range a.expired {
		a.pops.pending = a.pops.lot.releaseN(g+"\x00", 1, a.pops.pending)
	}
}

// checkIdle passivates the actor when it holds nothing and received no
// request since the previous check (registry.go).
func (a *queueActor) checkIdle(ctx actor.Context) {
	if a.retired {
		return
	}
	a.pruneWriters()
	if a.idle() && a.h.received == a.h.seen && a.h.retire() {
		a.retired = true
		a.pops.stop()
		ctx.Send(ctx.Parent(), &retired{h: a.h, queue: a.name})
		return
	}
	a.h.seen = a.h.received
	a.d.signals.idle()
}

// pruneWriters forgets the writers of the partitions no push came to since
// the previous idle check: a busy queue is never passivated, and one that
// writes to ever new partitions (one per customer or session) would keep a
// writer for each. The next push to a forgotten partition looks it up again.
func (a *queueActor) pruneWriters() {
	for name, w := range a.writers {
		if !w.used && w.idle() {
			delete(a.writers, name)
		}
		w.used = false
	}
}

func (a *queueActor) idle() bool {
	if a.loading || len(a.acks) > 0 || !a.pops.idle() || !a.pacer.idle() {
		return false
	}
	for _, w := range a.writers {
		if !w.idle() {
			return false
		}
	}
	return true
}

// fail answers every request the actor holds with err before the registry
// replaces it (registry.HandleFailure). It must not fail itself: the state
// may be what broke.
func (a *queueActor) fail(err error) {
	defer func() {
		if r := recover(); r != nil {
			a.d.log.Error("answering the requests of a failed queue actor failed", "queue", a.name, "panic", r)
		}
	}()
	switch m := a.failedOn.(type) {
	case *waiter:
		answer(m, popReply{err: err})
	case *appendReq:
		failPushes([]*appendReq{m}, err)
	case *ackRequest:
		m.answer(ackOutcome{err: err})
	case *claimRound:
		m.answerBack(a.d, err)
	}
	for _, r := range a.acks {
		r.answer(ackOutcome{err: err})
	}
	a.acks = nil
	a.pops.failAll(err)
	for _, w := range a.writers {
		w.failAll(err)
	}
	a.d.signals.failed()
}

// tellScopes tells the registry that a segment was committed to q, for the
// discovery scopes that cover it; a queue with neither namespace nor task is
// in none, and the registry would look at every scope for nothing.
func tellScopes(ctx actor.Context, q *queengo.Queue) {
	if q.Namespace != "" || q.Task != "" {
		ctx.Send(ctx.Parent(), &queuePushed{queue: q.ID, namespace: q.Namespace, task: q.Task})
	}
}
