package pg

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// The Store's claim entry points (Claim, AckClaim, AppendClaim) and the
// driving of a round: its claims checked, grouped by scope and served one
// scope after the other, a lead settled, a failed round run again claim by
// claim. The rest of a round is in claim_round.go (one scope's claims),
// claim_answer.go (reading what claim_take returns) and claim_giveback.go
// (what a round took and does not deliver); its statements are in
// sql/functions/claim.sql.

// Claim serves the claims of one round and returns their results in order.
// Its cost in statements does not depend on how many claims the round
// carries (sql/functions/claim.sql): the claims of one scope (a queue or
// discovery scope actor's round) are served per consumer group by one
// claim_take, which finds the group's claimable partitions, locks one for
// each claim, writes the leases (or commits) and returns the frames, when
// every claim of the group takes one partition (partitions=1, the default);
// otherwise one claim_read of every such group comes first, and the
// partitions are handed out to the claims here, within their budgets and
// caps, for claim_take to lock (the pops of the single-partition route in
// one more claim_take per group). A group's first contact with partitions,
// a pop carrying a subscription intent and a collision with a concurrent
// round add statements.
//
// One claim's failure never fails the others. A claim whose parameters
// PostgreSQL would reject (a group that is not valid text, a number out of
// range) gets its error (ClaimResult.Err) without being sent. When a
// statement fails anyway before anything was taken, each claim runs again
// alone and only the failing one reports its error. A claim whose answer
// cannot be decoded after its round committed reports its error without
// disturbing the others (its leases expire and the messages are delivered
// again). A claim without QueueIDs has nothing in scope: it gets an empty
// result. The returned error is for what every claim shares: no connection,
// a lost connection, the request deadline, which bounds the whole call,
// re-runs included.
func (s *Store) Claim(ctx context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out, run := prepareClaims(claims)
	if len(run) == 0 {
		return out, nil
	}
	if err := s.claim(ctx, claims, run, out, nil); err != nil {
		return nil, fmt.Errorf("error claiming: %w", err)
	}
	return out, nil
}

// AckClaim applies the acknowledgements items, then serves the claims as
// Claim does, and returns the acks' results in item order and the claims'.
// The acks ride at the head of the round's first batch, in its implicit
// transaction, which then commits synchronously as an ack does: a
// partition whose lease they end is claimed without a commit and a round
// trip in between (the hand-off, actors' Broker.Ack). When that batch does
// not commit, the acks run alone and the claims after them, as Ack and
// Claim would. The error is the acks' (the claims' failures are in their
// results' Err): nothing of them was applied, or, for a lost connection or
// an ended deadline, maybe they were.
func (s *Store) AckClaim(ctx context.Context, items []queengo.AckItem, claims []queengo.ClaimParams) ([]queengo.AckResult, []queengo.ClaimResult, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out, run := prepareClaims(claims)
	call := newAckCall(items)
	var res, got []queengo.AckResult
	lead := &roundLead{queue: call.queue, read: func(br pgx.BatchResults) error {
		got = make([]queengo.AckResult, len(items))
		return call.read(br, got)
	}}
	err := s.withLead(ctx, claims, run, out, lead, "acking", func() (err error) {
		res, err = s.Ack(ctx, items)
		return err
	})
	if lead.committed {
		res = got
	}
	return res, out, err
}

// AppendClaim writes the segments as Append does, then serves the claims as
// Claim does, and returns the segments' outcome as Append does and the
// claims' results. The segments ride at the head of the round's first batch,
// in its implicit transaction, which then commits synchronously: when seen
// is true the claims ran after the write in its transaction, so a pop finds
// the messages the segments bring and gets them with their commit (a queue
// actor's commit that carries the claim round of its parked pops). seen is
// false when the claims could not follow the write (a group's subscription
// record went first, or the write failed and ran again alone): they may have
// missed it. A first contact does not: it is found by the statements the
// write rides with, and the claims after it see the write. When the batch
// the segments rode in does not commit, they are written alone and the
// claims after them. The error is the segments' (the claims' failures are in
// their results' Err).
func (s *Store) AppendClaim(ctx context.Context, segs []queengo.Segment, claims []queengo.ClaimParams) (dups [][]uuid.UUID, res []queengo.ClaimResult, seen bool, err error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out, run := prepareClaims(claims)
	w, err := encodeSegments(segs, s.seal)
	if err != nil {
		// Nothing to write: the error, and the claims alone.
		if len(run) > 0 {
			failClaims(out, run, s.claim(ctx, claims, run, out, nil))
		}
		return nil, out, false, fmt.Errorf("error appending segments: %w", err)
	}
	var got [][]uuid.UUID
	lead := &roundLead{queue: w.queue, read: func(br pgx.BatchResults) error {
		var raw []pgtype.UUID
		if err := br.QueryRow().Scan(&raw); err != nil {
			return err
		}
		got = w.dups(raw)
		return nil
	}}
	// A lost connection may have committed the segments: they are not
	// written again (a retry with the same transaction ids finds them).
	err = s.withLead(ctx, claims, run, out, lead, "appending segments", func() (err error) {
		dups, err = s.Append(ctx, segs)
		return err
	})
	if lead.committed {
		dups, seen = got, lead.first
	}
	return dups, out, seen, err
}

// withLead serves the claims run (into out) with lead at the head of their
// first batch, then settles the lead: committed there, it stands; when its
// batch went with the connection or the deadline it may have committed, so
// it is not applied again and fails ("error <what>: ..."); when the batch
// rolled back, or no batch carried it (no claim to run), alone applies it
// by itself and the claims that failed with it run again. It returns the
// lead's error; the claims' failures are in their results' Err.
func (s *Store) withLead(ctx context.Context, claims []queengo.ClaimParams, run []int, out []queengo.ClaimResult, lead *roundLead, what string, alone func() error) error {
	var claimErr, err error
	if len(run) > 0 {
		claimErr = s.claim(ctx, claims, run, out, lead)
	}
	switch {
	case lead.committed:
	case lead.sent && !rolledBack(ctx, lead.err):
		err = fmt.Errorf("error %s: %w", what, translateCtx(ctx, lead.err))
	default:
		err = alone()
		claimErr = s.claimAgain(ctx, claims, run, out, lead, claimErr)
	}
	failClaims(out, run, claimErr)
	return err
}

// claimAgain runs the claims of a round whose lead did not commit and was
// applied alone: again, when the lead was sent (its batch rolled back, and
// the claims that failed with it); otherwise their outcome claimErr stands.
func (s *Store) claimAgain(ctx context.Context, claims []queengo.ClaimParams, run []int, out []queengo.ClaimResult, lead *roundLead, claimErr error) error {
	if lead.sent && claimErr != nil {
		return s.claim(ctx, claims, run, out, nil)
	}
	return claimErr
}

// failClaims gives every claim of run the error err, when there is one.
func failClaims(out []queengo.ClaimResult, run []int, err error) {
	if err == nil {
		return
	}
	err = fmt.Errorf("error claiming: %w", err)
	for _, i := range run {
		out[i] = queengo.ClaimResult{Err: err}
	}
}

// prepareClaims makes the results of claims and lists the ones to run: a
// claim PostgreSQL would reject gets its error without being sent, and one
// without QueueIDs an empty result.
func prepareClaims(claims []queengo.ClaimParams) (out []queengo.ClaimResult, run []int) {
	out = make([]queengo.ClaimResult, len(claims))
	for i := range claims {
		if err := checkClaim(&claims[i]); err != nil {
			out[i].Err = fmt.Errorf("error claiming: %w", err)
			continue
		}
		if len(claims[i].QueueIDs) > 0 {
			run = append(run, i)
		}
	}
	return out, run
}

// claim serves the claims run, with lead (nil: none) at the head of the
// first batch it may ride in. When the round fails before applying anything
// and carries more than one claim, each claim runs again alone so only the
// failing one reports its error (not when the failed batch carried the
// lead). The error is what every claim shares.
func (s *Store) claim(ctx context.Context, claims []queengo.ClaimParams, run []int, out []queengo.ClaimResult, lead *roundLead) error {
	var rerun bool
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		err := s.claimRound(ctx, c, claims, run, out, lead)
		// A failure of the batch the lead rode in may be the lead's own:
		// AckClaim runs the claims again after the acks.
		if err != nil && len(run) > 1 && rolledBack(ctx, err) && (lead == nil || !lead.sent || lead.committed) {
			s.log.Warn("claim round failed; running its claims one by one", "claims", len(run), "err", err)
			rerun = true
			return nil
		}
		return err
	})
	if err != nil || !rerun {
		return err
	}
	// On a connection of its own: the round's may have been dropped.
	return s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		for k, i := range run {
			err := s.claimRound(ctx, c, claims, run[k:k+1], out, nil)
			switch {
			case err == nil:
				continue
			case rolledBack(ctx, err):
				out[i] = queengo.ClaimResult{Err: fmt.Errorf("error claiming: %w", translate(err))}
				if !c.Conn().IsClosed() {
					continue
				}
			}
			// The connection or the deadline is gone: this claim and the
			// ones after it fail alike; the ones before it stand.
			err = fmt.Errorf("error claiming: %w", translateCtx(ctx, err))
			for _, j := range run[k:] {
				out[j] = queengo.ClaimResult{Err: err}
			}
			return nil
		}
		return nil
	})
}

// checkClaim rejects what PostgreSQL would reject in the claim's parameters,
// so that it cannot fail the statement its round shares.
func checkClaim(p *queengo.ClaimParams) error {
	if !utf8.ValidString(p.Group) || strings.IndexByte(p.Group, 0) >= 0 {
		return errors.New("consumer group is not valid text")
	}
	for _, n := range []int{p.Batch, p.MaxParts, p.LeaseSeconds, p.Min} {
		if n < math.MinInt32 || n > math.MaxInt32 {
			return fmt.Errorf("%d is out of range", n)
		}
	}
	// PostgreSQL's timestamptz runs from 4713 BC to 294276 AD.
	if p.SubFrom != nil && (p.SubFrom.Year() < -4712 || p.SubFrom.Year() > 294275) {
		return errors.New("subscriptionFrom is out of range")
	}
	return nil
}

// claimPasses bounds the claim_take calls of a round: a pass serves the
// pops a concurrent round beat to every partition the previous pass gave
// them. Two concurrent rounds rarely collide more than once (claim_take
// itself skips past rows locked elsewhere), and a pop that finds nothing
// parks and looks again.
const claimPasses = 3

// claimRound serves the claims run (indexes into claims, all encodable) and
// stores their results in out, one scope after the other; lead, when not
// nil, goes first in the first scope's first batch. An error is returned
// only when nothing of the round but maybe lead was applied.
func (s *Store) claimRound(ctx context.Context, c *pgxpool.Conn, claims []queengo.ClaimParams, run []int, out []queengo.ClaimResult, lead *roundLead) error {
	var scopes [][]int
	for _, i := range run {
		k := slices.IndexFunc(scopes, func(sc []int) bool { return slices.Equal(claims[sc[0]].QueueIDs, claims[i].QueueIDs) })
		if k < 0 {
			scopes = append(scopes, nil)
			k = len(scopes) - 1
		}
		scopes[k] = append(scopes[k], i)
	}
	for _, sc := range scopes {
		for _, i := range sc {
			out[i] = queengo.ClaimResult{}
		}
		r := newScopeRound(claims, sc)
		r.keys = s.keys
		r.lead, lead = lead, nil
		if err := r.read(ctx, c); err != nil {
			return err
		}
		for pass := range claimPasses {
			calls := r.handOut()
			if len(calls) == 0 {
				break
			}
			var before passState
			if pass > 0 {
				before = r.save(out)
			}
			if err := r.take(ctx, c, calls, out); err != nil {
				if pass == 0 {
					return err
				}
				// What the earlier passes took is committed and in out;
				// what this one read is not (rolled back, or unknown when
				// the connection or the deadline went: its leases then
				// expire), so it is not delivered; the pops still short of
				// their batch get less.
				r.restore(before, out)
				s.log.Warn("claim pass failed", "pass", pass+1, "err", err)
				break
			}
		}
		if err := r.flush(ctx, c); err != nil {
			// The claims were served; the groups meet the partitions
			// they have not contacted at their next round.
			s.log.Warn("claim round: first contact failed", "err", err)
		}
		if kept, err := r.giveBack(ctx, c, out); err != nil || kept > 0 {
			s.log.Error("claim round: autoAck messages that could not be read stay committed (lost for their group)",
				"err", err, "spans", kept)
		}
		r.finish(out)
	}
	return nil
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
