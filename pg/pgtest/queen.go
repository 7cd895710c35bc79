package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Queen is a database in the reference Queen server's layout
// (QueenLayout), for the tests of `queengo import queen`, with helpers that
// write its rows as the reference does.
type Queen struct {
	*Database
}

// NewQueen creates a database in QueenLayout named after prefix; it is
// dropped when the test ends.
func NewQueen(t testing.TB, prefix string) *Queen {
	t.Helper()
	db, err := Create(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Drop() })
	if err := db.Exec(QueenLayout); err != nil {
		t.Fatal(err)
	}
	return &Queen{db}
}

// MustExec runs a statement, failing the test on an error.
func (q *Queen) MustExec(t testing.TB, sql string, args ...any) {
	t.Helper()
	if err := q.Exec(sql, args...); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
}

// Queue creates a queue with the reference's defaults, then set (an
// UPDATE's SET list, "" for none), and returns its id.
func (q *Queen) Queue(t testing.TB, name, set string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	q.MustExec(t, `INSERT INTO queen.queues (id, name) VALUES ($1, $2)`, id, name)
	if set != "" {
		q.MustExec(t, `UPDATE queen.queues SET `+set+` WHERE id = $1`, id)
	}
	return id
}

// Partition creates a partition of the queue and returns its id.
func (q *Queen) Partition(t testing.TB, queue uuid.UUID, name string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	q.MustExec(t, `INSERT INTO queen.partitions (id, queue_id, name) VALUES ($1, $2, $3)`, id, queue, name)
	return id
}

// QueenMessage is a message a test writes; Payload is JSON text (an
// envelope of QueenEncrypt with Encrypted). TraceID and ProducerSub are
// NULL when empty.
type QueenMessage struct {
	TxID        string
	Payload     string
	TraceID     string
	ProducerSub string
	Encrypted   bool
}

// Push writes msgs into the partition as one push call of the reference
// does: one created_at for all, UUIDv7 ids increasing in their order. It
// returns the ids.
func (q *Queen) Push(t testing.TB, partition uuid.UUID, at time.Time, msgs ...QueenMessage) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, len(msgs))
	txids, payloads, traces, subs := make([]string, len(msgs)), make([]string, len(msgs)), make([]string, len(msgs)), make([]string, len(msgs))
	encrypted := make([]bool, len(msgs))
	for i, m := range msgs {
		id, err := uuid.NewV7()
		if err != nil {
			t.Fatal(err)
		}
		ids[i], txids[i], payloads[i], traces[i], subs[i], encrypted[i] = id, m.TxID, m.Payload, m.TraceID, m.ProducerSub, m.Encrypted
	}
	q.MustExec(t, `INSERT INTO queen.messages (id, transaction_id, trace_id, partition_id, payload, created_at,
    is_encrypted, producer_sub)
SELECT u.id, u.tx, nullif(u.trace, '')::uuid, $2, u.payload::jsonb, $3, u.enc, nullif(u.sub, '')
  FROM unnest($1::uuid[], $4::text[], $5::text[], $6::text[], $7::boolean[], $8::text[]) AS u(id, tx, payload, trace, enc, sub)`,
		ids, partition, at, txids, payloads, traces, encrypted, subs)
	return ids
}

// Consumed writes the group's cursor on the partition after message last
// (uuid.Nil: none consumed yet), then set (an UPDATE's SET list, "" for
// none: a lease, failures, ...).
func (q *Queen) Consumed(t testing.TB, partition uuid.UUID, group string, last uuid.UUID, set string) {
	t.Helper()
	q.MustExec(t, `INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_consumed_id,
    last_consumed_created_at, last_consumed_at)
SELECT $1, $2, $3, (SELECT created_at FROM queen.messages WHERE id = $3), CASE WHEN $3 <> '00000000-0000-0000-0000-000000000000'::uuid THEN now() END`,
		partition, group, last)
	if set != "" {
		q.MustExec(t, `UPDATE queen.partition_consumers SET `+set+` WHERE partition_id = $1 AND consumer_group = $2`,
			partition, group)
	}
}

// Subscribed writes a durable subscription record of the group on the
// queue (partition "": queue-wide), as the reference's first pop with a
// mode writes it.
func (q *Queen) Subscribed(t testing.TB, group, queue, partition, mode string, at time.Time) {
	t.Helper()
	q.MustExec(t, `INSERT INTO queen.consumer_groups_metadata (consumer_group, queue_name, partition_name,
    subscription_mode, subscription_timestamp, created_at) VALUES ($1, $2, $3, $4, $5, $5)`,
		group, queue, partition, mode, at)
}

// OpenPush writes a message into the partition in a transaction it leaves
// open, as a push of the reference still in flight (its created_at is the
// transaction's start); commit commits it. The test's end rolls it back if
// it is still open.
func (q *Queen) OpenPush(t testing.TB, partition uuid.UUID, txid string) (commit func()) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, q.URL)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tx.Rollback(ctx)
		_ = c.Close(ctx)
	})
	if _, err := tx.Exec(ctx, `INSERT INTO queen.messages (transaction_id, partition_id, payload) VALUES ($1, $2, '{}')`,
		txid, partition); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
