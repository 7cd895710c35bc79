package pg

import (
	"context"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// What a claim round took and does not deliver: the state a failed pass
// changed, put back in memory (save, restore), and the cursor moves of
// autoAck pops whose answers could not be read, given back in the database
// (giveBack).

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
