package pg

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

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

// readyMax is the most untaken claimable partitions a round reports per
// group (ClaimResult.Ready).
const readyMax = 1000

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

// scopeRound is the state of one scope's claims between the statements of a
// round: the claimable partitions of each group (as claim_read saw them and
// claim_take found them), and what each pop still needs.
type scopeRound struct {
	claims []queengo.ClaimParams
	queues []pgtype.UUID
	groups []roundGroup
	pops   []roundPop
	// names, modes and froms are the groups' names and subscription intents
	// as claim_subscribe and claim_contact take them.
	names []string
	modes []string
	froms []pgtype.Timestamptz
	// pre are statements that go first in the next batch: the subscription
	// records, first contacts.
	pre []preStatement
	// lead, until sent, goes first in the next batch (AckClaim,
	// AppendClaim); riding is it while it rides in the batch under way.
	lead, riding *roundLead
	batched      bool // a batch of the round was started
	// committed are the spans the round's autoAck pops committed, in
	// order: when a pop's answer cannot be read (a payload sealed with a
	// key this process lacks) they are given back (giveBack).
	committed []autoSpan
}

type preStatement struct {
	sql  string
	args []any
}

type roundGroup struct {
	full  bool
	cands map[uuid.UUID]bool
	// direct: every pop of the group takes one partition, any of them
	// (partitions=1), so claim_take finds the claimable partitions itself
	// and claim_read is not needed.
	direct bool
	// pinned: every pop of the group is of the single-partition route, so
	// its entries are the pops' partitions (pinnedEntries) and claim_read is
	// not needed either: the pinned claim_take reports the ones the group
	// never contacted.
	pinned  bool
	entries []roundEntry
	missing []uuid.UUID // never contacted, as the group's last claim_take found
	next    int         // in a hand-out: entries before it are not free
	readyTo int         // the pop that reports the group's untaken partitions
}

type roundEntry struct {
	pid   uuid.UUID
	avail int64 // as claim_read saw it
	state entryState
	// contacted: a pinned claim_take found the group never contacted it
	// (its pop looks again once, after the first contact).
	contacted bool
}

type entryState uint8

const (
	entryFree     entryState = iota
	entryPlanned             // given to pops in the pass under way
	entryReserved            // given to a pop restricted to it
	entryTaken               // leased or committed by this round
	entryGone                // locked by a concurrent round, holding nothing, or never contacted
)

type roundPop struct {
	claim  int // index into claims and out
	group  int
	budget int // messages still wanted
	parts  int // partitions taken
	taken  int
	done   bool
}

func newScopeRound(claims []queengo.ClaimParams, sc []int) *scopeRound {
	r := &scopeRound{claims: claims, queues: pgUUIDs(claims[sc[0]].QueueIDs)}
	index := map[string]int{}
	intents := false
	for _, i := range sc {
		p := &claims[i]
		k, ok := index[p.Group]
		if !ok {
			// The group's first pop in the round brings its intent.
			mode, from := "", pgtype.Timestamptz{}
			switch {
			case p.SubFrom != nil:
				mode, from = "timestamp", pgtype.Timestamptz{Time: *p.SubFrom, Valid: true}
			case p.SubFromNow, p.SubMode == queengo.SubscriptionNew:
				mode = "new"
			case p.SubMode == queengo.SubscriptionAll:
				mode = "all"
			}
			intents = intents || mode != ""
			k = len(r.groups)
			index[p.Group] = k
			r.names, r.modes, r.froms = append(r.names, p.Group), append(r.modes, mode), append(r.froms, from)
			r.groups = append(r.groups, roundGroup{cands: map[uuid.UUID]bool{}, direct: true, pinned: true, readyTo: -1})
		}
		g := &r.groups[k]
		if p.SubscribeOnly {
			// Its intent is recorded above; it takes no part in the takes.
			if g.readyTo < 0 {
				g.readyTo = len(r.pops)
			}
			r.pops = append(r.pops, roundPop{claim: i, group: k, done: true})
			continue
		}
		switch {
		case p.Partition != uuid.Nil:
			g.cands[p.Partition] = true
		case p.Candidates == nil:
			g.full = true
		default:
			for _, pid := range p.Candidates {
				g.cands[pid] = true
			}
		}
		g.direct = g.direct && p.Partition == uuid.Nil && p.MaxParts == 1
		g.pinned = g.pinned && p.Partition != uuid.Nil
		if p.Partition == uuid.Nil || g.readyTo < 0 || r.claims[r.pops[g.readyTo].claim].Partition != uuid.Nil {
			g.readyTo = len(r.pops)
		}
		r.pops = append(r.pops, roundPop{claim: i, group: k, budget: max(p.Batch, 1)})
	}
	if intents {
		r.pre = append(r.pre, preStatement{`SELECT queen.claim_subscribe($1, $2, $3, $4)`,
			[]any{r.queues, r.names, r.modes, r.froms}})
	}
	return r
}

// candidates returns the partitions group k searches, nil when it searches
// everything in scope.
func (r *scopeRound) candidates(k int) []pgtype.UUID {
	g := &r.groups[k]
	if g.full {
		return nil
	}
	out := make([]pgtype.UUID, 0, len(g.cands))
	for pid := range g.cands {
		out = append(out, pgUUID(pid))
	}
	return out
}

// read loads the claimable partitions of the groups that are neither direct
// nor pinned, creating the cursors they lack; a pinned group's entries are
// its pops' partitions. With only direct and pinned groups it sends nothing:
// the statements waiting in pre go with the first claim_take.
func (r *scopeRound) read(ctx context.Context, c *pgxpool.Conn) error {
	r.pinnedEntries()
	if !slices.ContainsFunc(r.groups, roundGroup.read) {
		return nil
	}
	full := make([]bool, len(r.groups))
	var candGroups []int32
	var candParts []pgtype.UUID
	for k, g := range r.groups {
		if !g.read() {
			continue
		}
		full[k] = g.full
		for _, pid := range r.candidates(k) {
			candGroups, candParts = append(candGroups, int32(k+1)), append(candParts, pid)
		}
	}
	const readSQL = `SELECT grp, partition_id, avail FROM queen.claim_read($1, $2, $3, $4, $5)`
	b := r.batch()
	b.Queue(readSQL, r.queues, r.names, full, candGroups, candParts)
	missing, err := r.readBatch(ctx, c, b)
	if err != nil || len(missing) == 0 {
		return err
	}
	// First contact, then the claimable partitions again, with the new
	// cursors; a partition still without one is left alone.
	r.contact(missing)
	b = r.batch()
	b.Queue(readSQL, r.queues, r.names, full, candGroups, candParts)
	_, err = r.readBatch(ctx, c, b)
	return err
}

// read reports whether the group's claimable partitions come from claim_read.
func (g roundGroup) read() bool { return !g.direct && !g.pinned }

// pinnedEntries makes each pinned group's entries its pops' partitions, each
// once, in the order of the pops, free: claim_take sees whether they hold
// anything (avail is not read).
func (r *scopeRound) pinnedEntries() {
	for _, p := range r.pops {
		g := &r.groups[p.group]
		pid := r.claims[p.claim].Partition
		if g.pinned && pid != uuid.Nil && !slices.ContainsFunc(g.entries, func(e roundEntry) bool { return e.pid == pid }) {
			g.entries = append(g.entries, roundEntry{pid: pid})
		}
	}
}

// leadRides reports whether the lead goes in the next batch: not sent yet,
// and no statement waits in pre. Subscription records and first contacts
// lock before cursors do (docs/architecture.md, "Lock order"), and an ack
// locks cursors, so a lead never shares their transaction.
func (r *scopeRound) leadRides() bool { return r.lead != nil && len(r.pre) == 0 }

// batch starts a batch with the lead, when it rides, or the statements
// waiting in pre.
func (r *scopeRound) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if r.leadRides() {
		r.lead.queue(b)
		r.lead.sent, r.lead.first = true, !r.batched
		r.lead, r.riding = nil, r.lead
	}
	r.batched = true
	for _, st := range r.pre {
		b.Queue(st.sql, st.args...)
	}
	return b
}

// sendPre reads the answers of the lead riding in br and the statements of
// pre that start br, and empties pre.
func (r *scopeRound) sendPre(br pgx.BatchResults) error {
	if l := r.riding; l != nil {
		if err := l.read(br); err != nil {
			return err
		}
	}
	for range r.pre {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	r.pre = nil
	return nil
}

// close ends br, whose answers were read (err: the first that failed), and
// marks the lead that rode in it committed, or failed with the batch.
func (r *scopeRound) close(br pgx.BatchResults, err error) error {
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if l := r.riding; l != nil {
		r.riding = nil
		l.committed, l.err = err == nil, err
	}
	return err
}

// flush sends what still waits: the statements of pre (the first contacts
// a round's last claim_take found needed when its pops were served anyway),
// then the lead, when no batch carried it.
func (r *scopeRound) flush(ctx context.Context, c *pgxpool.Conn) error {
	for len(r.pre) > 0 || r.lead != nil {
		br := c.SendBatch(ctx, r.batch())
		if err := r.close(br, r.sendPre(br)); err != nil {
			return err
		}
	}
	return nil
}

// contact queues the first contact of the groups with partitions they never
// contacted, for the next batch.
func (r *scopeRound) contact(missing []missingCursor) {
	var ks []int32
	var pids []pgtype.UUID
	for _, m := range missing {
		ks, pids = append(ks, int32(m.group+1)), append(pids, pgUUID(m.pid))
	}
	r.pre = append(r.pre, preStatement{`SELECT queen.claim_contact($1, $2, $3, $4, $5)`,
		[]any{r.names, r.modes, r.froms, ks, pids}})
}

type missingCursor struct {
	group int
	pid   uuid.UUID
}

// readBatch sends b, whose last statement is claim_read, and replaces the
// groups' entries with its answer. It returns the partitions never
// contacted, which become gone.
func (r *scopeRound) readBatch(ctx context.Context, c *pgxpool.Conn, b *pgx.Batch) (missing []missingCursor, err error) {
	br := c.SendBatch(ctx, b)
	defer func() {
		if err = r.close(br, err); err != nil {
			missing = nil
		}
	}()
	if err := r.sendPre(br); err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	for k := range r.groups {
		if r.groups[k].read() {
			r.groups[k].entries = r.groups[k].entries[:0]
		}
	}
	var (
		k     int32
		pid   pgtype.UUID
		avail pgtype.Int8
	)
	_, err = pgx.ForEachRow(rows, []any{&k, &pid, &avail}, func() error {
		if k < 1 || int(k) > len(r.groups) {
			return fmt.Errorf("claim_read answered for group %d of %d", k, len(r.groups))
		}
		e := roundEntry{pid: pid.Bytes, avail: avail.Int64}
		if !avail.Valid {
			e.state = entryGone
			missing = append(missing, missingCursor{group: int(k - 1), pid: pid.Bytes})
		}
		r.groups[k-1].entries = append(r.groups[k-1].entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return missing, nil
}

// takeCall is one claim_take: pops of one group served from a pool of its
// claimable partitions (direct: the ones claim_take finds; pinned: each pop
// restricted to the partition at its slot).
type takeCall struct {
	group  int
	direct bool
	pinned bool
	pool   []int // entries, in the order of preference
	slots  []int // per row to lock, the number of its pop in pops (1-based)
	pops   []int // the call's pops (indexes into scopeRound.pops)
}

// handOut gives each pop that still wants messages claimable partitions of
// its group, in claim order, within its budget (as claim_read counted the
// messages) and its cap, and returns the claim_take calls that lock them: one
// per group for the pops that take any partition (its pool is every free
// partition of the group, so rows locked elsewhere are skipped for the next
// ones), one per group for the pops restricted to a single partition (the
// pinned call: its pool is their partitions, each for its own pop). A
// direct group's pops get one row each from the call, which finds the
// partitions itself.
func (r *scopeRound) handOut() []*takeCall {
	var calls []*takeCall
	shared, pinned := make([]*takeCall, len(r.groups)), make([]*takeCall, len(r.groups))
	for k := range r.groups {
		r.groups[k].next = 0
	}
	for pi := range r.pops {
		p := &r.pops[pi]
		cl := &r.claims[p.claim]
		if p.done || p.budget <= 0 || (cl.MaxParts > 0 && p.parts >= cl.MaxParts) {
			continue
		}
		g := &r.groups[p.group]
		call := shared[p.group]
		if g.direct || cl.Partition == uuid.Nil {
			if call == nil {
				call = &takeCall{group: p.group, direct: g.direct}
				shared[p.group] = call
				calls = append(calls, call)
			}
		}
		if g.direct {
			p.done = true // unless the call meets partitions never contacted
			call.pops = append(call.pops, pi)
			call.slots = append(call.slots, len(call.pops))
			continue
		}
		if cl.Partition != uuid.Nil {
			p.done = true // one partition, one try
			e := slices.IndexFunc(g.entries, func(e roundEntry) bool { return e.pid == cl.Partition && e.state == entryFree })
			if e >= 0 {
				g.entries[e].state = entryReserved
				call := pinned[p.group]
				if call == nil {
					call = &takeCall{group: p.group, pinned: true}
					pinned[p.group] = call
					calls = append(calls, call)
				}
				call.pool, call.pops = append(call.pool, e), append(call.pops, pi)
				call.slots = append(call.slots, len(call.pops))
			}
			continue
		}
		budget, parts, local := p.budget, p.parts, 0
		e := g.next
		for ; e < len(g.entries) && budget > 0 && (cl.MaxParts <= 0 || parts < cl.MaxParts); e++ {
			if g.entries[e].state != entryFree {
				continue
			}
			g.entries[e].state = entryPlanned
			if local == 0 {
				call.pops = append(call.pops, pi)
				local = len(call.pops)
			}
			call.slots = append(call.slots, local)
			budget -= int(min(g.entries[e].avail, int64(budget)))
			parts++
		}
		g.next = e
		if local == 0 {
			p.done = true // nothing free is left in its group
		}
	}
	// A group whose pops all wanted nothing more has an empty shared call.
	calls = slices.DeleteFunc(calls, func(call *takeCall) bool { return len(call.slots) == 0 })
	for _, call := range calls {
		if call.direct || len(call.pool) > 0 {
			continue
		}
		for e, en := range r.groups[call.group].entries {
			if en.state == entryPlanned || en.state == entryFree {
				call.pool = append(call.pool, e)
			}
		}
	}
	return calls
}

// take runs the calls in one pipelined batch (one implicit transaction),
// after the statements waiting in pre, and records what they took: the
// results of the pops in out, and which partitions are taken, gone or still
// free.
func (r *scopeRound) take(ctx context.Context, c *pgxpool.Conn, calls []*takeCall, out []queengo.ClaimResult) error {
	// A lead riding in the batch commits synchronously.
	async := !r.leadRides() && r.asyncCommit(calls)
	b := r.batch()
	if async {
		b.Queue(asyncCommitSQL)
	}
	for _, call := range calls {
		g := &r.groups[call.group]
		var pool, cands []pgtype.UUID
		if call.direct {
			cands = r.candidates(call.group)
		} else {
			pool = make([]pgtype.UUID, len(call.pool))
			for i, e := range call.pool {
				pool[i] = pgUUID(g.entries[e].pid)
			}
		}
		slots := make([]int32, len(call.slots))
		for i, s := range call.slots {
			slots[i] = int32(s)
		}
		n := len(call.pops)
		budgets, mins, secs := make([]int32, n), make([]int32, n), make([]int32, n)
		autos, leases := make([]bool, n), make([]pgtype.UUID, n)
		for i, pi := range call.pops {
			p := &r.pops[pi]
			cl := &r.claims[p.claim]
			budgets[i], mins[i], secs[i], autos[i] = int32(p.budget), int32(cl.Min), int32(cl.LeaseSeconds), cl.AutoAck
			if !cl.AutoAck {
				leases[i] = pgUUID(cl.LeaseID)
			}
		}
		b.Queue(`SELECT ord, claim, taken, held, partition_id, partition_name, queue_name, span_from, lease_ms,
first_offset, created_at, frames, dead, missing FROM queen.claim_take($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			r.queues, r.names[call.group], g.full, cands, pool, slots, budgets, mins, secs, autos, leases, call.pinned)
	}
	br := c.SendBatch(ctx, b)
	// A failure at commit (Sync) rolls back every call read.
	if err := r.close(br, r.readTakes(br, async, calls, out)); err != nil {
		return err
	}
	var missing []missingCursor
	for k := range r.groups {
		for _, pid := range r.groups[k].missing {
			missing = append(missing, missingCursor{group: k, pid: pid})
		}
		r.groups[k].missing = nil
	}
	if len(missing) > 0 {
		r.contact(missing)
	}
	return nil
}

// readTakes reads the answers of a take's batch br: the statements that
// start it, the asyncCommit statement when async, then the calls'.
func (r *scopeRound) readTakes(br pgx.BatchResults, async bool, calls []*takeCall, out []queengo.ClaimResult) error {
	if err := r.sendPre(br); err != nil {
		return err
	}
	if async {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	for _, call := range calls {
		if err := r.readTake(br, call, out); err != nil {
			return err
		}
	}
	return nil
}

// asyncCommitSQL makes the rest of a claim's implicit transaction commit
// without waiting for its WAL flush (synchronous_commit=off, local to the
// transaction).
const asyncCommitSQL = `SELECT set_config('synchronous_commit', 'off', true)`

// asyncCommit reports whether the round's take may commit without waiting
// for the WAL flush: when none of its pops is autoAck. The flush was a
// third to a half of a batch-1 round's time, and a round in flight holds up
// the next (docs/benchmarks.md, issue 9). What such a commit writes is
// leases (and with them first contacts and subscription records): PostgreSQL
// flushes WAL in order, so it is lost in a crash only when no synchronous
// commit (a push, an ack) followed it, at most wal_writer_delay x 3 later,
// and then its messages are delivered again, which at-least-once allows.
// An autoAck pop's claim is its delivery's only record (its cursor moves
// in the claim), so a round carrying one commits synchronously: a crash
// must not deliver those messages twice.
func (r *scopeRound) asyncCommit(calls []*takeCall) bool {
	for _, call := range calls {
		for _, pi := range call.pops {
			if r.claims[r.pops[pi].claim].AutoAck {
				return false
			}
		}
	}
	return true
}

// readTake reads one claim_take answer.
func (r *scopeRound) readTake(br pgx.BatchResults, call *takeCall, out []queengo.ClaimResult) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	g := &r.groups[call.group]
	if call.direct {
		g.entries = g.entries[:0]
	}
	locked, contact := make([]bool, len(call.pool)), []int(nil)
	var (
		ord, claim                  pgtype.Int4
		taken, from, leaseMS, first pgtype.Int8
		held, missing               pgtype.Bool
		pid                         pgtype.UUID
		pname, qname, created       pgtype.Text
		frames                      []byte
		dead                        []int64
		span                        *queengo.Span
		nLocked, lastLocked         int
	)
	for rows.Next() {
		if err := rows.Scan(&ord, &claim, &taken, &held, &pid, &pname, &qname, &from, &leaseMS, &first, &created, &frames, &dead, &missing); err != nil {
			return err
		}
		if !claim.Valid && !call.direct {
			// A partition of a pinned call's pool that the group never
			// contacted.
			if i := int(ord.Int32) - 1; missing.Bool && i >= 0 && i < len(call.pool) && !g.entries[call.pool[i]].contacted {
				g.entries[call.pool[i]].contacted = true
				g.missing = append(g.missing, pid.Bytes)
				contact = append(contact, i)
			}
			continue
		}
		if !claim.Valid {
			// A partition of a direct call's pool it did not lock.
			switch {
			case missing.Bool:
				// Contacted before the round ends and reported ready: the
				// next claim sees whether its seed left anything.
				g.missing = append(g.missing, pid.Bytes)
				g.entries = append(g.entries, roundEntry{pid: pid.Bytes})
			case nLocked == len(call.slots) && int(ord.Int32) > lastLocked:
				g.entries = append(g.entries, roundEntry{pid: pid.Bytes})
			}
			continue
		}
		if claim.Int32 < 1 || int(claim.Int32) > len(call.pops) || (!call.direct && (ord.Int32 < 1 || int(ord.Int32) > len(call.pool))) {
			return fmt.Errorf("claim_take answered for row %d of %d, pop %d of %d", ord.Int32, len(call.pool), claim.Int32, len(call.pops))
		}
		p := &r.pops[call.pops[claim.Int32-1]]
		res := &out[p.claim]
		if taken.Valid {
			// A locked row; its segments follow.
			span = nil
			nLocked, lastLocked = nLocked+1, int(ord.Int32)
			state := entryGone
			switch {
			case taken.Int64 == 0:
			case held.Bool:
				state = entryFree
				p.taken += int(taken.Int64)
				p.done = true
			default:
				state = entryTaken
				p.taken += int(taken.Int64)
				p.budget -= int(taken.Int64)
				p.parts++
				res.Spans = append(res.Spans, queengo.Span{PartitionID: pid.Bytes, Partition: pname.String, Queue: qname.String,
					From: from.Int64, To: from.Int64 + taken.Int64 - 1, Lease: time.Duration(leaseMS.Int64) * time.Millisecond})
				span = &res.Spans[len(res.Spans)-1]
				if r.claims[p.claim].AutoAck {
					r.committed = append(r.committed, autoSpan{claim: p.claim, pid: pid.Bytes, from: span.From, to: span.To})
				}
			}
			if call.direct {
				if state == entryFree {
					g.entries = append(g.entries, roundEntry{pid: pid.Bytes})
				}
			} else {
				locked[ord.Int32-1] = true
				g.entries[call.pool[ord.Int32-1]].state = state
			}
			continue
		}
		if span == nil || res.Err != nil {
			continue
		}
		// rows.Scan into []byte copies the value out of the read buffer, so
		// payloads may alias it after the next row is read.
		if err := decodeSegment(res, frames, first.Int64, span.From, span.To, dead, created.String, span.PartitionID, span.Partition, span.Queue); err != nil {
			// The statement ran; only this pop's answer is unusable: its
			// leases expire and the messages are delivered again, or, for
			// autoAck, its spans are given back (giveBack).
			*res = queengo.ClaimResult{Err: fmt.Errorf("error reading claim: %w", err)}
		}
		frames = nil
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if call.direct {
		if len(g.missing) > 0 {
			// Its pops that got nothing look again once the cursors exist.
			for _, pi := range call.pops {
				if p := &r.pops[pi]; p.parts == 0 && p.taken == 0 {
					p.done = false
				}
			}
		}
		return nil
	}
	// Rows the call passed over were locked by a concurrent round or no
	// longer claimable; the ones after the last it locked, when it locked as
	// many as it had pops for, were not looked at and stay free.
	for i, e := range call.pool {
		switch {
		case locked[i]:
		case nLocked < len(call.slots) || i+1 < lastLocked:
			g.entries[e].state = entryGone
		default:
			g.entries[e].state = entryFree
		}
	}
	// A pinned pop whose partition gets its first contact looks again in
	// the next pass, whose batch makes the contact first.
	for _, i := range contact {
		g.entries[call.pool[i]].state = entryFree
		r.pops[call.pops[call.slots[i]-1]].done = false
	}
	return nil
}

// autoSpan is a span an autoAck pop's claim committed: the group's cursor on
// the partition moved from from-1 to to.
type autoSpan struct {
	claim    int
	pid      uuid.UUID
	from, to int64
}

// giveBack moves back the cursors of the spans that autoAck pops committed
// and whose answers could not be read (their result is an error): autoAck is
// at-most-once, and such messages were never delivered, so they are claimed
// again by the group's next pop (a broker with the key reads them) instead
// of being lost. A cursor that moved on since (another round of the group)
// stays: kept is how many spans could not be given back.
func (r *scopeRound) giveBack(ctx context.Context, c *pgxpool.Conn, out []queengo.ClaimResult) (kept int, err error) {
	var pids []pgtype.UUID
	var groups []string
	var froms, tos []int64
	for _, sp := range r.committed {
		if out[sp.claim].Err == nil {
			continue
		}
		pids, froms, tos = append(pids, pgUUID(sp.pid)), append(froms, sp.from), append(tos, sp.to)
		groups = append(groups, r.claims[sp.claim].Group)
	}
	if len(pids) == 0 {
		return 0, nil
	}
	tag, err := c.Exec(ctx, `WITH back AS (
    SELECT c.partition_id, c.consumer_group, u.first, u.last
      FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::bigint[]) AS u(pid, grp, first, last)
      JOIN queen.cursors c ON c.partition_id = u.pid AND c.consumer_group = u.grp COLLATE "C"
     WHERE c.committed = u.last AND c.lease_id IS NULL
     ORDER BY c.partition_id, c.consumer_group
       FOR UPDATE OF c
)
UPDATE queen.cursors c SET committed = b.first - 1,
       total_consumed = greatest(c.total_consumed - (b.last - b.first + 1), 0)
  FROM back b
 WHERE c.partition_id = b.partition_id AND c.consumer_group = b.consumer_group AND c.committed = b.last`,
		pids, groups, froms, tos)
	if err != nil {
		return len(pids), err
	}
	return len(pids) - int(tag.RowsAffected()), nil
}

// passState is what a claim pass changes of a round: its pops' counters,
// their results and the groups' entries, as they were before the pass.
type passState struct {
	committed int // len(scopeRound.committed)
	pops      []roundPop
	out       []queengo.ClaimResult // per pop
	entries   [][]roundEntry        // per group
	missing   [][]uuid.UUID         // per group
}

// save returns the round's state before a pass; restore puts it back when
// the pass failed. Results are copied as values: a pass only appends to
// their spans and messages, so the saved lengths are what came before it.
func (r *scopeRound) save(out []queengo.ClaimResult) passState {
	st := passState{committed: len(r.committed), pops: slices.Clone(r.pops), out: make([]queengo.ClaimResult, len(r.pops)),
		entries: make([][]roundEntry, len(r.groups)), missing: make([][]uuid.UUID, len(r.groups))}
	for i, p := range r.pops {
		st.out[i] = out[p.claim]
	}
	for k, g := range r.groups {
		st.entries[k], st.missing[k] = slices.Clone(g.entries), slices.Clone(g.missing)
	}
	return st
}

func (r *scopeRound) restore(st passState, out []queengo.ClaimResult) {
	r.committed = r.committed[:st.committed]
	copy(r.pops, st.pops)
	for i, p := range r.pops {
		out[p.claim] = st.out[i]
	}
	for k := range r.groups {
		r.groups[k].entries, r.groups[k].missing = st.entries[k], st.missing[k]
	}
}

// finish reports, per claim, how many messages it took (or, held by its
// minimum, found) and, on the pop chosen per group, the claimable
// partitions the round left untaken.
func (r *scopeRound) finish(out []queengo.ClaimResult) {
	for _, p := range r.pops {
		if out[p.claim].Err == nil {
			out[p.claim].Taken = p.taken
		}
	}
	for _, g := range r.groups {
		var ready []uuid.UUID
		for _, e := range g.entries {
			if e.state == entryFree && len(ready) < readyMax {
				ready = append(ready, e.pid)
			}
		}
		if res := &out[r.pops[g.readyTo].claim]; len(ready) > 0 && res.Err == nil {
			res.Ready = ready
		}
	}
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

// decodeSegment appends the frames of one segment that fall inside
// [from, to] and are not in dead (dead-lettered by the group, or deleted:
// claim_take lists both) to res.Messages.
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
		m.Offset, m.CreatedAt, m.PartitionID, m.Partition, m.Queue = off, created, pid, pname, qname
		res.Messages = append(res.Messages, m)
	}
	return nil
}
