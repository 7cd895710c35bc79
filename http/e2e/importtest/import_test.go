// Package importtest checks `queengo import queen` black-box (issue 44): a
// database in the reference Queen server's layout, filled by the test with
// its own SQL (pgtest.Queen) with the cases that matter, is imported by the
// queengo binary, and a broker on the imported database serves every group
// exactly what it had not consumed on Queen, in order, with the queues'
// options, the dead letters, traces, subscriptions and switches.
package importtest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/http/e2e"
	"github.com/queengo/queengo/pg/pgtest"
)

func TestMain(m *testing.M) { e2e.Main(m, "importtest") }

// key is QUEEN_ENCRYPTION_KEY, the same for Queen and for queengo.
const key = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

// imported is the outcome of one `queengo import` process.
type imported struct {
	code           int
	stdout, stderr string
}

// runImport runs the queengo binary's `import` with args against the
// queengo database target (DATABASE_URL) and the key.
func runImport(t *testing.T, target string, args ...string) imported {
	t.Helper()
	cmd := exec.Command(e2e.MustBinary(t), append([]string{"import"}, args...)...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+target, "QUEEN_ENCRYPTION_KEY="+key)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	res := imported{stdout: out.String(), stderr: errb.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return res
}

// fixture is a Queen database holding the cases of the import.
type fixture struct {
	q       *pgtest.Queen
	t0      time.Time
	parts   map[string]uuid.UUID
	payload map[string]string // transaction id -> the payload's JSON as a producer would read it
}

// txs makes messages with these transaction ids and payloads {"tx": id}.
func txs(f *fixture, ids ...string) []pgtest.QueenMessage {
	out := make([]pgtest.QueenMessage, len(ids))
	for i, id := range ids {
		out[i] = pgtest.QueenMessage{TxID: id, Payload: `{"tx": "` + id + `"}`}
		f.payload[id] = `{"tx":"` + id + `"}`
	}
	return out
}

// newFixture fills a Queen database with:
//
//   - queue orders (every option set): partition p1 holding a1-a9 in three
//     pushes a second apart (a1 with a trace id and a producerSub), where
//     g1 consumed a1-a3, g2 consumed a1-a2 and holds a live lease on the
//     next, queue mode consumed a1-a5, g3 never consumed (its durable
//     "new" subscription dates from the second push) and g5 consumed
//     all; p2 holding b1 (dead-lettered by g1, with a failed ack after)
//     and b2; p3, written after the subscription, and p4, before it,
//     that no group touched; traces on a1 and b1;
//   - queue vault with encryptionEnabled: v1-v3 encrypted by Queen, v4 in
//     plaintext (Queen stored it so when it had no key), of which group s
//     consumed v1;
//   - push maintenance on, pop maintenance off.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{q: pgtest.NewQueen(t, "importq"), t0: time.Now().Add(-10 * time.Minute).Truncate(time.Microsecond),
		parts: map[string]uuid.UUID{}, payload: map[string]string{}}
	q, t0 := f.q, f.t0
	orders := q.Queue(t, "orders", `namespace = 'shop', task = 'orders', lease_time = 120, retry_limit = 2,
    retry_delay = 500, priority = 5, max_queue_size = 1000, ttl = 7200, dead_letter_queue = true,
    dlq_after_max_retries = true, retention_seconds = 86400, completed_retention_seconds = 3600,
    retention_enabled = true, max_wait_time_seconds = 0, delayed_processing = 0, window_buffer = 0`)
	for _, name := range []string{"p1", "p2", "p3", "p4"} {
		f.parts[name] = q.Partition(t, orders, name)
	}
	p1 := f.parts["p1"]
	first := txs(f, "a1", "a2", "a3")
	first[0].TraceID, first[0].ProducerSub = "11111111-2222-3333-4444-555555555555", "user-7"
	a := q.Push(t, p1, t0, first...)
	a = append(a, q.Push(t, p1, t0.Add(time.Second), txs(f, "a4", "a5", "a6")...)...)
	a = append(a, q.Push(t, p1, t0.Add(2*time.Second), txs(f, "a7", "a8", "a9")...)...)
	q.Consumed(t, p1, "g1", a[2], "total_messages_consumed = 3")
	q.Consumed(t, p1, "g2", a[1], `worker_id = 'lease-1', lease_acquired_at = now(),
    lease_expires_at = now() + interval '10 minutes', batch_size = 4, acked_count = 2`)
	q.Consumed(t, p1, "__QUEUE_MODE__", a[4], "")
	q.Consumed(t, p1, "g3", uuid.Nil, "")
	q.Subscribed(t, "g3", "orders", "", "new", t0.Add(time.Second))
	q.Consumed(t, p1, "g5", a[8], "")

	b := q.Push(t, f.parts["p2"], t0, txs(f, "b1", "b2")...)
	q.Consumed(t, f.parts["p2"], "g1", b[0], "batch_retry_count = 1")
	q.MustExec(t, `INSERT INTO queen.dead_letter_queue (message_id, partition_id, consumer_group, error_message,
    retry_count, original_created_at, failed_at) VALUES ($1, $2, 'g1', 'boom', 2, $3::timestamptz, $3::timestamptz + interval '1 minute')`,
		b[0], f.parts["p2"], t0)
	q.Push(t, f.parts["p3"], t0.Add(3*time.Second), txs(f, "c1", "c2", "c3")...)
	q.Push(t, f.parts["p4"], t0, txs(f, "d1")...)
	for _, tr := range []struct {
		msg     uuid.UUID
		part    uuid.UUID
		tx      string
		group   any
		names   []string
		seconds int
	}{{a[0], p1, "a1", "g1", []string{"order-1", "checkout"}, 10}, {a[0], p1, "a1", nil, []string{"order-1"}, 11},
		{b[0], f.parts["p2"], "b1", "g1", nil, 12}} {
		id := uuid.New()
		q.MustExec(t, `INSERT INTO queen.message_traces (id, message_id, partition_id, transaction_id, consumer_group,
    event_type, data, created_at, worker_id) VALUES ($1, $2, $3, $4, $5, 'processing', '{"step": "x"}', $6, '3')`,
			id, tr.msg, tr.part, tr.tx, tr.group, t0.Add(time.Duration(tr.seconds)*time.Second))
		for _, n := range tr.names {
			q.MustExec(t, `INSERT INTO queen.message_trace_names (trace_id, trace_name) VALUES ($1, $2)`, id, n)
		}
	}

	vault := q.Queue(t, "vault", "encryption_enabled = true")
	f.parts["vault"] = q.Partition(t, vault, "Default")
	k, _ := hex.DecodeString(key)
	var vs []pgtest.QueenMessage
	for _, id := range []string{"v1", "v2", "v3"} {
		plain := `{"secret":"` + id + `"}`
		env, err := pgtest.QueenEncrypt(k, []byte(plain))
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, pgtest.QueenMessage{TxID: id, Payload: env, Encrypted: true})
		f.payload[id] = plain
	}
	vs = append(vs, txs(f, "v4")...)
	v := q.Push(t, f.parts["vault"], t0, vs...)
	q.Consumed(t, f.parts["vault"], "s", v[0], "")

	q.MustExec(t, `INSERT INTO queen.system_state (key, value) VALUES ('maintenance_mode', '{"enabled": true}'),
    ('pop_maintenance_mode', '{"enabled": false}')`)
	return f
}

// TestImport_EveryGroupPopsWhatItHadNotConsumed: after the import, each
// group pops exactly the messages it had not consumed on Queen, in order,
// with their ids, payloads (encrypted ones readable, stored sealed), trace
// ids, producerSub and times; the leased message comes again; a durable
// subscription seeds the partitions the group touches later; the queues
// keep their options; dead letters, traces and switches are there; a
// second run writes nothing and verifies clean.
func TestImport_EveryGroupPopsWhatItHadNotConsumed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	target := e2e.CreateDB(t, "importtarget")
	res := runImport(t, target.URL, "queen", "--from", f.q.URL)
	if res.code != 0 {
		t.Fatalf("import exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	if strings.Contains(res.stdout, "DIFF") || !strings.Contains(res.stdout, "imported 19 messages") {
		t.Fatalf("import output:\n%s", res.stdout)
	}
	if !strings.Contains(res.stdout, "re-sealed, not carried") {
		t.Fatalf("the import does not say what it does with encrypted payloads:\n%s", res.stdout)
	}
	if !strings.Contains(res.stderr, "import: messages: done, 19 in") {
		t.Fatalf("no plain progress lines on stderr (not a terminal):\n%s", res.stderr)
	}

	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: target.URL, Env: []string{"QUEEN_ENCRYPTION_KEY=" + key}})
	pops := []struct {
		partition, group string
		want             []string
	}{
		{"p1", "g1", []string{"a4", "a5", "a6", "a7", "a8", "a9"}},
		{"p1", "g2", []string{"a3", "a4", "a5", "a6", "a7", "a8", "a9"}},
		{"p1", e2e.QueueMode, []string{"a6", "a7", "a8", "a9"}},
		{"p1", "g3", []string{"a4", "a5", "a6", "a7", "a8", "a9"}},
		{"p1", "g5", nil},
		{"p2", "g1", []string{"b2"}},
		{"p3", "g1", []string{"c1", "c2", "c3"}},
		{"p3", "g3", []string{"c1", "c2", "c3"}},
		{"p4", "g3", nil},
		{"p4", "fresh", []string{"d1"}},
	}
	var a1 *e2e.Message
	for _, p := range pops {
		got := s.Pop(t, e2e.PopPartition("orders", p.partition, "consumerGroup", p.group, "batch", "100"))
		e2e.WantTxIDs(t, p.group+" on "+p.partition, got, p.want)
		if got == nil {
			continue
		}
		for i := range got.Messages {
			m := &got.Messages[i]
			if string(m.RawData) != f.payload[m.TransactionID] {
				t.Errorf("%s: payload %s, want %s", m.TransactionID, m.RawData, f.payload[m.TransactionID])
			}
			if m.TransactionID == "a1" {
				a1 = m
			}
		}
	}
	vault := s.PopOK(t, e2e.PopQueue("vault", "consumerGroup", "s", "batch", "100"))
	e2e.WantTxIDs(t, "s on vault", vault, []string{"v2", "v3", "v4"})
	for _, m := range vault.Messages {
		if string(m.RawData) != f.payload[m.TransactionID] {
			t.Errorf("%s: payload %s, want %s", m.TransactionID, m.RawData, f.payload[m.TransactionID])
		}
	}
	all := s.PopOK(t, e2e.PopPartition("orders", "p1", "consumerGroup", "late", "batch", "1"))
	if a1 = &all.Messages[0]; a1.TransactionID != "a1" || a1.TraceID == nil || *a1.TraceID != "11111111-2222-3333-4444-555555555555" ||
		a1.ProducerSub == nil || *a1.ProducerSub != "user-7" || a1.CreatedAt != f.t0.UTC().Format("2006-01-02T15:04:05.000000Z") ||
		a1.PartitionID != f.parts["p1"].String() {
		t.Fatalf("a1 as popped: %+v (traceId %v, producerSub %v), want Queen's ids, trace id, producerSub and time %s", a1,
			a1.TraceID, a1.ProducerSub, f.t0.UTC().Format(time.RFC3339Nano))
	}
	if n := e2e.QueryInt(t, target, `SELECT count(*) FROM queen.segments s JOIN queen.partitions p ON p.id = s.partition_id
JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = 'vault' AND get_byte(s.frames, 0) & 4 = 0`); n != 0 {
		t.Fatalf("%d segments of the encrypted queue are not sealed", n)
	}
	if n := e2e.QueryInt(t, target, `SELECT count(*) FROM queen.segments WHERE position('secret'::bytea IN frames) > 0`); n != 0 {
		t.Fatalf("%d segments hold an encrypted payload in plaintext", n)
	}

	var queue struct {
		Namespace, Task string
		Options         map[string]any
	}
	s.Get(t, "/api/v1/resources/queues/orders").JSON(t, &queue)
	wantOptions := map[string]any{"leaseTime": 120.0, "retryLimit": 2.0, "retryDelay": 500.0, "priority": 5.0,
		"maxSize": 1000.0, "ttl": 7200.0, "deadLetterQueue": true, "dlqAfterMaxRetries": true, "delayedProcessing": 0.0,
		"windowBuffer": 0.0, "retentionSeconds": 86400.0, "completedRetentionSeconds": 3600.0, "retentionEnabled": true,
		"encryptionEnabled": false, "maxWaitTimeSeconds": 0.0, "minPopWaitTime": 0.0}
	for k, v := range wantOptions {
		if queue.Options[k] != v {
			t.Errorf("option %s = %v, want %v", k, queue.Options[k], v)
		}
	}
	if queue.Namespace != "shop" || queue.Task != "orders" {
		t.Errorf("namespace/task %q/%q", queue.Namespace, queue.Task)
	}

	var dlq struct {
		Messages []struct {
			TransactionID, ConsumerGroup, ErrorMessage, PartitionID string
			RetryCount                                              int
			Data                                                    json.RawMessage
		}
	}
	s.Get(t, "/api/v1/dlq?queue=orders").JSON(t, &dlq)
	if len(dlq.Messages) != 1 || dlq.Messages[0].TransactionID != "b1" || dlq.Messages[0].ConsumerGroup != "g1" ||
		dlq.Messages[0].ErrorMessage != "boom" || dlq.Messages[0].RetryCount != 2 || string(dlq.Messages[0].Data) != f.payload["b1"] {
		t.Fatalf("dead letters: %+v", dlq.Messages)
	}
	if n := e2e.QueryInt(t, target, `SELECT failures FROM queen.attempts WHERE consumer_group = 'g1' AND "offset" = 2`); n != 1 {
		t.Fatalf("g1's failed ack on p2 counts %d against b2, want 1", n)
	}

	var traces struct {
		Traces []struct {
			ConsumerGroup string   `json:"consumer_group"`
			TraceNames    []string `json:"trace_names"`
		}
	}
	s.Get(t, "/api/v1/traces/"+f.parts["p1"].String()+"/a1").JSON(t, &traces)
	if len(traces.Traces) != 2 || strings.Join(traces.Traces[0].TraceNames, ",") != "checkout,order-1" ||
		traces.Traces[1].ConsumerGroup != e2e.QueueMode {
		t.Fatalf("traces of a1: %+v", traces.Traces)
	}
	var names struct {
		TraceNames []struct {
			TraceName    string `json:"trace_name"`
			TraceCount   int    `json:"trace_count"`
			MessageCount int    `json:"message_count"`
		} `json:"trace_names"`
	}
	s.Get(t, "/api/v1/traces/names").JSON(t, &names)
	if len(names.TraceNames) != 2 || names.TraceNames[0].TraceName != "order-1" || names.TraceNames[0].TraceCount != 2 ||
		names.TraceNames[0].MessageCount != 1 {
		t.Fatalf("trace names: %+v", names.TraceNames)
	}

	var maint struct{ MaintenanceMode, PopMaintenanceMode bool }
	s.Get(t, "/api/v1/system/maintenance").JSON(t, &maint)
	if !maint.MaintenanceMode || maint.PopMaintenanceMode {
		t.Fatalf("switches: %+v, want push maintenance on and pop maintenance off, as on Queen", maint)
	}

	again := runImport(t, target.URL, "queen", "--from", f.q.URL)
	if again.code != 0 || !strings.Contains(again.stdout, "imported 0 messages") {
		t.Fatalf("second run: exit %d\n%s\n%s", again.code, again.stdout, again.stderr)
	}
}

// TestImport_BadInput: a missing or bad --from, a database that is not
// Queen's, an unknown queue, queengo's database given as Queen's and the
// other way round: each a message and exit 1 with nothing written; an
// unreachable Queen database is exit 3; a dry run writes nothing.
func TestImport_BadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	target := e2e.CreateDB(t, "importbad")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"queen"}, 1, "--from is required"},
		{[]string{}, 1, "queengo import queen --from URL"},
		{[]string{"queen", "--from", "postgres://[::1"}, 1, "not a database URL"},
		{[]string{"queen", "--from", target.URL}, 1, "not a Queen database"},
		{[]string{"queen", "--from", f.q.URL, "--queues", "orders,nope"}, 1, `no queue "nope"`},
		{[]string{"queen", "--from", "postgres://postgres@127.0.0.1:1/x?connect_timeout=2"}, 3, "cannot read the Queen database"},
	} {
		res := runImport(t, target.URL, c.args...)
		if res.code != c.code || !strings.Contains(res.stderr, c.says) {
			t.Errorf("import %v: exit %d, stderr %q; want exit %d saying %q", c.args, res.code, res.stderr, c.code, c.says)
		}
	}
	if res := runImport(t, f.q.URL, "queen", "--from", f.q.URL); res.code != 1 || !strings.Contains(res.stderr, "DATABASE_URL names a Queen database") {
		t.Errorf("Queen's database as queengo's: exit %d, %q", res.code, res.stderr)
	}
	res := runImport(t, target.URL, "queen", "--from", f.q.URL, "--dry-run", "--queues", "vault")
	if res.code != 0 || !strings.Contains(res.stdout, "would copy") || !regexp.MustCompile(`vault +1 +4 +4 +new`).MatchString(res.stdout) {
		t.Fatalf("dry run: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if n := e2e.QueryInt(t, target, `SELECT count(*) FROM pg_namespace WHERE nspname = 'queen'`); n != 0 {
		t.Fatal("something was written to queengo's database")
	}
}

// TestImport_Differences: a partition written on queengo since the import
// is left alone by the next run (never mixed with Queen's messages), the
// verification marks it (exit 2), and queengo's switches stay as they
// were.
func TestImport_Differences(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	target := e2e.CreateDB(t, "importdiff")
	if res := runImport(t, target.URL, "queen", "--from", f.q.URL, "--queues", "orders", "--no-progress"); res.code != 0 || res.stderr != "" {
		t.Fatalf("import: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: target.URL, Env: []string{"QUEEN_ENCRYPTION_KEY=" + key}})
	s.Post(t, "/api/v1/system/maintenance", map[string]any{"enabled": false})
	s.PushQueued(t, e2e.PushItem{Queue: "orders", Partition: "p4", Payload: map[string]any{"on": "queengo"}})
	f.q.Push(t, f.parts["p4"], time.Now().Add(-time.Second), txs(f, "d2")...)
	res := runImport(t, target.URL, "queen", "--from", f.q.URL, "--queues", "orders")
	if res.code != 2 || !regexp.MustCompile(`messages +orders +p4 +- +2 to \S+ +2 to \S+ \(left alone: see above\) +DIFF`).MatchString(res.stdout) ||
		!strings.Contains(res.stdout, "left alone: orders/p4") {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	var maint struct{ MaintenanceMode bool }
	s.Get(t, "/api/v1/system/maintenance").JSON(t, &maint)
	if maint.MaintenanceMode {
		t.Fatal("a run with differences set queengo's push maintenance as Queen's; it must leave the switches alone")
	}
}
