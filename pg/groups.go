package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// The consumer-group admin statements (sql/functions/groups.sql).

// ListGroups returns one page of the consumer-group list: one entry per
// (group, queue) the group has a cursor or a subscription record on, by
// group, then queue, in byte order.
func (s *Store) ListGroups(ctx context.Context, limit, offset int) ([]queengo.GroupSummary, error) {
	var out []queengo.GroupSummary
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT consumer_group, queue_name, partitions, members, partitions_with_lag,
       total_lag, max_time_lag, consumed, last_activity, sub_mode, sub_from, sub_created
  FROM queen.group_list($1, $2)`, limit, offset)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var g queengo.GroupSummary
			var mode pgtype.Text
			var from, created *time.Time
			var parts, members, withLag int64
			if err := rows.Scan(&g.Group, &g.Queue, &parts, &members, &withLag, &g.TotalLag, &g.MaxTimeLag,
				&g.Consumed, &g.LastActivity, &mode, &from, &created); err != nil {
				return err
			}
			g.Partitions, g.Members, g.PartitionsWithLag = int(parts), int(members), int(withLag)
			if mode.Valid {
				g.Subscription = &queengo.Subscription{Mode: mode.String, From: from}
				if created != nil {
					g.Subscription.CreatedAt = *created
				}
			}
			out = append(out, g)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("error listing consumer groups: %w", err)
	}
	return out, nil
}

// LaggingGroups returns one page of the cursors whose oldest unconsumed
// message was written at least minLag ago, the longest waiting first.
func (s *Store) LaggingGroups(ctx context.Context, minLag time.Duration, limit, offset int) ([]queengo.GroupPartition, error) {
	var out []queengo.GroupPartition
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT consumer_group, queue_name, partition_name, partition_id, lease_id,
       last_consumed_at, total_consumed, offset_lag, oldest_unconsumed_at, time_lag_seconds
  FROM queen.group_lagging($1, $2, $3)`, int64(minLag/time.Second), limit, offset)
		if err != nil {
			return err
		}
		out, err = scanGroupPartitions(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing lagging consumer groups: %w", err)
	}
	return out, nil
}

// GroupPartitions returns one page of the group's cursors, by queue then
// partition, or a *queengo.MissingError when the group has neither a cursor
// nor a subscription record anywhere.
func (s *Store) GroupPartitions(ctx context.Context, group string, limit, offset int) ([]queengo.GroupPartition, error) {
	var out []queengo.GroupPartition
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT $1::text, queue_name, partition_name, partition_id, lease_id,
       last_consumed_at, total_consumed, offset_lag, oldest_unconsumed_at, time_lag_seconds
  FROM queen.group_partitions($1, $2, $3)`, group, limit, offset)
		if err != nil {
			return err
		}
		if out, err = scanGroupPartitions(rows); err != nil || len(out) > 0 {
			return err
		}
		var known bool
		if err := c.QueryRow(ctx, `SELECT queen.group_known($1, NULL)`, group).Scan(&known); err != nil {
			return err
		}
		if !known {
			return &queengo.MissingError{What: queengo.MissingGroup}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error reading consumer group: %w", err)
	}
	return out, nil
}

func scanGroupPartitions(rows pgx.Rows) ([]queengo.GroupPartition, error) {
	defer rows.Close()
	var out []queengo.GroupPartition
	for rows.Next() {
		var g queengo.GroupPartition
		var lease pgtype.UUID
		if err := rows.Scan(&g.Group, &g.Queue, &g.Partition, &g.PartitionID, &lease, &g.LastConsumedAt,
			&g.TotalConsumed, &g.OffsetLag, &g.OldestUnconsumedAt, &g.TimeLagSeconds); err != nil {
			return nil, err
		}
		if lease.Valid {
			g.LeaseID = uuid.UUID(lease.Bytes)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// missingOf is the failure the missing column of delete_group and
// seek_group reports ('queue', 'partition' or 'group'), nil when NULL.
func missingOf(m pgtype.Text) error {
	switch {
	case !m.Valid:
		return nil
	case m.String == "group":
		return &queengo.MissingError{What: queengo.MissingGroup}
	}
	return &queengo.MissingError{What: m.String}
}

// DeleteGroup deletes the group's cursors on queue (every queue when
// empty) with their attempt counts and, with metadata, its subscription
// records there. An unknown queue, or a group with neither a cursor nor a
// record there, is a *queengo.MissingError, and nothing is deleted.
func (s *Store) DeleteGroup(ctx context.Context, group, queue string, metadata bool) (queengo.GroupDeleted, error) {
	var res queengo.GroupDeleted
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var missing pgtype.Text
		var queues []string
		var parts []uuid.UUID
		var q pgtype.Text
		if queue != "" {
			q = pgtype.Text{String: queue, Valid: true}
		}
		if err := c.QueryRow(ctx, `SELECT missing, queues, partitions FROM queen.delete_group($1, $2, $3)`,
			group, q, metadata).Scan(&missing, &queues, &parts); err != nil {
			return err
		}
		if err := missingOf(missing); err != nil {
			return err
		}
		for i, pid := range parts {
			res.Cursors = append(res.Cursors, queengo.GroupCursor{Queue: queues[i], Partition: pid})
		}
		return nil
	})
	if err != nil {
		return queengo.GroupDeleted{}, fmt.Errorf("error deleting consumer group %q: %w", group, err)
	}
	return res, nil
}

// SeekGroup moves the group's cursors on the queue (or one partition) to
// the end or to a time, releasing their leases. An unknown queue or
// partition, or a group with neither a cursor nor a record on the queue, is
// a *queengo.MissingError, and nothing moves.
func (s *Store) SeekGroup(ctx context.Context, seek queengo.GroupSeek) (queengo.GroupSought, error) {
	var res queengo.GroupSought
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var missing, part pgtype.Text
		var at pgtype.Timestamptz
		var parts []uuid.UUID
		if seek.Partition != "" {
			part = pgtype.Text{String: seek.Partition, Valid: true}
		}
		if !seek.ToEnd {
			at = pgtype.Timestamptz{Time: seek.At, Valid: true}
		}
		if err := c.QueryRow(ctx, `SELECT missing, partitions, head_at FROM queen.seek_group($1, $2, $3, $4, $5)`,
			seek.Group, seek.Queue, part, seek.ToEnd, at).Scan(&missing, &parts, &res.HeadAt); err != nil {
			return err
		}
		if err := missingOf(missing); err != nil {
			return err
		}
		for _, pid := range parts {
			res.Moved = append(res.Moved, queengo.GroupCursor{Queue: seek.Queue, Partition: pid})
		}
		return nil
	})
	if err != nil {
		return queengo.GroupSought{}, fmt.Errorf("error seeking consumer group %q: %w", seek.Group, err)
	}
	return res, nil
}

// statsSteps are the statements of a statistics report, one per step, each
// an aggregate over queue, partition or cursor rows (never segments).
var statsSteps = []struct {
	names []string
	sql   string
}{
	{[]string{"partitions", "messagesWritten", "cursors", "cursorsWithLag"}, `SELECT
       (SELECT count(*) FROM queen.partitions), (SELECT coalesce(sum(head), 0)::bigint FROM queen.partitions),
       count(*), count(*) FILTER (WHERE p.head > c.committed)
  FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id`},
	{[]string{"queues"}, `SELECT count(*) FROM queen.queues`},
	{[]string{"namespaces"}, `SELECT count(DISTINCT namespace) FROM queen.queues WHERE namespace <> ''`},
	{[]string{"tasks"}, `SELECT count(DISTINCT task) FROM queen.queues WHERE task <> ''`},
	{[]string{"consumerGroups", "activeLeases", "totalLag"}, `SELECT
       (SELECT count(*) FROM (SELECT consumer_group FROM queen.cursors
                               UNION SELECT consumer_group FROM queen.subscriptions) g),
       count(*) FILTER (WHERE c.lease_id IS NOT NULL AND c.lease_expires_at > now()),
       coalesce(sum(greatest(p.head - c.committed, 0)), 0)::bigint
  FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id`},
}

// StatsReport computes the figures of POST /api/v1/stats/refresh now, one
// statement per step, timing each.
func (s *Store) StatsReport(ctx context.Context) (queengo.StatsReport, error) {
	var rep queengo.StatsReport
	steps := []*queengo.StatsStep{&rep.Partition, &rep.Queue, &rep.Namespace, &rep.Task, &rep.System}
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		for i, st := range statsSteps {
			start := time.Now()
			vals := make([]int64, len(st.names))
			dst := make([]any, len(vals))
			for k := range vals {
				dst[k] = &vals[k]
			}
			if err := c.QueryRow(ctx, st.sql).Scan(dst...); err != nil {
				return err
			}
			steps[i].Duration = time.Since(start)
			for k, n := range st.names {
				steps[i].Counts = append(steps[i].Counts, queengo.StatsCount{Name: n, Value: vals[k]})
			}
		}
		return nil
	})
	if err != nil {
		return queengo.StatsReport{}, fmt.Errorf("error computing statistics: %w", err)
	}
	return rep, nil
}
