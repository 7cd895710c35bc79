package importer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/pg"
	"github.com/queengo/queengo/pg/pgtest"
)

// The import against real databases: a Queen database the tests fill in
// the reference's layout (pgtest.Queen) and queengo's. What the broker then
// serves of it is http/e2e/importtest's.

// bundle is a test's two databases and the stores on them.
type bundle struct {
	q   *pgtest.Queen
	src *pg.QueenSource
	db  *pgtest.Database
	dst *pg.Store
	out bytes.Buffer
}

// setup makes an empty Queen database and an empty queengo database.
func setup(t *testing.T, prefix string) *bundle {
	t.Helper()
	b := &bundle{q: pgtest.NewQueen(t, prefix+"q")}
	var err error
	if b.db, err = pgtest.Create(prefix); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.db.Drop() })
	ctx := context.Background()
	if b.src, err = pg.OpenQueenSource(ctx, pg.QueenSourceConfig{URL: b.q.URL}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.src.Close)
	if b.dst, err = pg.Open(ctx, pg.Config{URL: b.db.URL, PoolSize: 2}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.dst.Close)
	return b
}

// run imports with o (Out set here; the table lands in b.out).
func (b *bundle) run(ctx context.Context, o Options) (*Result, error) {
	b.out.Reset()
	o.Out = &b.out
	return Run(ctx, b.src, b.dst, o, false)
}

// fill writes n messages to a new partition of the queue, in pushes of
// per messages one second apart, with transaction ids name-1...name-n.
func (b *bundle) fill(t *testing.T, queue uuid.UUID, name string, n, per int, from time.Time) uuid.UUID {
	t.Helper()
	p := b.q.Partition(t, queue, name)
	for i := 0; i < n; i += per {
		var ms []pgtest.QueenMessage
		for j := i; j < min(i+per, n); j++ {
			ms = append(ms, pgtest.QueenMessage{TxID: fmt.Sprintf("%s-%d", name, j+1), Payload: fmt.Sprintf(`{"i":%d}`, j+1)})
		}
		b.q.Push(t, p, from.Add(time.Duration(i/per)*time.Second), ms...)
	}
	return p
}

// queryInt runs a query on queengo's database that returns one integer.
func (b *bundle) queryInt(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := b.db.QueryRow(sql, args, &n); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	return n
}

// TestRun_ResumesAfterInterruption: a run stopped after a few pages (as
// Ctrl-C stops it) leaves whole pages; the next run goes on from there,
// copies every message once, in order, and verifies clean.
func TestRun_ResumesAfterInterruption(t *testing.T) {
	t.Parallel()
	b := setup(t, "importresume")
	qid := b.q.Queue(t, "orders", "")
	t0 := time.Now().Add(-time.Hour)
	var msgs []uuid.UUID
	for i, n := range []int{1234, 777, 0} {
		msgs = append(msgs, b.fill(t, qid, fmt.Sprintf("p%d", i), n, 50, t0))
	}
	b.q.Consumed(t, msgs[0], "g", uuid.Nil, "")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pages := 0
	_, err := b.run(ctx, Options{PageMessages: 100, AfterPage: func(int64) {
		if pages++; pages == 7 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v, want context.Canceled", err)
	}
	written := b.queryInt(t, `SELECT coalesce(sum(head), 0) FROM queen.partitions`)
	if written < 700 || written%100 != 0 || written >= 2011 {
		t.Fatalf("after the interruption %d messages are written, want whole pages of 100 (at least 7)", written)
	}

	res, err := b.run(context.Background(), Options{PageMessages: 100})
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, b.out.String())
	}
	if res.Messages != 2011-written {
		t.Fatalf("the second run wrote %d messages, want the %d left", res.Messages, 2011-written)
	}
	if n := b.queryInt(t, `SELECT count(*) FROM queen.txids`); n != 2011 {
		t.Fatalf("%d transaction ids stored, want 2011", n)
	}
	// Offsets are contiguous and in Queen's order: transaction id p0-k at
	// offset k.
	if n := b.queryInt(t, `SELECT count(*) FROM queen.txids x JOIN queen.partitions p ON p.id = x.partition_id
WHERE x.transaction_id <> p.name || '-' || x."offset"`); n != 0 {
		t.Fatalf("%d messages at another offset than their place in Queen", n)
	}
	if n := b.queryInt(t, `SELECT count(*) FROM queen.segments s WHERE s.first_offset > 1 AND NOT EXISTS (
    SELECT 1 FROM queen.segments r WHERE r.partition_id = s.partition_id AND r.last_offset = s.first_offset - 1)`); n != 0 {
		t.Fatalf("%d segments after a gap", n)
	}
	if !regexp.MustCompile(`position +orders +p0 +g +1234 left, next p0-1 +1234 left, next p0-1 *\n`).MatchString(b.out.String()) {
		t.Fatalf("no position row in the table:\n%s", b.out.String())
	}

	res, err = b.run(context.Background(), Options{PageMessages: 100})
	if err != nil || res.Messages != 0 {
		t.Fatalf("a third run wrote %d messages: %v", res.Messages, err)
	}
}

// TestRun_GoesOnWithWhatQueenTookSince: a run after Queen took more
// messages and acks copies the new messages after the others and moves
// the cursors on.
func TestRun_GoesOnWithWhatQueenTookSince(t *testing.T) {
	t.Parallel()
	b := setup(t, "importmore")
	qid := b.q.Queue(t, "orders", "")
	t0 := time.Now().Add(-time.Hour)
	p := b.fill(t, qid, "p", 10, 5, t0)
	b.q.Consumed(t, p, "g", uuid.Nil, "")
	if _, err := b.run(context.Background(), Options{}); err != nil {
		t.Fatalf("%v\n%s", err, b.out.String())
	}
	b.q.Push(t, p, t0.Add(time.Minute), pgtest.QueenMessage{TxID: "p-11", Payload: `{"i":11}`})
	b.q.MustExec(t, `UPDATE queen.partition_consumers SET (last_consumed_id, last_consumed_created_at) =
    (SELECT id, created_at FROM queen.messages WHERE transaction_id = 'p-7')`)
	res, err := b.run(context.Background(), Options{})
	if err != nil || res.Messages != 1 || res.Cursors != 1 {
		t.Fatalf("second run: %+v %v\n%s", res, err, b.out.String())
	}
	if n := b.queryInt(t, `SELECT committed FROM queen.cursors WHERE consumer_group = 'g'`); n != 7 {
		t.Fatalf("committed %d, want 7", n)
	}
	if n := b.queryInt(t, `SELECT "offset" FROM queen.txids WHERE transaction_id = 'p-11'`); n != 11 {
		t.Fatalf("p-11 at offset %d, want 11", n)
	}
}

// TestRun_WaitsForOpenPushes: a push still open on Queen holds the
// horizon back: what Queen committed after its start is left for the next
// run (the verification says so), which copies both in Queen's order once
// it committed.
func TestRun_WaitsForOpenPushes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, "importhorizon")
	qid := b.q.Queue(t, "orders", "")
	p := b.fill(t, qid, "p", 3, 3, time.Now().Add(-time.Hour))
	commit := b.q.OpenPush(t, p, "open")
	time.Sleep(10 * time.Millisecond)
	b.q.Push(t, p, time.Now(), pgtest.QueenMessage{TxID: "later", Payload: `{}`})

	res, err := b.run(ctx, Options{})
	if !errors.Is(err, ErrDifferences) || res.Messages != 3 {
		t.Fatalf("with a push open: %+v %v, want 3 messages and differences\n%s", res, err, b.out.String())
	}
	commit()
	if res, err = b.run(ctx, Options{}); err != nil || res.Messages != 2 {
		t.Fatalf("after it committed: %+v %v\n%s", res, err, b.out.String())
	}
	if n := b.queryInt(t, `SELECT "offset" FROM queen.txids WHERE transaction_id = 'open'`); n != 4 {
		t.Fatalf("the push that was open is at offset %d, want 4 (before the later one)", n)
	}
}

// TestRun_DryRunWritesNothing: a dry run reads both databases, prints the
// plan and leaves queengo's database empty, schema included.
func TestRun_DryRunWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, "importdry")
	qid := b.q.Queue(t, "orders", "")
	b.fill(t, qid, "p", 5, 5, time.Now().Add(-time.Hour))
	res, err := b.run(context.Background(), Options{DryRun: true})
	if err != nil || res.Messages != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if !strings.Contains(b.out.String(), "would copy") || !strings.Contains(b.out.String(), "orders") {
		t.Fatalf("plan:\n%s", b.out.String())
	}
	if n := b.queryInt(t, `SELECT count(*) FROM pg_namespace WHERE nspname = 'queen'`); n != 0 {
		t.Fatal("the dry run created the schema")
	}
}

// TestRun_BadInput: an unknown queue in Queues, a target that is a Queen
// database, a queengo queue of the same name, an encrypted queue without a
// key: each ErrUsage, with a message naming it, before anything is
// written.
func TestRun_BadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, "importbad")
	qid := b.q.Queue(t, "orders", "")
	b.fill(t, qid, "p", 2, 2, time.Now().Add(-time.Hour))
	if _, err := b.run(ctx, Options{Queues: []string{"orders", "nope"}}); !errors.Is(err, ErrUsage) ||
		!strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown queue: %v", err)
	}
	queenAsTarget, err := pg.Open(ctx, pg.Config{URL: b.q.URL, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer queenAsTarget.Close()
	if _, err := Run(ctx, b.src, queenAsTarget, Options{Out: &b.out}, false); !errors.Is(err, ErrUsage) ||
		!strings.Contains(err.Error(), "Queen database") {
		t.Fatalf("a Queen database as the target: %v", err)
	}
	if _, err := b.dst.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.db.Exec(`INSERT INTO queen.queues (name) VALUES ('orders')`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.run(ctx, Options{}); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "another id") {
		t.Fatalf("a queengo queue of the same name: %v", err)
	}
	b.q.Queue(t, "vault", "encryption_enabled = true")
	if _, err := b.run(ctx, Options{Queues: []string{"vault"}}); !errors.Is(err, ErrUsage) ||
		!strings.Contains(err.Error(), "QUEEN_ENCRYPTION_KEY") {
		t.Fatalf("an encrypted queue without a key: %v", err)
	}
	if n := b.queryInt(t, `SELECT count(*) FROM queen.queues`); n != 1 {
		t.Fatalf("%d queues in queengo, want only the one the test made", n)
	}
}

// TestRun_Differences: a cursor moved on queengo past where Queen has it
// is kept (a run never moves one back), and the verification marks it; the
// maintenance switches are set as Queen's only by a run that verified
// clean.
func TestRun_Differences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, "importdiff")
	qid := b.q.Queue(t, "orders", "")
	p := b.fill(t, qid, "p", 4, 4, time.Now().Add(-time.Hour))
	b.q.Consumed(t, p, "g", uuid.Nil, "")
	b.q.MustExec(t, `INSERT INTO queen.system_state (key, value) VALUES ('maintenance_mode', '{"enabled": true}')`)
	if res, err := b.run(ctx, Options{}); err != nil || res.Switches == nil || !res.Switches.Push {
		t.Fatalf("%+v %v", res, err)
	}
	if on, err := b.dst.PushMaintenance(ctx); err != nil || !on {
		t.Fatalf("push maintenance %v %v, want on as on Queen", on, err)
	}
	if err := b.dst.SetPushMaintenance(ctx, false); err != nil {
		t.Fatal(err)
	}
	if err := b.db.Exec(`UPDATE queen.cursors SET committed = 3`); err != nil {
		t.Fatal(err)
	}
	res, err := b.run(ctx, Options{})
	if !errors.Is(err, ErrDifferences) || res.Differences != 1 || res.CursorsKept != 1 || res.Switches != nil {
		t.Fatalf("%+v %v", res, err)
	}
	if on, err := b.dst.PushMaintenance(ctx); err != nil || on {
		t.Fatalf("push maintenance %v %v after a run with differences, want off as the operator left it", on, err)
	}
	if !regexp.MustCompile(`position +orders +p +g +4 left, next p-1 +1 left, next p-4 +DIFF\n`).MatchString(b.out.String()) {
		t.Fatalf("table:\n%s", b.out.String())
	}
}

// TestLines: plain progress lines: the phase, a line per interval with
// the rate and time left, and the end.
func TestLines(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(1000, 0)
	l := &lines{w: &out, every: 10 * time.Second, now: func() time.Time { return now }}
	l.Phase("messages", 1000)
	now = now.Add(5 * time.Second)
	l.Add(100) // within the interval: no line
	now = now.Add(5 * time.Second)
	l.Add(100)
	now = now.Add(2 * time.Second)
	l.Done()
	want := "import: messages: 1000 to do\n" +
		"import: messages: 200/1000 (20.0%), 20/s, 40s left\n" +
		"import: messages: done, 200 in 12s (17/s)\n"
	if out.String() != want {
		t.Fatalf("lines:\n%s\nwant:\n%s", out.String(), want)
	}
}
