package pg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/pg"
	"github.com/queengo/queengo/pg/pgtest"
)

// The reading of a Queen database and the Store's import writes; the
// command around them is tested in cmd/queengo/importer, the whole through
// HTTP in http/e2e/importtest.

// openQueen opens a QueenSource on the test's Queen database.
func openQueen(t *testing.T, q *pgtest.Queen, keys ...[]byte) *pg.QueenSource {
	t.Helper()
	src, err := pg.OpenQueenSource(context.Background(), pg.QueenSourceConfig{URL: q.URL, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src
}

// msgs makes messages with these transaction ids and payloads {"n": i}.
func msgs(txids ...string) []pgtest.QueenMessage {
	out := make([]pgtest.QueenMessage, len(txids))
	for i, tx := range txids {
		out[i] = pgtest.QueenMessage{TxID: tx, Payload: fmt.Sprintf(`{"n": %d}`, i)}
	}
	return out
}

// TestQueenSource_NotQueen: a database without the reference's tables,
// and queengo's own, are ErrNotQueen, naming what is wrong.
func TestQueenSource_NotQueen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	if _, err := pg.OpenQueenSource(ctx, pg.QueenSourceConfig{URL: b.db.URL}); !errors.Is(err, pg.ErrNotQueen) {
		t.Fatalf("queengo's database: %v, want ErrNotQueen", err)
	}
	empty := setupFresh(t, "pgnotqueen", pg.Config{PoolSize: 1})
	_, err := pg.OpenQueenSource(ctx, pg.QueenSourceConfig{URL: empty.db.URL})
	if !errors.Is(err, pg.ErrNotQueen) || !strings.Contains(err.Error(), "queen.messages") {
		t.Fatalf("an empty database: %v, want ErrNotQueen naming queen.messages", err)
	}
	if _, err := pg.OpenQueenSource(ctx, pg.QueenSourceConfig{URL: "postgres://[::1"}); !errors.Is(err, pg.ErrBadURL) {
		t.Fatalf("a bad url: %v, want ErrBadURL", err)
	}
}

// TestQueenSource_Cursors: a group's place is the first message it has not
// consumed on Queen: after its last consumed (created_at, id) whatever its
// lease, after its durable subscription's time when Queen never moved its
// cursor (a message created at that very time included; the partition's
// record before the queue's), at the oldest message in queue mode, and
// after the last consumed place even when that message is gone.
func TestQueenSource_Cursors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := pgtest.NewQueen(t, "pgqueencursors")
	qid := q.Queue(t, "orders", "")
	p := q.Partition(t, qid, "p1")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ids := append(q.Push(t, p, t0, msgs("m1", "m2")...), q.Push(t, p, t0.Add(time.Second), msgs("m3", "m4")...)...)
	ids = append(ids, q.Push(t, p, t0.Add(2*time.Second), msgs("m5", "m6")...)...)
	q.Consumed(t, p, "leased", ids[2], `worker_id = 'w', lease_expires_at = now() + interval '5 min', batch_size = 3`)
	q.Consumed(t, p, "__QUEUE_MODE__", uuid.Nil, "")
	q.Consumed(t, p, "new-queue", uuid.Nil, "")
	q.Subscribed(t, "new-queue", "orders", "", "new", t0.Add(time.Second))
	q.Consumed(t, p, "new-part", uuid.Nil, "")
	q.Subscribed(t, "new-part", "orders", "", "new", t0)
	q.Subscribed(t, "new-part", "orders", "p1", "new", t0.Add(2*time.Second))
	q.Subscribed(t, "no-cursor", "orders", "p1", "timestamp", t0.Add(time.Second))
	q.Consumed(t, p, "all", ids[5], "batch_retry_count = 2")
	q.Consumed(t, p, "gone", ids[1], "")
	q.MustExec(t, `DELETE FROM queen.messages WHERE id = $1`, ids[1])

	src := openQueen(t, q)
	cs, err := src.Cursors(ctx, []uuid.UUID{p}, true)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cs {
		got[c.Group] = fmt.Sprintf("next=%s pending=%d record=%v failures=%d", c.NextTxID, c.Pending, c.Record, c.Failures)
	}
	want := map[string]string{
		"leased":         "next=m4 pending=3 record=false failures=0",
		"__QUEUE_MODE__": "next=m1 pending=5 record=false failures=0",
		"new-queue":      "next=m3 pending=4 record=true failures=0",
		"new-part":       "next=m5 pending=2 record=true failures=0",
		"no-cursor":      "next=m3 pending=4 record=true failures=0",
		"all":            "next= pending=0 record=false failures=2",
		"gone":           "next=m3 pending=4 record=false failures=0",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("cursors:\n got %v\nwant %v", got, want)
	}
}

// importBundle is a Queen database with one queue, and queengo's store with
// that queue and its partition imported.
type importBundle struct {
	*bundle
	q   *pgtest.Queen
	src *pg.QueenSource
	qq  pg.QueenQueue
	p   pg.QueenPartition
}

// setupImport makes a Queen database with queue "orders" (set: its
// options) and partition p1, and imports both into a fresh store.
func setupImport(t *testing.T, prefix, set string, cfg pg.Config) *importBundle {
	t.Helper()
	ctx := context.Background()
	q := pgtest.NewQueen(t, prefix+"q")
	qid := q.Queue(t, "orders", set)
	q.Partition(t, qid, "p1")
	b := setupFresh(t, prefix, cfg)
	b.migrate(t)
	var keys [][]byte
	if cfg.EncryptionKey != nil {
		keys = append(keys, cfg.EncryptionKey)
	}
	src := openQueen(t, q, keys...)
	queues, err := src.Queues(ctx)
	if err != nil || len(queues) != 1 {
		t.Fatalf("queues %v %v", queues, err)
	}
	parts, err := src.Partitions(ctx, []uuid.UUID{qid})
	if err != nil || len(parts) != 1 {
		t.Fatalf("partitions %v %v", parts, err)
	}
	if err := b.s.ImportQueue(ctx, queues[0]); err != nil {
		t.Fatal(err)
	}
	if err := b.s.ImportPartition(ctx, parts[0]); err != nil {
		t.Fatal(err)
	}
	return &importBundle{bundle: b, q: q, src: src, qq: queues[0], p: parts[0]}
}

// importAll copies every message of the partition, page by page.
func (b *importBundle) importAll(t *testing.T, page int) int64 {
	t.Helper()
	ctx := context.Background()
	var head int64
	var after pg.Keyset
	for {
		ms, err := b.src.Messages(ctx, b.p.ID, after, time.Now().Add(time.Hour), page, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			return head
		}
		if head, err = b.s.ImportMessages(ctx, b.p.ID, head, ms, b.qq.Options.EncryptionEnabled); err != nil {
			t.Fatal(err)
		}
		after = ms[len(ms)-1].Keyset()
	}
}

// TestImportMessages_Segments: a partition's messages become segments cut
// where Queen's created_at changes (one per push call of the reference)
// and at the page's end, with their Queen ids, times and payloads
// compacted; the tail tells where the import stopped; a partition
// written since the import is refused, nothing of the page written.
func TestImportMessages_Segments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupImport(t, "pgimportsegs", "", pg.Config{PoolSize: 2})
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	ids := b.q.Push(t, b.p.ID, t0, msgs("a", "b", "c")...)
	ids = append(ids, b.q.Push(t, b.p.ID, t0.Add(time.Millisecond), msgs("d", "e")...)...)
	if head := b.importAll(t, 4); head != 5 {
		t.Fatalf("head %d, want 5", head)
	}
	var got string
	if err := b.db.QueryRow(`SELECT string_agg(format('%s-%s@%s', first_offset, last_offset,
    to_char(created_at AT TIME ZONE 'UTC', 'SS.US')), ' ' ORDER BY first_offset) FROM queen.segments`, nil, &got); err != nil {
		t.Fatal(err)
	}
	// Pages of 4: a, b, c | d (page end) then e.
	if want := "1-3@05.123456 4-4@05.124456 5-5@05.124456"; got != want {
		t.Fatalf("segments %q, want %q", got, want)
	}
	tails, err := b.s.ImportTails(ctx, []uuid.UUID{b.p.ID}, nil)
	if err != nil || len(tails) != 1 || tails[0].Last.ID != ids[4] || !tails[0].Last.CreatedAt.Equal(t0.Add(time.Millisecond)) ||
		tails[0].Stored != 5 {
		t.Fatalf("tails %+v %v", tails, err)
	}
	var payload string
	if err := b.db.QueryRow(`SELECT encode(substring(frames FROM length(frames) - 6), 'escape') FROM queen.segments
WHERE first_offset = 5`, nil, &payload); err != nil || payload != `{"n":1}` {
		t.Fatalf("payload %q %v, want the compacted {\"n\":1}", payload, err)
	}

	more := b.q.Push(t, b.p.ID, t0.Add(time.Second), msgs("f")...)
	ms, err := b.src.Messages(ctx, b.p.ID, tails[0].Last, time.Now().Add(time.Hour), 10, 1<<20)
	if err != nil || len(ms) != 1 || ms[0].ID != more[0] {
		t.Fatalf("after the tail: %v %v", ms, err)
	}
	if _, err := b.s.ImportMessages(ctx, b.p.ID, 4, ms, false); !errors.Is(err, pg.ErrImportDiverged) {
		t.Fatalf("expecting head 4 at head 5: %v, want ErrImportDiverged", err)
	}
	if head, err := b.s.ImportMessages(ctx, b.p.ID, 5, ms, false); err != nil || head != 6 {
		t.Fatalf("the next page: head %d %v", head, err)
	}
}

// TestImportMessages_Sealed: an encrypted queue's payloads are sealed with
// the store's key (Queen's encrypted ones opened first); a store without a
// key refuses them.
func TestImportMessages_Sealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := make([]byte, 32)
	key[0] = 7
	b := setupImport(t, "pgimportsealed", "encryption_enabled = true", pg.Config{PoolSize: 2, EncryptionKey: key})
	env, err := pgtest.QueenEncrypt(key, []byte(`{"secret":1}`))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-time.Minute)
	b.q.Push(t, b.p.ID, t0, pgtest.QueenMessage{TxID: "s", Payload: env, Encrypted: true},
		pgtest.QueenMessage{TxID: "plain", Payload: `{"stored":"plain"}`})
	if head := b.importAll(t, 10); head != 2 {
		t.Fatalf("head %d", head)
	}
	var sealed int64
	if err := b.db.QueryRow(`SELECT count(*) FROM queen.segments WHERE get_byte(frames, 0) & 4 <> 0`, nil, &sealed); err != nil || sealed != 1 {
		t.Fatalf("sealed segments %d %v, want 1", sealed, err)
	}
	var leaked int64
	if err := b.db.QueryRow(`SELECT count(*) FROM queen.segments WHERE position('secret' IN encode(frames, 'escape')) > 0
    OR position('stored' IN encode(frames, 'escape')) > 0`, nil, &leaked); err != nil || leaked != 0 {
		t.Fatalf("plaintext in %d segments %v", leaked, err)
	}
	ms, err := b.src.Messages(ctx, b.p.ID, pg.Keyset{}, time.Now(), 10, 1<<20)
	if err != nil || string(ms[0].Payload) != `{"secret":1}` {
		t.Fatalf("opened %v %v", ms, err)
	}
	bare := open(t, b.db, pg.Config{PoolSize: 1})
	if _, err := bare.s.ImportMessages(ctx, b.p.ID, 2, ms, true); err == nil {
		t.Fatal("a store without a key wrote an encrypted queue's messages")
	}
}

// TestImportCursors_NeverBack: a cursor goes before the first message its
// group has not consumed (the head when it consumed all, or when that
// message is not imported yet), a later run moves it on but never back,
// nor while it holds a live lease, and Queen's failed acks count against
// the next message.
func TestImportCursors_NeverBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupImport(t, "pgimportcursors", "", pg.Config{PoolSize: 2})
	b.q.Push(t, b.p.ID, time.Now().Add(-time.Minute), msgs("a", "b", "c", "d")...)
	b.importAll(t, 10)
	cur := func(group, next string, failures int) pg.QueenCursor {
		c := pg.QueenCursor{Partition: b.p.ID, Group: group, NextTxID: next, Failures: failures, CreatedAt: time.Now()}
		if next != "" {
			c.Next = uuid.New()
		}
		return c
	}
	got := func(cs []pg.ImportedCursor) string {
		out := ""
		for _, c := range cs {
			out += fmt.Sprintf("%s=%d/%v ", c.Group, c.Committed, c.Written)
		}
		return out
	}
	done, err := b.s.ImportCursors(ctx, []pg.QueenCursor{cur("g1", "c", 2), cur("g2", "", 0), cur("g3", "not-yet", 0)})
	if err != nil || got(done) != "g1=2/true g2=4/true g3=4/true " {
		t.Fatalf("first run: %s %v", got(done), err)
	}
	var failures int
	if err := b.db.QueryRow(`SELECT failures FROM queen.attempts WHERE consumer_group = 'g1' AND "offset" = 3`, nil, &failures); err != nil || failures != 2 {
		t.Fatalf("attempts of g1's next message: %d %v", failures, err)
	}
	if err := b.db.Exec(`UPDATE queen.cursors SET lease_id = gen_random_uuid(), lease_end = 4,
    lease_expires_at = now() + interval '1 min' WHERE consumer_group = 'g2'`); err != nil {
		t.Fatal(err)
	}
	done, err = b.s.ImportCursors(ctx, []pg.QueenCursor{cur("g1", "a", 0), cur("g2", "", 0), cur("g3", "d", 0)})
	if err != nil || got(done) != "g1=2/false g2=4/false g3=4/false " {
		t.Fatalf("a run after: %s %v", got(done), err)
	}
	done, err = b.s.ImportCursors(ctx, []pg.QueenCursor{cur("g1", "d", 0)})
	if err != nil || got(done) != "g1=3/true " {
		t.Fatalf("moved on: %s %v", got(done), err)
	}
}
