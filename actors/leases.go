package actors

import (
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
	// leaseSweepEvery is how often booking a lease also forgets the leases
	// that ended: at most this long a dead lease stays in the book.
	leaseSweepEvery = 10 * time.Second
)

// leaseBook remembers which cursors each lease this broker process handed
// out covers, until the lease ends, so that extending it finds them by key:
// no index covers lease ids (migration 007: claims and acks then update
// cursors HOT). It is a hint: the extension checks every cursor it names in
// SQL, and a lease the book does not know is searched for among every
// cursor. Used by the actors that answer pops and by the Broker; safe for
// concurrent use.
type leaseBook struct {
	mu        sync.Mutex
	leases    map[uuid.UUID]*bookedLease
	lastSweep time.Time
}

// bookedLease is what a leaseBook knows of one lease.
type bookedLease struct {
	group string
	parts []uuid.UUID
	until time.Time // when the lease ends, as far as this process knows
}

func newLeaseBook() *leaseBook { return &leaseBook{leases: map[uuid.UUID]*bookedLease{}} }

// book records that lease covers group's cursors on parts until until, and
// forgets the leases that ended when the last sweep is leaseSweepEvery old.
func (b *leaseBook) book(lease uuid.UUID, group string, parts []uuid.UUID, until, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.lastSweep) >= leaseSweepEvery {
		b.lastSweep = now
		for id, l := range b.leases {
			if !l.until.After(now) {
				delete(b.leases, id)
			}
		}
	}
	if len(b.leases) < leaseBookMax {
		b.leases[lease] = &bookedLease{group: group, parts: parts, until: until}
	}
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
			l.parts = append(l.parts[:i], l.parts[i+1:]...)
			break
		}
	}
	if len(l.parts) == 0 {
		delete(b.leases, lease)
	}
}

// bookDelivered books the lease of a pop answered with the messages of res,
// unless it took no lease (autoAck).
func (b *leaseBook) bookDelivered(w *waiter, res *queengo.ClaimResult, now time.Time) {
	if w.req.AutoAck || len(res.Spans) == 0 {
		return
	}
	parts := make([]uuid.UUID, 0, len(res.Spans))
	var lease time.Duration
	for _, s := range res.Spans {
		parts = append(parts, s.PartitionID)
		lease = max(lease, s.Lease)
	}
	b.book(w.leaseID, w.req.Group, parts, now.Add(lease), now)
}
