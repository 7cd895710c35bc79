package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

const queueColumns = `id, name, namespace, task, lease_time, retry_limit, retry_delay, priority,
max_queue_size, ttl, dead_letter_queue, dlq_after_max_retries, delayed_processing, window_buffer,
retention_seconds, completed_retention_seconds, retention_enabled, encryption_enabled,
max_wait_time_seconds, min_pop_wait_time`

func scanQueue(row pgx.Row) (queengo.Queue, error) {
	var q queengo.Queue
	o := &q.Options
	err := row.Scan(&q.ID, &q.Name, &q.Namespace, &q.Task, &o.LeaseTime, &o.RetryLimit, &o.RetryDelay,
		&o.Priority, &o.MaxSize, &o.TTL, &o.DeadLetterQueue, &o.DLQAfterMaxRetries, &o.DelayedProcessing,
		&o.WindowBuffer, &o.RetentionSeconds, &o.CompletedRetentionSeconds, &o.RetentionEnabled,
		&o.EncryptionEnabled, &o.MaxWaitTimeSeconds, &o.MinPopWaitTime)
	return q, err
}

// EnsureQueue returns the queue, creating it with the column defaults and the
// namespace and task derived from its dotted name when it does not exist
// (implicit creation by a push or a queue-scoped pop).
func (s *Store) EnsureQueue(ctx context.Context, name string) (queengo.Queue, error) {
	var q queengo.Queue
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		q, err = ensureQueue(ctx, c, name)
		return err
	})
	if err != nil {
		return q, fmt.Errorf("error ensuring queue %q: %w", name, err)
	}
	return q, nil
}

func ensureQueue(ctx context.Context, c querier, name string) (queengo.Queue, error) {
	ns, task := queengo.DeriveNamespaceTask(name)
	var q queengo.Queue
	err := retryRace(func() error {
		var err error
		q, err = scanQueue(c.QueryRow(ctx, `WITH ins AS (
    INSERT INTO queen.queues (name, namespace, task) VALUES ($1, $2, $3)
    ON CONFLICT (name) DO NOTHING RETURNING `+queueColumns+`)
SELECT * FROM ins
UNION ALL
SELECT `+queueColumns+` FROM queen.queues WHERE name = $1
LIMIT 1`, name, ns, task))
		return err
	})
	return q, err
}

// QueuesInScope lists the queues of a discovery scope, highest priority first.
// An empty namespace or task matches any.
func (s *Store) QueuesInScope(ctx context.Context, namespace, task string) ([]queengo.Queue, error) {
	var out []queengo.Queue
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT `+queueColumns+` FROM queen.queues
WHERE ($1 = '' OR namespace = $1) AND ($2 = '' OR task = $2)
ORDER BY priority DESC, name`, namespace, task)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.Queue, error) { return scanQueue(r) })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error listing queues of scope %q/%q: %w", namespace, task, err)
	}
	return out, nil
}

// Configure creates or fully replaces a queue's settings (options left out
// by the caller must already carry their defaults) and makes sure its Default
// partition exists. It returns the stored queue and the Default partition id.
// encryptionEnabled on a store without an encryption key is refused with
// queengo.ErrEncryptionUnavailable, and nothing changes.
func (s *Store) Configure(ctx context.Context, name, namespace, task string, o queengo.QueueOptions) (queengo.Queue, uuid.UUID, error) {
	var q queengo.Queue
	var pid uuid.UUID
	if o.EncryptionEnabled && s.seal == nil {
		return q, pid, fmt.Errorf("error configuring queue %q: %w", name, queengo.ErrEncryptionUnavailable)
	}
	err := s.withTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		q, err = scanQueue(tx.QueryRow(ctx, `INSERT INTO queen.queues (name, namespace, task, lease_time, retry_limit,
    retry_delay, priority, max_queue_size, ttl, dead_letter_queue, dlq_after_max_retries, delayed_processing,
    window_buffer, retention_seconds, completed_retention_seconds, retention_enabled, encryption_enabled,
    max_wait_time_seconds, min_pop_wait_time)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
ON CONFLICT (name) DO UPDATE SET namespace = EXCLUDED.namespace, task = EXCLUDED.task,
    lease_time = EXCLUDED.lease_time, retry_limit = EXCLUDED.retry_limit, retry_delay = EXCLUDED.retry_delay,
    priority = EXCLUDED.priority, max_queue_size = EXCLUDED.max_queue_size, ttl = EXCLUDED.ttl,
    dead_letter_queue = EXCLUDED.dead_letter_queue, dlq_after_max_retries = EXCLUDED.dlq_after_max_retries,
    delayed_processing = EXCLUDED.delayed_processing, window_buffer = EXCLUDED.window_buffer,
    retention_seconds = EXCLUDED.retention_seconds,
    completed_retention_seconds = EXCLUDED.completed_retention_seconds,
    retention_enabled = EXCLUDED.retention_enabled, encryption_enabled = EXCLUDED.encryption_enabled,
    max_wait_time_seconds = EXCLUDED.max_wait_time_seconds, min_pop_wait_time = EXCLUDED.min_pop_wait_time,
    updated_at = EXCLUDED.updated_at
RETURNING `+queueColumns,
			name, namespace, task, o.LeaseTime, o.RetryLimit, o.RetryDelay, o.Priority, o.MaxSize, o.TTL,
			o.DeadLetterQueue, o.DLQAfterMaxRetries, o.DelayedProcessing, o.WindowBuffer, o.RetentionSeconds,
			o.CompletedRetentionSeconds, o.RetentionEnabled, o.EncryptionEnabled, o.MaxWaitTimeSeconds,
			o.MinPopWaitTime))
		if err != nil {
			return err
		}
		pid, err = ensurePartition(ctx, tx, q.ID, queengo.DefaultPartition, s.citus.Load())
		return err
	})
	if err != nil {
		return q, pid, fmt.Errorf("error configuring queue %q: %w", name, err)
	}
	return q, pid, nil
}

// EnsurePartition returns the id of the queue's partition, creating it when
// it does not exist.
func (s *Store) EnsurePartition(ctx context.Context, queueID uuid.UUID, name string) (uuid.UUID, error) {
	var pid uuid.UUID
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		pid, err = ensurePartition(ctx, c, queueID, name, s.citus.Load())
		return err
	})
	if err != nil {
		return pid, fmt.Errorf("error ensuring partition %q: %w", name, err)
	}
	return pid, nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ensurePartition creates the partition or finds the existing one. On one
// PostgreSQL a new partition gets a random id (a partition deleted and
// created again gets a new one). In the Citus mode (citus) its id is the
// one queen.partition_key derives from its queue and name, which a check
// holds every partition to (the uniqueness of the pair there, sql/citus),
// so the statement names the partition by that id alone and Citus routes it
// to one node; a lookup by queue and name would read every node.
func ensurePartition(ctx context.Context, q querier, queueID uuid.UUID, name string, citus bool) (uuid.UUID, error) {
	sql := ensurePartitionSQL
	if citus {
		sql = ensurePartitionCitusSQL
	}
	var pid uuid.UUID
	err := retryRace(func() error {
		return q.QueryRow(ctx, sql, queueID, name).Scan(&pid)
	})
	return pid, err
}

const ensurePartitionSQL = `WITH ins AS (
    INSERT INTO queen.partitions (queue_id, name) VALUES ($1, $2)
    ON CONFLICT (queue_id, name) DO NOTHING RETURNING id)
SELECT id FROM ins
UNION ALL
SELECT id FROM queen.partitions WHERE queue_id = $1 AND name = $2
LIMIT 1`

const ensurePartitionCitusSQL = `WITH ins AS (
    INSERT INTO queen.partitions (id, queue_id, name) VALUES (queen.partition_key($1, $2), $1, $2)
    ON CONFLICT DO NOTHING RETURNING id)
SELECT id FROM ins
UNION ALL
SELECT id FROM queen.partitions WHERE id = queen.partition_key($1, $2)
LIMIT 1`

// retryRace reruns an insert-or-select that found no row: a concurrent
// insert of the same key committed after the statement's snapshot was taken,
// so ON CONFLICT skipped the insert and the select could not see the winner.
// The next attempt's snapshot does.
func retryRace(fn func() error) error {
	var err error
	for range 3 {
		if err = fn(); !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	return err
}

// LookupPartition returns the id of an existing partition, or an error
// wrapping queengo.ErrNotFound.
func (s *Store) LookupPartition(ctx context.Context, queueID uuid.UUID, name string) (uuid.UUID, error) {
	var pid uuid.UUID
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		sql := `SELECT id FROM queen.partitions WHERE queue_id = $1 AND name = $2`
		if s.citus.Load() {
			// Every partition has its derived id there (ensurePartition):
			// one routed probe instead of a read of every node.
			sql = `SELECT id FROM queen.partitions WHERE id = queen.partition_key($1, $2)`
		}
		return c.QueryRow(ctx, sql, queueID, name).Scan(&pid)
	})
	return pid, err
}

// DeleteQueue removes the queue and, through ON DELETE CASCADE, everything
// under it. It reports whether the queue existed.
func (s *Store) DeleteQueue(ctx context.Context, name string) (bool, error) {
	var existed bool
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		// queen.delete_queue never waits for a lock (docs/storage.md,
		// "Lock order"); a plain DELETE could close a deadlock cycle.
		return c.QueryRow(ctx, `SELECT queen.delete_queue($1)`, name).Scan(&existed)
	})
	if err != nil {
		return false, fmt.Errorf("error deleting queue %q: %w", name, err)
	}
	return existed, nil
}
