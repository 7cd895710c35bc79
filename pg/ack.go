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

type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func ack(ctx context.Context, q queryer, items []queengo.AckItem) ([]queengo.AckResult, error) {
	parts := make([]uuid.UUID, len(items))
	txids := make([]string, len(items))
	statuses := make([]string, len(items))
	groups := make([]string, len(items))
	leases := make([]pgtype.UUID, len(items))
	errs := make([]string, len(items))
	for i, it := range items {
		parts[i], txids[i], statuses[i], groups[i], errs[i] = it.PartitionID, it.TransactionID, it.Status, it.Group, it.Error
		leases[i] = pgUUID(it.LeaseID)
	}
	rows, err := q.Query(ctx, `SELECT idx, success, error, lease_released, dlq, queue_name, partition_name
FROM queen.ack($1, $2, $3, $4, $5, $6)`, pgUUIDs(parts), txids, statuses, groups, leases, errs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]queengo.AckResult, len(items))
	for rows.Next() {
		var (
			idx                   int32
			r                     queengo.AckResult
			errText, qname, pname pgtype.Text
		)
		if err := rows.Scan(&idx, &r.Success, &errText, &r.LeaseReleased, &r.DLQ, &qname, &pname); err != nil {
			return nil, err
		}
		r.Error, r.Queue, r.Partition = errText.String, qname.String, pname.String
		out[idx-1] = r
	}
	return out, rows.Err()
}

// ExtendLease extends every live span of the lease to at least now+seconds.
// It returns the earliest new expiry (RFC 3339, milliseconds) or, when the
// lease is not live, an empty expiry and the reason.
func (s *Store) ExtendLease(ctx context.Context, lease uuid.UUID, seconds int) (expiresAt, reason string, err error) {
	err = s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var e, r pgtype.Text
		if err := c.QueryRow(ctx, `SELECT expires_at, reason FROM queen.extend_lease($1, $2)`, lease, seconds).Scan(&e, &r); err != nil {
			return err
		}
		expiresAt, reason = e.String, r.String
		return nil
	})
	if err != nil {
		return "", "", fmt.Errorf("error extending lease: %w", err)
	}
	return expiresAt, reason, nil
}
