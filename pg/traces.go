package pg

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// RecordTrace records a trace event (queen.record_trace) and returns its id;
// a message that is not stored, or was deleted, fails with an error wrapping
// queengo.ErrNotFound.
func (s *Store) RecordTrace(ctx context.Context, t queengo.NewTrace) (uuid.UUID, error) {
	var id pgtype.UUID
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT queen.record_trace($1, $2, $3, $4, $5::text::json, $6, $7)`,
			pgUUID(t.PartitionID), t.TransactionID, t.Group, t.EventType, string(t.Data), t.WorkerID, t.Names).Scan(&id)
	})
	if err == nil && !id.Valid {
		err = fmt.Errorf("%w: message %s/%s", queengo.ErrNotFound, t.PartitionID, t.TransactionID)
	}
	if err != nil {
		return uuid.Nil, fmt.Errorf("error recording trace: %w", err)
	}
	return id.Bytes, nil
}

// MessageTraces returns one page of the traces of a message, oldest first
// (none for a message that has none or does not exist).
func (s *Store) MessageTraces(ctx context.Context, partition uuid.UUID, txid string, limit, offset int) ([]queengo.Trace, error) {
	var out []queengo.Trace
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT id, event_type, data::text, consumer_group, worker_id, created_at, names
  FROM queen.traces WHERE partition_id = $1 AND transaction_id = $2
 ORDER BY created_at, id LIMIT $3 OFFSET $4`, pgUUID(partition), txid, limit, offset)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.Trace, error) {
			t := queengo.Trace{PartitionID: partition, TransactionID: txid}
			var data string
			err := r.Scan(&t.ID, &t.EventType, &data, &t.Group, &t.WorkerID, &t.CreatedAt, &t.Names)
			t.Data = []byte(data)
			return t, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading traces: %w", err)
	}
	return out, nil
}

// TracesByName returns one page of the traces carrying name, newest first,
// each with its message's queue, partition and payload (nil when the message
// is no longer stored or was deleted), and how many traces carry the name in
// all.
//
// A page costs an index range of trace_names plus, per trace, primary-key
// probes of its trace, partition, queue, transaction id and segment; the
// total is a sum over the name's counter rows (one per partition).
func (s *Store) TracesByName(ctx context.Context, name string, limit, offset int) ([]queengo.Trace, int64, error) {
	var out []queengo.Trace
	var total int64
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		if err := c.QueryRow(ctx, `SELECT coalesce(sum(traces), 0)::bigint FROM queen.trace_name_stats WHERE name = $1`,
			name).Scan(&total); err != nil {
			return err
		}
		// The segment holding an offset is the last one starting at or
		// before it, if it reaches that far: ORDER BY ... LIMIT 1 makes
		// that one backward step of the primary key, where a range
		// condition alone would walk every older segment of the partition.
		rows, err := c.Query(ctx, `SELECT t.id, t.transaction_id, t.partition_id, t.event_type, t.data::text,
       t.consumer_group, t.worker_id, t.created_at, t.names, q.name, p.name, m.frame
  FROM (SELECT n.trace_id FROM queen.trace_names n WHERE n.name = $1
         ORDER BY n.created_at DESC, n.trace_id DESC LIMIT $2 OFFSET $3) n
  JOIN queen.traces t ON t.id = n.trace_id
  JOIN queen.partitions p ON p.id = t.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
  LEFT JOIN queen.txids x ON x.partition_id = t.partition_id AND x.transaction_id = t.transaction_id
        AND NOT EXISTS (SELECT 1 FROM queen.tombstones tb WHERE tb.partition_id = x.partition_id AND tb."offset" = x."offset")
  LEFT JOIN LATERAL (
        SELECT queen.frame_at(s.frames, s.ends, (x."offset" - s.first_offset)::integer) AS frame
          FROM (SELECT s.frames, s.ends, s.first_offset, s.last_offset FROM queen.segments s
                 WHERE s.partition_id = x.partition_id AND s.first_offset <= x."offset"
                 ORDER BY s.first_offset DESC LIMIT 1) s
         WHERE s.last_offset >= x."offset") m ON true
 ORDER BY t.created_at DESC, t.id DESC`, name, limit, offset)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.Trace, error) {
			var t queengo.Trace
			var data string
			var frame []byte
			err := r.Scan(&t.ID, &t.TransactionID, &t.PartitionID, &t.EventType, &data, &t.Group, &t.WorkerID,
				&t.CreatedAt, &t.Names, &t.Queue, &t.Partition, &frame)
			if err != nil {
				return t, err
			}
			t.Data = []byte(data)
			if frame != nil {
				var f queengo.Frame
				if _, err := decodeFrame(frame, &f, s.keys); err != nil {
					return t, err
				}
				t.Payload = f.Payload
			}
			return t, nil
		})
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("error reading traces by name: %w", err)
	}
	return out, total, nil
}

// TraceNames returns one page of the trace names, the most recently seen
// first, and how many names there are. It reads the counter rows only (one
// per name and partition the name was recorded on), never the traces: one
// aggregate over them, which also counts the names (a second statement
// counts them only for a page past the end).
func (s *Store) TraceNames(ctx context.Context, limit, offset int) ([]queengo.TraceName, int64, error) {
	var out []queengo.TraceName
	var total int64
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT name, sum(traces)::bigint, sum(messages)::bigint, max(last_seen), count(*) OVER ()
  FROM queen.trace_name_stats GROUP BY name ORDER BY max(last_seen) DESC, name LIMIT $1 OFFSET $2`, limit, offset)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.TraceName, error) {
			var n queengo.TraceName
			err := r.Scan(&n.Name, &n.Traces, &n.Messages, &n.LastSeen, &total)
			return n, err
		})
		if err != nil || len(out) > 0 {
			return err
		}
		return c.QueryRow(ctx, `SELECT count(*) FROM (SELECT name FROM queen.trace_name_stats GROUP BY name) n`).Scan(&total)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("error reading trace names: %w", err)
	}
	return out, total, nil
}
