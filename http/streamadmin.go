package http

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// StreamAdmin is the operator's view of the stream queries
// (docs/api-admin.md "Streams").
type StreamAdmin interface {
	ListStreams(ctx context.Context) ([]queengo.StreamQuery, error)
	StreamDetail(ctx context.Context, name string) (queengo.StreamQuery, []queengo.StreamPartition, error)
	ResetStream(ctx context.Context, name string) (int64, error)
}

func (s *Server) streamAdminRoutes() []route {
	return []route{
		{fasthttp.MethodGet, "/api/v1/streams", levelReadOnly, s.handleListStreams},
		{fasthttp.MethodGet, "/api/v1/streams/{name}", levelReadOnly, s.handleGetStream},
		// A reset drops data, as a queue clear does.
		{fasthttp.MethodPost, "/api/v1/streams/{name}/reset", levelAdmin, s.handleResetStream},
	}
}

// streamJSON is a stream query on the operator's routes.
type streamJSON struct {
	ID              string   `json:"id"`
	Name            string   `json:"name"`
	SourceQueue     string   `json:"sourceQueue"`
	SinkQueue       *string  `json:"sinkQueue"`
	ConfigHash      string   `json:"configHash"`
	ConsumerGroup   *string  `json:"consumerGroup"`
	StateRows       int64    `json:"stateRows"`
	StatePartitions int64    `json:"statePartitions"`
	Lag             int64    `json:"lag"`
	CreatedAt       jsonTime `json:"createdAt"`
	UpdatedAt       jsonTime `json:"updatedAt"`
}

func streamOf(q queengo.StreamQuery) streamJSON {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return streamJSON{ID: q.ID.String(), Name: q.Name, SourceQueue: q.SourceQueue, SinkQueue: opt(q.SinkQueue),
		ConfigHash: q.ConfigHash, ConsumerGroup: opt(q.ConsumerGroup), StateRows: q.StateRows,
		StatePartitions: q.StatePartitions, Lag: q.Lag, CreatedAt: jsonTime(q.CreatedAt), UpdatedAt: jsonTime(q.UpdatedAt)}
}

func (s *Server) handleListStreams(ctx *fasthttp.RequestCtx) {
	qs, err := s.broker.ListStreams(ctx)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	out := make([]streamJSON, len(qs))
	for i, q := range qs {
		out[i] = streamOf(q)
	}
	s.writeObject(ctx, map[string]any{"queries": out})
}

func (s *Server) handleGetStream(ctx *fasthttp.RequestCtx) {
	name, e := pathText(ctx, "name")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	q, parts, err := s.broker.StreamDetail(ctx, name)
	if err != nil {
		s.writeFailure(ctx, streamAdminFailure(err), err)
		return
	}
	type partitionJSON struct {
		PartitionID string    `json:"partitionId"`
		Partition   string    `json:"partition"`
		StateRows   int64     `json:"stateRows"`
		Lag         int64     `json:"lag"`
		UpdatedAt   *jsonTime `json:"updatedAt"`
	}
	ps := make([]partitionJSON, len(parts))
	for i, p := range parts {
		ps[i] = partitionJSON{PartitionID: p.PartitionID.String(), Partition: p.Partition, StateRows: p.StateRows, Lag: p.Lag}
		if p.UpdatedAt != nil {
			t := jsonTime(*p.UpdatedAt)
			ps[i].UpdatedAt = &t
		}
	}
	s.writeObject(ctx, struct {
		streamJSON
		Partitions []partitionJSON `json:"partitions"`
	}{streamOf(q), ps})
}

func (s *Server) handleResetStream(ctx *fasthttp.RequestCtx) {
	name, e := pathText(ctx, "name")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	start := time.Now()
	n, err := s.broker.ResetStream(ctx, name)
	if err != nil {
		s.writeFailure(ctx, streamAdminFailure(err), err)
		return
	}
	s.writeObject(ctx, map[string]any{"name": name, "deletedRows": n, "tookMs": time.Since(start).Milliseconds()})
}

// streamAdminFailure is failure on a route that names a query: a missing
// one is errStreamNotFound.
func streamAdminFailure(err error) apiError {
	if errors.Is(err, queengo.ErrNotFound) {
		return errStreamNotFound
	}
	return failure(err)
}
