package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// The Broker is the HTTP layer's only way into the domain: next to Push, Pop,
// Ack, Transaction and RequeueDeadLetter (broker.go), the methods below are
// the rest of what a route needs. Each that writes tells the actors what
// changed itself, so no caller has to remember to. Failures are the errors of
// package queengo, wrapped; only package http turns them into text.

// Configure replaces the options of a queue (a full replace), creating the
// queue and its Default partition when they do not exist, and makes the
// queue's actor reload them. It returns the stored queue and the id of its
// Default partition.
func (b *Broker) Configure(ctx context.Context, name, namespace, task string, o queengo.QueueOptions) (queengo.Queue, uuid.UUID, error) {
	q, pid, err := b.cfg.Store.Configure(ctx, name, namespace, task, o)
	if err != nil {
		return q, pid, err
	}
	b.queueChanged(name, false)
	return q, pid, nil
}

// DeleteQueue removes a queue and everything under it, and makes the queue's
// actor drop what it cached of it (settings, partitions). It reports whether
// the queue existed.
func (b *Broker) DeleteQueue(ctx context.Context, name string) (existed bool, err error) {
	existed, err = b.cfg.Store.DeleteQueue(ctx, name)
	if err != nil {
		return false, err
	}
	b.queueChanged(name, true)
	b.stats.drop()
	return existed, nil
}

// queueChanged tells the queue's actor, here and in the other broker
// processes on the database, that its row was created, replaced or deleted
// by this process, so they read it again.
func (b *Broker) queueChanged(name string, deleted bool) {
	b.system.Root.Send(b.queuePID(name), &queueChanged{deleted: deleted})
	if b.cross != nil {
		b.cross.changed(name, deleted)
	}
}

// ExtendLease extends every live span of the lease to at least now+seconds;
// it never shortens one. It returns the earliest new expiry (RFC 3339,
// milliseconds) or, when the lease is not live, an empty expiry and the
// failure (a per-item result on the wire, not an error). The extension
// rides in the next ack commit (ackCoalescer), or starts one at once when
// none is in flight; past the request timeout (or ctx's deadline, when
// earlier) it fails with queengo.ErrTimeout, and may still be applied. The
// lease's cursors go along when this process handed the lease out
// (leaseBook). Otherwise PostgreSQL looks for them among every cursor, in a
// transaction of its own: a scan must not hold up the shared ack commit.
func (b *Broker) ExtendLease(ctx context.Context, lease uuid.UUID, seconds int) (string, queengo.AckFailure, error) {
	ctx, cancel := requestBound(ctx, b.cfg.RequestTimeout)
	defer cancel()
	var (
		e   queengo.LeaseExtension
		err error
	)
	if cursors := b.leases.cursors(lease); cursors != nil {
		e, err = b.acks.extend(ctx, queengo.LeaseExtend{Lease: lease, Seconds: seconds, Cursors: cursors})
	} else {
		var ext []queengo.LeaseExtension
		_, ext, err = b.cfg.Store.AckExtend(ctx, nil, []queengo.LeaseExtend{{Lease: lease, Seconds: seconds}})
		switch {
		case err == nil && len(ext) == 1:
			e = ext[0]
		case err == nil:
			err = fmt.Errorf("extend: %d results for one lease", len(ext))
		}
	}
	if err == nil && e.Failure == "" {
		b.leases.extended(lease, time.Now().Add(time.Duration(seconds)*time.Second))
	}
	return e.ExpiresAt, e.Failure, err
}

// PopMaintenance reads the pop maintenance switch as stored, the state every
// broker process on the database converges to within MaintenanceRefresh.
func (b *Broker) PopMaintenance(ctx context.Context) (bool, error) {
	return b.cfg.Store.PopMaintenance(ctx)
}

// SetPopMaintenance switches pop maintenance for every broker process on the
// database; here it applies at once, elsewhere at their next refresh.
func (b *Broker) SetPopMaintenance(ctx context.Context, on bool) error {
	if err := b.cfg.Store.SetPopMaintenance(ctx, on); err != nil {
		return err
	}
	b.popSwitch.Lock()
	b.popSwitchedAt = time.Now()
	b.storePopMaintenance(on)
	b.popSwitch.Unlock()
	return nil
}

// ListDeadLetters returns one page of the dead letters f selects, newest
// failure first, and how many match in all.
func (b *Broker) ListDeadLetters(ctx context.Context, f queengo.DLQFilter) ([]queengo.DeadLetter, int, error) {
	return b.cfg.Store.ListDeadLetters(ctx, f)
}

// DeleteDeadLetter removes a dead letter, or fails with an error wrapping
// queengo.ErrNotFound when there is none. The offset stays resolved.
func (b *Broker) DeleteDeadLetter(ctx context.Context, id uuid.UUID) error {
	err := b.cfg.Store.DeleteDeadLetter(ctx, id)
	if err == nil {
		b.stats.drop()
	}
	return err
}

// GetMessage returns the management view of one message (D10), or an error
// wrapping queengo.ErrNotFound.
func (b *Broker) GetMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageInfo, error) {
	return b.cfg.Store.GetMessage(ctx, partition, txid)
}

// SetSubscription makes the group's durable subscription start at ts on
// every queue it has a record or a cursor on (D6); it returns how many
// records it wrote, or an error wrapping queengo.ErrNotFound for a group
// with neither. Cursors that exist keep their position.
func (b *Broker) SetSubscription(ctx context.Context, group string, ts time.Time) (int, error) {
	n, err := b.cfg.Store.SetSubscription(ctx, group, ts)
	if err == nil {
		b.stats.drop() // the group list shows the subscription
	}
	return n, err
}

// Health reports whether the database answers a trivial statement.
func (b *Broker) Health(ctx context.Context) error { return b.cfg.Store.Ping(ctx) }

// PoolStats reports the database pool's (total, idle, acquired) connections.
func (b *Broker) PoolStats() (total, idle, acquired int32) { return b.cfg.Store.PoolStats() }

// PushMaintenance reads the push maintenance switch as stored (D11): while
// it is on, every broker process writes pushes to its file buffer.
func (b *Broker) PushMaintenance(ctx context.Context) (bool, error) {
	if b.buf.sw == nil {
		return false, nil
	}
	return b.buf.sw.PushMaintenance(ctx)
}

// SetPushMaintenance switches push maintenance for every broker process on
// the database; here it applies at once, elsewhere at their next refresh.
// Switched off, each process replays its buffer into PostgreSQL, in order.
func (b *Broker) SetPushMaintenance(ctx context.Context, on bool) error {
	if b.buf.sw == nil {
		return fmt.Errorf("%w: push maintenance is not available", queengo.ErrNoBuffer)
	}
	if err := b.buf.sw.SetPushMaintenance(ctx, on); err != nil {
		return err
	}
	b.buf.switchedAt.Store(time.Now().UnixNano())
	b.buf.setMaintenance(on)
	return nil
}

// BufferStats reports this process's file buffer.
func (b *Broker) BufferStats() queengo.BufferStats { return b.buf.stats() }

// PushMaintenanceOn is the push maintenance switch as this process applies
// it (re-read every MaintenanceRefresh).
func (b *Broker) PushMaintenanceOn() bool { return b.buf.maint.Load() }
