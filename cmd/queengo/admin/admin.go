// Package admin is the operator's side of the broker: the reads behind the
// status, resource, consumer-group, message, dead-letter and trace routes,
// and the operator's writes (configure and delete a queue, seek and delete
// a group, clear a queue, delete, retry or dead-letter a message, requeue
// or delete a dead letter, the pop maintenance switch, durable
// subscriptions).
//
// It talks to the database only through the Store interface it declares.
// A write tells whoever must know itself, so no caller has to remember to:
// the data path through Hooks (a queue's options changed, a group moved, a
// partition may be claimable again, pop maintenance switched), the shared
// dashboard figures by dropping them. Failures are the errors of package
// queengo, wrapped; only package http turns them into text.
package admin

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/cmd/queengo/jobs"
)

// Store is what the operator's routes need of the database layer (package
// pg). Failures are the errors of package queengo (ErrNotFound, ErrPool,
// ErrTimeout, ...), wrapped.
type Store interface {
	GroupStore
	ResourceStore
	StatusStore
	TraceStore
	StreamStore
	jobs.FiguresStore
	Configure(ctx context.Context, name, namespace, task string, o queengo.QueueOptions) (queengo.Queue, uuid.UUID, error)
	DeleteQueue(ctx context.Context, name string) (bool, error)
	PopMaintenance(ctx context.Context) (bool, error)
	SetPopMaintenance(ctx context.Context, on bool) error
	ListDeadLetters(ctx context.Context, f queengo.DLQFilter) ([]queengo.DeadLetter, int, error)
	RequeueDeadLetter(ctx context.Context, id uuid.UUID) (queengo.DeadLetter, queengo.Frame, error)
	DeleteDeadLetter(ctx context.Context, id uuid.UUID) error
	GetMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageInfo, error)
	SetSubscription(ctx context.Context, group string, ts time.Time) (int, error)
	Ping(ctx context.Context) error
	PoolStats() (total, idle, acquired int32)
}

// Hooks is what an operator's write tells the data path (the actor tree:
// *actors.Broker), here and, through it, in the other broker processes on
// the database.
type Hooks interface {
	// QueueChanged: the queue's row was created, replaced or deleted.
	QueueChanged(name string, deleted bool)
	// GroupMoved: the group's cursors on these partitions were moved or
	// deleted, and their leases released.
	GroupMoved(group string, cursors []queengo.GroupCursor)
	// Freed: the partition may be claimable for group (a lease ended), or
	// for every group when group is empty (a message was written outside
	// the partition writers).
	Freed(queue string, partition uuid.UUID, group string)
	// PopMaintenanceSwitched: this process switched pop maintenance.
	PopMaintenanceSwitched(on bool)
}

// Admin is the operator's door; http reaches it through its Broker
// interface, beside the data path.
type Admin struct {
	store   Store
	hooks   Hooks
	figures *jobs.Figures
}

// New returns the operator's door over store, telling hooks what its
// writes change; figures are the shared dashboard figures its reads serve
// and its writes drop.
func New(store Store, hooks Hooks, figures *jobs.Figures) *Admin {
	return &Admin{store: store, hooks: hooks, figures: figures}
}

// Configure replaces the options of a queue (a full replace), creating the
// queue and its Default partition when they do not exist, and makes the
// queue's actor reload them. It returns the stored queue and the id of its
// Default partition.
func (a *Admin) Configure(ctx context.Context, name, namespace, task string, o queengo.QueueOptions) (queengo.Queue, uuid.UUID, error) {
	q, pid, err := a.store.Configure(ctx, name, namespace, task, o)
	if err != nil {
		return q, pid, err
	}
	a.hooks.QueueChanged(name, false)
	return q, pid, nil
}

// DeleteQueue removes a queue and everything under it, and makes the queue's
// actor drop what it cached of it (settings, partitions). It reports whether
// the queue existed.
func (a *Admin) DeleteQueue(ctx context.Context, name string) (existed bool, err error) {
	existed, err = a.store.DeleteQueue(ctx, name)
	if err != nil {
		return false, err
	}
	a.hooks.QueueChanged(name, true)
	a.figures.Drop()
	return existed, nil
}

// PopMaintenance reads the pop maintenance switch as stored, the state every
// broker process on the database converges to within its refresh.
func (a *Admin) PopMaintenance(ctx context.Context) (bool, error) {
	return a.store.PopMaintenance(ctx)
}

// SetPopMaintenance switches pop maintenance for every broker process on the
// database; here it applies at once, elsewhere at their next refresh.
func (a *Admin) SetPopMaintenance(ctx context.Context, on bool) error {
	if err := a.store.SetPopMaintenance(ctx, on); err != nil {
		return err
	}
	a.hooks.PopMaintenanceSwitched(on)
	return nil
}

// ListDeadLetters returns one page of the dead letters f selects, newest
// failure first, and how many match in all.
func (a *Admin) ListDeadLetters(ctx context.Context, f queengo.DLQFilter) ([]queengo.DeadLetter, int, error) {
	return a.store.ListDeadLetters(ctx, f)
}

// RequeueDeadLetter pushes a dead letter's payload again as a new message of
// its partition and removes the entry.
func (a *Admin) RequeueDeadLetter(ctx context.Context, id uuid.UUID) (queengo.DeadLetter, queengo.Frame, error) {
	d, f, err := a.store.RequeueDeadLetter(ctx, id)
	if err == nil {
		a.hooks.Freed(d.Queue, d.PartitionID, "")
		a.figures.Drop()
	}
	return d, f, err
}

// DeleteDeadLetter removes a dead letter, or fails with an error wrapping
// queengo.ErrNotFound when there is none. The offset stays resolved.
func (a *Admin) DeleteDeadLetter(ctx context.Context, id uuid.UUID) error {
	err := a.store.DeleteDeadLetter(ctx, id)
	if err == nil {
		a.figures.Drop()
	}
	return err
}

// GetMessage returns the management view of one message (D10), or an error
// wrapping queengo.ErrNotFound.
func (a *Admin) GetMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageInfo, error) {
	return a.store.GetMessage(ctx, partition, txid)
}

// SetSubscription makes the group's durable subscription start at ts on
// every queue it has a record or a cursor on (D6); it returns how many
// records it wrote, or an error wrapping queengo.ErrNotFound for a group
// with neither. Cursors that exist keep their position.
func (a *Admin) SetSubscription(ctx context.Context, group string, ts time.Time) (int, error) {
	n, err := a.store.SetSubscription(ctx, group, ts)
	if err == nil {
		a.figures.Drop() // the group list shows the subscription
	}
	return n, err
}

// Health reports whether the database answers a trivial statement.
func (a *Admin) Health(ctx context.Context) error { return a.store.Ping(ctx) }

// PoolStats reports the database pool's (total, idle, acquired) connections.
func (a *Admin) PoolStats() (total, idle, acquired int32) { return a.store.PoolStats() }
