package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// DeleteMessage tombstones a message (D10, queen.delete_message): it is never
// delivered again and counts as resolved for every group. An unknown or
// already deleted message is an error wrapping queengo.ErrNotFound.
func (s *Store) DeleteMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageChange, error) {
	var ch queengo.MessageChange
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var found bool
		var queue pgtype.Text
		if err := c.QueryRow(ctx, `SELECT present, queue_name, released FROM queen.delete_message($1, $2)`, partition,
			txid).Scan(&found, &queue, &ch.Released); err != nil {
			return err
		}
		if !found {
			return queengo.ErrNotFound
		}
		ch.Queue = queue.String
		return nil
	})
	if err != nil {
		return ch, fmt.Errorf("error deleting message: %w", err)
	}
	return ch, nil
}

// MoveToDLQ dead-letters a message for every group that has not resolved it,
// with the error text reason, and tombstones it (queen.dlq_message). An
// unknown or deleted message is an error wrapping queengo.ErrNotFound; a
// message every group resolved already comes back with no Groups, and
// nothing changed.
func (s *Store) MoveToDLQ(ctx context.Context, partition uuid.UUID, txid, reason string) (queengo.MessageChange, error) {
	var ch queengo.MessageChange
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var found bool
		var queue pgtype.Text
		if err := c.QueryRow(ctx, `SELECT present, queue_name, groups, released FROM queen.dlq_message($1, $2, $3)`,
			partition, txid, reason).Scan(&found, &queue, &ch.Groups, &ch.Released); err != nil {
			return err
		}
		if !found {
			return queengo.ErrNotFound
		}
		ch.Queue = queue.String
		return nil
	})
	if err != nil {
		return ch, fmt.Errorf("error moving message to the dead-letter queue: %w", err)
	}
	return ch, nil
}

// RetryMessage gives a failed or dead-lettered message another chance, in
// one transaction: its dead letters (every group's) are taken off the
// dead-letter queue (queen.remove_dead_letters: the offset stays resolved
// for each of those groups) and their frame is pushed again to its partition as one new message (new message
// and transaction ids, sealed as RequeueDeadLetter seals); and every group
// for which it is unresolved with a failed attempt gets its failure count
// removed (a fresh retry budget) and, without a live lease, its retry delay
// cleared, so it is delivered now. Nothing applies (empty result) when it is
// neither. An unknown message, or a deleted one without dead letters, is an
// error wrapping queengo.ErrNotFound. Locks: the dead letters, the
// partition (the segment write), then the cursors, as a requeue followed by
// a transaction's ack.
func (s *Store) RetryMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageRetry, error) {
	var r queengo.MessageRetry
	err := s.withTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var off int64
		var seal, deleted bool
		if err := tx.QueryRow(ctx, `SELECT x."offset", q.name, q.encryption_enabled,
       EXISTS (SELECT 1 FROM queen.tombstones t WHERE t.partition_id = x.partition_id AND t."offset" = x."offset")
  FROM queen.txids x JOIN queen.partitions p ON p.id = x.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE x.partition_id = $1 AND x.transaction_id = $2`, partition, txid).Scan(&off, &r.Queue, &seal, &deleted); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT r.consumer_group, r.frame FROM queen.remove_dead_letters(ARRAY(
    SELECT d.id FROM queen.dead_letters d WHERE d.partition_id = $1 AND d."offset" = $2 AND d.listed)) r`, partition, off)
		if err != nil {
			return err
		}
		var frame []byte
		for rows.Next() {
			var g string
			var fr []byte
			if err := rows.Scan(&g, &fr); err != nil {
				rows.Close()
				return err
			}
			r.RequeuedGroups, frame = append(r.RequeuedGroups, g), fr
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		slices.Sort(r.RequeuedGroups)
		if frame != nil {
			var f queengo.Frame
			if _, err := decodeFrame(frame, &f, s.keys); err != nil {
				return err
			}
			nf := f
			nf.Payload = append([]byte(nil), f.Payload...)
			nf.ID = uuid.Must(uuid.NewV7())
			nf.TransactionID = uuid.NewString()
			seal = seal || frame[0]&frameSealed != 0
			if _, err := appendSegments(ctx, tx, []queengo.Segment{{Partition: partition, Frames: []queengo.Frame{nf}, Seal: seal}}, s.seal); err != nil {
				return err
			}
			r.Requeued = &nf
		} else if deleted {
			return queengo.ErrNotFound
		}
		rows, err = tx.Query(ctx, `WITH locked AS (
    SELECT c.consumer_group, c.lease_id IS NOT NULL AND c.lease_expires_at > now() AND $2 <= c.lease_end AS live
      FROM queen.cursors c
     WHERE c.partition_id = $1 AND c.committed < $2
       AND NOT (c.lease_id IS NOT NULL AND c.lease_expires_at > now() AND $2 = ANY (c.acked))
       AND EXISTS (SELECT 1 FROM queen.attempts a WHERE a.partition_id = $1 AND a.consumer_group = c.consumer_group
                      AND a."offset" = $2 AND a.failures > 0)
     ORDER BY c.consumer_group FOR UPDATE OF c
), reset AS (
    DELETE FROM queen.attempts a USING locked l
     WHERE a.partition_id = $1 AND a.consumer_group = l.consumer_group AND a."offset" = $2
), undelayed AS (
    UPDATE queen.cursors c SET not_before = NULL FROM locked l
     WHERE c.partition_id = $1 AND c.consumer_group = l.consumer_group AND NOT l.live
)
SELECT consumer_group FROM locked ORDER BY consumer_group`, partition, off)
		if err != nil {
			return err
		}
		r.Reset, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if r.Requeued == nil && len(r.Reset) == 0 {
			// Nothing to retry: the transaction applies nothing.
			return errNothingToRetry
		}
		return nil
	})
	if errors.Is(err, errNothingToRetry) {
		return queengo.MessageRetry{Queue: r.Queue}, nil
	}
	if err != nil {
		return r, fmt.Errorf("error retrying message: %w", err)
	}
	return r, nil
}

var errNothingToRetry = errors.New("nothing to retry")

// Limits of one message list (docs/api-admin.md, "GET /api/v1/messages").
const (
	// listPartitionsMax bounds the partitions one list looks at: the most
	// recently written ones the filter selects.
	listPartitionsMax = 100
	// listExamineMax bounds the offsets one list examines (arithmetic on
	// cursors, no frame read) to fill its page, offset included.
	listExamineMax = 100_000
	// listDeadMax bounds the dead letters one list loads to tell
	// dead-lettered messages apart.
	listDeadMax = 100_000
	// listHeadMax is how much of each listed frame is read: its ids and
	// producerSub, not its payload (a transaction id is at most 1024
	// bytes).
	listHeadMax = 4096
)

type listPartition struct {
	id                    uuid.UUID
	name, queue, ns, task string
	priority              int
	lo, hi                int64 // the window: offsets in (lo, hi]
	cursors               []listCursor
	queueMode             int // index into cursors, -1 without one
	tomb                  map[int64]bool
	dead                  map[int64][]string // offset -> groups
	busGroups             int
}

type listCursor struct {
	group     string
	committed int64
	live      bool
	leaseEnd  int64
	acked     []int64
	expires   time.Time
}

// status is the status of offset off for the cursor (D10).
func (c *listCursor) status(off int64, dead []string) (string, time.Time) {
	switch {
	case slices.Contains(dead, c.group):
		return queengo.StatusDeadLetter, time.Time{}
	case off <= c.committed:
		return queengo.StatusCompleted, time.Time{}
	case c.live && off <= c.leaseEnd:
		if slices.Contains(c.acked, off) {
			return queengo.StatusCompleted, time.Time{}
		}
		return queengo.StatusProcessing, c.expires
	}
	return queengo.StatusPending, time.Time{}
}

// ListMessages returns one page of the messages f selects: those of the
// segments created in [f.From, f.To] in at most listPartitionsMax partitions
// (the most recently written first), partition by partition, newest first
// within each, deleted ones left out. Statuses come from the cursors (and
// the dead letters) by arithmetic; only the frames of the page are read, and
// only their heads. An unknown queue f names is a *queengo.MissingError.
func (s *Store) ListMessages(ctx context.Context, f queengo.MessageFilter) (queengo.MessageList, error) {
	var out queengo.MessageList
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
		parts, err := listScope(ctx, c, f)
		if err != nil || len(parts) == 0 {
			return err
		}
		groups := map[string]bool{}
		for i := range parts {
			for _, cu := range parts[i].cursors {
				if cu.group == queengo.QueueModeGroup {
					out.HasQueueMode = true
				} else {
					groups[cu.group] = true
				}
			}
		}
		out.BusGroups = len(groups)
		var pick []pickedMessage
		pick, out.Truncated = walkMessages(parts, f)
		if len(pick) == 0 {
			return nil
		}
		out.Messages, err = readHeads(ctx, c, pick)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("error listing messages: %w", err)
	}
	return out, nil
}

// listScope loads the partitions of a list with their windows, cursors,
// tombstones and dead letters.
func listScope(ctx context.Context, c *pgxpool.Conn, f queengo.MessageFilter) ([]listPartition, error) {
	rows, err := c.Query(ctx, `WITH sel AS (
    SELECT p.id, p.name, q.name AS queue, q.namespace, q.task, q.priority, p.head,
           coalesce((SELECT s.first_offset - 1 FROM queen.segments s WHERE s.partition_id = p.id
                      ORDER BY s.first_offset LIMIT 1), p.head) AS base, p.last_write_at
      FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
     WHERE ($1 = '' OR q.name = $1) AND ($2 = '' OR p.name = $2) AND ($3 = '' OR q.namespace = $3)
       AND ($4 = '' OR q.task = $4) AND p.last_write_at >= $5 AND p.created_at <= $6
     ORDER BY p.last_write_at DESC, p.id LIMIT $7)
SELECT sel.id, sel.name, sel.queue, sel.namespace, sel.task, sel.priority,
       queen.offset_at(sel.id, sel.base, sel.head, $5 - interval '1 microsecond'),
       queen.offset_at(sel.id, sel.base, sel.head, $6)
  FROM sel ORDER BY sel.last_write_at DESC, sel.id`, f.Queue, f.Partition, f.Namespace, f.Task, f.From, f.To,
		listPartitionsMax)
	if err != nil {
		return nil, err
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (listPartition, error) {
		p := listPartition{queueMode: -1, tomb: map[int64]bool{}, dead: map[int64][]string{}}
		err := r.Scan(&p.id, &p.name, &p.queue, &p.ns, &p.task, &p.priority, &p.lo, &p.hi)
		return p, err
	})
	if err != nil {
		return nil, err
	}
	parts = slices.DeleteFunc(parts, func(p listPartition) bool { return p.hi <= p.lo })
	if len(parts) == 0 {
		return nil, nil
	}
	index := map[uuid.UUID]int{}
	pids, los, his := make([]pgtype.UUID, len(parts)), make([]int64, len(parts)), make([]int64, len(parts))
	for i, p := range parts {
		index[p.id] = i
		pids[i], los[i], his[i] = pgUUID(p.id), p.lo, p.hi
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT c.partition_id, c.consumer_group, c.committed,
       c.lease_id IS NOT NULL AND c.lease_expires_at > now(), coalesce(c.lease_end, 0), c.acked,
       coalesce(c.lease_expires_at, now())
  FROM queen.cursors c WHERE c.partition_id = ANY ($1) ORDER BY c.partition_id, c.consumer_group`, pids)
	b.Queue(`SELECT t.partition_id, t."offset"
  FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS w(pid, lo, hi)
  JOIN queen.tombstones t ON t.partition_id = w.pid AND t."offset" > w.lo AND t."offset" <= w.hi`, pids, los, his)
	b.Queue(`SELECT d.partition_id, d."offset", d.consumer_group
  FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS w(pid, lo, hi)
  JOIN queen.dead_letters d ON d.partition_id = w.pid AND d."offset" > w.lo AND d."offset" <= w.hi AND d.resolves
 LIMIT $4`, pids, los, his, listDeadMax)
	br := c.SendBatch(ctx, b)
	defer br.Close()
	var (
		pid   uuid.UUID
		cu    listCursor
		off   int64
		group string
	)
	rows, err = br.Query()
	if err != nil {
		return nil, err
	}
	if _, err := pgx.ForEachRow(rows, []any{&pid, &cu.group, &cu.committed, &cu.live, &cu.leaseEnd, &cu.acked, &cu.expires}, func() error {
		p := &parts[index[pid]]
		if cu.group == queengo.QueueModeGroup {
			p.queueMode = len(p.cursors)
		} else {
			p.busGroups++
		}
		p.cursors = append(p.cursors, cu)
		cu.acked = nil
		return nil
	}); err != nil {
		return nil, err
	}
	if rows, err = br.Query(); err != nil {
		return nil, err
	}
	if _, err := pgx.ForEachRow(rows, []any{&pid, &off}, func() error {
		parts[index[pid]].tomb[off] = true
		return nil
	}); err != nil {
		return nil, err
	}
	if rows, err = br.Query(); err != nil {
		return nil, err
	}
	if _, err := pgx.ForEachRow(rows, []any{&pid, &off, &group}, func() error {
		p := &parts[index[pid]]
		p.dead[off] = append(p.dead[off], group)
		return nil
	}); err != nil {
		return nil, err
	}
	return parts, br.Close()
}

// pickedMessage is a message of the page before its frame is read.
type pickedMessage struct {
	part  *listPartition
	off   int64
	entry queengo.MessageEntry
}

// walkMessages picks the page: it walks the windows of parts in order,
// newest first, skipping deleted messages and those f's status filter
// rejects, skips f.Offset matches and keeps f.Limit. It examines at most
// listExamineMax offsets; truncated reports that it stopped there.
func walkMessages(parts []listPartition, f queengo.MessageFilter) ([]pickedMessage, bool) {
	var out []pickedMessage
	skip, examined := f.Offset, 0
	for i := range parts {
		p := &parts[i]
		for off := p.hi; off > p.lo; off-- {
			if examined == listExamineMax {
				return out, true
			}
			examined++
			if p.tomb[off] {
				continue
			}
			e := p.entry(off, f.Group)
			if f.Status != "" && e.Status != f.Status {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			out = append(out, pickedMessage{part: p, off: off, entry: e})
			if len(out) == f.Limit {
				return out, false
			}
		}
	}
	return out, false
}

// entry is the status part of the list entry of offset off: the status for
// group, or without one the overall status: the queue-mode group's when the
// partition has a queue-mode cursor, else over its named groups completed
// when all completed it, dead_letter when all resolved it and one
// dead-lettered it, processing when one holds it in a live lease, else
// pending.
func (p *listPartition) entry(off int64, group string) queengo.MessageEntry {
	e := queengo.MessageEntry{PartitionID: p.id, Queue: p.queue, Partition: p.name, Namespace: p.ns, Task: p.task,
		Priority: p.priority, TotalGroups: p.busGroups, Status: queengo.StatusPending}
	dead := p.dead[off]
	var done, dl, processing int
	var expires time.Time
	for i := range p.cursors {
		cu := &p.cursors[i]
		st, exp := cu.status(off, dead)
		if i == p.queueMode {
			e.QueueStatus = st
		} else {
			switch st {
			case queengo.StatusCompleted:
				e.ConsumedBy++
				done++
			case queengo.StatusDeadLetter:
				done++
				dl++
			case queengo.StatusProcessing:
				processing++
				if expires.IsZero() || exp.Before(expires) {
					expires = exp
				}
			}
		}
		if group != "" && cu.group == group {
			e.Status, e.LeaseExpiresAt = st, exp
		}
		if group == "" && i == p.queueMode {
			e.Status, e.LeaseExpiresAt = st, exp
		}
	}
	if group == "" && p.queueMode < 0 && p.busGroups > 0 {
		switch {
		case done == p.busGroups && dl == 0:
			e.Status = queengo.StatusCompleted
		case done == p.busGroups:
			e.Status = queengo.StatusDeadLetter
		case processing > 0:
			e.Status, e.LeaseExpiresAt = queengo.StatusProcessing, expires
		}
	}
	return e
}

// readHeads reads the heads of the picked messages' frames (their ids and
// producerSub) and their segments' times, one primary-key probe each.
func readHeads(ctx context.Context, c *pgxpool.Conn, pick []pickedMessage) ([]queengo.MessageEntry, error) {
	pids, offs := make([]pgtype.UUID, len(pick)), make([]int64, len(pick))
	for i, m := range pick {
		pids[i], offs[i] = pgUUID(m.part.id), m.off
	}
	rows, err := c.Query(ctx, `SELECT u.k::integer,
       substring(s.frames FROM coalesce(s.ends[u.off - s.first_offset], 0) + 1
                 FOR least($3, s.ends[u.off - s.first_offset + 1] - coalesce(s.ends[u.off - s.first_offset], 0))),
       s.created_at
  FROM unnest($1::uuid[], $2::bigint[]) WITH ORDINALITY AS u(pid, off, k)
  JOIN LATERAL (SELECT s0.first_offset, s0.ends, s0.frames, s0.created_at FROM queen.segments s0
                 WHERE s0.partition_id = u.pid AND s0.first_offset <= u.off
                 ORDER BY s0.first_offset DESC LIMIT 1) s ON true
 ORDER BY u.k`, pids, offs, listHeadMax)
	if err != nil {
		return nil, err
	}
	out := make([]queengo.MessageEntry, 0, len(pick))
	var (
		k    int
		head []byte
		at   time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&k, &head, &at}, func() error {
		m := &pick[k-1]
		e := m.entry
		var f queengo.Frame
		if err := frameHead(head, &f); err != nil {
			return fmt.Errorf("partition %s offset %d: %w", m.part.id, m.off, err)
		}
		e.ID, e.TraceID, e.TransactionID, e.ProducerSub, e.CreatedAt = f.ID, f.TraceID, f.TransactionID, f.ProducerSub, at
		out = append(out, e)
		return nil
	})
	return out, err
}

// frameHead decodes the head of a frame (pg/frames.go): its ids and
// producerSub; b may end anywhere after them.
func frameHead(b []byte, f *queengo.Frame) error {
	if len(b) < 17 {
		return errCorruptFrame
	}
	flags := b[0]
	copy(f.ID[:], b[1:17])
	b = b[17:]
	if flags&frameHasTrace != 0 {
		if len(b) < 16 {
			return errCorruptFrame
		}
		copy(f.TraceID[:], b[:16])
		b = b[16:]
	}
	id, b, err := readBytes(b)
	if err != nil {
		return err
	}
	f.TransactionID = string(id)
	if flags&frameHasSub != 0 {
		sub, _, err := readBytes(b)
		if err != nil {
			return err
		}
		f.ProducerSub = string(sub)
	}
	return nil
}
