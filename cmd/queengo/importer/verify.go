package importer

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/pg"
)

// check is one row of the verification table: what Queen holds against
// what queengo holds.
type check struct {
	what, queue, partition, group string
	queen, queengo                string
	ok                            bool
}

// table is the verification table.
type table []check

// differences counts the rows that differ.
func (t table) differences() int {
	n := 0
	for _, c := range t {
		if !c.ok {
			n++
		}
	}
	return n
}

// write prints the table, a DIFF at the end of each row that differs.
func (t table) write(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tQUEUE\tPARTITION\tGROUP\tQUEEN\tQUEENGO\t")
	for _, c := range t {
		mark := ""
		if !c.ok {
			mark = "DIFF"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.what, dash(c.queue), dash(c.partition), dash(c.group), c.queen,
			c.queengo, mark)
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// verify reads both databases again and compares, per partition, the
// messages (how many, and the newest), per group and partition the
// position (how many messages are left to consume, and which comes next),
// and per queue the dead letters and traces.
func (r *run) verify(ctx context.Context) (table, error) {
	r.o.Progress.Phase("verifying", -1)
	defer r.o.Progress.Done()
	ids := make([]uuid.UUID, len(r.pl.queues))
	for i, q := range r.pl.queues {
		ids[i] = q.q.ID
	}
	parts := r.pl.partitionIDs()
	now, err := r.src.Partitions(ctx, ids)
	if err != nil {
		return nil, err
	}
	srcParts := map[uuid.UUID]pg.QueenPartition{}
	for _, p := range now {
		srcParts[p.ID] = p
	}
	tails, err := r.dst.ImportTails(ctx, parts, nil)
	if err != nil {
		return nil, err
	}
	dstParts := map[uuid.UUID]pg.ImportTail{}
	for _, t := range tails {
		dstParts[t.ID] = t
	}
	var t table
	for _, p := range r.pl.parts {
		s, d := srcParts[p.p.ID], dstParts[p.p.ID]
		c := check{what: "messages", queue: p.queue.q.Name, partition: p.p.Name,
			queen: fmt.Sprint(s.Messages), queengo: fmt.Sprint(d.Stored)}
		c.ok = s.Messages == d.Stored && s.Last.ID == d.Last.ID
		if s.Messages == d.Stored && !c.ok {
			c.queen, c.queengo = c.queen+" to "+s.Last.ID.String(), c.queengo+" to "+d.Last.ID.String()
		}
		if p.diverged {
			c.ok, c.queengo = false, c.queengo+" (left alone: see above)"
		}
		t = append(t, c)
	}

	srcCursors, err := r.src.Cursors(ctx, parts, true)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(srcCursors, func(a, b pg.QueenCursor) int {
		pa, pb := r.pl.byID[a.Partition], r.pl.byID[b.Partition]
		return cmp.Or(cmp.Compare(pa.queue.q.Name, pb.queue.q.Name), cmp.Compare(pa.p.Name, pb.p.Name),
			cmp.Compare(a.Group, b.Group))
	})
	dstCursors, err := r.dst.ImportedCursors(ctx, parts)
	if err != nil {
		return nil, err
	}
	type key struct {
		p uuid.UUID
		g string
	}
	at := map[key]pg.ImportedCursorAt{}
	for _, c := range dstCursors {
		at[key{c.Partition, c.Group}] = c
	}
	for _, s := range srcCursors {
		p := r.pl.byID[s.Partition]
		c := check{what: "position", queue: p.queue.q.Name, partition: p.p.Name, group: s.Group,
			queen: position(s.Pending, s.NextTxID)}
		d, ok := at[key{s.Partition, s.Group}]
		if !ok {
			c.queengo = "no cursor"
		} else {
			c.queengo = position(d.Pending, d.NextTxID)
			c.ok = d.Pending == s.Pending && d.Next == s.Next
		}
		t = append(t, c)
	}

	srcCounts, err := r.src.Counts(ctx, parts)
	if err != nil {
		return nil, err
	}
	dstCounts, err := r.dst.ImportedCounts(ctx, parts)
	if err != nil {
		return nil, err
	}
	for _, q := range r.pl.queues {
		var s, d pg.QueenCounts
		for _, p := range q.parts {
			s.DeadLetters += srcCounts[p.p.ID].DeadLetters
			s.Traces += srcCounts[p.p.ID].Traces
			d.DeadLetters += dstCounts[p.p.ID].DeadLetters
			d.Traces += dstCounts[p.p.ID].Traces
		}
		t = append(t,
			check{what: "dead letters", queue: q.q.Name, queen: fmt.Sprint(s.DeadLetters), queengo: fmt.Sprint(d.DeadLetters),
				ok: s.DeadLetters == d.DeadLetters},
			check{what: "traces", queue: q.q.Name, queen: fmt.Sprint(s.Traces), queengo: fmt.Sprint(d.Traces),
				ok: s.Traces == d.Traces})
	}

	return t, nil
}

// position renders a group's place: how many messages it has left and
// the transaction id of the next one.
func position(pending int64, txid string) string {
	if txid == "" {
		return fmt.Sprintf("%d left", pending)
	}
	return fmt.Sprintf("%d left, next %s", pending, txid)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// writePlan prints what the run finds and will do (or, dry, would do).
func writePlan(w io.Writer, pl *plan, dry bool, horizon time.Time) {
	var msgs, imported, toCopy int64
	for _, p := range pl.parts {
		msgs += p.p.Messages
		imported += min(p.head, p.p.Messages)
		toCopy += p.toCopy()
	}
	verb := "copying"
	if dry {
		verb = "would copy (dry run: nothing is written)"
	}
	target := "holds queengo's schema"
	switch pl.kind {
	case "":
		target = "is empty: its schema is created first"
		if dry {
			target = "is empty: a run creates its schema first"
		}
	}
	fmt.Fprintf(w, "Queen: %d queues, %d partitions, %d messages (before %s); queengo's database %s\n",
		len(pl.queues), len(pl.parts), msgs, horizon.UTC().Format(time.RFC3339Nano), target)
	fmt.Fprintf(w, "%s %d messages (%d imported before)\n", verb, toCopy, imported)
	if pl.encrypted > 0 || pl.sealing > 0 {
		fmt.Fprintf(w, "encryption: %s; their payloads are opened with QUEEN_ENCRYPTION_KEY and sealed again with it "+
			"(re-sealed, not carried: queengo's seal authenticates the message id and names its key, which Queen's ciphertext does not)\n",
			encryptedWhat(pl))
	}
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tPARTITIONS\tMESSAGES\tTO COPY\tIN QUEENGO\t")
	for _, q := range pl.queues {
		var m, c int64
		state := "new"
		if q.exists {
			state = "imported before"
		}
		for _, p := range q.parts {
			m += p.p.Messages
			c += p.toCopy()
			if p.diverged {
				state = "partly left alone"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", q.q.Name, len(q.parts), m, c, state)
	}
	_ = tw.Flush()
	for _, p := range pl.parts {
		if p.diverged {
			fmt.Fprintf(w, "left alone: %s/%s: %s\n", p.queue.q.Name, p.p.Name, p.why)
		}
	}
}

// writeSummary prints what the run wrote.
func writeSummary(w io.Writer, res *Result) {
	rate := 0.0
	if s := res.Elapsed.Seconds(); s > 0 {
		rate = float64(res.Messages) / s
	}
	fmt.Fprintf(w, "imported %d messages in %s (%.0f msg/s), %d cursors written (%d kept as queengo had them), "+
		"%d subscriptions, %d dead letters, %d traces\n", res.Messages, res.Elapsed.Round(time.Millisecond), rate,
		res.Cursors, res.CursorsKept, res.Subscriptions, res.DeadLetters, res.Traces)
	if sw := res.Switches; sw != nil {
		fmt.Fprintf(w, "maintenance switches set as Queen's: push maintenance %s, pop maintenance %s\n", onOff(sw.Push), onOff(sw.Pop))
	} else {
		fmt.Fprintln(w, "maintenance switches left as they were in queengo: the verification found differences")
	}
	for _, d := range res.Diverged {
		fmt.Fprintf(w, "left alone: %s\n", d)
	}
}
