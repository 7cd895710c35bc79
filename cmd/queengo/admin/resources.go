package admin

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// ResourceStore is what the resource and message routes (docs/api-admin.md "Resources" and "Messages") need of the store.
type ResourceStore interface {
	Overview(ctx context.Context) (queengo.Overview, error)
	ListQueues(ctx context.Context, f queengo.ResourceFilter) ([]queengo.QueueSummary, int, error)
	GetQueue(ctx context.Context, name string, f queengo.ResourceFilter) (queengo.QueueResource, error)
	ListPartitions(ctx context.Context, f queengo.ResourceFilter) ([]queengo.PartitionSummary, int, error)
	ListGroupings(ctx context.Context, by string, limit, offset int) ([]queengo.GroupingSummary, int, error)
	ClearQueue(ctx context.Context, queue, partition string) (queengo.Cleared, error)
	ListMessages(ctx context.Context, f queengo.MessageFilter) (queengo.MessageList, error)
	DeleteMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageChange, error)
	MoveToDLQ(ctx context.Context, partition uuid.UUID, txid, reason string) (queengo.MessageChange, error)
	RetryMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageRetry, error)
}

// Overview returns the broker-wide summary of queues, messages, lag and the
// ingest rate, shared between readers (jobs.Figures: computed at most 5 s
// and never more than 30 s ago); At is when its computation started.
func (a *Admin) Overview(ctx context.Context) (queengo.Overview, error) {
	o, at, err := a.figures.Overview(ctx)
	o.At = at
	return o, err
}

// ListQueues returns one page of the queues f selects, newest first, and
// how many match.
func (a *Admin) ListQueues(ctx context.Context, f queengo.ResourceFilter) ([]queengo.QueueSummary, int, error) {
	return a.store.ListQueues(ctx, f)
}

// GetQueue returns a queue, its totals and one page of its partitions, or an
// error wrapping queengo.ErrNotFound.
func (a *Admin) GetQueue(ctx context.Context, name string, f queengo.ResourceFilter) (queengo.QueueResource, error) {
	return a.store.GetQueue(ctx, name, f)
}

// ListPartitions returns one page of the partitions f selects and how many
// match; an unknown queue is a *queengo.MissingError.
func (a *Admin) ListPartitions(ctx context.Context, f queengo.ResourceFilter) ([]queengo.PartitionSummary, int, error) {
	return a.store.ListPartitions(ctx, f)
}

// ListGroupings returns one page of the namespaces (by "namespace") or tasks
// (by "task"), by name, and how many there are; like Overview, from figures
// of every namespace or task shared between readers (jobs.Figures).
func (a *Admin) ListGroupings(ctx context.Context, by string, limit, offset int) ([]queengo.GroupingSummary, int, error) {
	if by != "task" && by != "namespace" {
		return nil, 0, fmt.Errorf("grouping must be namespace or task, not %q", by)
	}
	all, _, err := a.figures.Groupings(ctx, by)
	if err != nil {
		return nil, 0, err
	}
	return page(all, limit, offset), len(all), nil
}

// page returns the page of list that limit and offset select.
func page[T any](list []T, limit, offset int) []T {
	if offset >= len(list) {
		return nil
	}
	return list[offset:min(len(list), offset+limit)]
}

// ClearQueue drops every retained message of a queue (or of one partition)
// and moves its cursors to the head; an unknown queue or partition is a
// *queengo.MissingError. The queue actor needs no word: its writers cache
// partition ids and queue rows, which stay, offsets are assigned in SQL,
// and a partition its ready set still offers is found empty by the next
// claim.
func (a *Admin) ClearQueue(ctx context.Context, queue, partition string) (queengo.Cleared, error) {
	c, err := a.store.ClearQueue(ctx, queue, partition)
	if err == nil {
		a.figures.Drop()
	}
	return c, err
}

// ListMessages returns one page of the message list.
func (a *Admin) ListMessages(ctx context.Context, f queengo.MessageFilter) (queengo.MessageList, error) {
	return a.store.ListMessages(ctx, f)
}

// DeleteMessage tombstones a message (D10); the groups whose lease the
// delete ended are offered the partition again. An unknown or deleted
// message is an error wrapping queengo.ErrNotFound.
func (a *Admin) DeleteMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageChange, error) {
	ch, err := a.store.DeleteMessage(ctx, partition, txid)
	if err == nil {
		a.released(ch.Queue, partition, ch.Released)
		a.figures.Drop()
	}
	return ch, err
}

// MoveToDLQReason is the error text of the dead letters an operator's move
// writes.
const MoveToDLQReason = "moved to DLQ by operator"

// MoveToDLQ dead-letters a message for every group that has not resolved it
// and removes it from the queue; see DeleteMessage for the rest.
func (a *Admin) MoveToDLQ(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageChange, error) {
	ch, err := a.store.MoveToDLQ(ctx, partition, txid, MoveToDLQReason)
	if err == nil {
		a.released(ch.Queue, partition, ch.Released)
		a.figures.Drop()
	}
	return ch, err
}

// RetryMessage requeues a dead-lettered message and makes a failed one
// deliverable now, waking the partition's parked pops.
func (a *Admin) RetryMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageRetry, error) {
	r, err := a.store.RetryMessage(ctx, partition, txid)
	if err != nil {
		return r, err
	}
	a.figures.Drop()
	if r.Requeued != nil {
		a.hooks.Freed(r.Queue, partition, "")
	}
	for _, g := range r.Reset {
		a.hooks.Freed(r.Queue, partition, g)
	}
	return r, nil
}

// released offers the partition to each group whose lease ended.
func (a *Admin) released(queue string, partition uuid.UUID, groups []string) {
	for _, g := range groups {
		a.hooks.Freed(queue, partition, g)
	}
}
