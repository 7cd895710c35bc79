package actors

import "sync/atomic"

const (
	// warmIdleMax caps the workers a warmPool keeps waiting for work. A
	// worker costs its stack (a few KiB to a few tens); the pool needs
	// about as many as actors and claim rounds run at once.
	warmIdleMax = 256
	// actorThroughput is how many messages an actor handles before its
	// mailbox yields the goroutine: Proto.Actor's default.
	actorThroughput = 300
)

// warmPool runs functions on goroutines it keeps, where `go f()` starts a
// new one per call. A new goroutine starts with a small stack and grows it
// by copying it each time it goes deeper, and an actor's receive and a
// database call go deep: with a goroutine per mailbox run (Proto.Actor's
// dispatcher) and per claim round, that copying was 7% of the broker's CPU
// consuming at batch 1 (docs/performance.md "The dated record": "2026-12-07,
// morning: kept goroutines"). The pool runs those, segment commits and ack commits. A
// worker that finished waits for the next function unless warmIdleMax
// already wait; once closed, a worker runs what it was given and exits.
// Safe for concurrent use.
type warmPool struct {
	work    chan func()
	quit    chan struct{}
	closed  atomic.Bool
	idle    atomic.Int32 // workers waiting for work
	started atomic.Int64 // workers started, for tests
}

func newWarmPool() *warmPool {
	return &warmPool{work: make(chan func()), quit: make(chan struct{})}
}

// Go runs f on a waiting worker, or on a new one when none waits; a nil
// pool starts a goroutine per call.
func (p *warmPool) Go(f func()) {
	if p == nil {
		go f()
		return
	}
	select {
	case p.work <- f:
	default:
		p.started.Add(1)
		go p.worker(f)
	}
}

func (p *warmPool) worker(f func()) {
	for {
		f()
		if p.idle.Add(1) > warmIdleMax {
			p.idle.Add(-1)
			return
		}
		select {
		case f = <-p.work:
			p.idle.Add(-1)
		case <-p.quit:
			p.idle.Add(-1)
			return
		}
	}
}

// close makes the waiting workers exit; Go still runs what it is given.
func (p *warmPool) close() {
	if p != nil && !p.closed.Swap(true) {
		close(p.quit)
	}
}

// Schedule and Throughput make the pool the dispatcher of the queue and
// scope actors (actor.Dispatcher): each run of a mailbox goes to Go.
func (p *warmPool) Schedule(f func()) { p.Go(f) }

func (p *warmPool) Throughput() int { return actorThroughput }
