package actors

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// ResourceStore is what the resource and message routes (shared/spec/api.md §7.2-7.4, §8) need of the store.
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
// ingest rate, computed at most statsFresh ago and never more than
// statsMaxAge ago (figures.go); At is when its computation started.
func (b *Broker) Overview(ctx context.Context) (queengo.Overview, error) {
	o, at, err := b.stats.overview.get(ctx)
	o.At = at
	return o, err
}

// ListQueues returns one page of the queues f selects, newest first, and
// how many match.
func (b *Broker) ListQueues(ctx context.Context, f queengo.ResourceFilter) ([]queengo.QueueSummary, int, error) {
	return b.cfg.Store.ListQueues(ctx, f)
}

// GetQueue returns a queue, its totals and one page of its partitions, or an
// error wrapping queengo.ErrNotFound.
func (b *Broker) GetQueue(ctx context.Context, name string, f queengo.ResourceFilter) (queengo.QueueResource, error) {
	return b.cfg.Store.GetQueue(ctx, name, f)
}

// ListPartitions returns one page of the partitions f selects and how many
// match; an unknown queue is a *queengo.MissingError.
func (b *Broker) ListPartitions(ctx context.Context, f queengo.ResourceFilter) ([]queengo.PartitionSummary, int, error) {
	return b.cfg.Store.ListPartitions(ctx, f)
}

// ListGroupings returns one page of the namespaces (by "namespace") or tasks
// (by "task"), by name, and how many there are; like Overview, from figures
// of every namespace or task shared between readers (figures.go).
func (b *Broker) ListGroupings(ctx context.Context, by string, limit, offset int) ([]queengo.GroupingSummary, int, error) {
	f := b.stats.namespaces
	if by == "task" {
		f = b.stats.tasks
	} else if by != "namespace" {
		return nil, 0, fmt.Errorf("grouping must be namespace or task, not %q", by)
	}
	all, _, err := f.get(ctx)
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
func (b *Broker) ClearQueue(ctx context.Context, queue, partition string) (queengo.Cleared, error) {
	c, err := b.cfg.Store.ClearQueue(ctx, queue, partition)
	if err == nil {
		b.stats.drop()
	}
	return c, err
}

// ListMessages returns one page of the message list.
func (b *Broker) ListMessages(ctx context.Context, f queengo.MessageFilter) (queengo.MessageList, error) {
	return b.cfg.Store.ListMessages(ctx, f)
}

// DeleteMessage tombstones a message (D10); the groups whose lease the
// delete ended are offered the partition again. An unknown or deleted
// message is an error wrapping queengo.ErrNotFound.
func (b *Broker) DeleteMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageChange, error) {
	ch, err := b.cfg.Store.DeleteMessage(ctx, partition, txid)
	if err == nil {
		b.released(ch.Queue, partition, ch.Released)
		b.stats.drop()
	}
	return ch, err
}

// MoveToDLQReason is the error text of the dead letters an operator's move
// writes.
const MoveToDLQReason = "moved to DLQ by operator"

// MoveToDLQ dead-letters a message for every group that has not resolved it
// and removes it from the queue; see DeleteMessage for the rest.
func (b *Broker) MoveToDLQ(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageChange, error) {
	ch, err := b.cfg.Store.MoveToDLQ(ctx, partition, txid, MoveToDLQReason)
	if err == nil {
		b.released(ch.Queue, partition, ch.Released)
		b.stats.drop()
	}
	return ch, err
}

// RetryMessage requeues a dead-lettered message and makes a failed one
// deliverable now, waking the partition's parked pops.
func (b *Broker) RetryMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageRetry, error) {
	r, err := b.cfg.Store.RetryMessage(ctx, partition, txid)
	if err != nil {
		return r, err
	}
	b.stats.drop()
	if r.Requeued != nil {
		b.freed(r.Queue, partition, "")
	}
	for _, g := range r.Reset {
		b.freed(r.Queue, partition, g)
	}
	return r, nil
}

// released offers the partition to each group whose lease ended.
func (b *Broker) released(queue string, partition uuid.UUID, groups []string) {
	for _, g := range groups {
		b.freed(queue, partition, g)
	}
}
