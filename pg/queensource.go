package pg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// The reading of a reference Queen server's database, for `queengo import
// queen` (docs/operations.md, "Importing a Queen database"). Its layout
// (schema queen: queues, partitions, messages with one row per message
// ordered by (created_at, id), partition_consumers holding a cursor per
// (partition, group) as the last consumed (created_at, id), and the
// durable subscriptions, dead letters, traces and switches beside them)
// was learnt from a database the reference server made; every statement
// here is ours.

// ImportApplicationName is the application_name of the importer's
// connections: Horizon leaves them out of the transactions it waits for.
const ImportApplicationName = "queengo-import"

// ErrNotQueen is a source database that is not a reference Queen server's.
var ErrNotQueen = errors.New("not a Queen database")

// ErrBadURL is a database URL that does not parse.
var ErrBadURL = errors.New("not a database URL")

// QueenSourceConfig configures a QueenSource.
type QueenSourceConfig struct {
	// URL is the Queen database's libpq connection string or URL.
	URL string
	// Keys open the payloads Queen encrypted (its QUEEN_ENCRYPTION_KEY, 32
	// bytes); each is tried in turn. None: an encrypted payload fails the
	// read that meets it.
	Keys [][]byte
	// Logger receives the source's own log lines.
	Logger *slog.Logger
}

// QueenSource reads a reference Queen server's database. It only reads.
type QueenSource struct {
	pool *pgxpool.Pool
	keys []queenKey
}

// OpenQueenSource connects to the database of cfg and checks that it holds a
// Queen server's tables: a database without them is ErrNotQueen, naming
// what is missing.
func OpenQueenSource(ctx context.Context, cfg QueenSourceConfig) (*QueenSource, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	keys, err := loadQueenKeys(cfg.Keys)
	if err != nil {
		return nil, err
	}
	// One connection reads the messages while the other answers the small
	// reads between (cursors, counts): the importer never needs more.
	pcfg.MaxConns = 2
	pcfg.ConnConfig.RuntimeParams["application_name"] = ImportApplicationName
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("error connecting to the Queen database: %w", err)
	}
	s := &QueenSource{pool: pool, keys: keys}
	if err := s.checkLayout(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the source's connections.
func (s *QueenSource) Close() { s.pool.Close() }

// queenColumns are the columns of the reference's tables the importer
// reads; a database missing any of them is not one it can import.
var queenColumns = map[string][]string{
	"queues": {"id", "name", "namespace", "task", "priority", "lease_time", "retry_limit", "retry_delay", "ttl",
		"dead_letter_queue", "dlq_after_max_retries", "delayed_processing", "window_buffer", "retention_seconds",
		"completed_retention_seconds", "retention_enabled", "encryption_enabled", "max_wait_time_seconds",
		"max_queue_size", "created_at"},
	"partitions": {"id", "queue_id", "name", "created_at"},
	"messages": {"id", "transaction_id", "trace_id", "partition_id", "payload", "created_at", "is_encrypted",
		"producer_sub"},
	"partition_consumers": {"partition_id", "consumer_group", "last_consumed_id", "last_consumed_created_at",
		"total_messages_consumed", "last_consumed_at", "batch_retry_count", "created_at"},
	"consumer_groups_metadata": {"consumer_group", "queue_name", "partition_name", "subscription_mode",
		"subscription_timestamp", "created_at"},
	"dead_letter_queue": {"id", "message_id", "partition_id", "consumer_group", "error_message", "retry_count",
		"original_created_at", "failed_at"},
	"message_traces":      {"id", "partition_id", "transaction_id", "consumer_group", "event_type", "data", "created_at", "worker_id"},
	"message_trace_names": {"trace_id", "trace_name"},
	"system_state":        {"key", "value"},
}

// checkLayout compares the database's schema queen with queenColumns.
func (s *QueenSource) checkLayout(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT table_name::text, column_name::text FROM information_schema.columns
WHERE table_schema = 'queen'`)
	if err != nil {
		return fmt.Errorf("error reading the Queen database's tables: %w", translate(err))
	}
	have := map[string]map[string]bool{}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			rows.Close()
			return err
		}
		if have[t] == nil {
			have[t] = map[string]bool{}
		}
		have[t][c] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("error reading the Queen database's tables: %w", translate(err))
	}
	if have["segments"] != nil {
		return fmt.Errorf("%w: it holds queengo's tables (queen.segments): --from names the reference server's database", ErrNotQueen)
	}
	var missing []string
	for t, cols := range queenColumns {
		if have[t] == nil {
			missing = append(missing, "queen."+t)
			continue
		}
		for _, c := range cols {
			if !have[t][c] {
				missing = append(missing, "queen."+t+"."+c)
			}
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("%w: it lacks %s", ErrNotQueen, strings.Join(missing, ", "))
	}
	return nil
}

// QueenQueue is a queue of a Queen database, with its options.
type QueenQueue struct {
	queengo.Queue
	CreatedAt time.Time
}

// Queues returns every queue of the Queen database, by name. Options Queen
// leaves NULL are the values it acts on: its column defaults, and a lease
// of 60 s where lease_time is 0 or NULL (the reference's pop falls back to
// 60 then).
func (s *QueenSource) Queues(ctx context.Context) ([]QueenQueue, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, name, coalesce(namespace, ''), coalesce(task, ''),
    coalesce(priority, 0), coalesce(nullif(lease_time, 0), 60), coalesce(retry_limit, 3), coalesce(retry_delay, 1000),
    coalesce(ttl, 3600), coalesce(dead_letter_queue, false), coalesce(dlq_after_max_retries, false),
    coalesce(delayed_processing, 0), coalesce(window_buffer, 0), coalesce(retention_seconds, 0),
    coalesce(completed_retention_seconds, 0), coalesce(retention_enabled, false), coalesce(encryption_enabled, false),
    coalesce(max_wait_time_seconds, 0), coalesce(max_queue_size, 0), coalesce(created_at, now())
FROM queen.queues ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen queues: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueenQueue, error) {
		var q QueenQueue
		o := &q.Options
		err := r.Scan(&q.ID, &q.Name, &q.Namespace, &q.Task, &o.Priority, &o.LeaseTime, &o.RetryLimit, &o.RetryDelay,
			&o.TTL, &o.DeadLetterQueue, &o.DLQAfterMaxRetries, &o.DelayedProcessing, &o.WindowBuffer,
			&o.RetentionSeconds, &o.CompletedRetentionSeconds, &o.RetentionEnabled, &o.EncryptionEnabled,
			&o.MaxWaitTimeSeconds, &o.MaxSize, &q.CreatedAt)
		return q, err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen queues: %w", translate(err))
	}
	return out, nil
}

// QueenPartition is a partition of a Queen database and what it holds.
type QueenPartition struct {
	ID        uuid.UUID
	QueueID   uuid.UUID
	Name      string
	CreatedAt time.Time
	// Messages is how many messages it holds; Encrypted how many of them
	// Queen encrypted.
	Messages, Encrypted int64
	// Last is the newest message's place (zero when it holds none).
	Last Keyset
}

// Keyset is a message's place in its partition's order, (created_at, id):
// the reference server's delivery order.
type Keyset struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// IsZero reports whether k is before every message.
func (k Keyset) IsZero() bool { return k.CreatedAt.IsZero() && k.ID == uuid.Nil }

// Partitions returns the partitions of the queues, with the messages each
// holds (one pass over the messages of those queues).
func (s *QueenSource) Partitions(ctx context.Context, queues []uuid.UUID) ([]QueenPartition, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.id, p.queue_id, p.name, coalesce(p.created_at, now()),
    coalesce(m.n, 0), coalesce(m.enc, 0), l.created_at, l.id
FROM queen.partitions p
LEFT JOIN (SELECT partition_id, count(*) AS n, count(*) FILTER (WHERE is_encrypted) AS enc
             FROM queen.messages WHERE partition_id IN (SELECT id FROM queen.partitions WHERE queue_id = ANY ($1))
            GROUP BY partition_id) m ON m.partition_id = p.id
LEFT JOIN LATERAL (SELECT created_at, id FROM queen.messages
                    WHERE partition_id = p.id ORDER BY created_at DESC, id DESC LIMIT 1) l ON true
WHERE p.queue_id = ANY ($1)
ORDER BY p.queue_id, p.name`, pgUUIDs(queues))
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen partitions: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueenPartition, error) {
		var p QueenPartition
		var lastAt pgtype.Timestamptz
		var lastID pgtype.UUID
		err := r.Scan(&p.ID, &p.QueueID, &p.Name, &p.CreatedAt, &p.Messages, &p.Encrypted, &lastAt, &lastID)
		p.Last = Keyset{lastAt.Time, lastID.Bytes}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen partitions: %w", translate(err))
	}
	return out, nil
}

// Horizon returns the time before which every message of the Queen
// database has committed: the start of the oldest transaction that is
// running there and has written or is running a statement (a push's
// created_at is its transaction's start, so a push still to commit carries
// a created_at at or after it), or now when there is none. Reading only
// messages older than the horizon, a run never passes over a push that
// commits after it read its neighbours (the reference's late-commit
// hazard). Other roles' transactions count only when the connecting role
// may see them (a superuser, the owner of those sessions, or
// pg_read_all_stats).
func (s *QueenSource) Horizon(ctx context.Context) (time.Time, error) {
	var h time.Time
	err := s.pool.QueryRow(ctx, `SELECT least(now(), (SELECT min(a.xact_start) FROM pg_stat_activity a
    WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.xact_start IS NOT NULL
      AND a.application_name <> $1 AND (a.state = 'active' OR a.backend_xid IS NOT NULL)))`,
		ImportApplicationName).Scan(&h)
	if err != nil {
		return h, fmt.Errorf("error reading the Queen database's horizon: %w", translate(err))
	}
	return h, nil
}

// QueenMessage is one message of a Queen partition, its payload opened.
type QueenMessage struct {
	queengo.Frame
	CreatedAt time.Time
	// Encrypted: Queen stored the payload encrypted (it is opened here).
	Encrypted bool
}

// Keyset is the message's place in its partition's order.
func (m *QueenMessage) Keyset() Keyset { return Keyset{m.CreatedAt, m.ID} }

// Messages returns the messages of the partition after the place after,
// created before before, in delivery order: at most limit of them, and no
// more once their payloads reach maxBytes (at least one). Payloads are
// compacted JSON, opened when Queen encrypted them; an encrypted payload
// none of the source's keys opens is an error naming the message.
func (s *QueenSource) Messages(ctx context.Context, partition uuid.UUID, after Keyset, before time.Time, limit, maxBytes int) ([]QueenMessage, error) {
	from := after.CreatedAt
	if after.IsZero() {
		from = time.Time{}
	}
	fromArg := pgtype.Timestamptz{Time: from, Valid: true}
	if from.IsZero() {
		fromArg = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	rows, err := s.pool.Query(ctx, `SELECT id, transaction_id, trace_id, payload::text, created_at,
    coalesce(is_encrypted, false), producer_sub
FROM queen.messages
WHERE partition_id = $1 AND (created_at, id) > ($2, $3) AND created_at < $4
ORDER BY created_at, id LIMIT $5`, pgUUID(partition), fromArg, pgtype.UUID{Bytes: after.ID, Valid: true}, before, limit)
	if err != nil {
		return nil, fmt.Errorf("error reading the messages of partition %s: %w", partition, translate(err))
	}
	defer rows.Close()
	var out []QueenMessage
	size := 0
	var trace pgtype.UUID
	var sub pgtype.Text
	var payload []byte
	for rows.Next() {
		var m QueenMessage
		if err := rows.Scan(&m.ID, &m.TransactionID, &trace, &payload, &m.CreatedAt, &m.Encrypted, &sub); err != nil {
			return nil, fmt.Errorf("error reading the messages of partition %s: %w", partition, err)
		}
		if trace.Valid {
			m.TraceID = trace.Bytes
		}
		m.ProducerSub = sub.String
		if m.Payload, err = s.payload(payload, m.Encrypted); err != nil {
			return nil, fmt.Errorf("message %s (transaction id %q) of partition %s: %w", m.ID, m.TransactionID, partition, err)
		}
		out = append(out, m)
		if size += len(m.Payload); size >= maxBytes {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading the messages of partition %s: %w", partition, translate(err))
	}
	return out, nil
}

// payload returns the message's payload as compact JSON (jsonb's text has
// a space after every colon and comma; a push stores what the producer
// sent, compacted), opened when Queen encrypted it.
func (s *QueenSource) payload(text []byte, encrypted bool) ([]byte, error) {
	if encrypted {
		var err error
		if text, err = openQueen(text, s.keys); err != nil {
			return nil, err
		}
	}
	return compactJSON(text)
}

// compactJSON returns b without insignificant whitespace, in a buffer of
// its own.
func compactJSON(b []byte) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, len(b)))
	if err := json.Compact(buf, b); err != nil {
		return nil, fmt.Errorf("payload is not JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// QueenCursor is a consumer group's place on a partition of a Queen
// database: the first message the group has not consumed there. Queen
// keeps the last consumed (created_at, id) per (partition, group); a
// cursor it never moved starts after its group's durable subscription
// time (the partition's record, else the queue's), or at the oldest
// message (queue mode, and groups without a record). A lease does not
// count: what a group leased and did not ack, it has not consumed.
type QueenCursor struct {
	Partition uuid.UUID
	Group     string
	// Next is the first message the group has not consumed; NextTxID its
	// transaction id. Zero (empty) when it consumed every message.
	Next     uuid.UUID
	NextTxID string
	// Pending is how many messages it has not consumed (only with
	// Cursors' pending).
	Pending int64
	// Consumed is Queen's total_messages_consumed; LastConsumedAt its
	// last_consumed_at (zero: never).
	Consumed       int64
	LastConsumedAt time.Time
	// Failures is Queen's batch_retry_count: failed acks since the group
	// last completed a batch there, which the reference counts against
	// the retry limit of whatever it delivers next.
	Failures  int
	CreatedAt time.Time
	// Record: the place comes from a durable subscription, not a cursor
	// Queen moved.
	Record bool
}

// Cursors returns the place of every group on the partitions: one per
// partition_consumers row, and one per partition-specific durable
// subscription of a group that has no cursor there yet (the reference
// seeds it from that record at the group's first pop). With pending,
// each carries the count of messages it has not consumed, which reads
// them all.
func (s *QueenSource) Cursors(ctx context.Context, partitions []uuid.UUID, pending bool) ([]QueenCursor, error) {
	// bound_at, bound_id: the group has consumed every message at or
	// before (bound_at, bound_id) in (created_at, id) order. A record's
	// time comes with the nil id, as Queen seeds it: a message created at
	// that very time is still to consume.
	rows, err := s.pool.Query(ctx, `WITH c AS (
    SELECT pc.partition_id, coalesce(pc.consumer_group, '__QUEUE_MODE__') AS grp,
           pc.last_consumed_created_at AS at, pc.last_consumed_id AS id,
           coalesce(pc.total_messages_consumed, 0) AS consumed, pc.last_consumed_at,
           coalesce(pc.batch_retry_count, 0) AS failures, coalesce(pc.created_at, now()) AS created_at
      FROM queen.partition_consumers pc
     WHERE pc.partition_id = ANY ($1)
    UNION ALL
    SELECT p.id, r.consumer_group, NULL, NULL, 0, NULL, 0, r.created_at
      FROM queen.consumer_groups_metadata r
      JOIN queen.queues q ON q.name = r.queue_name
      JOIN queen.partitions p ON p.queue_id = q.id AND p.name = r.partition_name
     WHERE r.partition_name <> '' AND p.id = ANY ($1)
       AND NOT EXISTS (SELECT 1 FROM queen.partition_consumers pc
                        WHERE pc.partition_id = p.id AND pc.consumer_group = r.consumer_group)
), b AS (
    SELECT c.*,
           CASE WHEN c.at IS NOT NULL THEN c.at
                WHEN c.grp = '__QUEUE_MODE__' THEN NULL
                ELSE (SELECT r.subscription_timestamp
                        FROM queen.consumer_groups_metadata r
                        JOIN queen.partitions p ON p.id = c.partition_id
                        JOIN queen.queues q ON q.id = p.queue_id
                       WHERE r.consumer_group = c.grp AND r.queue_name = q.name AND r.partition_name IN (p.name, '')
                       ORDER BY r.partition_name = '' LIMIT 1) END AS bound_at,
           CASE WHEN c.at IS NOT NULL THEN c.id ELSE '00000000-0000-0000-0000-000000000000'::uuid END AS bound_id
      FROM c
)
SELECT b.partition_id, b.grp, n.id, n.transaction_id,
       CASE WHEN $2 THEN (SELECT count(*) FROM queen.messages m
                           WHERE m.partition_id = b.partition_id
                             AND (m.created_at, m.id) > (coalesce(b.bound_at, '-infinity'), b.bound_id)) END,
       b.consumed, b.last_consumed_at, b.failures, b.created_at, b.at IS NULL AND b.bound_at IS NOT NULL
  FROM b
  LEFT JOIN LATERAL (SELECT m.id, m.transaction_id FROM queen.messages m
                      WHERE m.partition_id = b.partition_id
                        AND (m.created_at, m.id) > (coalesce(b.bound_at, '-infinity'), b.bound_id)
                      ORDER BY m.created_at, m.id LIMIT 1) n ON true
 ORDER BY b.partition_id, b.grp`, pgUUIDs(partitions), pending)
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen cursors: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueenCursor, error) {
		var c QueenCursor
		var next pgtype.UUID
		var txid pgtype.Text
		var pend pgtype.Int8
		var last pgtype.Timestamptz
		err := r.Scan(&c.Partition, &c.Group, &next, &txid, &pend, &c.Consumed, &last, &c.Failures, &c.CreatedAt, &c.Record)
		c.Next, c.NextTxID, c.Pending, c.LastConsumedAt = next.Bytes, txid.String, pend.Int64, last.Time
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen cursors: %w", translate(err))
	}
	return out, nil
}

// QueenSubscription is a queue-wide durable subscription of a Queen
// database: the group starts on a partition it has not touched after
// From ("new": the time the record was made; "timestamp": the time it
// asked for).
type QueenSubscription struct {
	Queue     string
	Group     string
	Mode      string
	From      time.Time
	CreatedAt time.Time
}

// Subscriptions returns the queue-wide durable subscriptions of the
// queues. The partition-specific ones reach the import as cursors
// (Cursors), and records that name no queue (namespace or task only: the
// reference writes none) are left out.
func (s *QueenSource) Subscriptions(ctx context.Context, queues []string) ([]QueenSubscription, error) {
	rows, err := s.pool.Query(ctx, `SELECT queue_name, consumer_group, subscription_mode, subscription_timestamp,
    coalesce(created_at, subscription_timestamp)
FROM queen.consumer_groups_metadata
WHERE queue_name = ANY ($1) AND partition_name = '' AND consumer_group <> '__QUEUE_MODE__'
ORDER BY queue_name, consumer_group`, queues)
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen subscriptions: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueenSubscription])
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen subscriptions: %w", translate(err))
	}
	return out, nil
}

// QueenDeadLetter is a dead letter of a Queen database: the message
// (TransactionID in Partition) a group gave up on.
type QueenDeadLetter struct {
	ID            uuid.UUID
	Partition     uuid.UUID
	Group         string
	TransactionID string
	Error         string
	RetryCount    int
	CreatedAt     time.Time // the message's
	FailedAt      time.Time
}

// DeadLetters returns up to limit dead letters of the partitions after
// the one with id after (uuid.Nil: from the first), in id order. A NULL
// group is queue mode.
func (s *QueenSource) DeadLetters(ctx context.Context, partitions []uuid.UUID, after uuid.UUID, limit int) ([]QueenDeadLetter, error) {
	rows, err := s.pool.Query(ctx, `SELECT d.id, d.partition_id, coalesce(d.consumer_group, '__QUEUE_MODE__'), m.transaction_id,
    coalesce(d.error_message, ''), coalesce(d.retry_count, 0), coalesce(d.original_created_at, m.created_at),
    coalesce(d.failed_at, now())
FROM queen.dead_letter_queue d JOIN queen.messages m ON m.id = d.message_id
WHERE d.partition_id = ANY ($1) AND d.id > $2
ORDER BY d.id LIMIT $3`, pgUUIDs(partitions), pgtype.UUID{Bytes: after, Valid: true}, limit)
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen dead letters: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[QueenDeadLetter])
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen dead letters: %w", translate(err))
	}
	return out, nil
}

// QueenTrace is a trace event of a Queen database, with its names.
type QueenTrace struct {
	ID            uuid.UUID
	Partition     uuid.UUID
	TransactionID string
	Group         string
	EventType     string
	Data          []byte // compact JSON
	WorkerID      string
	CreatedAt     time.Time
	Names         []string // sorted by bytes, distinct
}

// Traces returns up to limit traces of the partitions after the one with
// id after (uuid.Nil: from the first), in id order. A NULL group is queue
// mode, a NULL event type "info" (the defaults of the trace route).
func (s *QueenSource) Traces(ctx context.Context, partitions []uuid.UUID, after uuid.UUID, limit int) ([]QueenTrace, error) {
	rows, err := s.pool.Query(ctx, `SELECT t.id, t.partition_id, t.transaction_id, coalesce(nullif(t.consumer_group, ''), '__QUEUE_MODE__'),
    coalesce(nullif(t.event_type, ''), 'info'), t.data::text, coalesce(t.worker_id, ''), coalesce(t.created_at, now()),
    ARRAY(SELECT DISTINCT n.trace_name COLLATE "C" FROM queen.message_trace_names n WHERE n.trace_id = t.id
           ORDER BY 1)
FROM queen.message_traces t
WHERE t.partition_id = ANY ($1) AND t.id > $2
ORDER BY t.id LIMIT $3`, pgUUIDs(partitions), pgtype.UUID{Bytes: after, Valid: true}, limit)
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen traces: %w", translate(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueenTrace, error) {
		var t QueenTrace
		if err := r.Scan(&t.ID, &t.Partition, &t.TransactionID, &t.Group, &t.EventType, &t.Data, &t.WorkerID,
			&t.CreatedAt, &t.Names); err != nil {
			return t, err
		}
		var err error
		t.Data, err = compactJSON(t.Data)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the Queen traces: %w", translate(err))
	}
	return out, nil
}

// QueenSwitches are the reference server's maintenance switches.
type QueenSwitches struct {
	// Push: pushes go to its file buffer (maintenance_mode); Pop: pops
	// answer empty (pop_maintenance_mode).
	Push, Pop bool
}

// Switches reads the maintenance switches; a missing row is off.
func (s *QueenSource) Switches(ctx context.Context) (QueenSwitches, error) {
	var w QueenSwitches
	err := s.pool.QueryRow(ctx, `SELECT
    coalesce((SELECT (value->>'enabled')::boolean FROM queen.system_state WHERE key = 'maintenance_mode'), false),
    coalesce((SELECT (value->>'enabled')::boolean FROM queen.system_state WHERE key = 'pop_maintenance_mode'), false)`).
		Scan(&w.Push, &w.Pop)
	if err != nil {
		return w, fmt.Errorf("error reading the Queen maintenance switches: %w", translate(err))
	}
	return w, nil
}

// QueenCounts are what a Queen partition holds besides its messages.
type QueenCounts struct {
	DeadLetters, Traces int64
}

// Counts returns, per partition that has any, its dead letters and traces.
func (s *QueenSource) Counts(ctx context.Context, partitions []uuid.UUID) (map[uuid.UUID]QueenCounts, error) {
	// A message dead-lettered twice for one group (the reference keeps
	// both rows) is one dead letter in queengo.
	rows, err := s.pool.Query(ctx, `SELECT p, sum(d)::bigint, sum(t)::bigint FROM (
    SELECT DISTINCT d.partition_id AS p, 1 AS d, 0 AS t, coalesce(d.consumer_group, '__QUEUE_MODE__') AS g,
           d.message_id AS m
      FROM queen.dead_letter_queue d
     WHERE d.partition_id = ANY ($1) AND EXISTS (SELECT 1 FROM queen.messages m WHERE m.id = d.message_id)
    UNION ALL
    SELECT partition_id, 0, 1, NULL, id FROM queen.message_traces WHERE partition_id = ANY ($1)) x
GROUP BY p`, pgUUIDs(partitions))
	if err != nil {
		return nil, fmt.Errorf("error counting the Queen dead letters and traces: %w", translate(err))
	}
	out := map[uuid.UUID]QueenCounts{}
	var id uuid.UUID
	var c QueenCounts
	_, err = pgx.ForEachRow(rows, []any{&id, &c.DeadLetters, &c.Traces}, func() error {
		out[id] = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error counting the Queen dead letters and traces: %w", translate(err))
	}
	return out, nil
}

// Places returns the place of each message of ids that the Queen database
// holds.
func (s *QueenSource) Places(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]Keyset, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, created_at FROM queen.messages WHERE id = ANY ($1) AND created_at IS NOT NULL`,
		pgUUIDs(ids))
	if err != nil {
		return nil, fmt.Errorf("error reading Queen messages: %w", translate(err))
	}
	out := map[uuid.UUID]Keyset{}
	var k Keyset
	_, err = pgx.ForEachRow(rows, []any{&k.ID, &k.CreatedAt}, func() error {
		out[k.ID] = k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error reading Queen messages: %w", translate(err))
	}
	return out, nil
}
