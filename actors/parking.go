package actors

import (
	"sync/atomic"
	"time"
)

// parkingLot keeps the pops of one actor that wait for something: long polls
// that found nothing (parked, under a key, with a backoff and a deadline) and
// pops minPopWaitTime holds back until their batch could fill (held). Its
// methods are pure: they take the time and return the pops to act on; the
// actor answers them or sends them to a claim round.
//
// Parked pops with the same (group, partition) key would all see the same
// thing, so one of them re-checks on the key's backoff schedule for the
// whole key: 10,000 idle long polls on one queue cost one claim per
// Backoff.Max.
type parkingLot struct {
	backoff Backoff
	max     int // parked pops at most; park refuses past it
	keys    map[string]*parkedKey
	held    []*waiter
	n       int // parked pops (held ones not included)
	// queue counts the lot's parked pops for its queue (its handle's
	// parked); nil for a discovery scope's lot.
	queue *atomic.Int64
}

// parkedKey is the long-poll state of the parked pops of one key.
type parkedKey struct {
	waiters  []*waiter
	empties  int // consecutive empty re-checks
	interval time.Duration
	next     time.Time // the key's next re-check
	// minDeadline is at or before the earliest deadline of the waiters, so
	// the waiters are scanned only when one may have expired.
	minDeadline time.Time
}

func newParkingLot(bo Backoff, max int) parkingLot {
	return parkingLot{backoff: bo, max: max, keys: map[string]*parkedKey{}}
}

// park parks w, a long poll whose claim found nothing. It reports false, and
// parks nothing, when the lot already holds its maximum.
func (l *parkingLot) park(w *waiter, now time.Time) bool {
	if l.n >= l.max {
		return false
	}
	if w.key == "" {
		w.key = w.req.Group + "\x00" + w.req.Partition
	}
	k := l.keys[w.key]
	if k == nil {
		k = &parkedKey{interval: l.backoff.Initial}
		l.keys[w.key] = k
	}
	if k.next.Before(now) {
		l.backoff.after(k, now)
	}
	k.waiters = append(k.waiters, w)
	if k.minDeadline.IsZero() || w.deadline.Before(k.minDeadline) {
		k.minDeadline = w.deadline
	}
	l.count(1)
	return true
}

// after schedules the key's next re-check after an empty one: every Initial
// until Threshold empty checks, then growing by Multiplier per empty check
// up to Max.
func (bo Backoff) after(k *parkedKey, now time.Time) {
	k.empties++
	if k.empties > bo.Threshold {
		k.interval = time.Duration(float64(k.interval) * bo.Multiplier)
		if k.interval > bo.Max {
			k.interval = bo.Max
		}
	}
	k.next = now.Add(k.interval)
}

// due takes out of the lot, as of now, the parked pops whose deadline passed
// (appended to expired: they answer empty) and one pop of every key whose
// re-check is due (appended to recheck: it claims for the whole key, whose
// backoff moves on). Keys left without pops are forgotten.
func (l *parkingLot) due(now time.Time, recheck, expired []*waiter) ([]*waiter, []*waiter) {
	for key, k := range l.keys {
		if !now.Before(k.minDeadline) {
			live := k.waiters[:0]
			k.minDeadline = time.Time{}
			for _, w := range k.waiters {
				switch {
				case w.cancelled:
				case !now.Before(w.deadline):
					expired = append(expired, w)
				default:
					live = append(live, w)
					if k.minDeadline.IsZero() || w.deadline.Before(k.minDeadline) {
						k.minDeadline = w.deadline
					}
				}
			}
			l.count(len(live) - len(k.waiters))
			clear(k.waiters[len(live):])
			k.waiters = live
		}
		if len(k.waiters) == 0 {
			delete(l.keys, key)
			continue
		}
		if !now.Before(k.next) {
			recheck = append(recheck, k.waiters[0])
			k.waiters = k.waiters[1:]
			l.count(-1)
			l.backoff.after(k, now)
		}
	}
	return recheck, expired
}

// wake resets every key's backoff so that each re-checks now (a push in
// scope), and releases every held pop into out: its batch may have filled.
func (l *parkingLot) wake(now time.Time, out []*waiter) []*waiter {
	for _, k := range l.keys {
		k.empties, k.interval, k.next = 0, l.backoff.Initial, now
	}
	out = append(out, l.held...)
	clear(l.held)
	l.held = l.held[:0]
	return out
}

// releaseN takes up to n of the key's pops, oldest first, into out: a claim
// of a key-mate left n claimable partitions untaken, or n leases of the
// key's group ended.
func (l *parkingLot) releaseN(key string, n int, out []*waiter) []*waiter {
	k := l.keys[key]
	if k == nil {
		return out
	}
	n = min(n, len(k.waiters))
	out = append(out, k.waiters[:n]...)
	k.waiters = append(k.waiters[:0], k.waiters[n:]...)
	l.count(-n)
	return out
}

// hold keeps w until w.holdUntil, or until a wake, whichever comes first.
func (l *parkingLot) hold(w *waiter) { l.held = append(l.held, w) }

// holdsDue releases into out the held pops whose hold ended by now, and
// forgets the cancelled ones.
func (l *parkingLot) holdsDue(now time.Time, out []*waiter) []*waiter {
	held := l.held[:0]
	for _, w := range l.held {
		switch {
		case w.cancelled:
		case !now.Before(w.holdUntil):
			out = append(out, w)
		default:
			held = append(held, w)
		}
	}
	clear(l.held[len(held):])
	l.held = held
	return out
}

// remove takes a cancelled pop out of its key.
func (l *parkingLot) remove(w *waiter) {
	k := l.keys[w.key]
	if k == nil {
		return
	}
	for i, x := range k.waiters {
		if x == w {
			k.waiters = append(k.waiters[:i], k.waiters[i+1:]...)
			l.count(-1)
			return
		}
	}
}

// next is the lot's earliest event: a key's re-check or a deadline that may
// have passed, a hold's end; zero when the lot is empty.
func (l *parkingLot) next() time.Time {
	var at time.Time
	for _, k := range l.keys {
		at = earliest(at, k.next)
		at = earliest(at, k.minDeadline)
	}
	for _, w := range l.held {
		at = earliest(at, w.holdUntil)
	}
	return at
}

// drain takes every parked and held pop out of the lot into out.
func (l *parkingLot) drain(out []*waiter) []*waiter {
	for _, k := range l.keys {
		out = append(out, k.waiters...)
	}
	out = append(out, l.held...)
	l.count(-l.n)
	l.keys = map[string]*parkedKey{}
	l.held = nil
	return out
}

// empty reports whether nothing is parked or held.
func (l *parkingLot) empty() bool { return l.n == 0 && len(l.held) == 0 }

func (l *parkingLot) count(d int) {
	l.n += d
	parked.Add(int64(d))
	if l.queue != nil {
		l.queue.Add(int64(d))
	}
}

// earliest returns the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
