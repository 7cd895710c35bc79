// Package messagetest holds the black-box HTTP tests of the message routes
// (docs/api-admin.md "Messages", including the routes the SDKs call that the reference lacks):
// the message list with its per-group statuses (D10), delete as a tombstone
// (skipped at delivery, resolved for every group), retry and move to the
// dead-letter queue.
//
// Every test shares one lazily started broker on the package database.
package messagetest

import (
	"net/url"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "message") }

func shared(t testing.TB) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "DB_POOL_SIZE=8")
}

type entry struct {
	ID            string  `json:"id"`
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	QueuePath     string  `json:"queuePath"`
	Queue         string  `json:"queue"`
	Partition     string  `json:"partition"`
	Namespace     string  `json:"namespace"`
	Task          string  `json:"task"`
	Status        string  `json:"status"`
	QueueStatus   *string `json:"queueStatus"`
	BusStatus     struct {
		ConsumedBy  int `json:"consumedBy"`
		TotalGroups int `json:"totalGroups"`
	} `json:"busStatus"`
	TraceID        *string `json:"traceId"`
	ProducerSub    *string `json:"producerSub"`
	QueuePriority  int     `json:"queuePriority"`
	CreatedAt      string  `json:"createdAt"`
	LeaseExpiresAt *string `json:"leaseExpiresAt"`
}

type list struct {
	Messages []entry `json:"messages"`
	Mode     struct {
		HasQueueMode   bool   `json:"hasQueueMode"`
		BusGroupsCount int    `json:"busGroupsCount"`
		Type           string `json:"type"`
	} `json:"mode"`
	Pagination struct {
		Limit  int `json:"limit"`
		Offset int `json:"offset"`
	} `json:"pagination"`
	Truncated bool `json:"truncated"`
}

func listMessages(t testing.TB, s *e2e.Server, pairs ...string) list {
	t.Helper()
	r := s.Get(t, "/api/v1/messages"+e2e.Query(pairs...))
	if r.Status != 200 {
		t.Fatalf("GET /api/v1/messages%s: %d %s", e2e.Query(pairs...), r.Status, r.Body)
	}
	var l list
	r.JSON(t, &l)
	return l
}

// txs lists the transaction ids of a page in order.
func (l list) txs() []string {
	out := make([]string, len(l.Messages))
	for i, m := range l.Messages {
		out[i] = m.TransactionID
	}
	return out
}

func messagePath(pid, tx string) string {
	return "/api/v1/messages/" + pid + "/" + url.PathEscape(tx)
}

// reversed returns txs newest first.
func reversed(txs []string) []string {
	out := make([]string, len(txs))
	for i, tx := range txs {
		out[len(txs)-1-i] = tx
	}
	return out
}
