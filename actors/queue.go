package actors

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

const (
	// roundMax caps the pops one pipelined claim round carries.
	roundMax = 32
	// fullScanEvery bounds how stale the ready set may get: at least this
	// often a claim searches every partition of the queue, which also finds
	// work the hints missed (another process's pushes, acks or expiries).
	fullScanEvery = time.Second
	// emptyRescan is the shortest gap between two full scans while the ready
	// set says nothing is claimable; pops in between answer from the set.
	emptyRescan = 200 * time.Millisecond
	// scopeRefresh is how long a discovery scope trusts its list of queues.
	scopeRefresh = time.Second
	// candidatesMin and candidatesMax bound the sample of the ready set one
	// claim searches.
	candidatesMin = 4
	candidatesMax = 64
)

// waiter is one pop from the moment it reaches its actor until it is
// answered. The fields below reply are owned by the actor.
type waiter struct {
	req      *queengo.PopRequest
	reply    chan popReply
	leaseID  uuid.UUID
	deadline time.Time // zero unless wait=true

	key       string
	inflight  bool
	cancelled bool
	answered  bool
	holdUntil time.Time // minPopWaitTime: deliver what there is at this time
	noHold    bool      // the queue was empty at the first look: never hold
}

type popReply struct {
	res queengo.PopResult
	err error
}

type cancelPop struct{ w *waiter }

// wake tells an actor that something in its scope (queue) was pushed.
type wake struct{ queue uuid.UUID }

type tick struct{}

type queueChanged struct{ deleted bool }

// partitionFreed: a partition may be claimable again for group (every group
// when empty).
type partitionFreed struct {
	partition uuid.UUID
	group     string
}

// commitDone is the outcome of one shared commit.
type commitDone struct {
	segs []*segmentReady
	dups [][]uuid.UUID
	err  error
}

type queueLoaded struct {
	q   queengo.Queue
	err error
}

type roundDone struct {
	ws     []*waiter
	params []queengo.ClaimParams
	res    []queengo.ClaimResult // a claim's own failure is in its Err
	err    error                 // the whole round failed
	errs   []error               // per waiter, when its partition lookup failed
	parts  map[string]uuid.UUID  // partition ids the round looked up
	scope  []uuid.UUID           // a refreshed discovery scope
	since  uint64                // the actor's event number when it started
}

// keyState is the long-poll state shared by the parked pops of one (group,
// partition) key: they would all see the same thing, so one of them re-checks
// on the key's backoff schedule and the rest follow when it finds messages.
type keyState struct {
	waiters  []*waiter
	empties  int
	interval time.Duration
	next     time.Time
	// minDeadline is at or before the earliest deadline of the waiters, so
	// the waiters are scanned only when one may have expired.
	minDeadline time.Time
}

// readySet is the queue actor's belief about which partitions a group could
// claim now. It is a hint: a claim verifies everything in SQL.
// Each entry remembers the actor's event number of its last addition, so a
// claim that started before a partition was (re)offered cannot erase that
// offer when it comes back empty-handed.
type readySet struct {
	set      map[uuid.UUID]uint64
	known    bool
	lastFull time.Time
}

// offer marks pid ready as of event n.
func (rs *readySet) offer(pid uuid.UUID, n uint64) { rs.set[pid] = n }

// drop forgets pid unless it was offered after event since.
func (rs *readySet) drop(pid uuid.UUID, since uint64) {
	if n, ok := rs.set[pid]; ok && n <= since {
		delete(rs.set, pid)
	}
}

type leaseEvent struct {
	at    time.Time
	group string
	pid   uuid.UUID
}

// queueActor supervises one queue (or, with scope set, one discovery scope):
// its partition writers, its parked pops and their backoff, minPopWaitTime
// holds and the ready set of partitions per consumer group.
type queueActor struct {
	b     *Broker
	name  string
	scope *scopeKey

	q       *queengo.Queue
	loading bool
	writers map[string]*actor.PID
	parts   map[string]uuid.UUID

	scopeIDs []uuid.UUID
	scopeAt  time.Time

	segs    []*segmentReady
	commits int

	pending  []*waiter
	keys     map[string]*keyState
	held     []*waiter
	ready    map[string]*readySet
	leases   []leaseEvent
	inflight int
	closing  bool
	events   uint64 // numbers ready-set offers

	timer   *time.Timer
	timerAt time.Time
}

func newQueueActor(b *Broker, name string) *queueActor {
	return &queueActor{b: b, name: name, writers: map[string]*actor.PID{}, parts: map[string]uuid.UUID{},
		keys: map[string]*keyState{}, ready: map[string]*readySet{}}
}

func newScopeActor(b *Broker, k scopeKey) *queueActor {
	a := newQueueActor(b, "")
	a.scope = &k
	return a
}

func (a *queueActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *appendReq:
		pid, ok := a.writers[m.partition]
		if !ok {
			name := m.partition
			pid = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
				return &writer{b: a.b, queue: a.name, name: name}
			}))
			a.writers[m.partition] = pid
		}
		ctx.Send(pid, m)
		return
	case *segmentReady:
		a.segs = append(a.segs, m)
		a.commit(ctx)
		return
	case *commitDone:
		a.commits--
		a.onCommitDone(ctx, m)
		a.commit(ctx)
	case *waiter:
		if a.closing {
			m.reply <- popReply{}
			return
		}
		a.pending = append(a.pending, m)
	case *cancelPop:
		a.cancel(m.w)
	case *wake:
		if a.scope != nil && !slices.Contains(a.scopeIDs, m.queue) {
			a.scopeAt = time.Time{} // a queue new to the scope: look again
		}
		a.wakeAll()
	case *partitionFreed:
		for g, rs := range a.ready {
			if m.group == "" || m.group == g {
				a.events++
				rs.offer(m.partition, a.events)
			}
		}
		a.wakeAll()
		if m.group == "" && a.q != nil {
			ctx.Send(a.b.registry, &queuePushed{queue: a.q.ID, namespace: a.q.Namespace, task: a.q.Task})
		}
	case *tick:
		a.timerAt = time.Time{}
		a.onTick()
	case *queueLoaded:
		a.loading = false
		if m.err != nil {
			a.b.log.Error("loading queue failed", "queue", a.name, "err", m.err)
			a.failPending(m.err)
		} else {
			q := m.q
			a.q = &q
		}
	case *queueChanged:
		a.q = nil
		if m.deleted {
			a.parts = map[string]uuid.UUID{}
			a.ready = map[string]*readySet{}
			for _, pid := range a.writers {
				ctx.Send(pid, &resetPartition{})
			}
		}
	case *roundDone:
		a.inflight--
		a.onRound(m)
	case *releaseAll:
		a.closing = true
		a.releaseAll()
		ctx.Respond(&released{})
		return
	default:
		return
	}
	a.run(ctx)
}

// concurrentCommitMin is the backlog of ready messages that justifies a
// second commit while one is in flight. Below it, waiting for the commit in
// flight makes the next one carry everything that arrived meanwhile, and
// PostgreSQL's cost is mostly per commit: at batch=1 with 50 connections one
// commit at a time gave 17k msg/s against 12k with two (docs/benchmarks.md);
// at batch=100 a second commit adds about 10%.
const concurrentCommitMin = 500

// commit starts a commit of every segment the writers handed over, unless a
// commit is in flight and the backlog is small, or enough are in flight.
func (a *queueActor) commit(ctx actor.Context) {
	if len(a.segs) == 0 || a.commits >= a.b.cfg.CommitsInFlight {
		return
	}
	if a.commits > 0 {
		n := 0
		for _, s := range a.segs {
			n += len(s.seg.Frames)
		}
		if n < concurrentCommitMin {
			return
		}
	}
	batch := a.segs
	a.segs = nil
	a.commits++
	segs := make([]queengo.Segment, len(batch))
	n := 0
	for i, s := range batch {
		segs[i] = s.seg
		n += len(s.seg.Frames)
	}
	commitMessages.Update(float64(n))
	self, root, store, timeout := ctx.Self(), ctx.ActorSystem().Root, a.b.cfg.Store, a.b.cfg.RequestTimeout
	go func() {
		// The commit is shared by every pusher whose items ride in it; each
		// of them stops waiting at its own deadline (Broker.Push).
		c, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		defer commitDuration.UpdateDuration(time.Now())
		dups, err := store.Append(c, segs)
		root.Send(self, &commitDone{segs: batch, dups: dups, err: err})
	}()
}

// onCommitDone marks the written partitions ready and wakes the parked pops
// in scope before any writer answers its pushers, so a pop that follows a
// push's answer finds the partition ready.
func (a *queueActor) onCommitDone(ctx actor.Context, m *commitDone) {
	if m.err == nil {
		q := m.segs[0].queue
		if a.q != nil && a.q.ID != q.ID {
			a.q = nil // recreated by another process: reload
		}
		for _, s := range m.segs {
			for _, rs := range a.ready {
				a.events++
				rs.offer(s.seg.Partition, a.events)
			}
			a.b.announce(a.name, s.seg.Partition)
		}
		a.wakeAll()
		ctx.Send(a.b.registry, &queuePushed{queue: q.ID, namespace: q.Namespace, task: q.Task})
	}
	for i, s := range m.segs {
		d := &segmentDone{err: m.err}
		if m.err == nil {
			d.dups = m.dups[i]
		}
		ctx.Send(s.writer, d)
	}
}

// wakeAll resets every key's backoff and re-checks it now; held pops look
// again whether their batch filled.
func (a *queueActor) wakeAll() {
	now := time.Now()
	for _, k := range a.keys {
		k.empties, k.interval, k.next = 0, a.b.cfg.Backoff.Initial, now
	}
	for _, w := range a.held {
		a.pending = append(a.pending, w)
	}
	a.held = a.held[:0]
	a.dispatchDue(now)
}

// dispatchDue answers parked pops past their deadline and sends one pop of
// every key whose re-check is due to the next claim round.
func (a *queueActor) dispatchDue(now time.Time) {
	for key, k := range a.keys {
		if !now.Before(k.minDeadline) {
			live := k.waiters[:0]
			k.minDeadline = time.Time{}
			for _, w := range k.waiters {
				if !w.cancelled && !now.Before(w.deadline) {
					a.answer(w, popReply{})
					continue
				}
				if !w.cancelled {
					live = append(live, w)
					if k.minDeadline.IsZero() || w.deadline.Before(k.minDeadline) {
						k.minDeadline = w.deadline
					}
				}
			}
			parked.Add(int64(len(live) - len(k.waiters)))
			clear(k.waiters[len(live):])
			k.waiters = live
		}
		if len(k.waiters) == 0 {
			delete(a.keys, key)
			continue
		}
		if !now.Before(k.next) {
			// One pop re-checks for the whole key.
			a.pending = append(a.pending, k.waiters[0])
			k.waiters = k.waiters[1:]
			parked.Add(-1)
			a.backoff(k, now)
		}
	}
}

// run starts claim rounds for pending pops and re-arms the timer.
func (a *queueActor) run(ctx actor.Context) {
	if len(a.pending) > 0 && !a.ensureLoaded(ctx) {
		a.armTimer(ctx)
		return
	}
	for len(a.pending) > 0 && a.inflight < a.b.cfg.ClaimsInFlight {
		n := min(len(a.pending), roundMax)
		ws := append([]*waiter(nil), a.pending[:n]...)
		a.pending = append(a.pending[:0], a.pending[n:]...)
		a.startRound(ctx, ws)
	}
	a.armTimer(ctx)
}

// ensureLoaded reports whether the queue row is known, and starts loading it
// (creating it for a queue-scoped pop on an unknown queue) when it is not.
func (a *queueActor) ensureLoaded(ctx actor.Context) bool {
	if a.scope != nil || a.q != nil {
		return true
	}
	if !a.loading {
		a.loading = true
		self, root, store, name, timeout := ctx.Self(), ctx.ActorSystem().Root, a.b.cfg.Store, a.name, a.b.cfg.RequestTimeout
		go func() {
			c, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			q, err := store.EnsureQueue(c, name)
			root.Send(self, &queueLoaded{q: q, err: err})
		}()
	}
	return false
}

func (a *queueActor) failPending(err error) {
	for _, w := range a.pending {
		a.answer(w, popReply{err: err})
	}
	a.pending = a.pending[:0]
}

func (a *queueActor) startRound(ctx actor.Context, ws []*waiter) {
	now := time.Now()
	var run []*waiter
	var params []queengo.ClaimParams
	for _, w := range ws {
		if w.cancelled {
			continue
		}
		p, skip := a.params(w, now)
		if skip {
			a.onEmpty(w, now)
			continue
		}
		w.inflight = true
		run = append(run, w)
		params = append(params, p)
	}
	if len(run) == 0 {
		return
	}
	a.inflight++
	claimRoundPops.Update(float64(len(run)))
	self, root, store, timeout := ctx.Self(), ctx.ActorSystem().Root, a.b.cfg.Store, a.b.cfg.RequestTimeout
	var qid uuid.UUID
	if a.q != nil {
		qid = a.q.ID
	}
	scope, refresh := a.scope, a.scope != nil && now.Sub(a.scopeAt) > scopeRefresh
	since := a.events
	scopeIDs := a.scopeIDs
	go func() {
		// The request deadline bounds the round's statements, not the wait
		// of a long poll, which is parked in the actor between rounds.
		c, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		d := &roundDone{ws: run, params: params, since: since}
		if refresh {
			var qs []queengo.Queue
			qs, err := store.QueuesInScope(c, scope.namespace, scope.task)
			if d.err = err; err == nil {
				d.scope = make([]uuid.UUID, 0, len(qs))
				for _, q := range qs {
					d.scope = append(d.scope, q.ID)
				}
				scopeIDs = d.scope
			}
		}
		var todo []int
		for i := range params {
			p := &params[i]
			switch {
			case scope != nil:
				p.QueueIDs = scopeIDs
			case run[i].req.Partition != "" && p.Partition == uuid.Nil:
				pid, err := store.LookupPartition(c, qid, run[i].req.Partition)
				if err != nil {
					if !errors.Is(err, queengo.ErrNotFound) {
						// This pop's failure only: the others claim.
						if d.errs == nil {
							d.errs = make([]error, len(params))
						}
						d.errs[i] = err
					}
					continue // no such partition yet: nothing to deliver
				}
				if d.parts == nil {
					d.parts = map[string]uuid.UUID{}
				}
				d.parts[run[i].req.Partition] = pid
				p.Partition, p.Candidates = pid, []uuid.UUID{pid}
			}
			if len(p.QueueIDs) > 0 {
				todo = append(todo, i)
			}
		}
		d.res = make([]queengo.ClaimResult, len(params))
		if d.err == nil && len(todo) > 0 {
			batch := make([]queengo.ClaimParams, len(todo))
			for k, i := range todo {
				batch[k] = params[i]
			}
			var res []queengo.ClaimResult
			start := time.Now()
			res, d.err = store.Claim(c, batch)
			claimDuration.UpdateDuration(start)
			if d.err == nil {
				for k, i := range todo {
					d.res[i] = res[k]
				}
			}
		}
		root.Send(self, d)
	}()
}

// params builds the claim of one pop. skip reports that the ready set says
// nothing is claimable and a full scan ran too recently to repeat.
func (a *queueActor) params(w *waiter, now time.Time) (queengo.ClaimParams, bool) {
	r := w.req
	p := queengo.ClaimParams{Group: r.Group, Batch: r.Batch, MaxParts: r.Partitions, LeaseSeconds: r.LeaseSeconds,
		AutoAck: r.AutoAck, LeaseID: w.leaseID, SubMode: r.SubMode, SubFrom: r.SubFrom, SubFromNow: r.SubFromNow}
	if r.AutoAck {
		p.LeaseID = uuid.Nil
	}
	if a.scope != nil {
		return p, false
	}
	p.QueueIDs = []uuid.UUID{a.q.ID}
	if r.Partition != "" {
		p.MaxParts = 1
		if pid, ok := a.parts[r.Partition]; ok {
			p.Partition, p.Candidates = pid, []uuid.UUID{pid}
		}
		return p, false
	}
	if a.holds(w) && !w.noHold && (w.holdUntil.IsZero() || now.Before(w.holdUntil)) {
		p.Min = r.Batch
	}
	rs := a.ready[r.Group]
	switch {
	case rs == nil || !rs.known || now.Sub(rs.lastFull) > fullScanEvery:
	case len(rs.set) == 0:
		if now.Sub(rs.lastFull) < emptyRescan {
			return p, true
		}
	default:
		// A claim costs what it searches, so it gets only a sample of the
		// ready set: enough partitions for its cap (or, uncapped, its
		// budget), with slack for the ones concurrent pops take first. Map
		// order is random, which spreads pops over the ready partitions.
		need := r.Partitions
		if need <= 0 {
			need = r.Batch
		}
		k := min(len(rs.set), max(2*need, candidatesMin), candidatesMax)
		p.Candidates = make([]uuid.UUID, 0, k)
		for pid := range rs.set {
			if len(p.Candidates) == k {
				break
			}
			p.Candidates = append(p.Candidates, pid)
		}
	}
	return p, false
}

// holds reports whether minPopWaitTime applies to the pop: the queue-scoped
// wildcard route, wait=true, batch > 1 and the option set.
func (a *queueActor) holds(w *waiter) bool {
	return a.scope == nil && a.q != nil && a.q.Options.MinPopWaitTime > 0 &&
		w.req.Partition == "" && w.req.Wait && w.req.Batch > 1
}

func (a *queueActor) onRound(d *roundDone) {
	now := time.Now()
	if d.scope != nil {
		a.scopeIDs, a.scopeAt = d.scope, now
	}
	for name, pid := range d.parts {
		a.parts[name] = pid
	}
	for i, w := range d.ws {
		w.inflight = false
		if err := d.failure(i); err != nil {
			a.answer(w, popReply{err: err})
			continue
		}
		p, r := &d.params[i], &d.res[i]
		a.learn(w, p, r, d.since, now)
		switch {
		case w.cancelled:
			// The client left; whatever was leased redelivers at expiry.
		case len(r.Messages) > 0:
			a.answer(w, popReply{res: queengo.PopResult{LeaseID: leaseText(p), Messages: r.Messages,
				PartitionsClaimed: len(r.Spans)}})
			// The claim left claimable partitions untaken: as many
			// key-mates as there are of them look now.
			if k := a.keys[w.key]; k != nil && len(r.Ready) > 0 {
				a.pending = append(a.pending, a.unparkN(k, len(r.Ready))...)
			}
		case p.Min > 0 && r.Taken > 0:
			if w.holdUntil.IsZero() {
				w.holdUntil = now.Add(time.Duration(a.q.Options.MinPopWaitTime) * time.Millisecond)
				if w.holdUntil.After(w.deadline) {
					w.holdUntil = w.deadline
				}
			}
			a.held = append(a.held, w)
		default:
			if p.Min > 0 {
				w.noHold = true
			}
			a.onEmpty(w, now)
		}
	}
}

// failure is the error the round's i-th pop answers with, if any: the
// round's (every pop shares it), or the pop's own (its partition lookup or its
// claim failed), which leaves the other pops of the round alone.
func (d *roundDone) failure(i int) error {
	switch {
	case d.err != nil:
		return d.err
	case d.errs != nil && d.errs[i] != nil:
		return d.errs[i]
	}
	return d.res[i].Err
}

func leaseText(p *queengo.ClaimParams) string {
	if p.AutoAck {
		return ""
	}
	return p.LeaseID.String()
}

// readyReportMax is the most untaken partitions a claim reports (queen.claim
// LIMIT): a full scan that reports fewer saw everything claimable.
const readyReportMax = 1000

// learn updates the group's ready set from what a claim that started at
// event since saw: partitions it leased are not ready until their lease ends,
// the ones it reported claimable are, and the rest of what it searched is
// not (unless offered again since the claim started).
func (a *queueActor) learn(w *waiter, p *queengo.ClaimParams, r *queengo.ClaimResult, since uint64, now time.Time) {
	if a.scope != nil || w.req.Partition != "" {
		return
	}
	rs := a.ready[p.Group]
	if rs == nil {
		rs = &readySet{set: map[uuid.UUID]uint64{}}
		a.ready[p.Group] = rs
	}
	keep := make(map[uuid.UUID]bool, len(r.Ready)+len(r.Spans))
	for _, pid := range r.Ready {
		keep[pid] = true
		a.events++
		rs.offer(pid, a.events)
	}
	if p.Min == 0 || len(r.Messages) > 0 {
		for _, s := range r.Spans {
			keep[s.PartitionID] = true
			if p.AutoAck {
				// Committed, not leased: it may hold more.
				a.events++
				rs.offer(s.PartitionID, a.events)
			} else {
				rs.drop(s.PartitionID, since)
				a.leases = append(a.leases, leaseEvent{at: now.Add(s.Lease), group: p.Group, pid: s.PartitionID})
			}
		}
	}
	searched := p.Candidates
	if searched == nil {
		for pid := range rs.set {
			searched = append(searched, pid)
		}
		rs.known, rs.lastFull = len(r.Ready) < readyReportMax, now
	}
	for _, pid := range searched {
		if !keep[pid] {
			rs.drop(pid, since)
		}
	}
}

// onEmpty answers a pop that found nothing, or parks it under its key.
func (a *queueActor) onEmpty(w *waiter, now time.Time) {
	if !w.req.Wait || !now.Before(w.deadline) {
		a.answer(w, popReply{})
		return
	}
	if w.key == "" {
		w.key = w.req.Group + "\x00" + w.req.Partition
	}
	k := a.keys[w.key]
	if k == nil {
		k = &keyState{interval: a.b.cfg.Backoff.Initial}
		a.keys[w.key] = k
	}
	if k.next.Before(now) {
		a.backoff(k, now)
	}
	k.waiters = append(k.waiters, w)
	if k.minDeadline.IsZero() || w.deadline.Before(k.minDeadline) {
		k.minDeadline = w.deadline
	}
	parked.Add(1)
}

// backoff schedules the key's next re-check after an empty one.
func (a *queueActor) backoff(k *keyState, now time.Time) {
	bo := a.b.cfg.Backoff
	k.empties++
	if k.empties > bo.Threshold {
		k.interval = time.Duration(float64(k.interval) * bo.Multiplier)
		if k.interval > bo.Max {
			k.interval = bo.Max
		}
	}
	k.next = now.Add(k.interval)
}

func (a *queueActor) onTick() {
	now := time.Now()
	a.dispatchDue(now)
	held := a.held[:0]
	for _, w := range a.held {
		switch {
		case w.cancelled:
		case !now.Before(w.holdUntil):
			a.pending = append(a.pending, w)
		default:
			held = append(held, w)
		}
	}
	a.held = held
	leases := a.leases[:0]
	for _, e := range a.leases {
		if now.Before(e.at) {
			leases = append(leases, e)
			continue
		}
		if rs := a.ready[e.group]; rs != nil {
			a.events++
			rs.offer(e.pid, a.events)
		}
		if k := a.keys[e.group+"\x00"]; k != nil {
			k.next = now
			a.pending = append(a.pending, a.unpark(k)...)
		}
	}
	a.leases = leases
}

// unpark takes every parked pop of the key out of the park.
func (a *queueActor) unpark(k *keyState) []*waiter {
	ws := k.waiters
	k.waiters = nil
	parked.Add(-int64(len(ws)))
	return ws
}

// unparkN takes up to n of the key's parked pops, oldest first.
func (a *queueActor) unparkN(k *keyState, n int) []*waiter {
	n = min(n, len(k.waiters))
	ws := append([]*waiter(nil), k.waiters[:n]...)
	k.waiters = append(k.waiters[:0], k.waiters[n:]...)
	parked.Add(-int64(n))
	return ws
}

func (a *queueActor) cancel(w *waiter) {
	w.cancelled = true
	if k := a.keys[w.key]; k != nil {
		for i, x := range k.waiters {
			if x == w {
				k.waiters = append(k.waiters[:i], k.waiters[i+1:]...)
				parked.Add(-1)
				break
			}
		}
	}
}

func (a *queueActor) answer(w *waiter, r popReply) {
	if w.answered || w.cancelled {
		return
	}
	w.answered = true
	w.reply <- r
}

func (a *queueActor) releaseAll() {
	for _, w := range a.pending {
		a.answer(w, popReply{})
	}
	a.pending = nil
	for _, k := range a.keys {
		for _, w := range a.unpark(k) {
			a.answer(w, popReply{})
		}
	}
	a.keys = map[string]*keyState{}
	for _, w := range a.held {
		a.answer(w, popReply{})
	}
	a.held = nil
	if a.timer != nil {
		a.timer.Stop()
	}
}

// armTimer points the actor's single timer at its next event: a key's
// re-check, a hold's end, a lease expiry or a parked pop's deadline.
func (a *queueActor) armTimer(ctx actor.Context) {
	var at time.Time
	earliest := func(t time.Time) {
		if !t.IsZero() && (at.IsZero() || t.Before(at)) {
			at = t
		}
	}
	for _, k := range a.keys {
		earliest(k.next)
		earliest(k.minDeadline)
	}
	for _, w := range a.held {
		earliest(w.holdUntil)
	}
	for _, e := range a.leases {
		earliest(e.at)
	}
	if at.IsZero() || a.closing {
		return
	}
	if !a.timerAt.IsZero() && !at.Before(a.timerAt) {
		return
	}
	a.timerAt = at
	self, root := ctx.Self(), ctx.ActorSystem().Root
	d := time.Until(at)
	if a.timer == nil {
		a.timer = time.AfterFunc(d, func() { root.Send(self, &tick{}) })
		return
	}
	a.timer.Reset(d)
}
