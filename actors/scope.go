package actors

import (
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// scopeRefresh is how long a discovery scope trusts its list of queues; a
// push to a queue it does not know makes it look again at once.
const scopeRefresh = time.Second

// scopeKey names a discovery scope; an empty field matches any.
type scopeKey struct{ namespace, task string }

func (k scopeKey) matches(namespace, task string) bool {
	return (k.namespace == "" || k.namespace == namespace) && (k.task == "" || k.task == task)
}

// scopeActor serves the pops of one discovery scope (namespace, task): every
// claim searches all the queues of the scope, highest priority first. It
// parks long polls like a queue actor (popScheduler); a push to any queue of
// the scope wakes them (the registry fans queuePushed out as wake). It keeps
// no ready set: the queues' own actors do, per queue. Every field is only
// used by the actor's goroutine.
type scopeActor struct {
	d   *deps
	h   *handle
	key scopeKey

	ids      []uuid.UUID     // the scope's queues, highest priority first
	names    map[string]bool // their names
	loadedAt time.Time       // zero: load them with the next round
	// loadedGen is deps.queueLoads when the round that loaded ids started:
	// a queue actor that loaded its queue since may hold a queue new to
	// the scope.
	loadedGen uint64

	pops     popScheduler
	retired  bool
	failedOn any
}

func newScopeActor(d *deps, h *handle, k scopeKey) *scopeActor {
	return &scopeActor{d: d, h: h, key: k, pops: newPopScheduler(d)}
}

func (a *scopeActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	defer func() {
		if r := recover(); r != nil {
			a.failedOn = msg
			a.d.log.Error("scope actor failed", "namespace", a.key.namespace, "task", a.key.task,
				"message", fmt.Sprintf("%T", msg), "panic", r, "stack", string(debug.Stack()))
			panic(r) // the registry decides (registry.HandleFailure)
		}
	}()
	switch m := msg.(type) {
	case *waiter:
		a.h.received++
		a.pops.add(m, a.d.clock.Now())
	case *cancelPop:
		a.pops.cancel(m.w)
	case *wake:
		if !slices.Contains(a.ids, m.queue) {
			a.loadedAt = time.Time{} // a queue new to the scope: look again
		}
		// A commit in one of the scope's queues, of partitions the scope
		// does not count: every pop of a round in flight looks again.
		a.pops.wake(a.d.clock.Now(), roundMax, nil)
	case *scopeHint:
		if m.queue != "" && !a.names[m.queue] {
			return // not in the scope, or new to it: the next load finds it
		}
		// A commit wakes like one of this process's (wake); a lease that
		// ended frees one partition of one group.
		n := roundMax
		if m.group != "" {
			n = 1
		}
		a.pops.wake(a.d.clock.Now(), n, nil)
	case *tick:
		a.pops.ticked()
		a.pops.due(a.d.clock.Now())
	case *claimRound:
		if !a.pops.finished(m) {
			return
		}
		a.onRound(m)
	case *releaseAll:
		a.pops.releaseAll()
		ctx.Send(ctx.Parent(), &released{from: ctx.Self()})
		return
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

// run starts claim rounds for the pending pops and re-arms the timer.
func (a *scopeActor) run(ctx actor.Context) {
	for ws := a.pops.take(); ws != nil; ws = a.pops.take() {
		now := a.d.clock.Now()
		r := &claimRound{scopeIDs: a.ids}
		if gen := a.d.queueLoadCount(); now.Sub(a.loadedAt) > scopeRefresh || gen != a.loadedGen {
			r.scope, r.scopeGen, r.scopeAt = &a.key, gen, now
		}
		for _, w := range ws {
			if w.cancelled {
				continue
			}
			r.ws = append(r.ws, w)
			r.params = append(r.params, claimOf(w))
		}
		if len(r.ws) == 0 {
			continue
		}
		a.pops.started(r)
		r.start(ctx, a.d)
	}
	a.pops.arm(ctx, time.Time{})
}

// onRound answers or parks the pops of a round that came back.
func (a *scopeActor) onRound(r *claimRound) {
	now := a.d.clock.Now()
	if r.loaded != nil {
		// The list is as of some time after the round started: loadedAt
		// is when it started, so a pop that came later looks again when
		// the list missed its queue.
		a.ids, a.loadedAt, a.loadedGen = r.loaded, r.scopeAt, r.scopeGen
		a.names = make(map[string]bool, len(r.names))
		for _, n := range r.names {
			a.names[n] = true
		}
	}
	for i, w := range r.ws {
		switch o := r.outcome(i); {
		case o == outcomeFailed:
			answer(w, r.failedClaim(a.d, i, now))
		case w.cancelled:
			if o == outcomeDelivered {
				a.d.leases.bookDelivered(w, &r.res[i], now)
				a.d.abandoned(w)
			}
		case o == outcomeDelivered:
			a.d.leases.bookDelivered(w, &r.res[i], now)
			answer(w, popReply{res: r.delivered(i)})
			// The claim left claimable partitions untaken: as many
			// key-mates as there are of them look now.
			if n := len(r.res[i].Ready); n > 0 {
				a.pops.pending = a.pops.lot.releaseN(w.key, n, a.pops.pending)
			}
		case o == outcomeEmpty && r.scope == nil && a.loadedAt.Before(w.arrived) && !w.rescoped:
			// Found nothing in a list of queues older than the pop: a
			// queue created since by another broker process (whose push
			// was answered before this pop came) may be missing. It looks
			// once more, after the list is read again.
			w.rescoped = true
			a.loadedAt = time.Time{}
			a.pops.pending = append(a.pops.pending, w)
		default:
			a.pops.emptyAfter(r, w, now)
		}
	}
}

// checkIdle passivates the actor when it holds nothing and received no
// request since the previous check (registry.go).
func (a *scopeActor) checkIdle(ctx actor.Context) {
	if a.retired {
		return
	}
	if a.pops.idle() && a.h.received == a.h.seen && a.h.retire() {
		a.retired = true
		a.pops.stop()
		ctx.Send(ctx.Parent(), &retired{h: a.h, scope: &a.key})
		return
	}
	a.h.seen = a.h.received
	a.d.signals.idle()
}

// fail answers every pop the actor holds with err before the registry
// replaces it.
func (a *scopeActor) fail(err error) {
	defer func() {
		if r := recover(); r != nil {
			a.d.log.Error("answering the pops of a failed scope actor failed", "panic", r)
		}
	}()
	switch m := a.failedOn.(type) {
	case *waiter:
		answer(m, popReply{err: err})
	case *claimRound:
		m.answerBack(a.d, err)
	}
	a.pops.failAll(err)
	a.d.signals.failed()
}
