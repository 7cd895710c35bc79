package actors

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/queengo/queengo"
)

// popScheduler is the pop side that queue and scope actors share: the pops
// waiting for a claim round (pending), the rounds in flight, the parking lot,
// and the one timer that points at the actor's next event. The actor decides
// how a pop becomes a claim and what a round's outcome means for each pop;
// the scheduler keeps the pops until then and answers them. Only used by its
// actor's goroutine.
type popScheduler struct {
	d       *deps
	pending []*waiter
	rounds  []*claimRound // in flight
	lot     parkingLot
	closing bool // releaseAll came: pops answer empty from now on
	timer   timer
	timerAt time.Time // when the timer fires; zero when it is not armed
	expired []*waiter // scratch for due
}

func newPopScheduler(d *deps) popScheduler {
	lot := newParkingLot(d.backoff, d.maxParked)
	lot.total = &d.metrics.parked
	lot.backoffs = &d.metrics.backoff
	return popScheduler{d: d, lot: lot}
}

// add takes a pop that reached the actor; its long-poll deadline starts now.
// A pop that finds deps.maxParked pops already waiting here (parked, or
// pending a round) answers queengo.ErrTooManyParked, so the actor's waiter
// lists stay bounded whatever its clients send.
func (s *popScheduler) add(w *waiter, now time.Time) {
	if s.closing {
		answer(w, popReply{})
		return
	}
	if len(s.pending)+s.lot.n >= s.d.maxParked {
		s.d.metrics.parkRefused.Inc()
		answer(w, popReply{err: queengo.ErrTooManyParked})
		return
	}
	w.arrived = now
	if w.req.Wait {
		w.deadline = now.Add(w.req.Timeout)
	}
	s.pending = append(s.pending, w)
}

// canStart reports whether the actor may start another claim round.
func (s *popScheduler) canStart() bool { return len(s.rounds) < s.d.claimsInFlight }

// take returns the pops of the next claim round, the ones waiting longest
// first (a round hands partitions out in its pops' order, so a parked pop a
// wake released keeps its turn over pops that came after it): nil when
// none is pending or the actor runs as many rounds as it may.
//
// While pop maintenance is on (D11) it returns nil and no pop claims: the
// pending ones park until their deadline, or answer empty.
func (s *popScheduler) take() []*waiter {
	if len(s.pending) == 0 || !s.canStart() {
		return nil
	}
	if s.d.popMaintenance != nil && s.d.popMaintenance.Load() {
		now := s.d.clock.Now()
		for _, w := range s.pending {
			if !w.cancelled {
				s.empty(w, now)
			}
		}
		clear(s.pending)
		s.pending = s.pending[:0]
		return nil
	}
	slices.SortStableFunc(s.pending, func(a, b *waiter) int { return a.arrived.Compare(b.arrived) })
	n := min(len(s.pending), roundMax)
	ws := append([]*waiter(nil), s.pending[:n]...)
	rest := copy(s.pending, s.pending[n:])
	clear(s.pending[rest:])
	s.pending = s.pending[:rest]
	return ws
}

// started records a round the actor started.
func (s *popScheduler) started(r *claimRound) { s.rounds = append(s.rounds, r) }

// finished forgets a round that came back; false means it is not this
// scheduler's (it was started by an incarnation of the actor that failed).
func (s *popScheduler) finished(r *claimRound) bool {
	for i, x := range s.rounds {
		if x == r {
			s.rounds = append(s.rounds[:i], s.rounds[i+1:]...)
			return true
		}
	}
	return false
}

// empty answers a pop that found nothing, or parks it: a long poll before
// its deadline. A full parking lot answers queengo.ErrTooManyParked.
func (s *popScheduler) empty(w *waiter, now time.Time) {
	if s.closing || !w.req.Wait || !now.Before(w.deadline) {
		answer(w, popReply{})
		return
	}
	if !s.lot.park(w, now) {
		s.d.metrics.parkRefused.Inc()
		answer(w, popReply{err: queengo.ErrTooManyParked})
	}
}

// due moves the parked pops whose re-check is due to pending and answers
// the ones whose deadline passed.
func (s *popScheduler) due(now time.Time) {
	s.pending, s.expired = s.lot.due(now, s.pending, s.expired)
	for _, w := range s.expired {
		answer(w, popReply{})
	}
	clear(s.expired)
	s.expired = s.expired[:0]
}

// wake makes the parked pops that may claim what freed names (anything
// when freed is nil) re-check now, and the held ones of its groups look
// again: n partitions may have become claimable (a commit, an ack that ended
// a lease). The rounds in flight are told: up to n of their pops that come
// back with nothing look again at once rather than park, and their held pops
// look again rather than wait for the hold's end. Only n, because a
// partition serves one pop of a group at a time: when every pop of a round
// in flight looked again for one freed partition, 40 consumers parked on 10
// partitions at batch 1 claimed in a loop for every ack.
func (s *popScheduler) wake(now time.Time, n int, freed []freedPartition) {
	for _, r := range s.rounds {
		r.wakes = min(r.wakes+n, roundMax)
	}
	s.pending = s.lot.wake(now, freed, s.pending)
	s.due(now)
}

// emptyAfter is empty for a pop whose round r found nothing: a long poll
// whose round a wake reached looks again at once instead of parking, as
// many as the wake freed partitions.
func (s *popScheduler) emptyAfter(r *claimRound, w *waiter, now time.Time) {
	if r.wakes > 0 && !s.closing && w.req.Wait && now.Before(w.deadline) {
		r.wakes--
		s.pending = append(s.pending, w)
		return
	}
	s.empty(w, now)
}

// hold keeps a pop whose round r found fewer messages than its
// minPopWaitTime batch until the hold ends or a wake; one whose round a
// wake reached looks again at once (a push meanwhile may fill its batch).
// After releaseAll it answers empty: nothing looks at the lot again.
func (s *popScheduler) hold(r *claimRound, w *waiter) {
	if s.closing {
		answer(w, popReply{})
		return
	}
	if r.wakes > 0 {
		s.pending = append(s.pending, w)
		return
	}
	s.lot.hold(w)
}

// cancel drops a pop whose client went away. A claim in flight for it goes
// on; what it takes is abandoned (deps.abandoned), as is what an answer the
// client never read carried.
func (s *popScheduler) cancel(w *waiter) {
	s.d.metrics.popsCancelled.Inc()
	if w.answered {
		// Answered before the cancel came, and never read: Broker.Pop
		// stopped reading when it sent the cancel.
		select {
		case r := <-w.reply:
			if len(r.res.Messages) > 0 {
				s.d.abandoned(w)
			}
		default:
		}
		return
	}
	w.cancelled = true
	s.lot.remove(w)
}

// arm points the timer at the earliest of the lot's next event and also
// (zero: none), unless it already fires earlier.
func (s *popScheduler) arm(ctx actor.Context, also time.Time) {
	at := earliest(s.lot.next(), also)
	if at.IsZero() || s.closing {
		return
	}
	if !s.timerAt.IsZero() && !at.Before(s.timerAt) {
		return
	}
	s.timerAt = at
	d := at.Sub(s.d.clock.Now())
	if s.timer == nil {
		self, root := ctx.Self(), ctx.ActorSystem().Root
		s.timer = s.d.clock.AfterFunc(d, func() { root.Send(self, tickMsg) })
		return
	}
	s.timer.Reset(d)
}

// ticked records that the timer fired.
func (s *popScheduler) ticked() { s.timerAt = time.Time{} }

// releaseAll answers every pop empty and makes later ones answer empty at
// once: the broker is shutting down. Pops in a claim round are answered when
// it comes back.
func (s *popScheduler) releaseAll() {
	s.closing = true
	for _, w := range s.lot.drain(s.pending) {
		answer(w, popReply{})
	}
	s.pending = nil
	s.stop()
}

// failAll answers every pop the scheduler holds with err: the actor failed.
// The pops of rounds in flight that claim messages get them instead
// (claimRound.orphan).
func (s *popScheduler) failAll(err error) {
	for _, r := range s.rounds {
		r.orphan(s.d, err)
	}
	for _, w := range s.lot.drain(s.pending) {
		answer(w, popReply{err: err})
	}
	s.pending, s.rounds = nil, nil
	s.stop()
}

// idle reports whether the scheduler holds no pop.
func (s *popScheduler) idle() bool {
	return len(s.pending) == 0 && len(s.rounds) == 0 && s.lot.empty()
}

// stop ends the scheduler with its actor (passivated, released or failed):
// its timer, and its lot's keys' part of the back-off counts.
func (s *popScheduler) stop() {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.lot.retire()
}

// answer replies to a pop once; a cancelled pop's client is gone.
func answer(w *waiter, r popReply) {
	if w.answered || w.cancelled {
		return
	}
	w.answered = true
	w.reply <- r
}
