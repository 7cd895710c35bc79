package pg

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// Claim runs the claims in one pipelined round trip (one implicit
// transaction) on one connection and returns their results in order.
func (s *Store) Claim(ctx context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
	out := make([]queengo.ClaimResult, len(claims))
	err := s.withConn(ctx, func(c *pgxpool.Conn) error {
		b := &pgx.Batch{}
		for i := range claims {
			p := &claims[i]
			part := pgUUID(p.Partition)
			var from any
			switch {
			case p.SubFromNow:
				from = "now"
			case p.SubFrom != nil:
				from = *p.SubFrom
			}
			var cands any
			if p.Candidates != nil {
				cands = pgUUIDs(p.Candidates)
			}
			b.Queue(`SELECT kind, partition_id, partition_name, queue_name, span_from, span_to, lease_ms,
first_offset, created_at, frames, taken, ready, dead
FROM queen.claim($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::timestamptz, $11, $12)`,
				pgUUIDs(p.QueueIDs), part, p.Group, p.Batch, p.MaxParts, p.LeaseSeconds, p.AutoAck, pgUUID(p.LeaseID),
				p.SubMode, from, cands, p.Min)
		}
		br := c.SendBatch(ctx, b)
		for i := range claims {
			if err := readClaim(br, &out[i]); err != nil {
				_ = br.Close()
				return err
			}
		}
		return br.Close()
	})
	if err != nil {
		return nil, fmt.Errorf("error claiming: %w", err)
	}
	return out, nil
}

func readClaim(br pgx.BatchResults, res *queengo.ClaimResult) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		kind, pname, qname, created pgtype.Text
		pid                         pgtype.UUID
		from, to, leaseMS, first    pgtype.Int8
		taken                       pgtype.Int8
		frames                      []byte
		ready                       []pgtype.UUID
		dead                        []int64
	)
	for rows.Next() {
		if err := rows.Scan(&kind, &pid, &pname, &qname, &from, &to, &leaseMS, &first, &created, &frames, &taken, &ready, &dead); err != nil {
			return err
		}
		if kind.String == "end" {
			res.Taken = int(taken.Int64)
			res.Ready = make([]uuid.UUID, len(ready))
			for i, r := range ready {
				res.Ready[i] = r.Bytes
			}
			continue
		}
		n := len(res.Spans)
		if n == 0 || res.Spans[n-1].PartitionID != uuid.UUID(pid.Bytes) {
			res.Spans = append(res.Spans, queengo.Span{PartitionID: pid.Bytes, Partition: pname.String, Queue: qname.String,
				From: from.Int64, To: to.Int64, Lease: time.Duration(leaseMS.Int64) * time.Millisecond})
		}
		// rows.Scan into []byte copies the value out of the read buffer, so
		// payloads may alias it after the next row is read.
		if err := decodeSegment(res, frames, first.Int64, from.Int64, to.Int64, dead, created.String, pid.Bytes, pname.String, qname.String); err != nil {
			return err
		}
		frames = nil
	}
	return rows.Err()
}

// decodeSegment appends the frames of one segment that fall inside
// [from, to] and are not dead-lettered to res.Messages.
func decodeSegment(res *queengo.ClaimResult, b []byte, first, from, to int64, dead []int64, created string, pid uuid.UUID, pname, qname string) error {
	for off := first; len(b) > 0 && off <= to; off++ {
		var m queengo.Message
		var err error
		if b, err = decodeFrame(b, &m.Frame); err != nil {
			return fmt.Errorf("segment %s@%d: %w", pid, first, err)
		}
		if off < from || slices.Contains(dead, off) {
			continue
		}
		m.CreatedAt, m.PartitionID, m.Partition, m.Queue = created, pid, pname, qname
		res.Messages = append(res.Messages, m)
	}
	return nil
}
