package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// The writing side of `queengo import queen`: the Store's methods that put
// a Queen database's rows into queengo's tables (sql/functions/import.sql
// has the statements and what each keeps of the broker's invariants).

// ErrImportDiverged is a partition written by someone other than the import
// since the import last wrote it (a broker's push, or its messages dropped
// by retention): the import does not append to it.
var ErrImportDiverged = errors.New("written on queengo since the import")

// codeImportDiverged is import_segments' refusal of a partition whose head
// moved.
const codeImportDiverged = "QG409"

// DatabaseKind says what the database of the store holds: "queengo"
// (queengo's schema), "queen" (a reference Queen server's tables), "" (no
// schema queen) or "other" (a schema queen of neither).
func (s *Store) DatabaseKind(ctx context.Context) (string, error) {
	var kind string
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT CASE
    WHEN to_regclass('queen.segments') IS NOT NULL THEN 'queengo'
    WHEN to_regclass('queen.messages') IS NOT NULL THEN 'queen'
    WHEN EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = 'queen') THEN 'other'
    ELSE '' END`).Scan(&kind)
	})
	if err != nil {
		return "", fmt.Errorf("error reading what the database holds: %w", err)
	}
	return kind, nil
}

// ImportedQueue is a queue of queengo's database that bears the name or the
// id of a queue being imported.
type ImportedQueue struct {
	ID   uuid.UUID
	Name string
}

// ImportQueuesByName returns the queues named names or with the ids ids.
func (s *Store) ImportQueuesByName(ctx context.Context, names []string, ids []uuid.UUID) ([]ImportedQueue, error) {
	var out []ImportedQueue
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT id, name FROM queen.queues WHERE name = ANY ($1) OR id = ANY ($2) ORDER BY name`,
			names, pgUUIDs(ids))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[ImportedQueue])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the queues: %w", err)
	}
	return out, nil
}

// ImportTail is a partition of queengo's database as the import finds it.
type ImportTail struct {
	ID      uuid.UUID
	QueueID uuid.UUID
	Name    string
	// Head is the last offset written there.
	Head int64
	// Last is the newest stored message's place in the reference's order
	// (zero when it stores none); Stored how many messages it stores.
	Last   Keyset
	Stored int64
}

// ImportTails returns the partitions with the ids ids, and every partition
// of the queues queues (a partition of an imported queue that bears a
// name being imported under another id is a conflict).
func (s *Store) ImportTails(ctx context.Context, ids, queues []uuid.UUID) ([]ImportTail, error) {
	var out []ImportTail
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		// A statement, not a function of sql/functions: a dry run reads a
		// queengo database without migrating it, whatever build made it.
		// The last message's id is the 16 bytes after its frame's flags
		// (pg/frames.go).
		rows, err := c.Query(ctx, `SELECT p.id, p.queue_id, p.name, p.head, s.created_at,
       encode(substring(queen.frame_at(s.frames, s.ends, cardinality(s.ends) - 1) FROM 2 FOR 16), 'hex')::uuid,
       coalesce((SELECT sum(x.last_offset - x.first_offset + 1) FROM queen.segments x
                  WHERE x.partition_id = p.id), 0)::bigint
  FROM queen.partitions p
  LEFT JOIN LATERAL (SELECT l.created_at, l.frames, l.ends FROM queen.segments l
                      WHERE l.partition_id = p.id ORDER BY l.first_offset DESC LIMIT 1) s ON true
 WHERE p.id = ANY ($1) OR p.queue_id = ANY ($2)`, pgUUIDs(ids), pgUUIDs(queues))
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ImportTail, error) {
			var t ImportTail
			var at pgtype.Timestamptz
			var id pgtype.UUID
			err := r.Scan(&t.ID, &t.QueueID, &t.Name, &t.Head, &at, &id, &t.Stored)
			t.Last = Keyset{at.Time, id.Bytes}
			return t, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the imported partitions: %w", err)
	}
	return out, nil
}

// ImportQueue writes the queue with its Queen id, name and options, or
// sets the options of the one the import wrote before; min_pop_wait_time,
// which Queen lacks, is 0 for a new queue and kept for one that exists.
func (s *Store) ImportQueue(ctx context.Context, q QueenQueue) error {
	o := q.Options
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO queen.queues (id, name, namespace, task, lease_time, retry_limit,
    retry_delay, priority, max_queue_size, ttl, dead_letter_queue, dlq_after_max_retries, delayed_processing,
    window_buffer, retention_seconds, completed_retention_seconds, retention_enabled, encryption_enabled,
    max_wait_time_seconds, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
ON CONFLICT (id) DO UPDATE SET namespace = EXCLUDED.namespace, task = EXCLUDED.task,
    lease_time = EXCLUDED.lease_time, retry_limit = EXCLUDED.retry_limit, retry_delay = EXCLUDED.retry_delay,
    priority = EXCLUDED.priority, max_queue_size = EXCLUDED.max_queue_size, ttl = EXCLUDED.ttl,
    dead_letter_queue = EXCLUDED.dead_letter_queue, dlq_after_max_retries = EXCLUDED.dlq_after_max_retries,
    delayed_processing = EXCLUDED.delayed_processing, window_buffer = EXCLUDED.window_buffer,
    retention_seconds = EXCLUDED.retention_seconds, completed_retention_seconds = EXCLUDED.completed_retention_seconds,
    retention_enabled = EXCLUDED.retention_enabled, encryption_enabled = EXCLUDED.encryption_enabled,
    max_wait_time_seconds = EXCLUDED.max_wait_time_seconds, updated_at = now()
WHERE (queues.namespace, queues.task, queues.lease_time, queues.retry_limit, queues.retry_delay, queues.priority,
       queues.max_queue_size, queues.ttl, queues.dead_letter_queue, queues.dlq_after_max_retries,
       queues.delayed_processing, queues.window_buffer, queues.retention_seconds,
       queues.completed_retention_seconds, queues.retention_enabled, queues.encryption_enabled,
       queues.max_wait_time_seconds)
   IS DISTINCT FROM
      (EXCLUDED.namespace, EXCLUDED.task, EXCLUDED.lease_time, EXCLUDED.retry_limit, EXCLUDED.retry_delay,
       EXCLUDED.priority, EXCLUDED.max_queue_size, EXCLUDED.ttl, EXCLUDED.dead_letter_queue,
       EXCLUDED.dlq_after_max_retries, EXCLUDED.delayed_processing, EXCLUDED.window_buffer,
       EXCLUDED.retention_seconds, EXCLUDED.completed_retention_seconds, EXCLUDED.retention_enabled,
       EXCLUDED.encryption_enabled, EXCLUDED.max_wait_time_seconds)`,
			q.ID, q.Name, q.Namespace, q.Task, o.LeaseTime, o.RetryLimit, o.RetryDelay, o.Priority, o.MaxSize, o.TTL,
			o.DeadLetterQueue, o.DLQAfterMaxRetries, o.DelayedProcessing, o.WindowBuffer, o.RetentionSeconds,
			o.CompletedRetentionSeconds, o.RetentionEnabled, o.EncryptionEnabled, o.MaxWaitTimeSeconds, q.CreatedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("error writing queue %q: %w", q.Name, err)
	}
	return nil
}

// ImportPartition writes the partition with its Queen id, empty, unless it
// is there.
func (s *Store) ImportPartition(ctx context.Context, p QueenPartition) error {
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO queen.partitions (id, queue_id, name, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO NOTHING`, p.ID, p.QueueID, p.Name, p.CreatedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("error writing partition %q: %w", p.Name, err)
	}
	return nil
}

// Import segment caps: a run of messages Queen created together (one push
// call: they share created_at) becomes one segment, as the writes a push
// coalesces do, cut at these so that no segment is far larger than what
// pushes write (a pop copies a segment's frames out by its ends, and a
// claim decodes a segment from its start).
const (
	importSegmentMessages = 1000
	importSegmentBytes    = 1 << 20
)

// ImportMessages appends msgs, the next messages of a Queen partition in
// its order, to the partition, whose head must be head (what the import
// wrote there so far): a partition written since is ErrImportDiverged.
// Payloads are sealed with the store's key where the queue has
// encryptionEnabled or Queen had encrypted them (seal). Returns the new
// head.
func (s *Store) ImportMessages(ctx context.Context, partition uuid.UUID, head int64, msgs []QueenMessage, seal bool) (int64, error) {
	if len(msgs) == 0 {
		return head, nil
	}
	args, err := encodeImport(partition, head, msgs, seal, s.seal)
	if err != nil {
		return head, fmt.Errorf("error encoding the messages of partition %s: %w", partition, err)
	}
	var out int64
	err = s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT queen.import_segments($1, $2, $3, $4, $5, $6, $7)`, args...).Scan(&out)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeImportDiverged {
		return head, fmt.Errorf("partition %s: %w (%s)", partition, ErrImportDiverged, pgErr.Message)
	}
	if err != nil {
		return head, fmt.Errorf("error writing the messages of partition %s: %w", partition, err)
	}
	return out, nil
}

// encodeImport makes import_segments' arguments: msgs cut into segments
// (a new one where created_at or sealing changes, or past the caps), each
// frame encoded (pg/frames.go) and sealed with key where it must be.
func encodeImport(partition uuid.UUID, head int64, msgs []QueenMessage, seal bool, key *sealKey) ([]any, error) {
	sealed := 0
	size := 0
	for i := range msgs {
		if seal || msgs[i].Encrypted {
			sealed++
		}
		size += 40 + len(msgs[i].TransactionID) + len(msgs[i].ProducerSub) + len(msgs[i].Payload)
	}
	var sl *sealer
	if sealed > 0 {
		if key == nil {
			return nil, queengo.ErrEncryptionUnavailable
		}
		sl = &sealer{key: key}
		sl.reserve(sealed)
		size += sealed * sealedOverhead
	}
	segOf := make([]int32, len(msgs))
	var created []time.Time
	txids := make([]string, len(msgs))
	ids := make([]uuid.UUID, len(msgs))
	frames := make([][]byte, len(msgs))
	buf := make([]byte, 0, size)
	segN, segBytes := 0, 0
	var segAt time.Time
	segSealed := false
	for i := range msgs {
		m := &msgs[i]
		mSealed := seal || m.Encrypted
		if len(created) == 0 || !m.CreatedAt.Equal(segAt) || mSealed != segSealed ||
			segN >= importSegmentMessages || segBytes >= importSegmentBytes {
			created = append(created, m.CreatedAt)
			segAt, segSealed, segN, segBytes = m.CreatedAt, mSealed, 0, 0
		}
		var fs *sealer
		if mSealed {
			fs = sl
		}
		start := len(buf)
		buf = appendFrame(buf, &m.Frame, fs)
		frames[i] = buf[start:len(buf):len(buf)]
		segOf[i] = int32(len(created))
		txids[i], ids[i] = m.TransactionID, m.ID
		segN++
		segBytes += len(frames[i])
	}
	return []any{pgUUID(partition), head, segOf, created, txids, pgUUIDs(ids), frames}, nil
}

// ImportedCursor is a cursor after the import: Committed its committed
// offset, Written whether this run wrote it (else it was kept: it is past
// the place the import computed, or holds a live lease).
type ImportedCursor struct {
	Partition uuid.UUID
	Group     string
	Committed int64
	Written   bool
}

// ImportCursors puts the cursors where the groups stand on Queen, never
// moving one back (queen.import_cursors).
func (s *Store) ImportCursors(ctx context.Context, cs []QueenCursor) ([]ImportedCursor, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	n := len(cs)
	parts, groups, next := make([]uuid.UUID, n), make([]string, n), make([]pgtype.Text, n)
	consumed, lastAt, created, failures := make([]int64, n), make([]pgtype.Timestamptz, n), make([]time.Time, n), make([]int32, n)
	for i, c := range cs {
		parts[i], groups[i], consumed[i], created[i], failures[i] = c.Partition, c.Group, c.Consumed, c.CreatedAt, int32(c.Failures)
		next[i] = pgtype.Text{String: c.NextTxID, Valid: c.Next != uuid.Nil}
		lastAt[i] = pgtype.Timestamptz{Time: c.LastConsumedAt, Valid: !c.LastConsumedAt.IsZero()}
	}
	var out []ImportedCursor
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT * FROM queen.import_cursors($1, $2, $3, $4, $5, $6, $7)`,
			pgUUIDs(parts), groups, next, consumed, lastAt, created, failures)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, pgx.RowToStructByPos[ImportedCursor])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error writing the cursors: %w", err)
	}
	return out, nil
}

// ImportSubscription writes the durable subscription of a group on the
// queue (D6): a "new" record keeps its time, anything else is a
// "timestamp" record from From (the reference seeds from the record's
// time whatever its mode says).
func (s *Store) ImportSubscription(ctx context.Context, queue uuid.UUID, sub QueenSubscription) error {
	mode := "timestamp"
	if sub.Mode == "new" {
		mode = "new"
	}
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO queen.subscriptions (queue_id, consumer_group, mode, from_ts, created_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (queue_id, consumer_group) DO UPDATE SET mode = EXCLUDED.mode, from_ts = EXCLUDED.from_ts
WHERE (subscriptions.mode, subscriptions.from_ts) IS DISTINCT FROM (EXCLUDED.mode, EXCLUDED.from_ts)`,
			queue, sub.Group, mode, sub.From, sub.CreatedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("error writing the subscription of %q on queue %q: %w", sub.Group, sub.Queue, err)
	}
	return nil
}

// ImportDeadLetters copies the dead letters (queen.import_dead_letters)
// and returns how many it wrote.
func (s *Store) ImportDeadLetters(ctx context.Context, ds []QueenDeadLetter) (int, error) {
	if len(ds) == 0 {
		return 0, nil
	}
	n := len(ds)
	ids, parts, groups, txids, errs := make([]uuid.UUID, n), make([]uuid.UUID, n), make([]string, n), make([]string, n), make([]string, n)
	retries, created, failed := make([]int32, n), make([]time.Time, n), make([]time.Time, n)
	for i, d := range ds {
		ids[i], parts[i], groups[i], txids[i], errs[i] = d.ID, d.Partition, d.Group, d.TransactionID, d.Error
		retries[i], created[i], failed[i] = int32(d.RetryCount), d.CreatedAt, d.FailedAt
	}
	var wrote int
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT queen.import_dead_letters($1, $2, $3, $4, $5, $6, $7, $8)`,
			pgUUIDs(ids), pgUUIDs(parts), groups, txids, errs, retries, created, failed).Scan(&wrote)
	})
	if err != nil {
		return 0, fmt.Errorf("error writing the dead letters: %w", err)
	}
	return wrote, nil
}

// ImportTraces copies the traces (queen.import_traces) and returns how
// many it wrote.
func (s *Store) ImportTraces(ctx context.Context, ts []QueenTrace) (int, error) {
	if len(ts) == 0 {
		return 0, nil
	}
	n := len(ts)
	ids, parts, txids, groups, events := make([]uuid.UUID, n), make([]uuid.UUID, n), make([]string, n), make([]string, n), make([]string, n)
	data, workers, created := make([]string, n), make([]string, n), make([]time.Time, n)
	var of []int32
	var names []string
	for i, t := range ts {
		ids[i], parts[i], txids[i], groups[i], events[i] = t.ID, t.Partition, t.TransactionID, t.Group, t.EventType
		data[i], workers[i], created[i] = string(t.Data), t.WorkerID, t.CreatedAt
		for _, name := range t.Names {
			of = append(of, int32(i+1))
			names = append(names, name)
		}
	}
	var wrote int
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT queen.import_traces($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			pgUUIDs(ids), pgUUIDs(parts), txids, groups, events, data, workers, created, of, names).Scan(&wrote)
	})
	if err != nil {
		return 0, fmt.Errorf("error writing the traces: %w", err)
	}
	return wrote, nil
}

// ImportTraceStats sets the trace names' counters of the partitions from
// their traces (queen.import_trace_stats).
func (s *Store) ImportTraceStats(ctx context.Context, partitions []uuid.UUID) error {
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `SELECT queen.import_trace_stats($1)`, pgUUIDs(partitions))
		return err
	})
	if err != nil {
		return fmt.Errorf("error counting the trace names: %w", err)
	}
	return nil
}

// ImportedCursorAt is a group's cursor on a partition of queengo's
// database, read back for the verification: Next and NextTxID name the
// message at committed+1 (uuid.Nil and "" when the group consumed
// everything stored), Pending is how many stored messages it has not
// consumed.
type ImportedCursorAt struct {
	Partition uuid.UUID
	Group     string
	Committed int64
	Next      uuid.UUID
	NextTxID  string
	Pending   int64
}

// ImportedCursors reads the cursors of the partitions.
func (s *Store) ImportedCursors(ctx context.Context, partitions []uuid.UUID) ([]ImportedCursorAt, error) {
	var out []ImportedCursorAt
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT c.partition_id, c.consumer_group, c.committed,
    substring(queen.frame_at(s.frames, s.ends, (c.committed + 1 - s.first_offset)::integer) FROM 1 FOR $2),
    greatest(p.head - c.committed, 0)
FROM queen.cursors c
JOIN queen.partitions p ON p.id = c.partition_id
LEFT JOIN queen.segments s ON s.partition_id = c.partition_id AND s.first_offset <= c.committed + 1
                          AND s.last_offset >= c.committed + 1
WHERE c.partition_id = ANY ($1)
ORDER BY c.partition_id, c.consumer_group`, pgUUIDs(partitions), listHeadMax)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ImportedCursorAt, error) {
			var a ImportedCursorAt
			var head []byte
			if err := r.Scan(&a.Partition, &a.Group, &a.Committed, &head, &a.Pending); err != nil || head == nil {
				return a, err
			}
			var f queengo.Frame
			err := frameHead(head, &f)
			a.Next, a.NextTxID = f.ID, f.TransactionID
			return a, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the cursors: %w", err)
	}
	return out, nil
}

// ImportedCounts returns, per partition that has any, its listed dead
// letters and its traces.
func (s *Store) ImportedCounts(ctx context.Context, partitions []uuid.UUID) (map[uuid.UUID]QueenCounts, error) {
	out := map[uuid.UUID]QueenCounts{}
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT p, sum(d)::bigint, sum(t)::bigint FROM (
    SELECT partition_id AS p, 1 AS d, 0 AS t FROM queen.dead_letters WHERE partition_id = ANY ($1) AND listed
    UNION ALL
    SELECT partition_id, 0, 1 FROM queen.traces WHERE partition_id = ANY ($1)) x
GROUP BY p`, pgUUIDs(partitions))
		if err != nil {
			return err
		}
		var id uuid.UUID
		var n QueenCounts
		_, err = pgx.ForEachRow(rows, []any{&id, &n.DeadLetters, &n.Traces}, func() error {
			out[id] = n
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error counting the dead letters and traces: %w", err)
	}
	return out, nil
}

// CanSeal reports whether the store has an encryption key to seal with.
func (s *Store) CanSeal() bool { return s.seal != nil }
