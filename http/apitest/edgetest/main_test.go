// Package edgetest holds the black-box HTTP tests of issue 8: bad input at
// the edges of the API. Numeric query parameters out of range or not
// integers, strings that cannot reach PostgreSQL (NUL, invalid UTF-8, lone
// surrogates), the HTTP server's own errors, paths that are not routes, and
// names with any valid UTF-8 but control characters. Every test is named
// after the rule it checks; a rejected request answers a JSON
// {"error":"..."} naming the parameter or field and applies nothing.
//
// Every test shares one lazily started broker on the package database
// (apitest.Shared); tests read queen.* through apitest.DB to check that a
// rejected request wrote nothing.
package edgetest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/apitest"
)

func TestMain(m *testing.M) { apitest.Main(m, "edgetest") }

// ---------------------------------------------------------------- server

// shared returns the package's one broker.
func shared(t testing.TB) *apitest.Server {
	t.Helper()
	return apitest.Shared(t, "DEFAULT_TIMEOUT=", "POP_DEFAULT_TIMEOUT_MS=")
}

// requestTimeout bounds every request of this package: a 400 is immediate,
// so a request still open after it is a parked pop that should not park.
const requestTimeout = 15 * time.Second

// get sends a GET bounded by requestTimeout and fails the test when no
// answer arrives.
func get(t testing.TB, s *apitest.Server, path string) *apitest.Response {
	t.Helper()
	return do(t, s, "GET", path, nil)
}

func post(t testing.TB, s *apitest.Server, path string, body any) *apitest.Response {
	t.Helper()
	return do(t, s, "POST", path, body)
}

func do(t testing.TB, s *apitest.Server, method, path string, body any) *apitest.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	start := time.Now()
	r, err := s.DoCtx(ctx, method, path, body)
	if err != nil {
		t.Fatalf("%s %s: no answer after %v: %v", method, path, time.Since(start).Round(time.Millisecond), err)
	}
	return r
}

// ---------------------------------------------------------------- errors

// wantError requires an error answer: the status, Content-Type
// application/json, and a body that is a JSON object with a string field
// "error". When contains is not empty the error text must contain it
// (compared case-insensitively: the text may begin a sentence with the
// field name). It returns the error text.
func wantError(t testing.TB, r *apitest.Response, status int, contains string) string {
	t.Helper()
	msg, err := checkError(r, status, contains)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// checkError is wantError as an error, for loops and goroutines.
func checkError(r *apitest.Response, status int, contains string) (string, error) {
	if r.Status != status {
		return "", fmt.Errorf("status %d, want %d: %q", r.Status, status, clip(r.Body))
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return "", fmt.Errorf("%d with Content-Type %q, want application/json: %q", r.Status, ct, clip(r.Body))
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return "", fmt.Errorf("%d body is not a JSON object (%v): %q", r.Status, err, clip(r.Body))
	}
	var msg string
	if raw, ok := body["error"]; !ok || json.Unmarshal(raw, &msg) != nil {
		return "", fmt.Errorf(`%d body has no string field "error": %s`, r.Status, clip(r.Body))
	}
	if contains != "" && !strings.Contains(strings.ToLower(msg), strings.ToLower(contains)) {
		return msg, fmt.Errorf("%d error %q does not name %q", r.Status, msg, contains)
	}
	return msg, nil
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}

// ---------------------------------------------------------------- pushes and pops

var txSeq atomic.Int64

// txid returns a transaction id unique within the run.
func txid(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), txSeq.Add(1))
}

// pushed is one message the test wrote.
type pushed struct {
	Tx, PartitionID string
}

// pushN pushes n messages to queue/partition ("" is Default) in one request
// and requires every one to be queued.
func pushN(t testing.TB, s *apitest.Server, queue, partition string, n int) []pushed {
	t.Helper()
	items := make([]apitest.PushItem, n)
	for k := range items {
		items[k] = apitest.PushItem{Queue: queue, Partition: partition, TransactionID: txid("tx"),
			Payload: map[string]any{"n": k}}
	}
	return pushItems(t, s, items...)
}

func pushItems(t testing.TB, s *apitest.Server, items ...apitest.PushItem) []pushed {
	t.Helper()
	r := post(t, s, "/api/v1/push", map[string]any{"items": items})
	if r.Status != 201 {
		t.Fatalf("push: status %d: %s", r.Status, clip(r.Body))
	}
	var res []apitest.PushResult
	r.JSON(t, &res)
	if len(res) != len(items) {
		t.Fatalf("push: %d results for %d items", len(res), len(items))
	}
	out := make([]pushed, len(res))
	for i, x := range res {
		if x.Status != "queued" {
			t.Fatalf("push item %d: %+v", i, x)
		}
		out[i] = pushed{Tx: x.TransactionID, PartitionID: x.PartitionID}
	}
	return out
}

// pop GETs a pop path and returns nil for a bare 204; anything but 200 or
// 204 fails the test.
func pop(t testing.TB, s *apitest.Server, path string) *apitest.PopResponse {
	t.Helper()
	r := get(t, s, path)
	switch r.Status {
	case 204:
		if len(r.Body) != 0 {
			t.Fatalf("GET %s: 204 with a body: %q", path, r.Body)
		}
		return nil
	case 200:
		var p apitest.PopResponse
		r.JSON(t, &p)
		return &p
	}
	t.Fatalf("GET %s: status %d: %s", path, r.Status, clip(r.Body))
	return nil
}

// popOK pops and requires a 200 with messages.
func popOK(t testing.TB, s *apitest.Server, path string) *apitest.PopResponse {
	t.Helper()
	p := pop(t, s, path)
	if p == nil || len(p.Messages) == 0 {
		t.Fatalf("GET %s: want messages, got a 204", path)
	}
	return p
}

// ---------------------------------------------------------------- acks

// ackRes is one element of an ack answer.
type ackRes struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transactionId"`
	Success       bool    `json:"success"`
	Error         *string `json:"error"`
}

// ackItem is the acknowledgement of a popped message under its own lease.
func ackItem(m apitest.Message, status string) map[string]any {
	return map[string]any{"transactionId": m.TransactionID, "partitionId": m.PartitionID, "leaseId": m.LeaseID,
		"status": status}
}

// ackOK posts a single ack in group ("" queue mode) and requires success.
func ackOK(t testing.TB, s *apitest.Server, m apitest.Message, group string) {
	t.Helper()
	b := ackItem(m, "completed")
	if group != "" {
		b["consumerGroup"] = group
	}
	r := post(t, s, "/api/v1/ack", b)
	if r.Status != 200 {
		t.Fatalf("ack %s: status %d: %s", m.TransactionID, r.Status, clip(r.Body))
	}
	var res []ackRes
	r.JSON(t, &res)
	if len(res) != 1 || !res[0].Success {
		t.Fatalf("ack %s: %s", m.TransactionID, r.Body)
	}
}

// batchOK posts a batch ack and requires per-item success for every item.
func batchOK(t testing.TB, s *apitest.Server, body any, n int) {
	t.Helper()
	r := post(t, s, "/api/v1/ack/batch", body)
	if r.Status != 200 {
		t.Fatalf("batch ack: status %d: %s", r.Status, clip(r.Body))
	}
	var res []ackRes
	r.JSON(t, &res)
	if len(res) != n {
		t.Fatalf("batch ack: %d results for %d items: %s", len(res), n, r.Body)
	}
	for i, x := range res {
		if !x.Success {
			t.Fatalf("batch ack item %d failed: %s", i, r.Body)
		}
	}
}

// ---------------------------------------------------------------- database

// queueRows counts the queen.queues rows of name: 0 shows a rejected
// request created nothing.
func queueRows(t testing.TB, name string) int64 {
	t.Helper()
	return dbInt(t, `SELECT count(*) FROM queen.queues WHERE name = $1`, name)
}

// messagesIn counts the messages stored in the queue's partitions.
func messagesIn(t testing.TB, name string) int64 {
	t.Helper()
	return dbInt(t, `SELECT count(*) FROM queen.txids x JOIN queen.partitions p ON p.id = x.partition_id
  JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1`, name)
}

func dbInt(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := apitest.DB.QueryRow(sql, args, &n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// cursorRow is what a test needs of a queen.cursors row.
type cursorRow struct {
	Found     bool
	Committed int64
	LeaseID   string  // "" when NULL
	ExpiresIn float64 // seconds until lease_expires_at; 0 when NULL
	Failures  int64   // sum of queen.attempts.failures of the (partition, group)
}

func readCursor(t testing.TB, partitionID, group string) cursorRow {
	t.Helper()
	if group == "" {
		group = "__QUEUE_MODE__"
	}
	var c cursorRow
	var n int64
	err := apitest.DB.QueryRow(`SELECT count(c.*), coalesce(max(c.committed), -1), coalesce(max(c.lease_id::text), ''),
       coalesce(max(extract(epoch FROM c.lease_expires_at - now()))::float8, 0),
       (SELECT coalesce(sum(failures), 0) FROM queen.attempts a WHERE a.partition_id = $1 AND a.consumer_group = $2)
  FROM queen.cursors c WHERE c.partition_id = $1 AND c.consumer_group = $2`, []any{partitionID, group},
		&n, &c.Committed, &c.LeaseID, &c.ExpiresIn, &c.Failures)
	if err != nil {
		t.Fatalf("reading cursor (%s, %s): %v", partitionID, group, err)
	}
	c.Found = n == 1
	return c
}

// ---------------------------------------------------------------- raw HTTP

// raw sends req as it is on a connection of its own and reads one answer;
// for what net/http will not send (oversized headers, bad framing, a path
// beginning with //). The writer runs beside the reader, so an answer sent
// before the server read the whole request is still seen.
func raw(t testing.TB, s *apitest.Server, req []byte) *apitest.Response {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(s.Port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(requestTimeout))
	go func() { _, _ = c.Write(req) }()
	method, _, _ := strings.Cut(string(req[:min(len(req), 16)]), " ")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", clip(req), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body of a %d: %v", resp.StatusCode, err)
	}
	return &apitest.Response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}
