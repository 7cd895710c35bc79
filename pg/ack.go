package pg

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// Ack applies the acknowledgements in one statement and returns one result
// per item in input order.
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

// ackLead is an ack that rides first in a claim round's first batch, in its
// implicit transaction (Store.AckClaim).
type ackLead struct {
	items     []queengo.AckItem
	sent      bool
	committed bool                // its batch committed: res stands
	res       []queengo.AckResult // read from the batch; nil unless committed
	err       error               // why its batch failed, when it did
}

type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ackSQL applies acknowledgements; ackArgs are its arguments.
const ackSQL = `SELECT idx, success, error, lease_released, dlq, queue_name, partition_name
FROM queen.ack($1, $2, $3, $4, $5, $6, $7)`

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

func ack(ctx context.Context, q queryer, items []queengo.AckItem) ([]queengo.AckResult, error) {
	rows, err := q.Query(ctx, ackSQL, ackArgs(items)...)
	if err != nil {
		return nil, err
	}
	return scanAcks(rows, len(items))
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
// one transaction (one round trip: the two statements are pipelined, and
// a pipeline without transaction commands runs as one implicit transaction
// in PostgreSQL). It returns one result per item and per extension, in
// input order. The extensions lock every cursor either statement writes in
// (partition, group) order, so the transaction takes its locks in the order
// a lone ack or extension does (see queen.extend_leases).
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
		if len(items) > 0 {
			b.Queue(ackSQL, ackArgs(items)...)
		}
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
			if rows, err = br.Query(); err != nil {
				return err
			}
			if acks, err = scanAcks(rows, len(items)); err != nil {
				return err
			}
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
