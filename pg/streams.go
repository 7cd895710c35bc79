package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// RegisterStream registers a named query (queen.streams_register). A changed
// config hash without Reset fails with an error wrapping
// queengo.ErrStreamHashMismatch; with Reset the state is deleted in bounded
// transactions of queengo.StreamResetBatch rows each before it returns.
func (s *Store) RegisterStream(ctx context.Context, r queengo.StreamRegistration) (queengo.StreamRegistered, error) {
	var out queengo.StreamRegistered
	var conflict, more bool
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		if err := c.QueryRow(ctx, `SELECT id, fresh, did_reset, conflict, more FROM queen.streams_register($1, $2, $3, $4, $5, $6)`,
			r.Name, r.SourceQueue, r.SinkQueue, r.ConfigHash, r.Reset, queengo.StreamResetBatch).
			Scan(&out.ID, &out.Fresh, &out.DidReset, &conflict, &more); err != nil {
			return err
		}
		if more {
			_, err := wipeStream(ctx, c, out.ID)
			return err
		}
		return nil
	})
	if err == nil && conflict {
		err = queengo.ErrStreamHashMismatch
	}
	if err != nil {
		return out, fmt.Errorf("error registering stream query: %w", err)
	}
	return out, nil
}

// StreamState reads the state rows f selects, in key order.
func (s *Store) StreamState(ctx context.Context, f queengo.StateFilter) ([]queengo.StateRow, error) {
	var out []queengo.StateRow
	keys := f.Keys
	if keys == nil {
		keys = []string{}
	}
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT key, value, updated_at FROM queen.streams_state_get($1, $2, $3, $4, $5)`,
			f.Query, f.Partition, keys, f.KeyPrefix, f.RipeAtOrBefore)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.StateRow, error) {
			var row queengo.StateRow
			var v []byte
			err := r.Scan(&row.Key, &v, &row.UpdatedAt)
			row.Value = json.RawMessage(v)
			return row, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading stream state: %w", err)
	}
	return out, nil
}

// Cycle commits a streaming cycle in one transaction: the state ops, the
// sink pushes (as a transaction's pushes: per-item results, dedupe by
// transaction id) and the source ack, in that order, all or nothing. A
// query or partition that does not exist fails it with a
// *queengo.MissingError; an ack that does not hold, or a cycle without an
// ack (the runtimes' idle window flush) deleting a state row that is gone
// (another cycle closed that window and emitted it first), with a
// *queengo.CycleRefusedError; a push its queue has no room for with an
// error wrapping queengo.ErrQueueFull. Cycles of one (query, partition) run
// one after the other (queen.streams_begin). The statements go in two
// pipelined batches (begin with the state ops; the segment write with the
// ack) around the sink's queue and partition lookups.
func (s *Store) Cycle(ctx context.Context, cy *queengo.Cycle) (queengo.CycleResult, error) {
	var out queengo.CycleResult
	err := s.withTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var group *string
		if cy.Ack != nil {
			group = &cy.Group
		}
		b := &pgx.Batch{}
		var missing *string
		var gone int
		b.Queue(`SELECT queen.streams_begin($1, $2, $3)`, cy.Query, cy.Partition, group).QueryRow(func(r pgx.Row) error {
			return r.Scan(&missing)
		})
		if len(cy.Ops) > 0 {
			keys := make([]string, len(cy.Ops))
			values := make([]*string, len(cy.Ops))
			for i, op := range cy.Ops {
				keys[i] = op.Key
				if !op.Delete {
					v := string(op.Value)
					values[i] = &v
				}
			}
			b.Queue(`SELECT queen.streams_apply($1, $2, $3, $4::jsonb[])`, cy.Query, cy.Partition, keys, values).QueryRow(func(r pgx.Row) error {
				return r.Scan(&gone)
			})
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			// streams_apply fails on a missing query or partition (a
			// foreign key); streams_begin named it first.
			if missing != nil {
				return &queengo.MissingError{What: *missing}
			}
			return err
		}
		if missing != nil {
			return &queengo.MissingError{What: *missing}
		}
		if gone > 0 && cy.Ack == nil {
			return &queengo.CycleRefusedError{StateGone: true}
		}

		b = &pgx.Batch{}
		var plan *pushPlan
		var dups []pgtype.UUID
		var w *segmentWrite
		if len(cy.Push) > 0 {
			items := make([]*queengo.PushItem, len(cy.Push))
			for i := range cy.Push {
				items[i] = &cy.Push[i]
			}
			var err error
			if plan, err = planPush(ctx, tx, items, s.citus.Load()); err != nil {
				return err
			}
			if len(plan.segs) > 0 {
				if w, err = encodeSegments(plan.segs, s.seal); err != nil {
					return err
				}
				b.Queue(appendSQL, w.args...).QueryRow(func(r pgx.Row) error { return r.Scan(&dups) })
			}
		}
		var failure, queue *string
		if a := cy.Ack; a != nil {
			var lease *uuid.UUID
			if a.LeaseID != uuid.Nil {
				lease = &a.LeaseID
			}
			b.Queue(`SELECT failure, acked, released, dlq, queue_name FROM queen.streams_ack($1, $2, $3, $4, $5, $6, $7)`,
				cy.Partition, cy.Group, a.TransactionID, lease, a.Status, a.Error, cy.ReleaseLease).QueryRow(func(r pgx.Row) error {
				return r.Scan(&failure, &out.Acked, &out.LeaseReleased, &out.DLQ, &queue)
			})
		}
		if b.Len() > 0 {
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
		}
		if plan != nil {
			if w != nil {
				d := w.dups(dups)
				for i := range d {
					for j, id := range d[i] {
						if id == queengo.QueueFullMark {
							return fmt.Errorf("%w: transaction id %q", queengo.ErrQueueFull, plan.segs[i].Frames[j].TransactionID)
						}
					}
				}
				out.Push = plan.results(d)
			} else {
				out.Push = plan.out
			}
		}
		if failure != nil {
			return &queengo.CycleRefusedError{Failure: queengo.AckFailure(*failure)}
		}
		if queue != nil {
			out.SourceQueue = *queue
		}
		return nil
	})
	if err != nil {
		return queengo.CycleResult{}, fmt.Errorf("error committing stream cycle: %w", err)
	}
	return out, nil
}

// wipeStream deletes the query's state, queengo.StreamResetBatch rows per
// statement (each its own transaction), and returns how many rows went.
func wipeStream(ctx context.Context, c *pgxpool.Conn, query uuid.UUID) (int64, error) {
	var total int64
	for {
		var n int64
		if err := c.QueryRow(ctx, `SELECT queen.streams_wipe($1, $2)`, query, queengo.StreamResetBatch).Scan(&n); err != nil {
			return total, err
		}
		total += n
		if n < queengo.StreamResetBatch {
			return total, nil
		}
	}
}

// ListStreams lists the registered stream queries with their state size
// and group lag (queen.streams_list), by name.
func (s *Store) ListStreams(ctx context.Context) ([]queengo.StreamQuery, error) {
	out, err := s.streamQueries(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("error listing stream queries: %w", err)
	}
	return out, nil
}

// StreamDetail returns the named query and its source partitions, or a
// *queengo.MissingError (query).
func (s *Store) StreamDetail(ctx context.Context, name string) (queengo.StreamQuery, []queengo.StreamPartition, error) {
	qs, err := s.streamQueries(ctx, &name)
	if err == nil && len(qs) == 0 {
		err = &queengo.MissingError{What: queengo.MissingQuery}
	}
	if err != nil {
		return queengo.StreamQuery{}, nil, fmt.Errorf("error reading stream query %q: %w", name, err)
	}
	var parts []queengo.StreamPartition
	err = s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT partition_id, partition_name, state_rows, lag, updated_at FROM queen.streams_partitions($1)`, qs[0].ID)
		if err != nil {
			return err
		}
		parts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.StreamPartition, error) {
			var p queengo.StreamPartition
			err := r.Scan(&p.PartitionID, &p.Partition, &p.StateRows, &p.Lag, &p.UpdatedAt)
			return p, err
		})
		return err
	})
	if err != nil {
		return queengo.StreamQuery{}, nil, fmt.Errorf("error reading stream query %q: %w", name, err)
	}
	return qs[0], parts, nil
}

// ResetStream deletes the named query's state in bounded transactions
// (wipeStream) and returns how many rows went, or a *queengo.MissingError
// (query). The registration and its hash stay.
func (s *Store) ResetStream(ctx context.Context, name string) (int64, error) {
	var n int64
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var id uuid.UUID
		if err := c.QueryRow(ctx, `SELECT id FROM queen_streams.queries WHERE name = $1`, name).Scan(&id); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return &queengo.MissingError{What: queengo.MissingQuery}
			}
			return err
		}
		var err error
		n, err = wipeStream(ctx, c, id)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("error resetting stream query %q: %w", name, err)
	}
	return n, nil
}

func (s *Store) streamQueries(ctx context.Context, name *string) ([]queengo.StreamQuery, error) {
	var out []queengo.StreamQuery
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT id, name, source_queue, sink_queue, config_hash, consumer_group, created_at, updated_at,
       state_rows, state_partitions, lag FROM queen.streams_list($1)`, name)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.StreamQuery, error) {
			var q queengo.StreamQuery
			err := r.Scan(&q.ID, &q.Name, &q.SourceQueue, &q.SinkQueue, &q.ConfigHash, &q.ConsumerGroup, &q.CreatedAt,
				&q.UpdatedAt, &q.StateRows, &q.StatePartitions, &q.Lag)
			return q, err
		})
		return err
	})
	return out, err
}
