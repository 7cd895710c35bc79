package actors

import (
	"context"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// abandoned ends the lease of w, an abandoned pop: its client left
// (Broker.Pop's context ended, the long poll's socket hung up) after its
// claim took messages, while the claim round was out or just before the
// cancel came. Nobody reads its answer, so the lease is ended at once instead
// of hiding the messages until it runs out (the queue's leaseTime). The
// lease must be booked (leaseBook.bookDelivered); it ends in the ack
// coalescer's next commit, on a goroutine of its own, and the book then
// offers its partitions to their groups at its next look
// (Broker.watchLeases), here and in the other processes, as for a lease
// that ran out. An autoAck pop has no lease: its claim committed the
// messages, which are gone with its client.
func (d *deps) abandoned(w *waiter) {
	if w.req.AutoAck {
		d.metrics.popsAbandoned.Inc()
		return
	}
	d.abandonLease(w.leaseID)
}

// abandonLease ends lease, which an abandoned pop took (deps.abandoned).
func (d *deps) abandonLease(lease uuid.UUID) {
	d.metrics.popsAbandoned.Inc()
	cursors := d.leases.cursors(lease)
	if cursors == nil {
		return // not booked (the book is full): it runs out
	}
	go d.endLease(lease, cursors)
}

// Abandon ends at once the lease of res, the answer of a pop whose client
// was found gone just before the answer was written (the long-poll watcher
// looks only every so often): as for a pop whose client left while its
// claim was out (deps.abandoned), nobody would see those messages until the
// lease ran out. An autoAck answer has no lease: its messages are gone with
// the client.
func (b *Broker) Abandon(res queengo.PopResult) {
	lease, err := uuid.Parse(res.LeaseID)
	if err != nil {
		b.metrics.popsAbandoned.Inc()
		return
	}
	b.d.abandonLease(lease)
}

// endLease ends lease in the database, then in the book.
func (d *deps) endLease(lease uuid.UUID, cursors []queengo.CursorKey) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	e, err := d.acks.extend(ctx, queengo.LeaseExtend{Lease: lease, End: true, Cursors: cursors})
	switch {
	case err != nil:
		d.log.Warn("ending the lease of an abandoned pop failed; it runs out instead", "lease", lease, "error", err)
	case e.Failure == "":
		d.leases.ended(lease, d.clock.Now())
	}
}
