package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// The figures of the resource routes come from queen.partition_figures
// (sql/functions/resources.sql): offset arithmetic over partitions, cursors
// and the first and last segment of each partition, never frames.

// figureSums are the sums over the figures of partition_figures f.
const figureSums = `coalesce(sum(f.total), 0)::bigint, coalesce(sum(f.pending), 0)::bigint,
coalesce(sum(f.processing), 0)::bigint, coalesce(sum(f.completed), 0)::bigint, coalesce(sum(f.failed), 0)::bigint,
coalesce(sum(f.dead_letter), 0)::bigint`

func countsDest(c *queengo.MessageCounts) []any {
	return []any{&c.Total, &c.Pending, &c.Processing, &c.Completed, &c.Failed, &c.DeadLetter}
}

func statsDest(s *queengo.Stats) []any { return []any{&s.Avg, &s.Median, &s.Min, &s.Max} }

// Overview returns the broker-wide summary: counts of queues, partitions,
// namespaces and tasks (non-empty ones), the message figures summed over
// every partition, the lag of every cursor and the ingest rate of the last
// minute.
func (s *Store) Overview(ctx context.Context) (queengo.Overview, error) {
	var o queengo.Overview
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		dest := []any{&o.Queues, &o.Partitions, &o.Namespaces, &o.Tasks}
		dest = append(dest, countsDest(&o.Messages)...)
		dest = append(dest, &o.At)
		if err := c.QueryRow(ctx, `SELECT (SELECT count(*) FROM queen.queues)::integer,
       (SELECT count(*) FROM queen.partitions)::integer,
       (SELECT count(DISTINCT namespace) FROM queen.queues WHERE namespace <> '')::integer,
       (SELECT count(DISTINCT task) FROM queen.queues WHERE task <> '')::integer,
       `+figureSums+`, now()
  FROM queen.partition_figures(NULL, false) f`).Scan(dest...); err != nil {
			return err
		}
		dest = append(statsDest(&o.LagMessages), statsDest(&o.LagSeconds)...)
		if err := c.QueryRow(ctx, `SELECT * FROM queen.cursor_lag()`).Scan(dest...); err != nil {
			return err
		}
		// Only partitions written in the last minute are searched, each by
		// a binary search over its offsets (queen.offset_at).
		var ingested int64
		if err := c.QueryRow(ctx, `SELECT coalesce(sum(p.head - queen.offset_at(p.id,
           coalesce((SELECT s.first_offset - 1 FROM queen.segments s WHERE s.partition_id = p.id
                      ORDER BY s.first_offset LIMIT 1), p.head), p.head, now() - interval '60 seconds')), 0)::bigint
  FROM queen.partitions p WHERE p.last_write_at > now() - interval '60 seconds'`).Scan(&ingested); err != nil {
			return err
		}
		o.IngestedPerSecond = float64(ingested) / 60
		return nil
	})
	if err != nil {
		return o, fmt.Errorf("error reading overview: %w", err)
	}
	return o, nil
}

// ListQueues returns one page of the queues f selects (by namespace and
// task), newest first, with their partition counts and figures, and how
// many match in all.
func (s *Store) ListQueues(ctx context.Context, f queengo.ResourceFilter) ([]queengo.QueueSummary, int, error) {
	var out []queengo.QueueSummary
	var total int
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		if err := c.QueryRow(ctx, `SELECT count(*) FROM queen.queues
 WHERE ($1 = '' OR namespace = $1) AND ($2 = '' OR task = $2)`, f.Namespace, f.Task).Scan(&total); err != nil {
			return err
		}
		rows, err := c.Query(ctx, `WITH page AS (
    SELECT `+queueColumns+`, created_at FROM queen.queues
     WHERE ($1 = '' OR namespace = $1) AND ($2 = '' OR task = $2)
     ORDER BY created_at DESC, name LIMIT $3 OFFSET $4)
SELECT page.*, count(f.partition_id)::integer, `+figureSums+`
  FROM page
  LEFT JOIN queen.partitions p ON p.queue_id = page.id
  LEFT JOIN queen.partition_figures(ARRAY(SELECT p1.id FROM queen.partitions p1
                                           WHERE p1.queue_id IN (SELECT id FROM page)), false) f ON f.partition_id = p.id
 GROUP BY `+pageColumns+`
 ORDER BY page.created_at DESC, page.name`, f.Namespace, f.Task, f.Limit, f.Offset)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.QueueSummary, error) {
			return scanQueueSummary(r)
		})
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("error listing queues: %w", err)
	}
	return out, total, nil
}

// pageColumns are the queue columns of the CTE page, for GROUP BY.
const pageColumns = `page.id, page.name, page.namespace, page.task, page.lease_time, page.retry_limit,
page.retry_delay, page.priority, page.max_queue_size, page.ttl, page.dead_letter_queue, page.dlq_after_max_retries,
page.delayed_processing, page.window_buffer, page.retention_seconds, page.completed_retention_seconds,
page.retention_enabled, page.encryption_enabled, page.max_wait_time_seconds, page.min_pop_wait_time, page.created_at`

func scanQueueSummary(row pgx.Row) (queengo.QueueSummary, error) {
	var q queengo.QueueSummary
	o := &q.Options
	dest := []any{&q.ID, &q.Name, &q.Namespace, &q.Task, &o.LeaseTime, &o.RetryLimit, &o.RetryDelay,
		&o.Priority, &o.MaxSize, &o.TTL, &o.DeadLetterQueue, &o.DLQAfterMaxRetries, &o.DelayedProcessing,
		&o.WindowBuffer, &o.RetentionSeconds, &o.CompletedRetentionSeconds, &o.RetentionEnabled,
		&o.EncryptionEnabled, &o.MaxWaitTimeSeconds, &o.MinPopWaitTime, &q.CreatedAt, &q.Partitions}
	err := row.Scan(append(dest, countsDest(&q.Messages)...)...)
	return q, err
}

// GetQueue returns a queue with its options, the totals over all its
// partitions and one page of its partitions (by name, f.Limit and f.Offset),
// or an error wrapping queengo.ErrNotFound.
func (s *Store) GetQueue(ctx context.Context, name string, f queengo.ResourceFilter) (queengo.QueueResource, error) {
	var d queengo.QueueResource
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		d.QueueSummary, err = scanQueueSummary(c.QueryRow(ctx, `WITH page AS (
    SELECT `+queueColumns+`, created_at FROM queen.queues WHERE name = $1)
SELECT page.*, count(f.partition_id)::integer, `+figureSums+`
  FROM page
  LEFT JOIN queen.partition_figures(ARRAY(SELECT p.id FROM queen.partitions p JOIN page ON p.queue_id = page.id), false) f
         ON true
 GROUP BY `+pageColumns, name))
		if err != nil {
			return err
		}
		d.Page, err = partitionPage(ctx, c, `p.queue_id = $1`, []any{d.ID}, `p.name`, `page.name`, f.Limit, f.Offset)
		return err
	})
	if err != nil {
		return d, fmt.Errorf("error reading queue %q: %w", name, err)
	}
	return d, nil
}

// partitionPage returns one page of the partitions where (over queen.partitions
// p and queen.queues q, with args) selects, in order (pageOrder: the same
// over the page's columns), with their figures.
func partitionPage(ctx context.Context, c *pgxpool.Conn, where string, args []any, order, pageOrder string, limit, offset int) ([]queengo.PartitionSummary, error) {
	n := len(args)
	rows, err := c.Query(ctx, fmt.Sprintf(`WITH page AS (
    SELECT p.id, p.name, q.name AS queue, p.created_at, p.head, p.last_write_at
      FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE %s ORDER BY %s LIMIT $%d OFFSET $%d)
SELECT page.id, page.name, page.queue, page.created_at, page.head, page.last_write_at,
       f.total, f.pending, f.processing, f.completed, f.failed, f.dead_letter, f.oldest_at, f.newest_at
  FROM page JOIN queen.partition_figures(ARRAY(SELECT id FROM page), true) f ON f.partition_id = page.id
 ORDER BY %s`, where, order, n+1, n+2, pageOrder), append(args, limit, offset)...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.PartitionSummary, error) {
		var p queengo.PartitionSummary
		var lw, oldest, newest pgtype.Timestamptz
		dest := []any{&p.ID, &p.Name, &p.Queue, &p.CreatedAt, &p.Head, &lw}
		dest = append(dest, countsDest(&p.Messages)...)
		err := r.Scan(append(dest, &oldest, &newest)...)
		p.LastWriteAt, p.OldestAt, p.NewestAt = lw.Time, oldest.Time, newest.Time
		return p, err
	})
}

// ListPartitions returns one page of the partitions f selects (by queue,
// namespace and task), by queue and partition name, and how many match in
// all; a queue f names that does not exist is a *queengo.MissingError.
func (s *Store) ListPartitions(ctx context.Context, f queengo.ResourceFilter) ([]queengo.PartitionSummary, int, error) {
	var out []queengo.PartitionSummary
	var total int
	const where = `($1 = '' OR q.name = $1) AND ($2 = '' OR q.namespace = $2) AND ($3 = '' OR q.task = $3)`
	args := []any{f.Queue, f.Namespace, f.Task}
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		if f.Queue != "" {
			var id uuid.UUID
			err := c.QueryRow(ctx, `SELECT id FROM queen.queues WHERE name = $1`, f.Queue).Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				return &queengo.MissingError{What: queengo.MissingQueue}
			}
			if err != nil {
				return err
			}
		}
		if err := c.QueryRow(ctx, `SELECT count(*) FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE `+where, args...).Scan(&total); err != nil {
			return err
		}
		var err error
		out, err = partitionPage(ctx, c, where, args, `q.name, p.name`, `page.queue, page.name`, f.Limit, f.Offset)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("error listing partitions: %w", err)
	}
	return out, total, nil
}

// ListGroupings returns one page of the namespaces (by "namespace") or tasks
// (by "task") of the queues, by name, with their queue and partition counts
// and figures, and how many there are; queues without one are left out.
// The figures of every partition are computed (a page of namespaces covers
// most of them; passing thousands of ids costs more to plan than that).
func (s *Store) ListGroupings(ctx context.Context, by string, limit, offset int) ([]queengo.GroupingSummary, int, error) {
	if by != "namespace" && by != "task" {
		return nil, 0, errors.New("grouping must be namespace or task")
	}
	var out []queengo.GroupingSummary
	var total int
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		if err := c.QueryRow(ctx, `SELECT count(DISTINCT `+by+`) FROM queen.queues WHERE `+by+` <> ''`).Scan(&total); err != nil {
			return err
		}
		rows, err := c.Query(ctx, `WITH page AS (
    SELECT DISTINCT `+by+` AS name FROM queen.queues WHERE `+by+` <> '' ORDER BY 1 LIMIT $1 OFFSET $2)
SELECT page.name, count(DISTINCT q.id)::integer, count(f.partition_id)::integer, `+figureSums+`
  FROM page
  JOIN queen.queues q ON q.`+by+` = page.name
  LEFT JOIN queen.partitions p ON p.queue_id = q.id
  LEFT JOIN queen.partition_figures(NULL, false) f ON f.partition_id = p.id
 GROUP BY page.name ORDER BY page.name`, limit, offset)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.GroupingSummary, error) {
			var g queengo.GroupingSummary
			err := r.Scan(append([]any{&g.Name, &g.Queues, &g.Partitions}, countsDest(&g.Messages)...)...)
			return g, err
		})
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("error listing %ss: %w", by, err)
	}
	return out, total, nil
}

// ClearQueue drops every retained message of the queue, or of its partition
// when partition is not empty, and moves every cursor there to the head
// (queen.clear_queue). An unknown queue or partition is a
// *queengo.MissingError naming which.
func (s *Store) ClearQueue(ctx context.Context, queue, partition string) (queengo.Cleared, error) {
	var out queengo.Cleared
	var outcome string
	var part any
	if partition != "" {
		part = partition
	}
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var cleared pgtype.Int4
		var dropped pgtype.Int8
		err := c.QueryRow(ctx, `SELECT outcome, cleared, dropped FROM queen.clear_queue($1, $2)`, queue, part).Scan(&outcome,
			&cleared, &dropped)
		out.Partitions, out.Messages = int(cleared.Int32), dropped.Int64
		return err
	})
	if err == nil && outcome != "ok" {
		err = &queengo.MissingError{What: outcome}
	}
	if err != nil {
		return out, fmt.Errorf("error clearing queue %q: %w", queue, err)
	}
	return out, nil
}
