package pg_test

// The tests of the store against PostgreSQL share one vocabulary, the
// helpers of this file, so that a test reads the same in every file:
//
//   - fixtures: setup (a migrated store on the package's database) and
//     setupFresh (a store on a database of the test's own), each returning
//     a bundle: b.s the store, b.db its database; setupRetention and
//     setupGroups build on them for the files that need more;
//   - SQL beside the store: b.conn for checks and direct statements,
//     b.session for a connection of its own with a lock_timeout,
//     b.explain for one that sends back the plans of what it runs;
//   - queues and messages: b.namedQueue, b.countedQueue, b.partition,
//     b.append, frame, segOf;
//   - claims: pops, b.claimOK, delivered;
//   - locks: holdWrite, appendIn, b.waitBlockedBy, b.waitHigherCursorFree;
//   - waiting: eventually.
//
// The tests inside package pg (ackcall, claim_commit, messages, notify,
// seal, dial) are of pure functions and need none of it; dial_linux's
// opens a Store on the test server's own database to read a pooled
// connection's socket options.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/pg"
	"github.com/queengo/queengo/pg/pgtest"
)

// testDB is the package's database: TestMain creates it and drops it after
// the tests.
var testDB *pgtest.Database

func TestMain(m *testing.M) {
	var err error
	if testDB, err = pgtest.Create("pg"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := testDB.Drop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// bundle is a test's store and the database it is on.
type bundle struct {
	s  *pg.Store
	db *pgtest.Database
	c  *pgx.Conn // conn's connection, opened at its first call
}

// setup opens a store on the package's database, migrated, with a pool of
// 4 connections acquired within 5 s; each of opts may change its Config
// (not the URL). The store closes when the test ends.
func setup(t *testing.T, opts ...func(*pg.Config)) *bundle {
	t.Helper()
	cfg := pg.Config{PoolSize: 4, AcquireTimeout: 5 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	b := open(t, testDB, cfg)
	b.migrate(t)
	return b
}

// setupFresh opens a store with cfg (its URL set here) on a database of the
// test's own named after prefix, not yet migrated (b.migrate); both go when
// the test ends.
func setupFresh(t *testing.T, prefix string, cfg pg.Config) *bundle {
	t.Helper()
	db, err := pgtest.Create(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Drop() })
	return open(t, db, cfg)
}

// open opens a store with cfg on db, closed when the test ends.
func open(t *testing.T, db *pgtest.Database, cfg pg.Config) *bundle {
	t.Helper()
	cfg.URL = db.URL
	s, err := pg.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &bundle{s: s, db: db}
}

// migrate applies the migrations and the function files to the bundle's
// database.
func (b *bundle) migrate(t *testing.T) {
	t.Helper()
	if _, err := b.s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// session opens a connection of its own to the bundle's database with
// lock_timeout set, so a lock wait longer than that fails the statement
// with 55P03; it closes when the test ends.
func (b *bundle) session(t *testing.T, lockTimeout string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := c.Exec(ctx, "SET lock_timeout = '"+lockTimeout+"'"); err != nil {
		t.Fatal(err)
	}
	return c
}

// conn is the bundle's connection for checks and statements beside the
// store (a session with a 10 s lock_timeout), opened at its first call and
// closed when the test ends; a cleanup that uses it must be registered
// after that first call.
func (b *bundle) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	if b.c == nil {
		b.c = b.session(t, "10s")
	}
	return b.c
}

// explainConn is a connection on which auto_explain sends the client the
// plan (with actual rows, without timing) of every statement, those run
// inside functions included: EXPLAIN shows a PL/pgSQL or SQL function's
// call, not the statements in it.
type explainConn struct {
	*pgx.Conn
	mu    sync.Mutex
	plans []string
}

// explain opens an explainConn to the bundle's database, closed when the
// test ends.
func (b *bundle) explain(t *testing.T) *explainConn {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	e := &explainConn{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.HasPrefix(n.Message, "duration:") {
			e.mu.Lock()
			e.plans = append(e.plans, n.Message)
			e.mu.Unlock()
		}
	}
	if e.Conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	for _, set := range []string{
		`LOAD 'auto_explain'`,
		`SET auto_explain.log_min_duration = 0`,
		`SET auto_explain.log_nested_statements = on`,
		`SET auto_explain.log_analyze = on`,
		`SET auto_explain.log_timing = off`,
		`SET client_min_messages = log`,
	} {
		if _, err := e.Exec(ctx, set); err != nil {
			t.Fatalf("%s: %v", set, err)
		}
	}
	return e
}

// take returns the plans sent since the last take.
func (e *explainConn) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.plans
	e.plans = nil
	return p
}

// frame is a message whose payload names its transaction id.
func frame(tx string) queengo.Frame {
	return queengo.Frame{ID: uuid.Must(uuid.NewV7()), TransactionID: tx, Payload: []byte(`{"tx":"` + tx + `"}`)}
}

// segOf is a segment of partition pid with one frame per transaction id.
func segOf(pid uuid.UUID, txids ...string) queengo.Segment {
	seg := queengo.Segment{Partition: pid}
	for _, id := range txids {
		seg.Frames = append(seg.Frames, frame(id))
	}
	return seg
}

// namedQueue creates a queue with the named partitions, one message each
// (transaction id "m-<partition>"), and returns the queue and partition ids.
func (b *bundle) namedQueue(t *testing.T, parts ...string) (queengo.Queue, []uuid.UUID) {
	t.Helper()
	txids := make([][]string, len(parts))
	for i, name := range parts {
		txids[i] = []string{"m-" + name}
	}
	return b.queue(t, parts, txids)
}

// countedQueue creates a queue whose partitions p0, p1, ... hold counts[i]
// messages each (transaction ids "<partition>-<k>").
func (b *bundle) countedQueue(t *testing.T, counts ...int) (queengo.Queue, []uuid.UUID) {
	t.Helper()
	names, txids := make([]string, len(counts)), make([][]string, len(counts))
	for i, n := range counts {
		names[i] = "p" + strconv.Itoa(i)
		for k := range n {
			txids[i] = append(txids[i], fmt.Sprintf("%s-%d", names[i], k))
		}
	}
	return b.queue(t, names, txids)
}

// queue creates a queue with the named partitions, partition i holding one
// message per transaction id of txids[i], written in one segment.
func (b *bundle) queue(t *testing.T, names []string, txids [][]string) (queengo.Queue, []uuid.UUID) {
	t.Helper()
	q, err := b.s.EnsureQueue(context.Background(), "queue-"+uuid.NewString()[:8])
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uuid.UUID, len(names))
	for i, name := range names {
		ids[i] = b.partition(t, q, name)
		if len(txids[i]) > 0 {
			b.append(t, segOf(ids[i], txids[i]...))
		}
	}
	return q, ids
}

// partition creates (or finds) the partition name of q.
func (b *bundle) partition(t *testing.T, q queengo.Queue, name string) uuid.UUID {
	t.Helper()
	pid, err := b.s.EnsurePartition(context.Background(), q.ID, name)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// append writes segs in one call.
func (b *bundle) append(t *testing.T, segs ...queengo.Segment) {
	t.Helper()
	if _, err := b.s.Append(context.Background(), segs); err != nil {
		t.Fatal(err)
	}
}

// pops are n claims of queue q shaped like p, each under a lease of its own
// (none when autoAck).
func pops(q queengo.Queue, n int, p queengo.ClaimParams) []queengo.ClaimParams {
	out := make([]queengo.ClaimParams, n)
	for i := range out {
		out[i] = p
		out[i].QueueIDs = []uuid.UUID{q.ID}
		if !p.AutoAck {
			out[i].LeaseID = uuid.Must(uuid.NewV7())
		}
	}
	return out
}

// claimOK claims as one round and fails the test when the round or any of
// its claims fails.
func (b *bundle) claimOK(t *testing.T, claims []queengo.ClaimParams) []queengo.ClaimResult {
	t.Helper()
	res, err := b.s.Claim(context.Background(), claims)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("claim %d: %v", i, r.Err)
		}
	}
	return res
}

// delivered lists the transaction ids a claim's messages carry, sorted.
func delivered(r queengo.ClaimResult) []string {
	var ids []string
	for _, m := range r.Messages {
		ids = append(ids, m.TransactionID)
	}
	slices.Sort(ids)
	return ids
}

// holdWrite starts a transaction on c that writes one message to each
// partition (appendIn) and leaves it open: it holds the partition rows the
// way a segment write does. It rolls back when the test ends.
func holdWrite(t *testing.T, c *pgx.Conn, parts ...uuid.UUID) pgx.Tx {
	t.Helper()
	tx, err := c.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	appendIn(t, tx, parts...)
	return tx
}

// appendIn writes one message to each partition in tx with
// queen.append_segments.
func appendIn(t *testing.T, tx pgx.Tx, parts ...uuid.UUID) {
	t.Helper()
	ids, seg, txids, msgs, frames := make([]string, len(parts)), make([]int32, len(parts)), make([]string, len(parts)),
		make([]string, len(parts)), make([][]byte, len(parts))
	for i, p := range parts {
		ids[i], seg[i], txids[i], msgs[i], frames[i] = p.String(), int32(i+1), uuid.NewString(), uuid.NewString(), []byte{0}
	}
	if _, err := tx.Exec(context.Background(), `SELECT queen.append_segments($1::uuid[], $2::int[], $3::text[], $4::uuid[], $5::bytea[])`,
		ids, seg, txids, msgs, frames); err != nil {
		t.Fatal(err)
	}
}

// waitBlockedBy waits until a session is blocked by a lock the session
// holder holds; what names the waiter and the lock in the failure. It
// returns the session it looked from, one of its own.
func (b *bundle) waitBlockedBy(t *testing.T, holder *pgx.Conn, what string) *pgx.Conn {
	t.Helper()
	pid := holder.PgConn().PID()
	probe := b.session(t, "10s")
	eventually(t, func() error {
		var waiting bool
		if err := probe.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)))`,
			pid).Scan(&waiting); err != nil || waiting {
			return err
		}
		return errors.New(what + " did not wait")
	})
	return probe
}

// waitHigherCursorFree waits until a session is blocked by the lock that
// the session holder holds on a lower cursor, then fails the test when the
// cursor (hi, group) is locked too: taking cursors in (partition, group)
// order, the waiter holds none above the one it waits for. what names the
// waiter in the messages.
func (b *bundle) waitHigherCursorFree(t *testing.T, holder *pgx.Conn, hi uuid.UUID, group, what string) {
	t.Helper()
	ctx := context.Background()
	probe := b.waitBlockedBy(t, holder, what+" for the locked cursor")
	ptx, err := probe.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ptx.Exec(ctx, `SELECT 1 FROM queen.cursors WHERE partition_id = $1 AND consumer_group = $2 FOR UPDATE NOWAIT`,
		hi.String(), group)
	_ = ptx.Rollback(ctx)
	if err != nil {
		t.Fatalf("%s holds the higher cursor while it waits for the lower one (an ack holding the lower one would deadlock with it): %v", what, err)
	}
}

// eventually calls cond every 5 ms until it returns nil, and fails the test
// with its error when it still does not after 5 s (e2e.Eventually's shape).
func eventually(t *testing.T, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
