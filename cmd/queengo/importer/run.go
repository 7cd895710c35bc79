package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/queengo/queengo/pg"
)

// Result is what a run did.
type Result struct {
	Queues, Partitions int
	// Messages were written by this run; Horizon is the time before which
	// it copied every message Queen held (later ones wait for the next
	// run).
	Messages int64
	Horizon  time.Time
	// Cursors were written, CursorsKept left as queengo had them.
	Cursors, CursorsKept               int
	Subscriptions, DeadLetters, Traces int
	// Switches are Queen's maintenance switches, set on queengo (nil: not
	// set, the verification found differences).
	Switches *pg.QueenSwitches
	// Diverged lists the partitions left alone, and why.
	Diverged []string
	// Differences is how many rows of the verification differ.
	Differences int
	Elapsed     time.Duration
}

// Run imports the Queen database src into queengo's database dst as o
// says (see the package comment). Its errors wrap ErrUsage (nothing
// written), ErrDifferences (the verification table says where), the
// context's error (interrupted: run again to go on), or a database's
// error (run again to go on). canOpen says whether src was given a key
// for Queen's encrypted payloads.
func Run(ctx context.Context, src Source, dst Target, o Options, canOpen bool) (*Result, error) {
	start := time.Now()
	if o.PageMessages <= 0 {
		o.PageMessages = PageMessagesDefault
	}
	if o.PageBytes <= 0 {
		o.PageBytes = PageBytesDefault
	}
	if o.Progress == nil {
		o.Progress = silent{}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	kind, err := dst.DatabaseKind(ctx)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "queen":
		return nil, usage("DATABASE_URL names a Queen database (it holds queen.messages): the import writes into queengo's database, which must be another one")
	case "other":
		return nil, usage("DATABASE_URL's database has a schema queen that is neither queengo's nor empty")
	}
	pl, err := makePlan(ctx, src, dst, kind, &o, canOpen)
	if err != nil {
		return nil, err
	}
	horizon, err := src.Horizon(ctx)
	if err != nil {
		return nil, err
	}
	res := &Result{Queues: len(pl.queues), Partitions: len(pl.parts), Horizon: horizon}
	writePlan(o.Out, pl, o.DryRun, horizon)
	if o.DryRun {
		res.Elapsed = time.Since(start)
		return res, nil
	}
	// Also on a queengo database: one an older build migrated lacks the
	// import's functions (the broker applies the function files at every
	// start, as this does).
	if _, err := dst.Migrate(ctx); err != nil {
		return nil, err
	}
	r := &run{src: src, dst: dst, o: o, pl: pl, res: res, horizon: horizon}
	for _, step := range []func(context.Context) error{r.queues, r.messages, r.positions, r.subscriptions,
		r.deadLetters, r.traces} {
		if err := step(ctx); err != nil {
			res.Elapsed = time.Since(start)
			return res, err
		}
	}
	for _, p := range pl.parts {
		if p.diverged {
			res.Diverged = append(res.Diverged, fmt.Sprintf("%s/%s: %s", p.queue.q.Name, p.p.Name, p.why))
		}
	}
	table, err := r.verify(ctx)
	if err != nil {
		res.Elapsed = time.Since(start)
		return res, err
	}
	if res.Differences = table.differences(); res.Differences == 0 {
		if err := r.switches(ctx); err != nil {
			res.Elapsed = time.Since(start)
			return res, err
		}
	}
	res.Elapsed = time.Since(start)
	writeSummary(o.Out, res)
	table.write(o.Out)
	if res.Differences > 0 {
		return res, fmt.Errorf("%w: %d rows differ (marked DIFF)", ErrDifferences, res.Differences)
	}
	return res, nil
}

// run is one run's state.
type run struct {
	src     Source
	dst     Target
	o       Options
	pl      *plan
	res     *Result
	horizon time.Time
}

// queues writes the queues and the partitions the target lacks.
func (r *run) queues(ctx context.Context) error {
	r.o.Progress.Phase("queues", int64(len(r.pl.queues)))
	defer r.o.Progress.Done()
	for _, q := range r.pl.queues {
		if err := r.dst.ImportQueue(ctx, q.q); err != nil {
			return err
		}
		for _, p := range q.parts {
			if p.exists {
				continue
			}
			if err := r.dst.ImportPartition(ctx, p.p); err != nil {
				return err
			}
			p.exists = true
		}
		r.o.Progress.Add(1)
	}
	return nil
}

// page is a page of one partition's messages on its way to the target.
type page struct {
	p    *partPlan
	msgs []pg.QueenMessage
}

// messages copies every partition's messages older than the horizon, in
// Queen's order, from where the target's partition ends. One goroutine
// reads the next page while the other writes the last (at most three
// pages are held: one read, one waiting, one written).
func (r *run) messages(ctx context.Context) error {
	var total int64
	for _, p := range r.pl.parts {
		total += p.toCopy()
	}
	r.o.Progress.Phase("messages", total)
	defer r.o.Progress.Done()
	var mu sync.Mutex // guards the partitions' diverged, which the writer sets and the reader reads
	diverged := func(p *partPlan) bool {
		mu.Lock()
		defer mu.Unlock()
		return p.diverged
	}
	g, gctx := errgroup.WithContext(ctx)
	pages := make(chan page, 1)
	g.Go(func() error {
		defer close(pages)
		for _, p := range r.pl.parts {
			after := p.tail
			for !diverged(p) {
				msgs, err := r.src.Messages(gctx, p.p.ID, after, r.horizon, r.o.PageMessages, r.o.PageBytes)
				if err != nil {
					return err
				}
				if len(msgs) == 0 {
					break
				}
				after = msgs[len(msgs)-1].Keyset()
				select {
				case pages <- page{p, msgs}:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
		}
		return nil
	})
	g.Go(func() error {
		for pp := range pages {
			if diverged(pp.p) {
				continue
			}
			head, err := r.dst.ImportMessages(gctx, pp.p.p.ID, pp.p.head, pp.msgs, pp.p.queue.q.Options.EncryptionEnabled)
			if errors.Is(err, pg.ErrImportDiverged) {
				mu.Lock()
				pp.p.diverged, pp.p.why = true, err.Error()
				mu.Unlock()
				continue
			}
			if err != nil {
				return err
			}
			n := head - pp.p.head
			pp.p.head, pp.p.tail = head, pp.msgs[len(pp.msgs)-1].Keyset()
			r.res.Messages += n
			r.o.Progress.Add(n)
			if r.o.AfterPage != nil {
				r.o.AfterPage(r.res.Messages)
			}
		}
		return nil
	})
	return g.Wait()
}

// livePartitions are the partitions the import keeps in step with Queen.
func (r *run) livePartitions() []uuid.UUID {
	var out []uuid.UUID
	for _, p := range r.pl.parts {
		if !p.diverged {
			out = append(out, p.p.ID)
		}
	}
	return out
}

// positions sets every group's cursor on the partitions, before the first
// message it had not consumed on Queen.
func (r *run) positions(ctx context.Context) error {
	cs, err := r.src.Cursors(ctx, r.livePartitions(), false)
	if err != nil {
		return err
	}
	r.o.Progress.Phase("positions", int64(len(cs)))
	defer r.o.Progress.Done()
	for len(cs) > 0 {
		n := min(len(cs), rowsPerCall)
		done, err := r.dst.ImportCursors(ctx, cs[:n])
		if err != nil {
			return err
		}
		for _, d := range done {
			if d.Written {
				r.res.Cursors++
			} else {
				r.res.CursorsKept++
			}
		}
		r.o.Progress.Add(int64(n))
		cs = cs[n:]
	}
	return nil
}

// subscriptions writes the queue-wide durable subscriptions.
func (r *run) subscriptions(ctx context.Context) error {
	ids := map[string]uuid.UUID{}
	names := make([]string, 0, len(r.pl.queues))
	for _, q := range r.pl.queues {
		ids[q.q.Name] = q.q.ID
		names = append(names, q.q.Name)
	}
	subs, err := r.src.Subscriptions(ctx, names)
	if err != nil {
		return err
	}
	r.o.Progress.Phase("subscriptions", int64(len(subs)))
	defer r.o.Progress.Done()
	for _, s := range subs {
		if err := r.dst.ImportSubscription(ctx, ids[s.Queue], s); err != nil {
			return err
		}
		r.res.Subscriptions++
		r.o.Progress.Add(1)
	}
	return nil
}

// deadLetters copies the dead letters whose messages are imported.
func (r *run) deadLetters(ctx context.Context) error {
	parts := r.pl.partitionIDs()
	r.o.Progress.Phase("dead letters", -1)
	defer r.o.Progress.Done()
	var after uuid.UUID
	for {
		ds, err := r.src.DeadLetters(ctx, parts, after, rowsPerCall)
		if err != nil || len(ds) == 0 {
			return err
		}
		n, err := r.dst.ImportDeadLetters(ctx, ds)
		if err != nil {
			return err
		}
		r.res.DeadLetters += n
		r.o.Progress.Add(int64(len(ds)))
		after = ds[len(ds)-1].ID
	}
}

// traces copies the traces, then counts their names.
func (r *run) traces(ctx context.Context) error {
	parts := r.pl.partitionIDs()
	r.o.Progress.Phase("traces", -1)
	defer r.o.Progress.Done()
	var after uuid.UUID
	for {
		ts, err := r.src.Traces(ctx, parts, after, rowsPerCall)
		if err != nil {
			return err
		}
		if len(ts) == 0 {
			break
		}
		n, err := r.dst.ImportTraces(ctx, ts)
		if err != nil {
			return err
		}
		r.res.Traces += n
		r.o.Progress.Add(int64(len(ts)))
		after = ts[len(ts)-1].ID
	}
	return r.dst.ImportTraceStats(ctx, parts)
}

// switches sets queengo's maintenance switches as Queen's are. It runs
// last, and only after a clean verification: a switch turned off starts
// what it held back (queengo's buffered pushes replay, its pops deliver),
// which must come after the imported messages and positions; after
// differences, queengo's switches stay as the operator left them.
func (r *run) switches(ctx context.Context) error {
	sw, err := r.src.Switches(ctx)
	if err != nil {
		return err
	}
	if err := r.dst.SetPushMaintenance(ctx, sw.Push); err != nil {
		return err
	}
	if err := r.dst.SetPopMaintenance(ctx, sw.Pop); err != nil {
		return err
	}
	r.res.Switches = &sw
	return nil
}
