package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// Transaction applies pushes and acks in one PostgreSQL transaction, all or
// nothing (D7). A duplicate push is reported and does not abort it; an ack
// that fails aborts it with an error wrapping a *queengo.ConflictError.
func (s *Store) Transaction(ctx context.Context, ops []queengo.TxOp) ([]queengo.TxResult, error) {
	out := make([]queengo.TxResult, len(ops))
	err := s.withTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var pushes []*queengo.PushItem
		var at []int
		for i, op := range ops {
			if op.Push != nil {
				pushes = append(pushes, op.Push)
				at = append(at, i)
			}
		}
		res, err := s.pushInTx(ctx, tx, pushes)
		if err != nil {
			return err
		}
		for k, r := range res {
			out[at[k]].Push = r
		}
		// Acks.
		var items []queengo.AckItem
		var ackAt []int
		for i, op := range ops {
			if op.Ack != nil {
				items = append(items, *op.Ack)
				ackAt = append(ackAt, i)
			}
		}
		if len(items) > 0 {
			res, err := ack(ctx, tx, items)
			if err != nil {
				return err
			}
			for k, r := range res {
				out[ackAt[k]].Ack = r
				if !r.Success {
					return &queengo.ConflictError{Op: ackAt[k], Failure: r.Failure}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error in transaction: %w", err)
	}
	return out, nil
}

// pushInTx stores the items in tx, one segment per partition in item order,
// creating queues and partitions as a push does, and answers per item:
// queued, or duplicate (of an earlier item of the call or of a stored
// message with its transaction id). A frame its queue has no room for fails
// the call with an error wrapping queengo.ErrQueueFull: tx must roll back.
func (s *Store) pushInTx(ctx context.Context, tx pgx.Tx, items []*queengo.PushItem) ([]queengo.PushResult, error) {
	plan, err := planPush(ctx, tx, items, s.citus.Load())
	if err != nil || len(plan.segs) == 0 {
		return plan.out, err
	}
	dups, err := appendSegments(ctx, tx, plan.segs, s.seal)
	if err != nil {
		return nil, err
	}
	return plan.results(dups), nil
}

// pushPlan is pushInTx's items cut into segments, before the write.
type pushPlan struct {
	out  []queengo.PushResult
	segs []queengo.Segment
	refs []pushRef
}

// pushRef places an item that goes to the write: segment seg, frame frame.
type pushRef struct{ item, seg, frame int }

// planPush creates the items' queues and partitions in tx (with the Citus
// mode's partition ids when citus) and cuts the items into one segment per
// partition; an item repeating a transaction id of an earlier one of its
// partition is answered duplicate at once.
func planPush(ctx context.Context, tx pgx.Tx, items []*queengo.PushItem, citus bool) (*pushPlan, error) {
	plan := &pushPlan{out: make([]queengo.PushResult, len(items))}
	queues := map[string]queengo.Queue{}
	parts := map[[2]string]int{}
	for i, p := range items {
		q, ok := queues[p.Queue]
		if !ok {
			var err error
			if q, err = ensureQueue(ctx, tx, p.Queue); err != nil {
				return nil, err
			}
			queues[p.Queue] = q
		}
		k := [2]string{p.Queue, p.Partition}
		si, ok := parts[k]
		if !ok {
			pid, err := ensurePartition(ctx, tx, q.ID, p.Partition, citus)
			if err != nil {
				return nil, err
			}
			si = len(plan.segs)
			parts[k] = si
			plan.segs = append(plan.segs, queengo.Segment{Partition: pid, Seal: q.Options.EncryptionEnabled})
		}
		dupOf := -1
		for j, f := range plan.segs[si].Frames {
			if f.TransactionID == p.TransactionID {
				dupOf = j
			}
		}
		r := &plan.out[i]
		r.TransactionID, r.PartitionID, r.TraceID = p.TransactionID, plan.segs[si].Partition, p.TraceID
		if dupOf >= 0 {
			r.Status, r.MessageID = queengo.PushDuplicate, plan.segs[si].Frames[dupOf].ID
			continue
		}
		plan.refs = append(plan.refs, pushRef{item: i, seg: si, frame: len(plan.segs[si].Frames)})
		plan.segs[si].Frames = append(plan.segs[si].Frames, p.Frame)
	}
	return plan, nil
}

// results completes the answers with the write's duplicates (appendSegments).
func (plan *pushPlan) results(dups [][]uuid.UUID) []queengo.PushResult {
	for _, rf := range plan.refs {
		r := &plan.out[rf.item]
		if d := dups[rf.seg][rf.frame]; d != uuid.Nil {
			r.Status, r.MessageID = queengo.PushDuplicate, d
		} else {
			r.Status, r.MessageID = queengo.PushQueued, plan.segs[rf.seg].Frames[rf.frame].ID
		}
	}
	return plan.out
}

// ListDeadLetters returns one page of dead letters, newest failure first,
// and the number of all that match.
func (s *Store) ListDeadLetters(ctx context.Context, f queengo.DLQFilter) ([]queengo.DeadLetter, int, error) {
	var out []queengo.DeadLetter
	var total int
	var from, to any
	if f.From != nil {
		from = *f.From
	}
	if f.To != nil {
		to = *f.To
	}
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, `SELECT d.id, d.frame, d.partition_id, p.name, q.name, d.consumer_group,
       coalesce(d.error_message, ''), d.retry_count,
       to_char(d.original_created_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
       to_char(d.failed_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), count(*) OVER ()
  FROM queen.dead_letters d
  JOIN queen.partitions p ON p.id = d.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE d.listed AND ($1 = '' OR q.name = $1) AND ($2 = '' OR d.consumer_group = $2) AND ($3 = '' OR p.name = $3)
   AND ($4::timestamptz IS NULL OR d.failed_at >= $4) AND ($5::timestamptz IS NULL OR d.failed_at <= $5)
 ORDER BY d.failed_at DESC, d.id
 LIMIT $6 OFFSET $7`, f.Queue, f.Group, f.Partition, from, to, f.Limit, f.Offset)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d queengo.DeadLetter
			var frame []byte
			if err := rows.Scan(&d.ID, &frame, &d.PartitionID, &d.Partition, &d.Queue, &d.Group, &d.ErrorMessage,
				&d.RetryCount, &d.CreatedAt, &d.FailedAt, &total); err != nil {
				return err
			}
			if _, err := decodeFrame(frame, &d.Frame, s.keys); err != nil {
				return err
			}
			out = append(out, d)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 && f.Offset > 0 {
			// The page is past the end: count without it.
			return c.QueryRow(ctx, `SELECT count(*) FROM queen.dead_letters d
  JOIN queen.partitions p ON p.id = d.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE d.listed AND ($1 = '' OR q.name = $1) AND ($2 = '' OR d.consumer_group = $2) AND ($3 = '' OR p.name = $3)
   AND ($4::timestamptz IS NULL OR d.failed_at >= $4) AND ($5::timestamptz IS NULL OR d.failed_at <= $5)`,
				f.Queue, f.Group, f.Partition, from, to).Scan(&total)
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("error listing dead letters: %w", err)
	}
	return out, total, nil
}

// RequeueDeadLetter pushes the dead letter's payload again to its partition
// as a new message (new message id and transaction id) and removes the entry
// (queen.remove_dead_letters: the original offset stays resolved for its
// group), in one transaction. It returns the new message and where it went, or an
// error wrapping queengo.ErrNotFound when there is no such dead letter. The
// new message is sealed when its queue has encryptionEnabled or the dead
// letter was sealed.
func (s *Store) RequeueDeadLetter(ctx context.Context, id uuid.UUID) (queengo.DeadLetter, queengo.Frame, error) {
	var d queengo.DeadLetter
	var nf queengo.Frame
	err := s.withTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var frame []byte
		var seal bool
		if err := tx.QueryRow(ctx, `SELECT d.frame, d.partition_id, p.name, q.name, d.consumer_group, q.encryption_enabled
  FROM queen.remove_dead_letters(ARRAY[$1::uuid]) d
  JOIN queen.partitions p ON p.id = d.partition_id JOIN queen.queues q ON q.id = p.queue_id`, id).Scan(&frame, &d.PartitionID,
			&d.Partition, &d.Queue, &d.Group, &seal); err != nil {
			return err
		}
		if _, err := decodeFrame(frame, &d.Frame, s.keys); err != nil {
			return err
		}
		nf = d.Frame
		nf.Payload = append([]byte(nil), d.Frame.Payload...)
		nf.ID = uuid.Must(uuid.NewV7())
		nf.TransactionID = uuid.NewString()
		seal = seal || frame[0]&frameSealed != 0
		_, err := appendSegments(ctx, tx, []queengo.Segment{{Partition: d.PartitionID, Frames: []queengo.Frame{nf}, Seal: seal}}, s.seal)
		return err
	})
	if err != nil {
		return d, nf, fmt.Errorf("error requeueing dead letter: %w", err)
	}
	return d, nf, nil
}

// DeleteDeadLetter removes a dead letter (queen.remove_dead_letters: its
// offset stays resolved for its group), or fails with an error wrapping
// queengo.ErrNotFound when there is none.
func (s *Store) DeleteDeadLetter(ctx context.Context, id uuid.UUID) error {
	var n int64
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `SELECT FROM queen.remove_dead_letters(ARRAY[$1::uuid])`, id)
		n = tag.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		err = queengo.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("error deleting dead letter: %w", err)
	}
	return nil
}

// GetMessage returns the management view of one message (D10), or an error
// wrapping queengo.ErrNotFound.
func (s *Store) GetMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageInfo, error) {
	var m queengo.MessageInfo
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var off int64
		var frame []byte
		var qid uuid.UUID
		err := c.QueryRow(ctx, `SELECT x."offset", p.name, q.id, q.name,
       queen.frame_at(s.frames, s.ends, (x."offset" - s.first_offset)::integer),
       to_char(s.created_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
  FROM queen.txids x
  JOIN queen.partitions p ON p.id = x.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
  JOIN queen.segments s ON s.partition_id = x.partition_id AND s.first_offset <= x."offset" AND s.last_offset >= x."offset"
 WHERE x.partition_id = $1 AND x.transaction_id = $2
   AND NOT EXISTS (SELECT 1 FROM queen.tombstones t WHERE t.partition_id = x.partition_id AND t."offset" = x."offset")`,
			partition, txid).Scan(&off, &m.Partition, &qid, &m.Queue,
			&frame, &m.CreatedAt)
		if err != nil {
			return err
		}
		if _, err := decodeFrame(frame, &m.Frame, s.keys); err != nil {
			return err
		}
		m.Encrypted = frame[0]&frameSealed != 0
		m.PartitionID = partition
		q, err := scanQueue(c.QueryRow(ctx, `SELECT `+queueColumns+` FROM queen.queues WHERE id = $1`, qid))
		if err != nil {
			return err
		}
		m.Namespace, m.Task, m.Options = q.Namespace, q.Task, q.Options
		rows, err := c.Query(ctx, `SELECT c.consumer_group,
       CASE WHEN EXISTS (SELECT 1 FROM queen.dead_letters d WHERE d.partition_id = c.partition_id
                            AND d.consumer_group = c.consumer_group AND d."offset" = $2 AND d.resolves)
            THEN 'dead_letter'
            WHEN $2 <= c.committed THEN 'completed'
            WHEN c.lease_id IS NOT NULL AND c.lease_expires_at > now() AND $2 <= c.lease_end THEN 'processing'
            ELSE 'pending' END,
       coalesce((SELECT a.failures FROM queen.attempts a WHERE a.partition_id = c.partition_id
                    AND a.consumer_group = c.consumer_group AND a."offset" = $2), 0),
       CASE WHEN c.lease_id IS NOT NULL AND c.lease_expires_at > now() AND $2 > c.committed AND $2 <= c.lease_end
            THEN to_char(c.lease_expires_at, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') ELSE '' END
  FROM queen.cursors c WHERE c.partition_id = $1 ORDER BY c.consumer_group`, partition, off)
		if err != nil {
			return err
		}
		m.Groups, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (queengo.GroupState, error) {
			var g queengo.GroupState
			err := r.Scan(&g.Group, &g.Status, &g.Failures, &g.LeaseExpiresAt)
			return g, err
		})
		return err
	})
	if err != nil {
		return m, fmt.Errorf("error reading message: %w", err)
	}
	return m, nil
}

// SetSubscription sets the durable subscription of a group to start at ts on
// every queue where the group has a record or a cursor; partitions the group
// has not contacted yet start there (D6). It returns how many records it
// wrote, or a *queengo.MissingError (consumer group) when the group has
// neither anywhere.
func (s *Store) SetSubscription(ctx context.Context, group string, ts time.Time) (int, error) {
	var n int64
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `INSERT INTO queen.subscriptions (queue_id, consumer_group, mode, from_ts)
SELECT q.queue_id, $1, 'timestamp', $2 FROM (
    SELECT queue_id FROM queen.subscriptions WHERE consumer_group = $1
    UNION
    SELECT p.queue_id FROM queen.cursors c JOIN queen.partitions p ON p.id = c.partition_id WHERE c.consumer_group = $1
) q
ON CONFLICT (queue_id, consumer_group) DO UPDATE SET mode = 'timestamp', from_ts = EXCLUDED.from_ts`, group, ts)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("error setting subscription: %w", err)
	}
	if n == 0 {
		return 0, &queengo.MissingError{What: queengo.MissingGroup}
	}
	return int(n), nil
}
