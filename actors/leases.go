package actors

import (
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

const (
	// leaseBookMax caps the leases a leaseBook remembers; past it a new
	// lease is not booked, and extending it scans every cursor instead. At
	// about 150 bytes a lease, a full book is about 150 MB.
	leaseBookMax = 1 << 20
	// offsetBookMax caps the delivered messages whose offsets a leaseBook
	// remembers; past it a delivery books its lease but not its offsets,
	// and acking those messages looks them up by transaction id. At about
	// 100 bytes a message, a full book is about 100 MB.
	offsetBookMax = 1 << 20
)

// leaseBook remembers which cursors each lease this broker process handed
// out covers, until the lease ends, so that extending it finds them by key:
// no index covers lease ids (migration 007: claims and acks then update
// cursors HOT). It is a hint: the extension checks every cursor it names in
// SQL, and a lease the book does not know is searched for among every
// cursor. Used by the actors that answer pops and by the Broker; safe for
// concurrent use.
type leaseBook struct {
	mu     sync.Mutex
	leases map[uuid.UUID]*bookedLease
	// offsets holds the offset of every message delivered under a booked
	// lease, so that an ack naming that lease spares the store the lookup
	// by transaction id (queen.ack's p_offsets; fillOffsets says when an
	// entry is used). It is forgotten with the lease it was delivered under.
	offsets map[txKey]bookedOffset
	// ends orders the leases' ends, for expire.
	ends endHeap[uuid.UUID]
}

// bookedLease is what a leaseBook knows of one lease.
type bookedLease struct {
	queue string // the queue of every cursor it covers; "" when several
	// full: the pop that took it got its whole batch, so its partitions
	// likely hold more for the next pop of the group.
	full  bool
	group string
	parts []uuid.UUID
	// queues names the queue of each of parts when the lease covers
	// several (queue ""); nil otherwise.
	queues []string
	until  time.Time // when the lease ends, as far as this process knows
	msgs   []txKey   // the messages delivered under it whose offsets are booked
}

// txKey names a message as an ack does: its partition and transaction id.
type txKey struct {
	partition uuid.UUID
	txid      string
}

// bookedOffset is a delivered message's offset and the lease it was last
// delivered under.
type bookedOffset struct {
	offset int64
	lease  uuid.UUID
}

func newLeaseBook() *leaseBook {
	return &leaseBook{leases: map[uuid.UUID]*bookedLease{}, offsets: map[txKey]bookedOffset{}}
}

// book records lease as l describes it (its msgs unset), with the offsets
// of msgs, the messages delivered under it.
func (b *leaseBook) book(lease uuid.UUID, l bookedLease, msgs []queengo.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.leases) < leaseBookMax {
		b.leases[lease] = &l
		b.bookOffsets(lease, msgs)
		b.ends.add(l.until, lease, len(b.leases), b.liveEnds)
	}
}

// liveEnds yields every booked lease with its end. b.mu must be held.
func (b *leaseBook) liveEnds(yield func(uuid.UUID, time.Time) bool) {
	for id, l := range b.leases {
		if !yield(id, l.until) {
			return
		}
	}
}

// endedLease is a lease that ended without its spans being released: its
// partitions (of queues[i], or all of queue) are claimable again for group.
type endedLease struct {
	queue, group string
	parts        []uuid.UUID
	queues       []string
}

// expire forgets the leases that ended by now, as far as this process
// knows, and returns those an ack had not released. The first expire at or
// after a lease's end (or its extension's) finds it.
func (b *leaseBook) expire(now time.Time) []endedLease {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []endedLease
	for e, ok := b.ends.take(now); ok; e, ok = b.ends.take(now) {
		l := b.leases[e.key]
		switch {
		case l == nil: // released
		case l.until.After(now): // extended
			b.ends.add(l.until, e.key, len(b.leases), b.liveEnds)
		default:
			out = append(out, endedLease{queue: l.queue, group: l.group, parts: l.parts, queues: l.queues})
			b.forget(e.key, l, uuid.Nil)
		}
	}
	return out
}

// forget drops lease from the book, with the offsets of its messages on
// partition (every partition when partition is uuid.Nil). b.mu must be
// held.
func (b *leaseBook) forget(lease uuid.UUID, l *bookedLease, partition uuid.UUID) {
	kept := l.msgs[:0]
	for _, k := range l.msgs {
		if partition != uuid.Nil && k.partition != partition {
			kept = append(kept, k)
			continue
		}
		// A later delivery of the message under another lease owns the
		// entry now.
		if o, ok := b.offsets[k]; ok && o.lease == lease {
			delete(b.offsets, k)
		}
	}
	l.msgs = kept
	if partition == uuid.Nil || len(l.parts) == 0 {
		delete(b.leases, lease)
	}
}

// bookOffsets records the offsets of msgs, delivered under lease, which
// must be booked. b.mu must be held.
func (b *leaseBook) bookOffsets(lease uuid.UUID, msgs []queengo.Message) {
	if len(b.offsets)+len(msgs) > offsetBookMax {
		return
	}
	l := b.leases[lease]
	l.msgs = slices.Grow(l.msgs, len(msgs))
	for _, m := range msgs {
		k := txKey{partition: m.PartitionID, txid: m.TransactionID}
		b.offsets[k] = bookedOffset{offset: m.Offset, lease: lease}
		l.msgs = append(l.msgs, k)
	}
}

// fillOffsets sets the Offset of each item whose message the book knows
// and that names the lease it was delivered under. queen.ack trusts such an
// offset only while that lease is live, which keeps the message at its
// offset; an item naming no lease, or another one, is looked up by its
// transaction id (the book may hold an entry of a lease that has ended
// without it knowing yet). It returns the queue of the items when every one
// of them names a booked lease of that queue and the group the lease was
// taken for, "" otherwise.
func (b *leaseBook) fillOffsets(items []queengo.AckItem) (queue string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	one := true // every item so far names a booked lease of queue and its group
	for i := range items {
		it := &items[i]
		if o, ok := b.offsets[txKey{partition: it.PartitionID, txid: it.TransactionID}]; ok &&
			it.LeaseID != uuid.Nil && o.lease == it.LeaseID {
			it.Offset = o.offset
		}
		if l := b.leases[it.LeaseID]; one && it.LeaseID != uuid.Nil && l != nil && l.full && l.group == it.Group &&
			(i == 0 || l.queue == queue) {
			queue = l.queue
		} else {
			one = false
		}
	}
	if !one {
		return ""
	}
	return queue
}

// cursors returns the cursors lease covers, nil when the book does not know
// it.
func (b *leaseBook) cursors(lease uuid.UUID) []queengo.CursorKey {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.leases[lease]
	if l == nil {
		return nil
	}
	out := make([]queengo.CursorKey, len(l.parts))
	for i, p := range l.parts {
		out[i] = queengo.CursorKey{Partition: p, Group: l.group}
	}
	return out
}

// extended records that lease lives at least until until.
func (b *leaseBook) extended(lease uuid.UUID, until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.leases[lease]; l != nil && until.After(l.until) {
		l.until = until
	}
}

// ended records that lease ended at at, before its time (its pop was
// abandoned): the first expire at or after at offers its partitions, as
// for a lease that ran out.
func (b *leaseBook) ended(lease uuid.UUID, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.leases[lease]; l != nil {
		l.until = at
		b.ends.add(at, lease, len(b.leases), b.liveEnds)
	}
}

// released records that lease no longer covers partition (an ack resolved
// its span there), and forgets the lease when it covers nothing more.
func (b *leaseBook) released(lease, partition uuid.UUID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.leases[lease]
	if l == nil {
		return
	}
	for i, p := range l.parts {
		if p == partition {
			l.parts = slices.Delete(l.parts, i, i+1)
			if l.queues != nil {
				l.queues = slices.Delete(l.queues, i, i+1)
			}
			break
		}
	}
	b.forget(lease, l, partition)
}

// bookDelivered books the lease of a pop answered with the messages of res,
// unless it took no lease (autoAck).
func (b *leaseBook) bookDelivered(w *waiter, res *queengo.ClaimResult, now time.Time) {
	if w.req.AutoAck || len(res.Spans) == 0 {
		return
	}
	parts := make([]uuid.UUID, 0, len(res.Spans))
	var lease time.Duration
	queue := res.Spans[0].Queue
	for _, s := range res.Spans {
		parts = append(parts, s.PartitionID)
		lease = max(lease, s.Lease)
		if s.Queue != queue {
			queue = ""
		}
	}
	var queues []string
	if queue == "" {
		for _, s := range res.Spans {
			queues = append(queues, s.Queue)
		}
	}
	b.book(w.leaseID, bookedLease{queue: queue, full: len(res.Messages) >= w.req.Batch, group: w.req.Group,
		parts: parts, queues: queues, until: now.Add(lease)}, res.Messages)
}
