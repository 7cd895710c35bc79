package pg

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// The live figures of the status routes and the collector
// (sql/functions/status.sql): aggregates over partition and cursor rows, and
// primary-key probes of queen.segments.

// queueFilter selects the queues of a StatusFilter; $1 queue name, $2
// namespace, $3 task, each ” for any.
const queueFilter = `($1 = '' OR q.name = $1) AND ($2 = '' OR q.namespace = $2) AND ($3 = '' OR q.task = $3)`

// figureColumns are the columns of queen.status_queues that scanFigures reads.
const figureColumns = `f.partitions, f.pushed, f.retained, f.pending, f.processing, f.completed, f.failed, f.offset_lag,
f.max_offset_lag, f.consumed, f.leases, f.partitions_leased, f.leased, f.leased_acked, f.oldest_unconsumed_at,
f.last_consumed_at, f.dead_letters`

// scanFigures reads q.id, q.name, q.namespace, q.task, q.priority,
// q.created_at and then figureColumns.
func scanFigures(r pgx.Row) (queengo.QueueFigures, error) {
	var f queengo.QueueFigures
	var oldest, last pgtype.Timestamptz
	err := r.Scan(&f.QueueID, &f.Name, &f.Namespace, &f.Task, &f.Priority, &f.CreatedAt,
		&f.Partitions, &f.Pushed, &f.Retained, &f.Pending, &f.Processing, &f.Completed, &f.Failed, &f.OffsetLag,
		&f.MaxOffsetLag, &f.Consumed, &f.Leases, &f.PartitionsLeased, &f.Leased, &f.LeasedAcked, &oldest,
		&last, &f.DeadLetters)
	f.OldestUnconsumedAt, f.LastConsumedAt = oldest.Time, last.Time
	return f, err
}

// AllQueueFigures returns the figures of every queue, in name order: the
// collector's one statement per tick.
func (s *Store) AllQueueFigures(ctx context.Context) ([]queengo.QueueFigures, error) {
	var out []queengo.QueueFigures
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT q.id, q.name, q.namespace, q.task, q.priority, q.created_at, `+figureColumns+`
  FROM queen.status_queues(NULL) f JOIN queen.queues q ON q.id = f.queue_id ORDER BY q.name`)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.QueueFigures, error) { return scanFigures(r) })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading queue figures: %w", err)
	}
	return out, nil
}

// StatusQueues returns one page of the queues f selects, newest first, with
// their figures, and how many it selects in all.
func (s *Store) StatusQueues(ctx context.Context, f queengo.StatusFilter, limit, offset int) ([]queengo.QueueFigures, int, error) {
	var out []queengo.QueueFigures
	var total int
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		if err := c.QueryRow(ctx, `SELECT count(*) FROM queen.queues q WHERE `+queueFilter,
			f.Queue, f.Namespace, f.Task).Scan(&total); err != nil {
			return err
		}
		rows, err := c.Query(ctx, `WITH page AS (
    SELECT q.id, q.name, q.namespace, q.task, q.priority, q.created_at FROM queen.queues q
     WHERE `+queueFilter+` ORDER BY q.created_at DESC, q.name LIMIT $4 OFFSET $5)
SELECT q.id, q.name, q.namespace, q.task, q.priority, q.created_at, `+figureColumns+`
  FROM page q JOIN queen.status_queues(ARRAY(SELECT id FROM page)) f ON f.queue_id = q.id
 ORDER BY q.created_at DESC, q.name`, f.Queue, f.Namespace, f.Task, limit, offset)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.QueueFigures, error) { return scanFigures(r) })
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("error reading queue status: %w", err)
	}
	return out, total, nil
}

// DeadLetterSummary counts the dead letters of the queues f selects, with
// the topN most frequent error texts.
func (s *Store) DeadLetterSummary(ctx context.Context, f queengo.StatusFilter, topN int) (queengo.DeadLetterSummary, error) {
	var d queengo.DeadLetterSummary
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		const sel = `FROM queen.dead_letters d JOIN queen.partitions p ON p.id = d.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE d.listed AND ` + queueFilter
		if err := c.QueryRow(ctx, `SELECT count(*), count(DISTINCT d.partition_id) `+sel,
			f.Queue, f.Namespace, f.Task).Scan(&d.Total, &d.AffectedPartitions); err != nil {
			return err
		}
		rows, err := c.Query(ctx, `SELECT coalesce(d.error_message, ''), count(*) `+sel+`
 GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT $4`, f.Queue, f.Namespace, f.Task, topN)
		if err != nil {
			return err
		}
		d.TopErrors, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.ErrorCount, error) {
			var e queengo.ErrorCount
			err := r.Scan(&e.Error, &e.Count)
			return e, err
		})
		return err
	})
	if err != nil {
		return d, fmt.Errorf("error reading dead-letter summary: %w", err)
	}
	if d.TopErrors == nil {
		d.TopErrors = []queengo.ErrorCount{}
	}
	return d, nil
}

// QueueDetail returns the queue name with its totals and one page of its
// partitions in name order, or an error wrapping queengo.ErrNotFound.
func (s *Store) QueueDetail(ctx context.Context, name string, limit, offset int) (queengo.QueueDetail, error) {
	var d queengo.QueueDetail
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		if d.Queue, err = scanQueue(c.QueryRow(ctx, `SELECT `+queueColumns+` FROM queen.queues WHERE name = $1`, name)); err != nil {
			return err
		}
		if d.Totals, err = scanFigures(c.QueryRow(ctx, `SELECT q.id, q.name, q.namespace, q.task, q.priority, q.created_at, `+
			figureColumns+` FROM queen.queues q JOIN queen.status_queues(ARRAY[$1::uuid]) f ON f.queue_id = q.id
 WHERE q.id = $1`, d.Queue.ID)); err != nil {
			return err
		}
		d.CreatedAt, d.PartitionCount = d.Totals.CreatedAt, d.Totals.Partitions
		rows, err := c.Query(ctx, `WITH page AS (
    SELECT p.id, p.name, p.created_at, p.last_write_at FROM queen.partitions p WHERE p.queue_id = $1
     ORDER BY p.name LIMIT $2 OFFSET $3)
SELECT page.id, page.name, page.created_at, page.last_write_at, f.head, f.retained, f.groups, f.pending,
       f.processing, f.completed, f.failed, f.offset_lag, f.consumed, f.leases, f.oldest_unconsumed_at, f.last_consumed_at,
       (SELECT s.created_at FROM queen.segments s WHERE s.partition_id = page.id ORDER BY s.first_offset LIMIT 1),
       (SELECT s.created_at FROM queen.segments s WHERE s.partition_id = page.id ORDER BY s.first_offset DESC LIMIT 1),
       f.dead_letters,
       (SELECT coalesce(sum(c.batches_consumed), 0)::bigint FROM queen.cursors c WHERE c.partition_id = page.id)
  FROM page JOIN queen.status_partitions(ARRAY[$1::uuid]) f ON f.partition_id = page.id
 ORDER BY page.name`, d.Queue.ID, limit, offset)
		if err != nil {
			return err
		}
		d.Partitions, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.PartitionFigures, error) {
			var p queengo.PartitionFigures
			var lw, oldest, last, first, newest pgtype.Timestamptz
			err := r.Scan(&p.ID, &p.Name, &p.CreatedAt, &lw, &p.Head, &p.Retained, &p.Groups, &p.Pending,
				&p.Processing, &p.Completed, &p.Failed, &p.OffsetLag, &p.Consumed, &p.Leases, &oldest, &last, &first, &newest,
				&p.DeadLetters, &p.BatchesConsumed)
			p.LastWriteAt, p.OldestUnconsumedAt, p.LastConsumedAt = lw.Time, oldest.Time, last.Time
			p.OldestMessageAt, p.NewestMessageAt = first.Time, newest.Time
			return p, err
		})
		return err
	})
	if err != nil {
		return d, fmt.Errorf("error reading queue detail: %w", err)
	}
	return d, nil
}

// QueueMessages returns the messages of queue name from the offset-th newest
// (segment time, then offset, descending), limit of them, or an error
// wrapping queengo.ErrNotFound for an unknown queue. It reads the index of
// the newest offset+limit segments of each partition, then cuts out only
// the frames of the page.
func (s *Store) QueueMessages(ctx context.Context, name string, limit, offset int) ([]queengo.QueueMessage, error) {
	var out []queengo.QueueMessage
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var qid uuid.UUID
		if err := c.QueryRow(ctx, `SELECT id FROM queen.queues WHERE name = $1`, name).Scan(&qid); err != nil {
			return err
		}
		// A segment holds at least one message, so the newest offset+limit
		// segments of each partition cover the page.
		rows, err := c.Query(ctx, `SELECT p.id, p.name, s.first_offset, s.last_offset, s.created_at
  FROM queen.partitions p
 CROSS JOIN LATERAL (SELECT s.first_offset, s.last_offset, s.created_at FROM queen.segments s
                      WHERE s.partition_id = p.id ORDER BY s.first_offset DESC LIMIT $2) s
 WHERE p.queue_id = $1
 ORDER BY s.created_at DESC, s.last_offset DESC, p.id LIMIT $2`, qid, offset+limit)
		if err != nil {
			return err
		}
		type seg struct {
			part        uuid.UUID
			name        string
			first, last int64
			at          time.Time
		}
		segs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (seg, error) {
			var g seg
			err := r.Scan(&g.part, &g.name, &g.first, &g.last, &g.at)
			return g, err
		})
		if err != nil {
			return err
		}
		// Walk the segments newest first to the page's messages.
		skip := int64(offset)
		var parts []pgtype.UUID
		var firsts, offs []int64
		for _, g := range segs {
			n := g.last - g.first + 1
			if skip >= n {
				skip -= n
				continue
			}
			for o := g.last - skip; o >= g.first && len(out) < limit; o-- {
				out = append(out, queengo.QueueMessage{PartitionID: g.part, Partition: g.name, Offset: o, CreatedAt: g.at})
				parts, firsts, offs = append(parts, pgUUID(g.part)), append(firsts, g.first), append(offs, o)
			}
			skip = 0
			if len(out) == limit {
				break
			}
		}
		if len(out) == 0 {
			return nil
		}
		rows, err = c.Query(ctx, `SELECT k.n, queen.frame_at(s.frames, s.ends, (k.o - s.first_offset)::integer),
       CASE WHEN EXISTS (SELECT 1 FROM queen.tombstones t WHERE t.partition_id = k.p AND t."offset" = k.o)
                 THEN 'completed'
            WHEN NOT EXISTS (SELECT 1 FROM queen.cursors c WHERE c.partition_id = k.p) THEN 'pending'
            WHEN NOT EXISTS (SELECT 1 FROM queen.cursors c WHERE c.partition_id = k.p AND c.committed < k.o
                              AND NOT (c.lease_id IS NOT NULL AND c.lease_expires_at > now() AND k.o = ANY (c.acked)))
                 THEN 'completed'
            WHEN EXISTS (SELECT 1 FROM queen.cursors c WHERE c.partition_id = k.p AND c.committed < k.o
                          AND c.lease_id IS NOT NULL AND c.lease_expires_at > now() AND c.lease_end >= k.o
                          AND NOT k.o = ANY (c.acked))
                 THEN 'processing'
            ELSE 'pending' END
  FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS k(p, f, o, n)
  JOIN queen.segments s ON s.partition_id = k.p AND s.first_offset = k.f
 ORDER BY k.n`, parts, firsts, offs)
		if err != nil {
			return err
		}
		var n int
		var frame []byte
		var status string
		_, err = pgx.ForEachRow(rows, []any{&n, &frame, &status}, func() error {
			var f queengo.Frame
			if _, err := decodeFrame(frame, &f, s.keys); err != nil {
				return err
			}
			m := &out[n-1]
			m.ID, m.TransactionID, m.Status = f.ID, f.TransactionID, status
			return nil
		})
		if err != nil {
			return err
		}
		// A segment retention dropped since the index read leaves its
		// messages out.
		out = slices.DeleteFunc(out, func(m queengo.QueueMessage) bool { return m.Status == "" })
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error reading queue messages: %w", err)
	}
	return out, nil
}

// PostgresStats reads the live statistics of the current database as JSON:
// the server's version, pg_stat_database's row, connections by state, the database size, the
// sizes of the queen.* tables and the cache hit ratio.
func (s *Store) PostgresStats(ctx context.Context) (queengo.PostgresStats, error) {
	var out []byte
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT jsonb_build_object(
  'database', current_database(),
  'serverVersion', current_setting('server_version'),
  'databaseSizeBytes', pg_database_size(current_database()),
  'stats', (SELECT jsonb_build_object('numBackends', d.numbackends, 'xactCommit', d.xact_commit,
             'xactRollback', d.xact_rollback, 'blksRead', d.blks_read, 'blksHit', d.blks_hit,
             'tupReturned', d.tup_returned, 'tupFetched', d.tup_fetched, 'tupInserted', d.tup_inserted,
             'tupUpdated', d.tup_updated, 'tupDeleted', d.tup_deleted, 'conflicts', d.conflicts,
             'tempFiles', d.temp_files, 'tempBytes', d.temp_bytes, 'deadlocks', d.deadlocks,
             'statsReset', d.stats_reset)
            FROM pg_stat_database d WHERE d.datname = current_database()),
  'cacheHitRatio', (SELECT CASE WHEN d.blks_hit + d.blks_read = 0 THEN NULL
                                ELSE round(d.blks_hit::numeric / (d.blks_hit + d.blks_read), 4) END
                      FROM pg_stat_database d WHERE d.datname = current_database()),
  'connections', coalesce((SELECT jsonb_object_agg(coalesce(a.state, 'unknown'), a.n)
                  FROM (SELECT state, count(*) AS n FROM pg_stat_activity
                         WHERE datname = current_database() GROUP BY state) a), '{}'::jsonb),
  'tables', coalesce((SELECT jsonb_agg(jsonb_build_object('table', c.relname,
                 'totalBytes', pg_total_relation_size(c.oid), 'tableBytes', pg_relation_size(c.oid),
                 'indexBytes', pg_indexes_size(c.oid), 'estimatedRows', greatest(c.reltuples, 0)::bigint)
                 ORDER BY pg_total_relation_size(c.oid) DESC)
                FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'queen' AND c.relkind = 'r'), '[]'::jsonb))`).Scan(&out)
	})
	if err != nil {
		return nil, fmt.Errorf("error reading postgres stats: %w", err)
	}
	return out, nil
}
