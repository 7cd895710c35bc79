package actors

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// roundMax caps the pops one claim round carries.
const roundMax = 32

// claimRound is one claim round: the pops of an actor that were ready
// together, each with its claim, run against the store in one Claim call.
// The actor builds it, run executes it on a goroutine of its own, and the
// round comes back to the actor as a message, results filled in; outcome
// then says what each pop gets.
type claimRound struct {
	ws     []*waiter
	params []queengo.ClaimParams
	since  uint64 // the ready sets' event number when the round started

	// queue is the queue whose partitions the single-partition route looks
	// up; uuid.Nil for a discovery scope, whose claims get scopeIDs.
	queue uuid.UUID
	// hold is the queue's minPopWaitTime when the round started.
	hold time.Duration
	// wakes counts the partitions that may have become claimable while the
	// round was in flight (popScheduler.wake), so what it found empty or
	// under-full may predate them: that many of its empty pops look again.
	wakes int
	// scope, when set, makes the round load the scope's queues first;
	// scopeIDs are the queues a discovery round claims from otherwise.
	scope    *scopeKey
	scopeGen uint64    // deps.queueLoads when the round was made to load the scope
	scopeAt  time.Time // when it was made
	scopeIDs []uuid.UUID
	// acks are handed-off acks the round applies before its claims, in the
	// same transaction (Store.AckClaim); answered by the round's goroutine.
	acks []*ackRequest
	// commit, when set, is the queue's segment commit the round carries:
	// written before its claims, in their transaction (Store.AppendClaim),
	// and answered by the actor when the round comes back; segs are its
	// segments.
	commit *commitDone
	segs   []queengo.Segment

	// Filled by run.
	res    []queengo.ClaimResult // one per pop; a claim's own failure is in its Err
	err    error                 // the whole round failed
	errs   []error               // per pop, when its partition lookup failed
	sent   []int                 // the pops whose claim went to the store
	parts  map[string]uuid.UUID  // partition ids the round looked up
	loaded []uuid.UUID           // the scope's queues, when the round loaded them
	names  []string              // their names, in the same order
	seen   bool                  // the claims ran after commit's write, in its transaction

	// state says who answers the pops: the actor the round goes back to,
	// or, when that actor failed while the round ran, the round's own
	// goroutine (roundRunning, roundBack, roundOrphaned).
	state atomic.Int32
	// failed is the actor's failure, set before it orphans the round.
	failed error
}

const (
	roundRunning  int32 = iota
	roundBack           // sent back to its actor, results filled in
	roundOrphaned       // its actor failed first: the goroutine answers
)

// outcome is what a round gave one pop.
type outcome uint8

const (
	outcomeEmpty     outcome = iota // nothing claimable: answer empty or park
	outcomeDelivered                // messages: answer them
	outcomeHeld                     // fewer than minPopWaitTime's batch available: hold
	outcomeFailed                   // answer failure(i)
)

// claimOf is the claim of one pop, before the actor adds where to look
// (queues, partition, candidates) and the minPopWaitTime minimum.
func claimOf(w *waiter) queengo.ClaimParams {
	r := w.req
	p := queengo.ClaimParams{Group: r.Group, Batch: r.Batch, MaxParts: r.Partitions, LeaseSeconds: r.LeaseSeconds,
		AutoAck: r.AutoAck, LeaseID: w.leaseID, SubMode: r.SubMode, SubFrom: r.SubFrom, SubFromNow: r.SubFromNow}
	if r.AutoAck {
		p.LeaseID = uuid.Nil
	}
	return p
}

// start runs the round on a goroutine of its own (a kept one: warmPool),
// bounded by the request timeout (not a long poll's wait, which is parked in
// the actor between rounds), answers the acks it carried, and sends it back
// to the actor when it is done, or answers its pops itself when the actor
// failed meanwhile (orphan).
func (r *claimRound) start(ctx actor.Context, d *deps) {
	d.metrics.claimRoundPops.Update(float64(len(r.ws)))
	self, root := ctx.Self(), ctx.ActorSystem().Root
	d.warm.Go(func() {
		c, cancel := context.WithTimeout(context.Background(), d.timeout)
		defer cancel()
		res, err := r.run(c, d.store, d.metrics)
		if len(r.acks) > 0 {
			d.acks.settle(c, r.acks, res, nil, err)
		}
		if r.state.CompareAndSwap(roundRunning, roundBack) {
			root.Send(self, r)
			return
		}
		r.answerOrphaned(d)
	})
}

// orphan is called by an actor that fails with err while the round is in
// flight: the round's pops that claimed messages must get them, not the
// error, for an autoAck claim has committed them and a lease hides them
// until it expires. The round's goroutine answers them when the round is
// still running; a round already sent back, whose message the actor will
// never handle, is answered here.
func (r *claimRound) orphan(d *deps, err error) {
	r.failed = err
	if !r.state.CompareAndSwap(roundRunning, roundOrphaned) {
		r.answerOrphaned(d)
	}
}

// answerOrphaned answers every pop of a round whose actor failed while the
// round was out (orphan). It writes nothing to the waiters, which the failed
// actor's replacement may still touch (cancelPop): each reply channel has
// room for the one answer, which a pop that failAll skipped never got.
func (r *claimRound) answerOrphaned(d *deps) {
	now := d.clock.Now()
	for i, w := range r.ws {
		select {
		case w.reply <- r.last(d, i, now):
		default:
		}
	}
}

// answerBack answers the pops of a round that came back to an actor which
// then failed handling it (the round no longer counts as in flight, so
// failAll does not see it), on the failed actor's goroutine: each pop the
// actor had not answered yet gets what answerOrphaned would give it (one
// it had parked or held again gets err here, and failAll skips it).
func (r *claimRound) answerBack(d *deps, err error) {
	r.failed = err
	now := d.clock.Now()
	for i, w := range r.ws {
		if !w.answered && !w.cancelled {
			answer(w, r.last(d, i, now))
		}
	}
}

// last is the i-th pop's answer when no actor is left to park or hold it:
// its messages (their lease booked), its own failure, or else the actor's
// (it claimed nothing).
func (r *claimRound) last(d *deps, i int, now time.Time) popReply {
	switch r.outcome(i) {
	case outcomeFailed:
		return r.failedClaim(d, i, now)
	case outcomeDelivered:
		d.leases.bookDelivered(r.ws[i], &r.res[i], now)
		return popReply{res: r.delivered(i)}
	}
	return popReply{err: r.failed}
}

// run executes the round: it loads the scope's queues when asked, looks up
// the partitions of single-partition pops the actor does not know yet, then
// hands every claim that has somewhere to look to the store in one call,
// with the round's commit (AppendClaim) or acks (AckClaim) when it carries
// any, and returns the acks' results or their error. A failed lookup or
// claim is that pop's failure only; a failed scope load or Claim call fails
// the whole round.
func (r *claimRound) run(ctx context.Context, store Store, m *brokerMetrics) ([]queengo.AckResult, error) {
	if r.scope != nil {
		qs, err := store.QueuesInScope(ctx, r.scope.namespace, r.scope.task)
		if r.err = err; err == nil {
			r.loaded, r.names = make([]uuid.UUID, 0, len(qs)), make([]string, 0, len(qs))
			for _, q := range qs {
				r.loaded, r.names = append(r.loaded, q.ID), append(r.names, q.Name)
			}
			r.scopeIDs = r.loaded
		}
	}
	var todo []int
	for i := range r.params {
		p := &r.params[i]
		switch {
		case r.queue == uuid.Nil:
			p.QueueIDs = r.scopeIDs
		case r.ws[i].req.Partition != "" && p.Partition == uuid.Nil:
			pid, err := store.LookupPartition(ctx, r.queue, r.ws[i].req.Partition)
			switch {
			case err == nil:
				if r.parts == nil {
					r.parts = map[string]uuid.UUID{}
				}
				r.parts[r.ws[i].req.Partition] = pid
				p.Partition, p.Candidates = pid, []uuid.UUID{pid}
			case !errors.Is(err, queengo.ErrNotFound):
				if r.errs == nil {
					r.errs = make([]error, len(r.params))
				}
				r.errs[i] = err
				continue
			case p.SubMode == queengo.SubscriptionUnset && p.SubFrom == nil && !p.SubFromNow:
				continue // no such partition yet: nothing to deliver
			default:
				// Nothing to deliver, but a group's first pop records the
				// subscription intent it carries (D6): it claims, searching
				// no partition.
				p.SubscribeOnly = true
			}
		}
		if len(p.QueueIDs) > 0 {
			todo = append(todo, i)
		}
	}
	r.res = make([]queengo.ClaimResult, len(r.params))
	r.sent = todo
	items := joinAcks(r.acks)
	if len(items) > 0 {
		m.handOffItems.Update(float64(len(items)))
	}
	if r.err != nil || len(todo) == 0 {
		if r.commit != nil {
			r.commit.dups, r.commit.err = store.Append(ctx, r.segs)
		}
		if len(items) == 0 {
			return nil, nil
		}
		return store.Ack(ctx, items)
	}
	batch := r.params
	if len(todo) < len(r.params) {
		batch = make([]queengo.ClaimParams, len(todo))
		for k, i := range todo {
			batch[k] = r.params[i]
		}
	}
	var (
		acks   []queengo.AckResult
		ackErr error
		res    []queengo.ClaimResult
		err    error
	)
	start := time.Now()
	switch {
	case r.commit != nil:
		r.commit.dups, res, r.seen, r.commit.err = store.AppendClaim(ctx, r.segs, batch)
	case len(items) > 0:
		acks, res, ackErr = store.AckClaim(ctx, items, batch)
	default:
		res, err = store.Claim(ctx, batch)
	}
	m.claimDuration.UpdateDuration(start)
	if err != nil {
		r.err = err
		return nil, nil
	}
	for k, i := range todo {
		r.res[i] = res[k]
	}
	return acks, ackErr
}

// failure is the error the i-th pop answers with, if any: the round's (every
// pop shares it), or the pop's own (its partition lookup or its claim
// failed), which leaves the other pops of the round alone.
func (r *claimRound) failure(i int) error {
	switch {
	case r.err != nil:
		return r.err
	case r.errs != nil && r.errs[i] != nil:
		return r.errs[i]
	}
	return r.res[i].Err
}

// failedClaim is the answer of the i-th pop, whose claim failed: its error. A
// claim that went to the store and failed on the request deadline or a lost
// connection may have committed all the same: its lease is kept for the
// Broker to end (lostLeases).
func (r *claimRound) failedClaim(d *deps, i int, now time.Time) popReply {
	err := r.failure(i)
	if slices.Contains(r.sent, i) {
		d.lost.claimFailed(r.ws[i], err, now)
	}
	return popReply{err: err}
}

// outcome is what the round gave the i-th pop.
func (r *claimRound) outcome(i int) outcome {
	switch res := &r.res[i]; {
	case r.failure(i) != nil:
		return outcomeFailed
	case len(res.Messages) > 0:
		return outcomeDelivered
	case r.params[i].Min > 0 && res.Taken > 0:
		return outcomeHeld
	}
	return outcomeEmpty
}

// delivered is the pop result of the i-th pop's messages.
func (r *claimRound) delivered(i int) queengo.PopResult {
	p, res := &r.params[i], &r.res[i]
	lease := ""
	if !p.AutoAck {
		lease = p.LeaseID.String()
	}
	return queengo.PopResult{LeaseID: lease, Messages: res.Messages, PartitionsClaimed: len(res.Spans)}
}
