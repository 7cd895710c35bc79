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

// One scope's claims in a claim round (scopeRound): its groups and pops,
// the claimable partitions claim_read reports, the batches and the
// statements that ride at their head (the lead, subscription records, first
// contacts), the hand-out of partitions to pops, the claim_take calls that
// lock them, and what each claim reports at the end (finish).

// scopeRound is the state of one scope's claims between the statements of a
// round: the claimable partitions of each group (as claim_read saw them and
// claim_take found them), and what each pop still needs.
type scopeRound struct {
	claims []queengo.ClaimParams
	queues []pgtype.UUID
	keys   keyring // the Store's: they open the takes' sealed payloads
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
	// key this store lacks) they are given back (giveBack).
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
// lock before cursors do (docs/storage.md, "Lock order"), and an ack
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

// asyncCommitSQL makes the rest of a claim's implicit transaction commit
// without waiting for its WAL flush (synchronous_commit=off, local to the
// transaction).
const asyncCommitSQL = `SELECT set_config('synchronous_commit', 'off', true)`

// asyncCommit reports whether the round's take may commit without waiting
// for the WAL flush: when none of its pops is autoAck. The flush was a
// third to a half of a batch-1 round's time, and a round in flight holds up
// the next (docs/performance.md "The dated record", issue 9). What such a commit writes is
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

// readyMax is the most untaken claimable partitions a round reports per
// group (ClaimResult.Ready).
const readyMax = 1000

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
