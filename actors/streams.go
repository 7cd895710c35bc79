package actors

import (
	"context"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// RegisterStream registers a named stream query (Store.RegisterStream).
func (b *Broker) RegisterStream(ctx context.Context, r queengo.StreamRegistration) (queengo.StreamRegistered, error) {
	ctx, cancel := requestBound(ctx, b.cfg.RequestTimeout)
	defer cancel()
	return b.cfg.Store.RegisterStream(ctx, r)
}

// StreamState reads a query's state rows of one source partition.
func (b *Broker) StreamState(ctx context.Context, f queengo.StateFilter) ([]queengo.StateRow, error) {
	ctx, cancel := requestBound(ctx, b.cfg.RequestTimeout)
	defer cancel()
	return b.cfg.Store.StreamState(ctx, f)
}

// Cycle commits a streaming cycle (Store.Cycle) and then, as a push and an
// ack do, wakes the pops parked on what it changed: the sink partitions it
// wrote and, when its ack ended the source lease, that partition for its
// group.
func (b *Broker) Cycle(ctx context.Context, cy *queengo.Cycle) (queengo.CycleResult, error) {
	ctx, cancel := requestBound(ctx, b.cfg.RequestTimeout)
	defer cancel()
	res, err := b.cfg.Store.Cycle(ctx, cy)
	if err != nil {
		return res, err
	}
	woken := map[uuid.UUID]bool{}
	for i, r := range res.Push {
		if r.Status == queengo.PushQueued && !woken[r.PartitionID] {
			woken[r.PartitionID] = true
			b.freed(cy.Push[i].Queue, r.PartitionID, "")
		}
	}
	if res.LeaseReleased {
		b.freed(res.SourceQueue, cy.Partition, cy.Group)
	}
	return res, nil
}
