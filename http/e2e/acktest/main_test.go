// Package acktest holds the black-box HTTP tests of acknowledgement, batch
// ack, lease extension, transactions, dead letters and the per-message route
// (docs/api.md "POST /api/v1/ack" to "POST /api/v1/lease/:leaseId/extend" and "Dead letters", docs/api-admin.md "Messages"; docs/rules.md D2 to D7, D10 and
// the A-*, L-*, X-*, D-* rules; issue 4). Every test is named after the rule
// it checks; where a D decision changes a reference rule, the test follows
// the decision.
//
// Every test shares one lazily started broker on the package database (none
// needs an environment of its own); e2e.Main stops it at the end. Tests
// read queen.* tables through e2e.DB to check what the HTTP answers
// cannot show (committed offsets, attempts, lease expiries).
package acktest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "ack") }

// shared returns the package's one broker (e2e.Shared).
func shared(t testing.TB) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "DB_POOL_SIZE=12")
}

// ---------------------------------------------------------------- database

// offsetOf is the offset of a transaction id in its partition.
func offsetOf(t testing.TB, partitionID, tx string) int64 {
	t.Helper()
	var off int64
	if err := e2e.DB.QueryRow(`SELECT "offset" FROM queen.txids WHERE partition_id = $1 AND transaction_id = $2`,
		[]any{partitionID, tx}, &off); err != nil {
		t.Fatalf("offset of %s: %v", tx, err)
	}
	return off
}

// failures is queen.attempts.failures of an offset (0 without a row).
func failures(t testing.TB, partitionID, group string, off int64) int {
	t.Helper()
	if group == "" {
		group = e2e.QueueMode
	}
	var n int
	if err := e2e.DB.QueryRow(`SELECT coalesce(max(failures), 0) FROM queen.attempts
 WHERE partition_id = $1 AND consumer_group = $2 AND "offset" = $3`, []any{partitionID, group, off}, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// ---------------------------------------------------------------- DLQ

// dlqEntry is one element of GET /api/v1/dlq (docs/api.md "Dead letters").
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

func listDLQ(t testing.TB, s *e2e.Server, pairs ...string) dlqList {
	t.Helper()
	r := s.Get(t, "/api/v1/dlq"+e2e.Query(pairs...))
	if r.Status != 200 {
		t.Fatalf("GET /api/v1/dlq%s: %d %s", e2e.Query(pairs...), r.Status, r.Body)
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
