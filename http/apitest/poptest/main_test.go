// Package poptest holds the black-box HTTP tests of the three pop routes
// (shared/spec/pop-routes.md, api.md 4.2 and 5, semantics.md D1, D2, D6,
// D11, D12 and the O-* rules). Every test is named after the rule it checks.
//
// Most tests share one lazily started broker on the package database; tests
// that need special environment start their own, and tests that lock tables
// or flip the process-wide pop maintenance switch run against a database of
// their own so they cannot disturb the others.
package poptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/apitest"
	"github.com/queengo/queengo/pg/pgtest"
)

func TestMain(m *testing.M) { apitest.Main(m, "pop") }

// ---------------------------------------------------------------- servers

// shared returns the broker every test without special needs uses: default
// environment (DEFAULT_TIMEOUT and POP_DEFAULT_TIMEOUT_MS cleared, whatever
// the test process's environment holds), the package database.
func shared(t *testing.T) *apitest.Server {
	t.Helper()
	return apitest.Shared(t, "DEFAULT_TIMEOUT=", "POP_DEFAULT_TIMEOUT_MS=")
}

// sharedEnv returns a broker on the package database started once with env
// and shared by every test asking for the same env.
func sharedEnv(t *testing.T, _ string, env ...string) *apitest.Server {
	t.Helper()
	return apitest.Shared(t, env...)
}

// ownDB creates a database for one test and drops it when the test ends
// (after the brokers started on it by startOn have stopped).
func ownDB(t *testing.T, prefix string) *pgtest.Database {
	t.Helper()
	db, err := pgtest.Create(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Drop(); err != nil {
			t.Logf("dropping %s: %v", db.Name, err)
		}
	})
	return db
}

// startOn starts a broker on db for the test and stops it at its end,
// printing its log when the test failed.
func startOn(t *testing.T, db *pgtest.Database, env ...string) *apitest.Server {
	t.Helper()
	s, err := apitest.StartURL(db.URL, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("broker log (%s):\n%s", s.URL, tail(s.Logs(), 8000))
		}
	})
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// ---------------------------------------------------------------- paths

// kv builds a query string from key, value pairs, in order.
func kv(pairs ...string) string { return apitest.Query(pairs...) }

// wildcard is the queue-scoped route GET /api/v1/pop/queue/:queue.
func wildcard(queue string, pairs ...string) string { return apitest.PopQueue(queue, pairs...) }

// single is the route GET /api/v1/pop/queue/:queue/partition/:partition.
func single(queue, partition string, pairs ...string) string {
	return apitest.PopPartition(queue, partition, pairs...)
}

// discovery is the route GET /api/v1/pop?namespace=&task=.
func discovery(pairs ...string) string { return "/api/v1/pop" + kv(pairs...) }

// ---------------------------------------------------------------- requests

// result is one finished pop.
type result struct {
	Path    string
	Status  int
	Header  http.Header
	Body    []byte
	Elapsed time.Duration
	Pop     *apitest.PopResponse // decoded when Status is 200
}

// do runs a GET with its own client (c nil: the harness client) and times it.
func do(ctx context.Context, c *http.Client, s *apitest.Server, path string) (*result, error) {
	if c == nil {
		c = apitest.Client
	}
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL+path, nil)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	r := &result{Path: path, Status: resp.StatusCode, Header: resp.Header, Body: body, Elapsed: time.Since(start)}
	if r.Status == 200 {
		var p apitest.PopResponse
		if err := json.Unmarshal(body, &p); err != nil {
			return r, fmt.Errorf("200 that is not a pop response (%v): %q", err, body)
		}
		r.Pop = &p
	}
	return r, nil
}

// get runs a pop and fails the test on a transport error.
func get(t testing.TB, s *apitest.Server, path string) *result {
	t.Helper()
	r, err := do(context.Background(), nil, s, path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return r
}

// popOK runs a pop that must deliver: 200 with at least one message.
func popOK(t testing.TB, s *apitest.Server, path string) *apitest.PopResponse {
	t.Helper()
	r := get(t, s, path)
	if r.Status != 200 || len(r.Pop.Messages) == 0 {
		t.Fatalf("GET %s: want 200 with messages, got %d %q", path, r.Status, r.Body)
	}
	return r.Pop
}

// popEmpty runs a pop that must answer a bare 204.
func popEmpty(t testing.TB, s *apitest.Server, path string) *result {
	t.Helper()
	r := get(t, s, path)
	if err := bare204(r); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return r
}

// bare204 checks the empty pop of pop-routes.md: 204, no body, no
// Content-Type.
func bare204(r *result) error {
	if r.Status != 204 {
		return fmt.Errorf("want a bare 204, got %d %q", r.Status, r.Body)
	}
	if len(r.Body) != 0 {
		return fmt.Errorf("204 with a body: %q", r.Body)
	}
	if ct := r.Header.Values("Content-Type"); len(ct) != 0 {
		return fmt.Errorf("204 with Content-Type %q", ct)
	}
	return nil
}

// ---------------------------------------------------------------- pushes

var txSeq atomic.Int64

// pushN pushes n messages to queue/partition in one request and returns their
// transaction ids in push order. Each payload is {"tx": id, "n": k}.
func pushN(t testing.TB, s *apitest.Server, queue, partition string, n int) []string {
	t.Helper()
	items := make([]apitest.PushItem, n)
	txs := make([]string, n)
	for k := range items {
		txs[k] = fmt.Sprintf("tx-%s-%d", partition, txSeq.Add(1))
		items[k] = apitest.PushItem{Queue: queue, Partition: partition, TransactionID: txs[k],
			Payload: map[string]any{"tx": txs[k], "n": k}}
	}
	res := s.Push(t, items...)
	for i, r := range res {
		if r.Status != "queued" {
			t.Fatalf("push item %d: %+v", i, r)
		}
	}
	return txs
}

// pushCtx is a push for goroutines: one message, no test.
func pushCtx(ctx context.Context, s *apitest.Server, queue, partition string) (string, error) {
	tx := fmt.Sprintf("tx-%s-%d", partition, txSeq.Add(1))
	r, err := s.DoCtx(ctx, "POST", "/api/v1/push", map[string]any{"items": []apitest.PushItem{
		{Queue: queue, Partition: partition, TransactionID: tx, Payload: map[string]any{"tx": tx}}}})
	if err != nil {
		return "", err
	}
	if r.Status != 201 {
		return "", fmt.Errorf("push: %d %s", r.Status, r.Body)
	}
	return tx, nil
}

// configure creates or replaces a queue with the given options. Configure is
// a full replace, namespace and task included, so it sends the ones a push
// would derive from the dotted name.
func configure(t testing.TB, s *apitest.Server, queue string, options map[string]any) {
	t.Helper()
	ns, rest, _ := strings.Cut(queue, ".")
	task, _, _ := strings.Cut(rest, ".")
	body := map[string]any{"queue": queue, "namespace": ns, "task": task}
	if options != nil {
		body["options"] = options
	}
	r := s.Post(t, "/api/v1/configure", body)
	if r.Status != 200 {
		t.Fatalf("configure %s: %d %s", queue, r.Status, r.Body)
	}
}

// txids lists the messages' transaction ids in delivery order.
func txids(p *apitest.PopResponse) []string {
	if p == nil {
		return nil
	}
	out := make([]string, len(p.Messages))
	for i, m := range p.Messages {
		out[i] = m.TransactionID
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func wantTx(t testing.TB, what string, p *apitest.PopResponse, want []string) {
	t.Helper()
	if got := txids(p); !equal(got, want) {
		t.Fatalf("%s: delivered %v, want %v", what, got, want)
	}
}

func cat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// run is a maximal stretch of consecutive messages of one partition.
type run struct {
	partition string
	txs       []string
}

// runs splits a delivery into its per-partition stretches, in order.
func runs(p *apitest.PopResponse) []run {
	var out []run
	for _, m := range p.Messages {
		if n := len(out); n > 0 && out[n-1].partition == m.Partition {
			out[n-1].txs = append(out[n-1].txs, m.TransactionID)
			continue
		}
		out = append(out, run{partition: m.Partition, txs: []string{m.TransactionID}})
	}
	return out
}

// ---------------------------------------------------------------- SQL

// cursor is a (partition, group) row of queen.cursors as a test sees it.
type cursor struct {
	Exists    bool
	Committed int64
	LeaseID   string  // "" when NULL
	ExpiresIn float64 // lease_expires_at - now() in seconds; -1e9 when NULL
}

func readCursor(t testing.TB, db *pgtest.Database, queue, partition, group string) cursor {
	t.Helper()
	var c cursor
	var n int64
	err := db.QueryRow(`SELECT count(*), coalesce(max(c.committed), -1), coalesce(max(c.lease_id::text), ''),
       coalesce(max(extract(epoch FROM c.lease_expires_at - now()))::float8, -1e9)
  FROM queen.cursors c
  JOIN queen.partitions p ON p.id = c.partition_id
  JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 AND p.name = $2 AND c.consumer_group = $3`, []any{queue, partition, group},
		&n, &c.Committed, &c.LeaseID, &c.ExpiresIn)
	if err != nil {
		t.Fatalf("reading cursor %s/%s@%s: %v", queue, partition, group, err)
	}
	c.Exists = n == 1
	return c
}

// leaseExpiresAt returns when the live lease of (queue, partition, group)
// ends, read as an absolute time (the box has one clock).
func leaseExpiresAt(t testing.TB, db *pgtest.Database, queue, partition, group string) time.Time {
	t.Helper()
	var epoch float64
	err := db.QueryRow(`SELECT extract(epoch FROM c.lease_expires_at)::float8 FROM queen.cursors c
  JOIN queen.partitions p ON p.id = c.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 AND p.name = $2 AND c.consumer_group = $3 AND c.lease_expires_at IS NOT NULL`,
		[]any{queue, partition, group}, &epoch)
	if err != nil {
		t.Fatalf("reading the lease of %s/%s@%s: %v", queue, partition, group, err)
	}
	return time.Unix(0, int64(epoch*1e9))
}

// partitionID returns the id of queue/partition as text, "" when absent.
func partitionID(t testing.TB, db *pgtest.Database, queue, partition string) string {
	t.Helper()
	var id string
	err := db.QueryRow(`SELECT coalesce(max(p.id::text), '') FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 AND p.name = $2`, []any{queue, partition}, &id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// count runs a SELECT count(*)-like query returning one integer.
func count(t testing.TB, db *pgtest.Database, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(sql, args, &n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

var lockSeq atomic.Int64

// holdLock takes an ACCESS EXCLUSIVE lock on table in a session of its own on
// db and returns once the lock is granted. The session keeps it until release
// is called (at the latest 60s), then commits; done yields its error. The
// release signal is a row in public.poptest_release, which the locking
// session polls (each plpgsql statement sees newly committed rows).
func holdLock(t testing.TB, db *pgtest.Database, table string) (release func(), done <-chan error) {
	t.Helper()
	if err := db.Exec(`CREATE TABLE IF NOT EXISTS public.poptest_release (key text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("%s-%d", table, lockSeq.Add(1))
	ch := make(chan error, 1)
	go func() {
		ch <- db.Exec(fmt.Sprintf(`DO $$
BEGIN
    LOCK TABLE %s IN ACCESS EXCLUSIVE MODE;
    FOR i IN 1..3000 LOOP
        EXIT WHEN EXISTS (SELECT 1 FROM public.poptest_release WHERE key = '%s');
        PERFORM pg_sleep(0.02);
    END LOOP;
END $$`, table, key))
	}()
	schema, rel, _ := strings.Cut(table, ".")
	deadline := time.Now().Add(20 * time.Second)
	for {
		n := count(t, db, `SELECT count(*) FROM pg_locks l
  JOIN pg_class c ON c.oid = l.relation JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND n.nspname = $1 AND c.relname = $2 AND l.mode = 'AccessExclusiveLock' AND l.granted`, schema, rel)
		if n > 0 {
			break
		}
		select {
		case err := <-ch:
			t.Fatalf("lock session on %s ended early: %v", table, err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock on %s not granted within 20s", table)
		}
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := db.Exec(`INSERT INTO public.poptest_release (key) VALUES ($1)`, key); err != nil {
				t.Errorf("releasing the lock on %s: %v", table, err)
			}
		})
	}
	t.Cleanup(release)
	return release, ch
}

// ---------------------------------------------------------------- misc

// createdAtRe is the createdAt format of pop-routes.md: microseconds, literal Z.
var createdAtRe = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

var uuidRe = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// waitFor polls cond every 20ms until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// async runs a pop in the background; the channel yields its outcome.
type outcome struct {
	r   *result
	err error
	at  time.Time // when the answer arrived
}

func async(ctx context.Context, c *http.Client, s *apitest.Server, path string) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		r, err := do(ctx, c, s, path)
		ch <- outcome{r: r, err: err, at: time.Now()}
	}()
	return ch
}

// await waits up to d for an async pop, failing the test on a timeout or a
// transport error.
func await(t testing.TB, ch <-chan outcome, d time.Duration) outcome {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("pop: %v", o.err)
		}
		return o
	case <-time.After(d):
		t.Fatalf("pop did not answer within %v", d)
	}
	return outcome{}
}

// pending reports whether an async pop is still parked after d.
func pending(ch <-chan outcome, d time.Duration) (outcome, bool) {
	select {
	case o := <-ch:
		return o, false
	case <-time.After(d):
		return outcome{}, true
	}
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
