package actors

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// handle is the Broker's reference to one queue or scope actor. Requests
// (pushes and pops) go through send, which counts them and refuses once the
// actor passivated, so a request never lands in an actor that will not
// answer it. Hints (a freed partition, a cancelled pop) go to pid directly:
// when the actor is gone, they had nothing to tell it.
//
// An actor passivates itself (retire) only when it received every request
// sent through its handle, so nothing is in its mailbox that needs an
// answer; the Broker then asks the registry, which spawns a fresh actor.
type handle struct {
	pid *actor.PID
	// sent counts the requests handed to the actor; retire sets it
	// negative, after which send refuses.
	sent atomic.Int64
	// received counts the requests the actor took from its mailbox, and
	// seen is received at the previous idle check. Only used by the
	// actor's goroutine (every incarnation of it: the handle outlives a
	// restart).
	received int64
	seen     int64
	// parked counts the long polls the queue actor keeps parked (every
	// incarnation of it); read by Broker.ParkedByQueue. Zero for a scope.
	parked atomic.Int64
}

func newHandle() *handle { return &handle{seen: -1} } // a fresh actor lives through one idle check

// send hands a request to the actor; false means it passivated, and the
// caller resolves the actor again.
func (h *handle) send(root *actor.RootContext, m any) bool {
	if h.sent.Add(1) < 0 {
		return false
	}
	root.Send(h.pid, m)
	return true
}

// retire closes the handle if every request sent through it was received.
// Called by the actor only.
func (h *handle) retire() bool { return h.sent.CompareAndSwap(h.received, math.MinInt64) }

func (h *handle) retired() bool { return h.sent.Load() < 0 }

// directory maps queue names and discovery scopes to the handles of their
// live actors. The Broker reads it; only the registry writes it.
type directory struct {
	queues sync.Map // string -> *handle
	scopes sync.Map // scopeKey -> *handle
}

// registry is the root of the tree. It spawns one actor per queue and per
// discovery scope on demand, and it supervises them:
//
//   - A panic in an actor is a bug, not a state to live with: the actor
//     answers every request it holds with queengo.ErrActorFailed (never a
//     hang) and is replaced by a fresh one on the same mailbox, so requests
//     that queued behind the failure are served (HandleFailure). It is never
//     stopped for failing: a stopped actor's queued messages would be
//     dropped unanswered.
//   - Every deps.idleAfter the registry asks each actor checkIdle; one that
//     held nothing and received no request since the previous check
//     passivates itself (handle.retire) and reports retired; the registry
//     forgets and stops it. The next request spawns a fresh one.
//
// Its own state is the directory; every field is only used by its goroutine.
type registry struct {
	d    *deps
	dir  *directory
	tick timer

	release  *releaseAll         // a shutdown waiting for its actors
	awaiting map[string]struct{} // ids of the actors that have not answered it
}

func newRegistry(d *deps, dir *directory) *registry { return &registry{d: d, dir: dir} }

func (r *registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		self, root := ctx.Self(), ctx.ActorSystem().Root
		r.tick = r.d.clock.AfterFunc(r.d.idleAfter, func() { root.Send(self, idleTickMsg) })
	case *actor.Stopping, *actor.Restarting:
		if r.tick != nil {
			r.tick.Stop()
		}
	case *getQueue:
		if v, ok := r.dir.queues.Load(m.name); ok && !v.(*handle).retired() {
			m.reply <- v.(*handle)
			return
		}
		h := newHandle()
		name := m.name
		h.pid = ctx.Spawn(r.d.actorProps(func() actor.Actor { return newQueueActor(r.d, h, name) }))
		r.dir.queues.Store(name, h)
		m.reply <- h
	case *getScope:
		if v, ok := r.dir.scopes.Load(m.key); ok && !v.(*handle).retired() {
			m.reply <- v.(*handle)
			return
		}
		h := newHandle()
		key := m.key
		h.pid = ctx.Spawn(r.d.actorProps(func() actor.Actor { return newScopeActor(r.d, h, key) }))
		r.dir.scopes.Store(key, h)
		m.reply <- h
	case *queuePushed:
		r.dir.scopes.Range(func(k, v any) bool {
			if k.(scopeKey).matches(m.namespace, m.task) {
				ctx.Send(v.(*handle).pid, &wake{queue: m.queue})
			}
			return true
		})
	case *idleTick:
		r.each(func(h *handle) { ctx.Send(h.pid, checkIdleMsg) })
		r.tick.Reset(r.d.idleAfter)
	case *retired:
		if m.scope != nil {
			r.dir.scopes.CompareAndDelete(*m.scope, m.h)
		} else {
			r.dir.queues.CompareAndDelete(m.queue, m.h)
		}
		// It held nothing: it counts as released.
		r.answered(m.h.pid)
		ctx.Stop(m.h.pid)
		r.d.metrics.actorPassivations.Inc()
		r.d.signals.gone()
	case *releaseAll:
		r.release = m
		r.awaiting = map[string]struct{}{}
		r.each(func(h *handle) {
			r.awaiting[h.pid.Id] = struct{}{}
			ctx.Send(h.pid, &releaseAll{})
		})
		r.answered(nil)
	case *released:
		r.answered(m.from)
	}
}

// each calls fn with the handle of every live actor.
func (r *registry) each(fn func(*handle)) {
	visit := func(_, v any) bool {
		fn(v.(*handle))
		return true
	}
	r.dir.queues.Range(visit)
	r.dir.scopes.Range(visit)
}

// answered records that the actor pid needs no more waiting for by a
// shutdown in progress, and ends the shutdown's wait when it was the last.
func (r *registry) answered(pid *actor.PID) {
	if r.release == nil {
		return
	}
	if pid != nil {
		delete(r.awaiting, pid.Id)
	}
	if len(r.awaiting) == 0 {
		close(r.release.done)
		r.release, r.awaiting = nil, nil
	}
}

// HandleFailure is the registry's supervision decision for a child that
// panicked: restart it. The old incarnation first answers every request it
// held with queengo.ErrActorFailed (on actor.Restarting); the fresh one takes
// over the mailbox. The panic and its stack were logged by the actor.
func (r *registry) HandleFailure(_ *actor.ActorSystem, s actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics,
	reason, message any) {
	r.d.metrics.actorRestarts.Inc()
	r.d.log.Warn("restarting a failed actor", "actor", child.Id, "reason", fmt.Sprint(reason),
		"message", fmt.Sprintf("%T", message))
	s.RestartChildren(child)
}
