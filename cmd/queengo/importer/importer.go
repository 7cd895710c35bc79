// Package importer is `queengo import queen`: it copies a reference Queen
// server's database into queengo's (docs/operations.md, "Importing a Queen
// database"). Package pg reads the one (pg.QueenSource) and writes the
// other (pg.Store's Import methods); this package decides what to copy,
// in which order, and checks the result:
//
//  1. plan: the queues (all, or --queues), their partitions and what the
//     target already holds of them; a queue or partition of the target
//     that bears an imported name under another id is a conflict, and
//     nothing is written;
//  2. queues with their options, partitions with their ids;
//  3. messages, partition by partition in Queen's order, a page at a
//     time (bounded memory), each page one transaction, from where the
//     target's partition ends: a run after a crash or Ctrl-C goes on,
//     and never writes a message twice;
//  4. positions: every group's cursor, before the first message it had
//     not consumed on Queen (a leased message is not consumed);
//  5. durable subscriptions, dead letters, traces;
//  6. verification: counts and positions, source against target;
//  7. only when it found no difference, the maintenance switches (a
//     switch turned off here lets queengo's buffered pushes and its pops
//     go on after the imported messages and positions).
package importer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/pg"
)

// Source is the Queen database (pg.QueenSource).
type Source interface {
	Queues(ctx context.Context) ([]pg.QueenQueue, error)
	Partitions(ctx context.Context, queues []uuid.UUID) ([]pg.QueenPartition, error)
	Horizon(ctx context.Context) (time.Time, error)
	Messages(ctx context.Context, partition uuid.UUID, after pg.Keyset, before time.Time, limit, maxBytes int) ([]pg.QueenMessage, error)
	Places(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]pg.Keyset, error)
	Cursors(ctx context.Context, partitions []uuid.UUID, pending bool) ([]pg.QueenCursor, error)
	Subscriptions(ctx context.Context, queues []string) ([]pg.QueenSubscription, error)
	DeadLetters(ctx context.Context, partitions []uuid.UUID, after uuid.UUID, limit int) ([]pg.QueenDeadLetter, error)
	Traces(ctx context.Context, partitions []uuid.UUID, after uuid.UUID, limit int) ([]pg.QueenTrace, error)
	Switches(ctx context.Context) (pg.QueenSwitches, error)
	Counts(ctx context.Context, partitions []uuid.UUID) (map[uuid.UUID]pg.QueenCounts, error)
}

// Target is queengo's database (*pg.Store).
type Target interface {
	DatabaseKind(ctx context.Context) (string, error)
	Migrate(ctx context.Context) ([]int, error)
	CanSeal() bool
	ImportQueuesByName(ctx context.Context, names []string, ids []uuid.UUID) ([]pg.ImportedQueue, error)
	ImportTails(ctx context.Context, ids, queues []uuid.UUID) ([]pg.ImportTail, error)
	ImportQueue(ctx context.Context, q pg.QueenQueue) error
	ImportPartition(ctx context.Context, p pg.QueenPartition) error
	ImportMessages(ctx context.Context, partition uuid.UUID, head int64, msgs []pg.QueenMessage, seal bool) (int64, error)
	ImportCursors(ctx context.Context, cs []pg.QueenCursor) ([]pg.ImportedCursor, error)
	ImportSubscription(ctx context.Context, queue uuid.UUID, sub pg.QueenSubscription) error
	ImportDeadLetters(ctx context.Context, ds []pg.QueenDeadLetter) (int, error)
	ImportTraces(ctx context.Context, ts []pg.QueenTrace) (int, error)
	ImportTraceStats(ctx context.Context, partitions []uuid.UUID) error
	ImportedCursors(ctx context.Context, partitions []uuid.UUID) ([]pg.ImportedCursorAt, error)
	ImportedCounts(ctx context.Context, partitions []uuid.UUID) (map[uuid.UUID]pg.QueenCounts, error)
	SetPushMaintenance(ctx context.Context, on bool) error
	SetPopMaintenance(ctx context.Context, on bool) error
}

// Defaults of Options.
const (
	// PageMessagesDefault messages are read and written per page: one
	// statement each side and one commit. Past a few thousand a page
	// saves little (the statements' fixed costs are spread thin) and
	// holds more in memory.
	PageMessagesDefault = 5000
	// PageBytesDefault of payload ends a page early, so that large
	// payloads keep a page, and the memory it holds (read, encoded, sent:
	// about three times this), small.
	PageBytesDefault = 8 << 20
	// rowsPerCall dead letters, traces or cursors go in one statement.
	rowsPerCall = 2000
)

// Options are what a run does besides copying.
type Options struct {
	// Queues limits the import to these queues (empty: every queue).
	Queues []string
	// DryRun reads both databases and prints what a run would do, writing
	// nothing (not even queengo's schema).
	DryRun bool
	// PageMessages and PageBytes bound a page of messages (0: the
	// defaults).
	PageMessages, PageBytes int
	// Out receives the plan, the summary and the verification table.
	Out io.Writer
	// Progress follows the run's phases; nil: none.
	Progress Progress
	// AfterPage, when set, is called after each page of messages is
	// committed, with the messages written so far in this run.
	AfterPage func(written int64)
}

// ErrUsage is input the import cannot run on: a database that is not the
// one it should be, an unknown queue, a conflict with what queengo holds,
// an encrypted queue and no key. Nothing was written.
var ErrUsage = errors.New("cannot import")

// ErrDifferences is a run whose verification found the target differing
// from the source.
var ErrDifferences = errors.New("the verification found differences")

// usage wraps ErrUsage with what is wrong.
func usage(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// queuePlan is one queue to import.
type queuePlan struct {
	q     pg.QueenQueue
	parts []*partPlan
	// exists: queengo holds it (an earlier run wrote it).
	exists bool
}

// partPlan is one partition to import.
type partPlan struct {
	p     pg.QueenPartition
	queue *queuePlan
	// head is what the import wrote there so far (its next page goes
	// after it), tail the place of its last message in Queen's order.
	head int64
	tail pg.Keyset
	// exists: queengo holds it; diverged: someone else wrote it since
	// the import did (or its messages were dropped), so the import
	// leaves it alone.
	exists, diverged bool
	why              string
}

// toCopy is how many of the partition's messages are not imported yet.
func (p *partPlan) toCopy() int64 {
	if p.diverged {
		return 0
	}
	return max(p.p.Messages-p.head, 0)
}

// plan is what a run will do.
type plan struct {
	queues []*queuePlan
	parts  []*partPlan
	byID   map[uuid.UUID]*partPlan
	// kind is what the target held when the run began (pg
	// Store.DatabaseKind).
	kind string
	// encrypted: messages Queen encrypted; sealing: queues to seal.
	encrypted int64
	sealing   int
}

// partitionIDs lists the plan's partitions.
func (pl *plan) partitionIDs() []uuid.UUID {
	ids := make([]uuid.UUID, len(pl.parts))
	for i, p := range pl.parts {
		ids[i] = p.p.ID
	}
	return ids
}

// makePlan reads both databases and decides what to copy.
func makePlan(ctx context.Context, src Source, dst Target, kind string, o *Options, canOpen bool) (*plan, error) {
	all, err := src.Queues(ctx)
	if err != nil {
		return nil, err
	}
	queues := all
	if len(o.Queues) > 0 {
		byName := map[string]pg.QueenQueue{}
		for _, q := range all {
			byName[q.Name] = q
		}
		queues = queues[:0:0]
		var unknown []string
		for _, name := range o.Queues {
			q, ok := byName[name]
			if !ok {
				unknown = append(unknown, name)
				continue
			}
			if !slices.ContainsFunc(queues, func(x pg.QueenQueue) bool { return x.ID == q.ID }) {
				queues = append(queues, q)
			}
		}
		if len(unknown) > 0 {
			return nil, usage("the Queen database has no queue %s (it has %d: %s)", strings.Join(quoteAll(unknown), ", "),
				len(all), strings.Join(firstNames(all, 10), ", "))
		}
	}
	pl := &plan{kind: kind, byID: map[uuid.UUID]*partPlan{}}
	ids := make([]uuid.UUID, len(queues))
	names := make([]string, len(queues))
	for i, q := range queues {
		ids[i], names[i] = q.ID, q.Name
		pl.queues = append(pl.queues, &queuePlan{q: q})
		if q.Options.EncryptionEnabled {
			pl.sealing++
		}
	}
	parts, err := src.Partitions(ctx, ids)
	if err != nil {
		return nil, err
	}
	qByID := map[uuid.UUID]*queuePlan{}
	for _, q := range pl.queues {
		qByID[q.q.ID] = q
	}
	for _, p := range parts {
		pp := &partPlan{p: p, queue: qByID[p.QueueID]}
		pp.queue.parts = append(pp.queue.parts, pp)
		pl.parts = append(pl.parts, pp)
		pl.byID[p.ID] = pp
		pl.encrypted += p.Encrypted
	}
	// Queues come by name; their partitions by name too, for the table.
	slices.SortFunc(pl.parts, func(a, b *partPlan) int {
		return cmp.Or(cmp.Compare(a.queue.q.Name, b.queue.q.Name), cmp.Compare(a.p.Name, b.p.Name))
	})
	if (pl.encrypted > 0 || pl.sealing > 0) && !dst.CanSeal() {
		return nil, usage("%s: queengo seals them with QUEEN_ENCRYPTION_KEY, which is not set", encryptedWhat(pl))
	}
	if pl.encrypted > 0 && !canOpen {
		return nil, usage("%d messages are encrypted on Queen: QUEEN_ENCRYPTION_KEY (Queen's key) opens them, and it is not set",
			pl.encrypted)
	}
	if kind != "queengo" {
		return pl, nil
	}
	if err := pl.readTarget(ctx, src, dst, names, ids); err != nil {
		return nil, err
	}
	return pl, nil
}

// readTarget reads what queengo holds of the plan: the queues and
// partitions an earlier run wrote (same ids), and conflicts (same names,
// other ids).
func (pl *plan) readTarget(ctx context.Context, src Source, dst Target, names []string, ids []uuid.UUID) error {
	have, err := dst.ImportQueuesByName(ctx, names, ids)
	if err != nil {
		return err
	}
	var conflicts []string
	for _, h := range have {
		for _, q := range pl.queues {
			switch {
			case h.ID == q.q.ID:
				q.exists = true
			case h.Name == q.q.Name:
				conflicts = append(conflicts, fmt.Sprintf("queue %q exists in queengo under another id (%s, Queen's is %s)",
					h.Name, h.ID, q.q.ID))
			}
		}
	}
	tails, err := dst.ImportTails(ctx, pl.partitionIDs(), ids)
	if err != nil {
		return err
	}
	var check []uuid.UUID
	for _, t := range tails {
		if p := pl.byID[t.ID]; p != nil {
			p.exists, p.head, p.tail = true, t.Head, t.Last
			if t.Head > 0 {
				check = append(check, t.Last.ID)
			}
			continue
		}
		for _, q := range pl.queues {
			if q.q.ID != t.QueueID {
				continue
			}
			for _, p := range q.parts {
				if p.p.Name == t.Name {
					conflicts = append(conflicts, fmt.Sprintf("partition %q of queue %q exists in queengo under another id (%s, Queen's is %s)",
						t.Name, q.q.Name, t.ID, p.p.ID))
				}
			}
		}
	}
	if len(conflicts) > 0 {
		return usage("%s; the import writes only the queues and partitions it made (drop those in queengo, or leave their queues out with --queues)",
			strings.Join(conflicts, "; "))
	}
	places, err := src.Places(ctx, check)
	if err != nil {
		return err
	}
	for _, p := range pl.parts {
		if !p.exists || p.head == 0 {
			continue
		}
		switch at, ok := places[p.tail.ID]; {
		case p.tail.IsZero():
			p.diverged, p.why = true, fmt.Sprintf("queengo holds offsets up to %d there but none of its messages (dropped by retention since)", p.head)
		case !ok || !at.CreatedAt.Equal(p.tail.CreatedAt):
			p.diverged, p.why = true, "its last message in queengo is not one of Queen's (pushed on queengo since, or gone from Queen)"
		}
	}
	return nil
}

// encryptedWhat says what of the plan is encrypted.
func encryptedWhat(pl *plan) string {
	switch {
	case pl.sealing > 0 && pl.encrypted > 0:
		return fmt.Sprintf("%d queues have encryptionEnabled and %d messages are encrypted on Queen", pl.sealing, pl.encrypted)
	case pl.sealing > 0:
		return fmt.Sprintf("%d queues have encryptionEnabled", pl.sealing)
	}
	return fmt.Sprintf("%d messages are encrypted on Queen", pl.encrypted)
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

// firstNames lists up to n queue names, and how many more there are.
func firstNames(qs []pg.QueenQueue, n int) []string {
	var out []string
	for i, q := range qs {
		if i == n {
			out = append(out, fmt.Sprintf("and %d more", len(qs)-n))
			break
		}
		out = append(out, q.Name)
	}
	return out
}
