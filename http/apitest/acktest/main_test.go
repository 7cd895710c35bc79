// Package acktest holds the black-box HTTP tests of acknowledgement, batch
// ack, lease extension, transactions, dead letters and the per-message route
// (shared/spec/api.md 4.3 to 4.6, 7.1, 7.3; semantics.md D2 to D7, D10 and
// the A-*, L-*, X-*, D-* rules; issue 4). Every test is named after the rule
// it checks; where a D decision changes a reference rule, the test follows
// the decision.
//
// Every test shares one lazily started broker on the package database (none
// needs an environment of its own); apitest.Main stops it at the end. Tests
// read queen.* tables through apitest.DB to check what the HTTP answers
// cannot show (committed offsets, attempts, lease expiries).
package acktest

import (
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/apitest"
)

func TestMain(m *testing.M) { apitest.Main(m, "ack") }

// queueMode is the reserved group name of queue mode (pop-routes.md).
const queueMode = "__QUEUE_MODE__"

// ---------------------------------------------------------------- server

// shared returns the package's one broker (apitest.Shared).
func shared(t testing.TB) *apitest.Server {
	t.Helper()
	return apitest.Shared(t, "DB_POOL_SIZE=12")
}

// ---------------------------------------------------------------- paths

func kv(pairs ...string) string { return apitest.Query(pairs...) }

// wildcard is GET /api/v1/pop/queue/:queue.
func wildcard(queue string, pairs ...string) string { return apitest.PopQueue(queue, pairs...) }

// single is GET /api/v1/pop/queue/:queue/partition/:partition.
func single(queue, partition string, pairs ...string) string {
	return apitest.PopPartition(queue, partition, pairs...)
}

// ---------------------------------------------------------------- setup

// configure creates or replaces a queue with the given options.
func configure(t testing.TB, s *apitest.Server, queue string, options map[string]any) {
	t.Helper()
	body := map[string]any{"queue": queue}
	if options != nil {
		body["options"] = options
	}
	r := s.Post(t, "/api/v1/configure", body)
	if r.Status != 200 {
		t.Fatalf("configure %s: %d %s", queue, r.Status, r.Body)
	}
}

var txSeq atomic.Int64

// pushed is one message the test wrote.
type pushed struct {
	Tx, MessageID, PartitionID string
	Payload                    map[string]any
}

// pushN pushes n messages to queue/partition in one request and returns them
// in push order. Each payload is {"tx": id, "n": k}.
func pushN(t testing.TB, s *apitest.Server, queue, partition string, n int) []pushed {
	t.Helper()
	items := make([]apitest.PushItem, n)
	out := make([]pushed, n)
	for k := range items {
		tx := fmt.Sprintf("tx-%d-%d", os.Getpid(), txSeq.Add(1))
		out[k] = pushed{Tx: tx, Payload: map[string]any{"tx": tx, "n": float64(k)}}
		items[k] = apitest.PushItem{Queue: queue, Partition: partition, TransactionID: tx, Payload: out[k].Payload}
	}
	res := s.Push(t, items...)
	for i, r := range res {
		if r.Status != "queued" {
			t.Fatalf("push item %d: %+v", i, r)
		}
		out[i].MessageID, out[i].PartitionID = r.MessageID, r.PartitionID
	}
	return out
}

// ---------------------------------------------------------------- pops

// popOK pops and requires a 200 with messages.
func popOK(t testing.TB, s *apitest.Server, path string) *apitest.PopResponse {
	t.Helper()
	p := s.Pop(t, path)
	if p == nil || len(p.Messages) == 0 {
		t.Fatalf("GET %s: want messages, got %+v", path, p)
	}
	return p
}

// popNone pops and requires a 204.
func popNone(t testing.TB, s *apitest.Server, path string) {
	t.Helper()
	if p := s.Pop(t, path); p != nil {
		t.Fatalf("GET %s: want 204, got %d messages %v", path, len(p.Messages), txs(p.Messages))
	}
}

// popWithin pops every 100 ms until a 200 or the deadline; nil on timeout.
func popWithin(t testing.TB, s *apitest.Server, path string, d time.Duration) *apitest.PopResponse {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if p := s.Pop(t, path); p != nil {
			return p
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func txs(ms []apitest.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.TransactionID
	}
	return out
}

func txsOf(ps []pushed) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Tx
	}
	return out
}

func sameList(a, b []string) bool {
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

// ---------------------------------------------------------------- acks

// ackRes is one element of an ack answer (api.md 4.3).
type ackRes struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
	QueueName     *string `json:"queueName"`
	PartitionName *string `json:"partitionName"`
	LeaseReleased bool    `json:"leaseReleased"`
	DLQ           bool    `json:"dlq"`
}

func (r ackRes) errText() string {
	if r.Error == nil {
		return "<null>"
	}
	return *r.Error
}

// ackItem is an acknowledgement of a popped message with its own lease.
func ackItem(m apitest.Message, status string) map[string]any {
	return map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "status": status,
		"leaseId": m.LeaseID}
}

// ackBody is a single-ack body for group (nil: omitted).
func ackBody(m apitest.Message, status string, group any) map[string]any {
	b := ackItem(m, status)
	if group != nil {
		b["consumerGroup"] = group
	}
	return b
}

// postAck posts a single ack and requires a 200 with a one-element array.
func postAck(t testing.TB, s *apitest.Server, body any) ackRes {
	t.Helper()
	r := s.Post(t, "/api/v1/ack", body)
	if r.Status != 200 {
		t.Fatalf("ack: status %d: %s", r.Status, r.Body)
	}
	var out []ackRes
	r.JSON(t, &out)
	if len(out) != 1 {
		t.Fatalf("ack: want one result, got %s", r.Body)
	}
	return out[0]
}

// ack acknowledges one popped message in the given group ("" queue mode).
func ack(t testing.TB, s *apitest.Server, m apitest.Message, status, group string) ackRes {
	t.Helper()
	var g any
	if group != "" {
		g = group
	}
	return postAck(t, s, ackBody(m, status, g))
}

// ackOK acknowledges and requires success.
func ackOK(t testing.TB, s *apitest.Server, m apitest.Message, status, group string) ackRes {
	t.Helper()
	r := ack(t, s, m, status, group)
	if !r.Success {
		t.Fatalf("ack %s %s: %+v (error %s)", m.TransactionID, status, r, r.errText())
	}
	return r
}

// postBatch posts a batch ack and requires a 200 with one result per item.
func postBatch(t testing.TB, s *apitest.Server, group any, items ...map[string]any) []ackRes {
	t.Helper()
	body := map[string]any{"acknowledgments": items}
	if group != nil {
		body["consumerGroup"] = group
	}
	r := s.Post(t, "/api/v1/ack/batch", body)
	if r.Status != 200 {
		t.Fatalf("batch ack: status %d: %s", r.Status, r.Body)
	}
	var out []ackRes
	r.JSON(t, &out)
	if len(out) != len(items) {
		t.Fatalf("batch ack: %d results for %d items: %s", len(out), len(items), r.Body)
	}
	return out
}

// wantFailure requires a per-item failure with the given error text.
func wantFailure(t testing.TB, r ackRes, text string) {
	t.Helper()
	if r.Success || r.Error == nil || *r.Error != text {
		t.Fatalf("want success:false error %q, got %+v (error %s)", text, r, r.errText())
	}
}

// ---------------------------------------------------------------- errors

// wantErrorBody requires status and a body that is exactly {"error":"..."}
// with a non-empty text.
func wantErrorBody(t testing.TB, r *apitest.Response, status int) string {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("error body is not JSON: %q", r.Body)
	}
	e, ok := body["error"].(string)
	if !ok || e == "" || len(body) != 1 {
		t.Fatalf(`body %s, want exactly {"error":"..."}`, r.Body)
	}
	return e
}

// ---------------------------------------------------------------- database

// cursorRow is a queen.cursors row.
type cursorRow struct {
	Found     bool
	Committed int64
	LeaseID   *string
	LeaseEnd  *int64
	Expires   *time.Time
	Acked     []int64
	NotBefore *time.Time
	Live      bool // a lease that has not expired
	Consumed  int64
}

func readCursor(t testing.TB, partitionID, group string) cursorRow {
	t.Helper()
	if group == "" {
		group = queueMode
	}
	var c cursorRow
	var committed *int64
	err := apitest.DB.QueryRow(`SELECT c.committed, c.lease_id::text, c.lease_end, c.lease_expires_at,
       coalesce(c.acked, '{}'), c.not_before,
       coalesce(c.lease_id IS NOT NULL AND c.lease_expires_at > now(), false), coalesce(c.total_consumed, 0)
  FROM (SELECT 1) x LEFT JOIN queen.cursors c ON c.partition_id = $1 AND c.consumer_group = $2`,
		[]any{partitionID, group},
		&committed, &c.LeaseID, &c.LeaseEnd, &c.Expires, &c.Acked, &c.NotBefore, &c.Live, &c.Consumed)
	if err != nil {
		t.Fatalf("reading cursor (%s, %s): %v", partitionID, group, err)
	}
	if committed != nil {
		c.Found, c.Committed = true, *committed
	}
	return c
}

// offsetOf is the offset of a transaction id in its partition.
func offsetOf(t testing.TB, partitionID, tx string) int64 {
	t.Helper()
	var off int64
	if err := apitest.DB.QueryRow(`SELECT "offset" FROM queen.txids WHERE partition_id = $1 AND transaction_id = $2`,
		[]any{partitionID, tx}, &off); err != nil {
		t.Fatalf("offset of %s: %v", tx, err)
	}
	return off
}

// failures is queen.attempts.failures of an offset (0 without a row).
func failures(t testing.TB, partitionID, group string, off int64) int {
	t.Helper()
	if group == "" {
		group = queueMode
	}
	var n int
	if err := apitest.DB.QueryRow(`SELECT coalesce(max(failures), 0) FROM queen.attempts
 WHERE partition_id = $1 AND consumer_group = $2 AND "offset" = $3`, []any{partitionID, group, off}, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// dbInt runs a query that returns one integer.
func dbInt(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := apitest.DB.QueryRow(sql, args, &n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// ---------------------------------------------------------------- DLQ

// dlqEntry is one element of GET /api/v1/dlq (api.md 7.1).
type dlqEntry struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	ErrorMessage  *string         `json:"errorMessage"`
	RetryCount    int             `json:"retryCount"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     string          `json:"createdAt"`
	FailedAt      string          `json:"failedAt"`
}

type dlqList struct {
	Messages   []dlqEntry `json:"messages"`
	Total      *int       `json:"total"`
	Pagination struct {
		Limit  int `json:"limit"`
		Offset int `json:"offset"`
	} `json:"pagination"`
}

func listDLQ(t testing.TB, s *apitest.Server, pairs ...string) dlqList {
	t.Helper()
	r := s.Get(t, "/api/v1/dlq"+kv(pairs...))
	if r.Status != 200 {
		t.Fatalf("GET /api/v1/dlq%s: %d %s", kv(pairs...), r.Status, r.Body)
	}
	var l dlqList
	r.JSON(t, &l)
	if l.Total == nil {
		t.Fatalf("dlq answer without total: %s", r.Body)
	}
	return l
}

func parseTS(t testing.TB, s string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("timestamp %q: %v", s, err)
	}
	return ts
}
