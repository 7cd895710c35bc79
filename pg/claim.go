package pg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// Claim runs the claims in one pipelined round trip (one implicit
// transaction) on one connection and returns their results in order.
//
// One claim's failure never fails the others. When a statement of the round
// fails, PostgreSQL rolls the whole implicit transaction back (and skips the
// statements after it), and a claim that cannot be encoded stops the round
// before its Sync is sent (pgx then drops the connection, which rolls back
// whatever the server had started): either way nothing of the round was
// applied, so each claim runs again alone, in a transaction of its own, and
// only the failing one reports its error (ClaimResult.Err). A claim whose
// answer cannot be decoded after its round committed reports its error
// without disturbing the others. The returned error is for what every claim
// shares: no connection, a lost connection, the request deadline, which
// bounds the whole call, re-runs included.
func (s *Store) Claim(ctx context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var out []queengo.ClaimResult
	var rerun bool
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		out, err = claimRound(ctx, c, claims)
		if err != nil && len(claims) > 1 && rolledBack(ctx, err) {
			s.log.Warn("claim round failed; running its claims one by one", "claims", len(claims), "err", err)
			rerun = true
			return nil
		}
		return err
	})
	if err == nil && rerun {
		// On a connection of its own: the round's may have been dropped.
		out = make([]queengo.ClaimResult, len(claims))
		err = s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
			for i := range claims {
				res, err := claimRound(ctx, c, claims[i:i+1])
				switch {
				case err == nil:
					out[i] = res[0]
					continue
				case rolledBack(ctx, err):
					out[i].Err = fmt.Errorf("error claiming: %w", translate(err))
					if !c.Conn().IsClosed() {
						continue
					}
				}
				// The connection or the deadline is gone: this claim and the
				// ones after it fail alike; the ones before it stand.
				err = fmt.Errorf("error claiming: %w", translateCtx(ctx, err))
				for j := i; j < len(claims); j++ {
					if out[j].Err == nil {
						out[j] = queengo.ClaimResult{Err: err}
					}
				}
				return nil
			}
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("error claiming: %w", err)
	}
	return out, nil
}

// claimRound sends the claims as one pipelined batch and reads their
// answers. A claim whose answer cannot be decoded gets it as its Err; any
// other error is returned for the round.
func claimRound(ctx context.Context, c *pgxpool.Conn, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
	out := make([]queengo.ClaimResult, len(claims))
	// In group order: two rounds first-contacting the same new groups take
	// the groups' cursor-insert locks in one order (docs/architecture.md,
	// "Lock order"). Different groups never compete for rows, so the order
	// changes no outcome.
	order := make([]int, len(claims))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(claims[a].Group, claims[b].Group) })
	b := &pgx.Batch{}
	for _, i := range order {
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
	for _, i := range order {
		if err := readClaim(br, &out[i]); err != nil {
			var bad *badAnswer
			if errors.As(err, &bad) {
				// The statement ran; only its answer is unusable.
				out[i] = queengo.ClaimResult{Err: fmt.Errorf("error reading claim: %w", bad.err)}
				continue
			}
			_ = br.Close()
			return nil, err
		}
	}
	// A failure at commit (Sync) rolls back every claim read above.
	if err := br.Close(); err != nil {
		return nil, err
	}
	return out, nil
}

// rolledBack reports whether a round that failed with err is known to have
// applied nothing: a statement (or the commit) failed in PostgreSQL, which
// rolls the implicit transaction back, or a claim could not be encoded, which
// stops the round before its Sync. A lost connection, a cancelled or
// timed-out statement or an ended context are not: those fail the round as a
// whole.
func rolledBack(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var pre pgx.ErrPreprocessingBatch
	if errors.As(err, &pre) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch {
	case pgErr.Code == codeQueryCanceled, strings.HasPrefix(pgErr.Code, classConnection),
		strings.EqualFold(pgErr.Severity, "FATAL"), strings.EqualFold(pgErr.Severity, "PANIC"):
		return false
	}
	return true
}

// badAnswer marks a claim whose rows arrived but could not be decoded.
type badAnswer struct{ err error }

func (e *badAnswer) Error() string { return e.err.Error() }

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
			return &badAnswer{err: err}
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
