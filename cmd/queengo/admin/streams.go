package admin

import (
	"context"

	"github.com/queengo/queengo"
)

// StreamStore is what the operator's streams routes (docs/api-admin.md
// "Streams") need of the store.
type StreamStore interface {
	ListStreams(ctx context.Context) ([]queengo.StreamQuery, error)
	StreamDetail(ctx context.Context, name string) (queengo.StreamQuery, []queengo.StreamPartition, error)
	ResetStream(ctx context.Context, name string) (int64, error)
}

// ListStreams lists the registered stream queries, by name, with their
// source, sink, group lag and state size.
func (a *Admin) ListStreams(ctx context.Context) ([]queengo.StreamQuery, error) {
	return a.store.ListStreams(ctx)
}

// StreamDetail returns the named query and its source partitions, or an
// error wrapping a *queengo.MissingError (query).
func (a *Admin) StreamDetail(ctx context.Context, name string) (queengo.StreamQuery, []queengo.StreamPartition, error) {
	return a.store.StreamDetail(ctx, name)
}

// ResetStream deletes the named query's state, a bounded transaction at a
// time, keeping its registration; the SDK's runtime starts from empty state
// at its next cycle (the offsets it consumed stay consumed).
func (a *Admin) ResetStream(ctx context.Context, name string) (int64, error) {
	return a.store.ResetStream(ctx, name)
}
