package actors

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
)

// scopeKey names a discovery scope; an empty field matches any.
type scopeKey struct{ namespace, task string }

func (k scopeKey) matches(namespace, task string) bool {
	return (k.namespace == "" || k.namespace == namespace) && (k.task == "" || k.task == task)
}

type getQueue struct {
	name  string
	reply chan *actor.PID
}

type getScope struct {
	key   scopeKey
	reply chan *actor.PID
}

// queuePushed tells the registry that a segment was committed to a queue, so
// the discovery scopes containing it wake their parked pops.
type queuePushed struct {
	queue           uuid.UUID
	namespace, task string
}

// releaseAll answers every parked pop empty, for shutdown.
type releaseAll struct{ done chan struct{} }

// released is a child's answer to releaseAll.
type released struct{}

// registry is the root of the tree: it spawns (and supervises) one actor per
// queue and per discovery scope. Both live as long as the broker, so the PIDs
// the Broker caches never go stale.
type registry struct {
	b       *Broker
	queues  map[string]*actor.PID
	scopes  map[scopeKey]*actor.PID
	release *releaseAll
	waiting int
}

func newRegistry(b *Broker) *registry {
	return &registry{b: b, queues: map[string]*actor.PID{}, scopes: map[scopeKey]*actor.PID{}}
}

func (r *registry) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *getQueue:
		pid, ok := r.queues[m.name]
		if !ok {
			pid = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return newQueueActor(r.b, m.name) }))
			r.queues[m.name] = pid
		}
		m.reply <- pid
	case *getScope:
		pid, ok := r.scopes[m.key]
		if !ok {
			pid = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return newScopeActor(r.b, m.key) }))
			r.scopes[m.key] = pid
		}
		m.reply <- pid
	case *queuePushed:
		for k, pid := range r.scopes {
			if k.matches(m.namespace, m.task) {
				ctx.Send(pid, &wake{queue: m.queue})
			}
		}
	case *releaseAll:
		r.release = m
		r.waiting = len(r.queues) + len(r.scopes)
		for _, pid := range r.queues {
			ctx.Request(pid, &releaseAll{})
		}
		for _, pid := range r.scopes {
			ctx.Request(pid, &releaseAll{})
		}
		r.maybeReleased()
	case *released:
		r.waiting--
		r.maybeReleased()
	}
}

func (r *registry) maybeReleased() {
	if r.release != nil && r.waiting <= 0 {
		close(r.release.done)
		r.release = nil
	}
}
