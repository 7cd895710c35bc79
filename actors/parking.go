package actors

import (
	"sync/atomic"
	"time"

	"github.com/google/uuid"
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
// Backoff.Max. A parked pop is in its key's list, oldest first, and its
// deadline in the lot's endHeap, so that parking one and expiring one cost
// O(log n) and taking one out O(1), whatever the number parked (the entry of
// a pop taken out stays until it comes up, and is then skipped). The keys'
// re-checks are in a second endHeap and the keys are indexed by partition,
// so that neither the timer's next event, nor a tick, nor a wake visits
// every key: with 2,000 consumers pinned to 2,000 partitions those visits
// were a sixth to a quarter of the broker's CPU (docs/performance.md "The dated record").
type parkingLot struct {
	backoff   Backoff
	max       int // parked pops at most; park refuses past it
	keys      map[string]*parkedKey
	rechecks  endHeap[*parkedKey] // the keys' next re-checks, and superseded ones
	deadlines endHeap[*waiter]    // the parked pops' deadlines, and entries of pops no longer parked
	// byName indexes the keys by partition name ("": the wildcard route's
	// keys), byPid the single-partition route's keys by partition id
	// (uuid.Nil: not known yet), for wake.
	byName map[string]keySet
	byPid  map[uuid.UUID]keySet
	held   []*waiter
	n      int // parked pops (held ones not included)
	// queue counts the lot's parked pops for its queue (its handle's
	// parked); nil for a discovery scope's lot.
	queue *atomic.Int64
	// total counts the parked pops of every lot of the Broker
	// (brokerMetrics.parked); nil in unit tests of the lot alone.
	total *atomic.Int64
	// backedOff counts, per group, the keys whose re-check interval grew
	// past Backoff.Initial, and nBackedOff all of them; backoffs adds them
	// up over every lot of the Broker (brokerMetrics.backoff; nil in unit
	// tests of the lot alone). They change only when a key's interval
	// does, so a parked pop costs them nothing.
	backedOff  map[string]int
	nBackedOff int
	backoffs   *backoffCounts
}

// parkedKey is the long-poll state of the parked pops of one key. A key
// outlives its pops while they claim (a re-check's pop that comes back empty
// parks again under the key's backoff): it is forgotten when its last pop
// leaves for good (answered at its deadline, or cancelled), or when its
// re-check comes and finds no pop.
type parkedKey struct {
	id               string    // its key in parkingLot.keys
	group, partition string    // its pops' (partition "" for the wildcard route)
	pid              uuid.UUID // partition's id, as its latest pop knew it
	first, last      *waiter   // its parked pops, oldest first (waiter.parkedNext)
	n                int
	empties          int // consecutive empty re-checks
	interval         time.Duration
	next             time.Time // the key's next re-check
}

// parkedAt is where a waiter is while it is parked: its key and its
// neighbours in the key's list.
type parkedAt struct {
	key                    *parkedKey // nil when not parked
	parkedPrev, parkedNext *waiter
}

// keySet is a set of keys.
type keySet map[*parkedKey]struct{}

func newParkingLot(bo Backoff, max int) parkingLot {
	return parkingLot{backoff: bo, max: max, keys: map[string]*parkedKey{},
		byName: map[string]keySet{}, byPid: map[uuid.UUID]keySet{}}
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
		k = &parkedKey{id: w.key, group: w.req.Group, partition: w.req.Partition, interval: l.backoff.Initial}
		l.keys[w.key] = k
		l.index(k)
	}
	if w.pid != uuid.Nil && w.pid != k.pid {
		l.unindexPid(k)
		k.pid = w.pid
		l.indexPid(k)
	}
	if k.next.Before(now) {
		l.after(k, now)
		l.scheduled(k)
	}
	w.parked = parkedAt{key: k, parkedPrev: k.last}
	if k.last != nil {
		k.last.parked.parkedNext = w
	} else {
		k.first = w
	}
	k.last = w
	k.n++
	l.count(1)
	l.deadlines.add(w.deadline, w, l.n, l.parkedDeadlines)
	return true
}

// index adds a new key to byName and byPid.
func (l *parkingLot) index(k *parkedKey) {
	addKey(l.byName, k.partition, k)
	l.indexPid(k)
}

// indexPid adds a key of the single-partition route to byPid.
func (l *parkingLot) indexPid(k *parkedKey) {
	if k.partition != "" {
		addKey(l.byPid, k.pid, k)
	}
}

func (l *parkingLot) unindexPid(k *parkedKey) {
	if k.partition != "" {
		dropKey(l.byPid, k.pid, k)
	}
}

// forget drops a key; its re-check entries are skipped when they come up.
func (l *parkingLot) forget(k *parkedKey) {
	l.intervalMoved(k, k.interval, l.backoff.Initial)
	delete(l.keys, k.id)
	dropKey(l.byName, k.partition, k)
	l.unindexPid(k)
}

// addKey adds k to the set of m under i.
func addKey[I comparable](m map[I]keySet, i I, k *parkedKey) {
	s := m[i]
	if s == nil {
		s = keySet{}
		m[i] = s
	}
	s[k] = struct{}{}
}

// dropKey takes k out of the set of m under i, and the set out of m when
// it is left empty.
func dropKey[I comparable](m map[I]keySet, i I, k *parkedKey) {
	if s := m[i]; s != nil {
		delete(s, k)
		if len(s) == 0 {
			delete(m, i)
		}
	}
}

// scheduled records the key's new next re-check.
func (l *parkingLot) scheduled(k *parkedKey) {
	l.rechecks.add(k.next, k, len(l.keys), l.keyRechecks)
}

// keyRechecks yields every key with its next re-check (endHeap.add's
// rebuild).
func (l *parkingLot) keyRechecks(yield func(*parkedKey, time.Time) bool) {
	for _, k := range l.keys {
		if !yield(k, k.next) {
			return
		}
	}
}

// parkedDeadlines yields every parked pop with its deadline (endHeap.add's
// rebuild).
func (l *parkingLot) parkedDeadlines(yield func(*waiter, time.Time) bool) {
	for _, k := range l.keys {
		for w := k.first; w != nil; w = w.parked.parkedNext {
			if !yield(w, w.deadline) {
				return
			}
		}
	}
}

// unpark takes the parked pop w out of its key; its deadline's entry is
// skipped when it comes up.
func (l *parkingLot) unpark(w *waiter) {
	k, at := w.parked.key, &w.parked
	if at.parkedPrev != nil {
		at.parkedPrev.parked.parkedNext = at.parkedNext
	} else {
		k.first = at.parkedNext
	}
	if at.parkedNext != nil {
		at.parkedNext.parked.parkedPrev = at.parkedPrev
	} else {
		k.last = at.parkedPrev
	}
	k.n--
	w.parked = parkedAt{}
	l.count(-1)
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
// backoff moves on), in the order of their re-checks, with the keys due
// within recheckSlack after now. A key whose re-check finds no pop is
// forgotten.
func (l *parkingLot) due(now time.Time, recheck, expired []*waiter) ([]*waiter, []*waiter) {
	for e, ok := l.deadlines.take(now); ok; e, ok = l.deadlines.take(now) {
		if w := e.key; w.parked.key != nil {
			k := w.parked.key
			l.unpark(w)
			expired = append(expired, w)
			if k.n == 0 {
				l.forget(k)
			}
		}
	}
	by := now.Add(recheckSlack)
	for e, ok := l.rechecks.take(by); ok; e, ok = l.rechecks.take(by) {
		k := e.key
		switch {
		case l.superseded(e):
		case k.n == 0:
			l.forget(k)
		default:
			w := k.first
			l.unpark(w)
			recheck = append(recheck, w)
			l.after(k, now)
			l.scheduled(k)
		}
	}
	return recheck, expired
}

// recheckSlack is how early a key may re-check to ride along with one that
// is due: each key keeps its own schedule, so without it 2,000 idle keys of
// the single-partition route re-checked in rounds of 7 pops, a claim
// statement per 7 re-checks where a round carries up to roundMax.
const recheckSlack = 20 * time.Millisecond

// wake resets the backoff of every key whose pops may claim what freed names
// (concerns; every key when freed is nil: a discovery scope's wake), so that
// each re-checks now, and releases the held pops of the groups it names into
// out: their batch may have filled. It finds the keys through the indexes:
// its cost grows with what it names, not with the keys parked.
func (l *parkingLot) wake(now time.Time, freed []freedPartition, out []*waiter) []*waiter {
	if freed == nil {
		for _, k := range l.keys {
			l.reset(k, now)
		}
	}
	for _, f := range freed {
		l.resetAll(l.byName[""], f.group, now) // the wildcard route claims any partition
		switch {
		case f.name != "":
			l.resetAll(l.byName[f.name], f.group, now)
		case f.pid != uuid.Nil:
			l.resetAll(l.byPid[f.pid], f.group, now)
			l.resetAll(l.byPid[uuid.Nil], f.group, now)
		default: // a partition known by neither: any key of the group
			for _, k := range l.keys {
				if f.group == "" || f.group == k.group {
					l.reset(k, now)
				}
			}
		}
	}
	held := l.held[:0]
	for _, w := range l.held {
		if freed == nil || concerns(freed, w.req.Group, "", uuid.Nil) {
			out = append(out, w)
		} else {
			held = append(held, w)
		}
	}
	clear(l.held[len(held):])
	l.held = held
	return out
}

// resetAll resets the keys of ks that are of group (of any group when group
// is "").
func (l *parkingLot) resetAll(ks keySet, group string, now time.Time) {
	for k := range ks {
		if group == "" || group == k.group {
			l.reset(k, now)
		}
	}
}

// reset makes the key re-check now, its backoff started over.
func (l *parkingLot) reset(k *parkedKey, now time.Time) {
	if k.empties == 0 && k.next.Equal(now) {
		return // reset already by this wake
	}
	l.intervalMoved(k, k.interval, l.backoff.Initial)
	k.empties, k.interval, k.next = 0, l.backoff.Initial, now
	l.scheduled(k)
}

// after schedules the key's next re-check after an empty one
// (Backoff.after), keeping the back-off counts.
func (l *parkingLot) after(k *parkedKey, now time.Time) {
	old := k.interval
	l.backoff.after(k, now)
	l.intervalMoved(k, old, k.interval)
}

// intervalMoved keeps the back-off counts when the re-check interval of k
// moves from old to cur (to Backoff.Initial when k leaves the lot). A key
// is in back-off while its interval is past Backoff.Initial.
func (l *parkingLot) intervalMoved(k *parkedKey, old, cur time.Duration) {
	was, is := old > l.backoff.Initial, cur > l.backoff.Initial
	c := l.backoffs
	switch {
	case was && is:
		if c != nil && cur != old {
			c.interval.Add(int64(cur - old))
		}
	case is: // keys before interval, and the reverse on the way out: see BackoffStats
		if l.backedOff == nil {
			l.backedOff = map[string]int{}
		}
		l.backedOff[k.group]++
		l.nBackedOff++
		if c != nil {
			c.keys.Add(1)
			c.interval.Add(int64(cur))
			if l.backedOff[k.group] == 1 {
				c.groups.Add(1)
			}
			if l.nBackedOff == 1 && l.queue != nil {
				c.queues.Add(1)
			}
		}
	case was:
		l.backedOff[k.group]--
		l.nBackedOff--
		if l.backedOff[k.group] == 0 {
			delete(l.backedOff, k.group)
		}
		if c != nil {
			c.interval.Add(-int64(old))
			c.keys.Add(-1)
			if _, ok := l.backedOff[k.group]; !ok {
				c.groups.Add(-1)
			}
			if l.nBackedOff == 0 && l.queue != nil {
				c.queues.Add(-1)
			}
		}
	}
}

// freedPartition is what a wake may have made claimable: a partition of a
// group (of every group when group is ""), known by its id, its name or
// both (neither: one not known here, a lost claim's).
type freedPartition struct {
	group string
	pid   uuid.UUID
	name  string
}

// concerns reports whether the parked pops of group on partition (its name
// and id; "" for the wildcard route, whose pops claim any partition) may
// claim something freed names: the rule wake finds its keys by. A pop of
// the single-partition route only looks again for its own partition: with
// 50 consumers pinned to 10 partitions, waking every key at an ack made ten
// pops claim where one could take something. A partition either side does
// not know by id concerns it.
func concerns(freed []freedPartition, group, partition string, pid uuid.UUID) bool {
	for _, f := range freed {
		switch {
		case f.group != "" && f.group != group:
		case partition == "":
			return true
		case f.name != "":
			if f.name == partition {
				return true
			}
		case f.pid == uuid.Nil, pid == uuid.Nil, f.pid == pid:
			return true
		}
	}
	return false
}

// releaseN takes up to n of the key's pops, oldest first, into out: a claim
// of a key-mate left n claimable partitions untaken, or n leases of the
// key's group ended.
func (l *parkingLot) releaseN(key string, n int, out []*waiter) []*waiter {
	k := l.keys[key]
	if k == nil {
		return out
	}
	for ; n > 0 && k.first != nil; n-- {
		w := k.first
		l.unpark(w)
		out = append(out, w)
	}
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

// remove takes a cancelled pop out of the lot, if it is parked there.
func (l *parkingLot) remove(w *waiter) {
	if k := w.parked.key; k != nil {
		l.unpark(w)
		if k.n == 0 {
			l.forget(k)
		}
	}
}

// next is the lot's earliest event: a key's re-check, a parked pop's
// deadline, a hold's end; zero when there is none. The entries of pops no
// longer parked and of superseded re-checks it meets go: every wake
// supersedes a re-check, and each such entry cost the actor a tick.
func (l *parkingLot) next() time.Time {
	l.deadlines.trim(notParked)
	l.rechecks.trim(l.superseded)
	at := earliest(l.deadlines.next(), l.rechecks.next())
	for _, w := range l.held {
		at = earliest(at, w.holdUntil)
	}
	return at
}

// notParked reports a deadline entry of a pop no longer parked.
func notParked(e keyEnd[*waiter]) bool { return e.key.parked.key == nil }

// superseded reports a re-check entry of a forgotten key, or one a later
// schedule of its key replaced.
func (l *parkingLot) superseded(e keyEnd[*parkedKey]) bool {
	return l.keys[e.key.id] != e.key || !e.at.Equal(e.key.next)
}

// drain takes every parked and held pop out of the lot into out.
func (l *parkingLot) drain(out []*waiter) []*waiter {
	n := len(out)
	for w := range l.parkedDeadlines {
		out = append(out, w)
	}
	for _, w := range out[n:] {
		w.parked = parkedAt{} // after the walk, which follows parkedNext
	}
	out = append(out, l.held...)
	l.count(-l.n)
	for _, k := range l.keys {
		l.intervalMoved(k, k.interval, l.backoff.Initial)
	}
	l.keys, l.byName, l.byPid = map[string]*parkedKey{}, map[string]keySet{}, map[uuid.UUID]keySet{}
	l.rechecks, l.deadlines = nil, nil
	l.held = nil
	return out
}

// retire takes the lot's keys out of the back-off counts when its actor
// stops: a key outlives its pops while they claim, so a passivated actor's
// lot can hold keys with no pop.
func (l *parkingLot) retire() {
	for _, k := range l.keys {
		l.intervalMoved(k, k.interval, l.backoff.Initial)
		k.interval = l.backoff.Initial
	}
}

// empty reports whether nothing is parked or held.
func (l *parkingLot) empty() bool { return l.n == 0 && len(l.held) == 0 }

func (l *parkingLot) count(d int) {
	l.n += d
	if l.total != nil {
		l.total.Add(int64(d))
	}
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
