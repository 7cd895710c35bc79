package pg

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// Ack applies the acknowledgements and returns one result per item in input
// order, in one commit (ackCall: one or two statements).
func (s *Store) Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error) {
	var out []queengo.AckResult
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		out, err = ack(ctx, c, items)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error acking: %w", err)
	}
	return out, nil
}

// roundLead is a write that rides first in a claim round's first batch it
// can ride in, in that batch's implicit transaction, which then commits
// synchronously: the acks of AckClaim, the segments of AppendClaim. queue
// adds its statements to a batch and read reads their answers, which stand
// only when committed.
type roundLead struct {
	queue     func(b *pgx.Batch)
	read      func(br pgx.BatchResults) error
	sent      bool
	first     bool  // it rode in the round's first batch: every claim ran after it
	committed bool  // its batch committed
	err       error // why its batch failed, when it did
}

type batcher interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ackSQL applies acknowledgements; ackArgs are its arguments.
const ackSQL = `SELECT idx, success, error, lease_released, dlq, queue_name, partition_name
FROM queen.ack($1, $2, $3, $4, $5, $6, $7)`

// ackSpansSQL applies spans, and queen.ack the items of those that do not
// apply (queen.ack_spans).
const ackSpansSQL = `SELECT k, idx, success, error, released, dlq, queue_name, partition_name
FROM queen.ack_spans($1, $2, $3, $4, $5, $6, $7, $8)`

func ackArgs(items []queengo.AckItem) []any {
	parts := make([]uuid.UUID, len(items))
	txids := make([]string, len(items))
	statuses := make([]string, len(items))
	groups := make([]string, len(items))
	leases := make([]pgtype.UUID, len(items))
	errs := make([]string, len(items))
	offsets := make([]pgtype.Int8, len(items))
	for i, it := range items {
		parts[i], txids[i], statuses[i], groups[i], errs[i] = it.PartitionID, it.TransactionID, it.Status, it.Group, it.Error
		leases[i] = pgUUID(it.LeaseID)
		offsets[i] = pgtype.Int8{Int64: it.Offset, Valid: it.Offset > 0}
	}
	return []any{pgUUIDs(parts), txids, statuses, groups, leases, errs, offsets}
}

// ackSpan is the items of one cursor that complete a contiguous run of
// offsets of one lease: queen.ack_spans applies them as one cursor update
// when the run starts right after the cursor's committed offset.
type ackSpan struct {
	part        uuid.UUID
	group       string
	lease       uuid.UUID
	first, last int64
	items       []int // in offset order: items[j] completes first+j
}

// ackCall is one application of acknowledgements, split for the span path:
// the spans, and the items outside every span (rest), which queen.ack
// applies in the same implicit transaction. queen.ack_spans sends the items
// of a span that did not apply through queen.ack itself: each cursor's
// items are all on one side, so every cursor resolves as queen.ack alone
// would resolve it.
type ackCall struct {
	items []queengo.AckItem
	spans []ackSpan
	rest  []int
}

// newAckCall splits items: the items of a (partition, group) form a span
// when each completes (completed or success) a message whose offset the
// broker knows, under one lease they all name, and their offsets are
// distinct and contiguous.
func newAckCall(items []queengo.AckItem) *ackCall {
	a := &ackCall{items: items}
	type cursor struct {
		part  uuid.UUID
		group string
	}
	var order []cursor
	of := map[cursor][]int{}
	for i, it := range items {
		k := cursor{it.PartitionID, it.Group}
		if of[k] == nil {
			order = append(order, k)
		}
		of[k] = append(of[k], i)
	}
	for _, k := range order {
		idx := of[k]
		if sp, ok := spanOf(items, idx); ok {
			a.spans = append(a.spans, sp)
		} else {
			a.rest = append(a.rest, idx...)
		}
	}
	slices.Sort(a.rest)
	return a
}

// spanOf makes the items idx of one cursor a span, if they are one.
func spanOf(items []queengo.AckItem, idx []int) (ackSpan, bool) {
	first := &items[idx[0]]
	sp := ackSpan{part: first.PartitionID, group: first.Group, lease: first.LeaseID, first: first.Offset,
		last: first.Offset, items: idx}
	for _, i := range idx {
		it := &items[i]
		if (it.Status != "completed" && it.Status != "success") || it.LeaseID == uuid.Nil || it.LeaseID != sp.lease ||
			it.Offset <= 0 {
			return ackSpan{}, false
		}
		sp.first, sp.last = min(sp.first, it.Offset), max(sp.last, it.Offset)
	}
	if sp.last-sp.first+1 != int64(len(idx)) {
		return ackSpan{}, false
	}
	if len(idx) > 1 {
		// As many offsets as the run is long: a gap means an offset twice.
		sp.items = make([]int, len(idx))
		seen := make([]bool, len(idx))
		for _, i := range idx {
			k := items[i].Offset - sp.first
			if seen[k] {
				return ackSpan{}, false
			}
			seen[k] = true
			sp.items[k] = i
		}
	}
	return sp, true
}

// queue adds the call's statements to b: the spans', which lock the rest's
// cursors too, then queen.ack's for the rest.
func (a *ackCall) queue(b *pgx.Batch) {
	if len(a.spans) > 0 {
		n := len(a.spans)
		parts, groups, leases := make([]uuid.UUID, n), make([]string, n), make([]uuid.UUID, n)
		firsts, lasts := make([]int64, n), make([]int64, n)
		for k, sp := range a.spans {
			parts[k], groups[k], leases[k], firsts[k], lasts[k] = sp.part, sp.group, sp.lease, sp.first, sp.last
		}
		moreParts, moreGroups := make([]uuid.UUID, len(a.rest)), make([]string, len(a.rest))
		for k, i := range a.rest {
			moreParts[k], moreGroups[k] = a.items[i].PartitionID, a.items[i].Group
		}
		// The spans' items, for queen.ack when their span does not apply.
		var txids []string
		for _, sp := range a.spans {
			for _, i := range sp.items {
				txids = append(txids, a.items[i].TransactionID)
			}
		}
		b.Queue(ackSpansSQL, pgUUIDs(parts), groups, pgUUIDs(leases), firsts, lasts, pgUUIDs(moreParts), moreGroups,
			txids)
	}
	if len(a.rest) > 0 {
		b.Queue(ackSQL, ackArgs(a.subset(a.rest))...)
	}
}

// read reads the answers of the statements queue added into out, one
// result per item.
func (a *ackCall) read(br pgx.BatchResults, out []queengo.AckResult) error {
	if len(a.spans) > 0 {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if err := a.readSpans(rows, out); err != nil {
			return err
		}
	}
	if len(a.rest) > 0 {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		res, err := scanAcks(rows, len(a.rest))
		if err != nil {
			return err
		}
		a.place(a.rest, res, out)
	}
	return nil
}

// readSpans reads queen.ack_spans' answer into out and closes rows: a row
// per span that applied, then one per item of the spans that did not,
// numbered as queue listed them (span by span, in offset order).
func (a *ackCall) readSpans(rows pgx.Rows, out []queengo.AckResult) error {
	defer rows.Close()
	var spanItems []int // the spans' items as queue listed them
	for _, sp := range a.spans {
		spanItems = append(spanItems, sp.items...)
	}
	answered := 0
	for rows.Next() {
		var (
			k, idx        pgtype.Int4
			success       bool
			errText       pgtype.Text
			released, dlq bool
			qname, pname  pgtype.Text
		)
		if err := rows.Scan(&k, &idx, &success, &errText, &released, &dlq, &qname, &pname); err != nil {
			return err
		}
		switch {
		case k.Valid && k.Int32 >= 1 && int(k.Int32) <= len(a.spans):
			sp := &a.spans[k.Int32-1]
			for _, i := range sp.items {
				out[i] = queengo.AckResult{Success: true, LeaseReleased: released && a.items[i].Offset == sp.last,
					Queue: qname.String, Partition: pname.String}
			}
			answered += len(sp.items)
		case idx.Valid && idx.Int32 >= 1 && int(idx.Int32) <= len(spanItems):
			failure, err := ackFailure(errText)
			if err != nil {
				return err
			}
			out[spanItems[idx.Int32-1]] = queengo.AckResult{Success: success, Failure: failure,
				LeaseReleased: released, DLQ: dlq, Queue: qname.String, Partition: pname.String}
			answered++
		default:
			return fmt.Errorf("queen.ack_spans answered span %v, item %v of %d spans, %d items", k, idx, len(a.spans), len(spanItems))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if answered != len(spanItems) {
		return fmt.Errorf("queen.ack_spans answered %d of %d items", answered, len(spanItems))
	}
	return nil
}

// subset returns the items idx (distinct, in order: all of them is the
// call's items).
func (a *ackCall) subset(idx []int) []queengo.AckItem {
	if len(idx) == len(a.items) {
		return a.items
	}
	out := make([]queengo.AckItem, len(idx))
	for k, i := range idx {
		out[k] = a.items[i]
	}
	return out
}

// place puts the results res of the items idx into out.
func (a *ackCall) place(idx []int, res []queengo.AckResult, out []queengo.AckResult) {
	for k, i := range idx {
		out[i] = res[k]
	}
}

// ack applies the acknowledgements items on q: the call's statements in one
// batch (one implicit transaction, or q's).
func ack(ctx context.Context, q batcher, items []queengo.AckItem) ([]queengo.AckResult, error) {
	a := newAckCall(items)
	if len(a.spans) == 0 {
		// No spans: the one queen.ack statement, no batch.
		rows, err := q.Query(ctx, ackSQL, ackArgs(items)...)
		if err != nil {
			return nil, err
		}
		return scanAcks(rows, len(items))
	}
	out := make([]queengo.AckResult, len(items))
	b := &pgx.Batch{}
	a.queue(b)
	br := q.SendBatch(ctx, b)
	err := a.read(br, out)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanAcks reads the n results of ackSQL and closes rows.
func scanAcks(rows pgx.Rows, n int) ([]queengo.AckResult, error) {
	defer rows.Close()
	out := make([]queengo.AckResult, n)
	for rows.Next() {
		var (
			idx                int32
			r                  queengo.AckResult
			code, qname, pname pgtype.Text
		)
		if err := rows.Scan(&idx, &r.Success, &code, &r.LeaseReleased, &r.DLQ, &qname, &pname); err != nil {
			return nil, err
		}
		if idx < 1 || int(idx) > n {
			return nil, fmt.Errorf("queen.ack answered item %d of %d", idx, n)
		}
		var err error
		if r.Failure, err = ackFailure(code); err != nil {
			return nil, err
		}
		r.Queue, r.Partition = qname.String, pname.String
		out[idx-1] = r
	}
	return out, rows.Err()
}

// ackFailure reads a failure code of queen.ack or queen.extend_leases: NULL
// is none, anything else must be a queengo.AckFailure.
func ackFailure(code pgtype.Text) (queengo.AckFailure, error) {
	if !code.Valid {
		return "", nil
	}
	for _, f := range queengo.AckFailures {
		if string(f) == code.String {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown ack failure code %q", code.String)
}

// AckExtend applies the lease extensions and then the acknowledgements in
// one transaction (one round trip: the statements are pipelined, and a
// pipeline without transaction commands runs as one implicit transaction
// in PostgreSQL; the acks are ackCall's statements). It returns one result
// per item and per extension, in input order. The extensions lock every
// cursor the statements write in (partition, group) order, so the
// transaction takes its locks in the order a lone ack or extension does
// (see queen.extend_leases).
//
// Extensions go first: a caller's extension and its concurrent ack promise
// each other no order, and this one never fails an extension because an ack
// of the same commit released its lease.
func (s *Store) AckExtend(ctx context.Context, items []queengo.AckItem, extends []queengo.LeaseExtend) ([]queengo.AckResult, []queengo.LeaseExtension, error) {
	leases := make([]uuid.UUID, len(extends))
	seconds := make([]int, len(extends))
	var (
		hintK      []int32
		hintParts  []uuid.UUID
		hintGroups []string
	)
	for i, e := range extends {
		leases[i], seconds[i] = e.Lease, e.Seconds
		if e.End {
			seconds[i] = -1 // queen.extend_leases: ends it now
		}
		for _, c := range e.Cursors {
			hintK, hintParts, hintGroups = append(hintK, int32(i+1)), append(hintParts, c.Partition), append(hintGroups, c.Group)
		}
	}
	parts := make([]uuid.UUID, len(items))
	groups := make([]string, len(items))
	for i, it := range items {
		parts[i], groups[i] = it.PartitionID, it.Group
	}
	var (
		acks []queengo.AckResult
		ext  []queengo.LeaseExtension
	)
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		b := &pgx.Batch{}
		b.Queue(`SELECT idx, expires_at, failure FROM queen.extend_leases($1, $2, $3, $4, $5, $6, $7)`,
			pgUUIDs(leases), seconds, pgUUIDs(parts), groups, hintK, pgUUIDs(hintParts), hintGroups)
		call := newAckCall(items)
		call.queue(b)
		br := c.SendBatch(ctx, b)
		defer br.Close()
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if ext, err = scanExtends(rows, len(extends)); err != nil {
			return err
		}
		if len(items) > 0 {
			acks = make([]queengo.AckResult, len(items))
		}
		if err := call.read(br, acks); err != nil {
			return err
		}
		return br.Close()
	})
	if err != nil {
		return nil, nil, fmt.Errorf("error acking and extending leases: %w", err)
	}
	return acks, ext, nil
}

// scanExtends reads the n results of queen.extend_leases and closes rows.
func scanExtends(rows pgx.Rows, n int) ([]queengo.LeaseExtension, error) {
	defer rows.Close()
	out := make([]queengo.LeaseExtension, n)
	for rows.Next() {
		var (
			idx           int32
			expires, code pgtype.Text
		)
		if err := rows.Scan(&idx, &expires, &code); err != nil {
			return nil, err
		}
		if idx < 1 || int(idx) > n {
			return nil, fmt.Errorf("queen.extend_leases answered item %d of %d", idx, n)
		}
		f, err := ackFailure(code)
		if err != nil {
			return nil, err
		}
		out[idx-1] = queengo.LeaseExtension{ExpiresAt: expires.String, Failure: f}
	}
	return out, rows.Err()
}
