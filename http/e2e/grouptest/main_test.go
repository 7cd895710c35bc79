// Package grouptest checks the consumer-group admin routes black-box
// (docs/api-admin.md, "Consumer groups"): the list, the
// lagging cursors, one group, delete (with and without its subscription
// record, on every queue or one), seek to the end or to a time (replay),
// the partition seek and the statistics report, through the requests the
// Queen SDKs' admin methods send.
package grouptest

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "grouptest") }

func shared(t *testing.T) *e2e.Server {
	t.Helper()
	return e2e.Shared(t)
}

// groupPath is /api/v1/consumer-groups/<group> plus rest, the group escaped
// as the JS SDK's encodeURIComponent does.
func groupPath(group, rest string) string {
	return "/api/v1/consumer-groups/" + url.PathEscape(group) + rest
}

// seekPath is the queue seek route of group on queue.
func seekPath(group, queue string) string {
	return groupPath(group, "/queues/"+url.PathEscape(queue)+"/seek")
}

// entry is one element of GET /api/v1/consumer-groups.
type entry struct {
	Name                  string   `json:"name"`
	Topics                []string `json:"topics"`
	QueueName             string   `json:"queueName"`
	Partitions            int      `json:"partitions"`
	Members               int      `json:"members"`
	PartitionsWithLag     int      `json:"partitionsWithLag"`
	TotalLag              *int64   `json:"totalLag"`
	MaxTimeLag            int64    `json:"maxTimeLag"`
	State                 string   `json:"state"`
	LastActivity          *string  `json:"lastActivity"`
	SubscriptionMode      *string  `json:"subscriptionMode"`
	SubscriptionTimestamp *string  `json:"subscriptionTimestamp"`
	SubscriptionCreatedAt *string  `json:"subscriptionCreatedAt"`
}

// listEntry returns the list's entry of (group, queue), nil when there is
// none, after a stats refresh. The package's tests share the broker, so it
// reads the largest page.
func listEntry(t *testing.T, s *e2e.Server, group, queue string) *entry {
	t.Helper()
	s.RefreshStats(t)
	r := s.Get(t, "/api/v1/consumer-groups?limit=10000")
	if r.Status != 200 {
		t.Fatalf("list: %d %s", r.Status, r.Body)
	}
	var list []entry
	r.JSON(t, &list)
	for i := range list {
		if list[i].Name == group && list[i].QueueName == queue {
			return &list[i]
		}
	}
	return nil
}

// age moves every segment of queue back by d, as if written d earlier.
func age(t *testing.T, queue string, d time.Duration) {
	t.Helper()
	err := e2e.DB.Exec(`UPDATE queen.segments SET created_at = created_at - make_interval(secs => $2)
 WHERE partition_id IN (SELECT p.id FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1)`,
		queue, d.Seconds())
	if err != nil {
		t.Fatal(err)
	}
}

// contact makes group's first contact with every partition of queue
// without consuming anything: a pop on the empty queue creates its cursors.
func contact(t *testing.T, s *e2e.Server, queue, group string, pairs ...string) {
	t.Helper()
	s.Configure(t, queue, nil)
	s.PopEmpty(t, e2e.PopQueue(queue, append([]string{"consumerGroup", group}, pairs...)...))
}

// consume pops and acks every message of queue for group (at most 100),
// returning their transaction ids in delivery order.
func consume(t *testing.T, s *e2e.Server, queue, group string) []string {
	t.Helper()
	var got []string
	for {
		p := s.Pop(t, e2e.PopQueue(queue, "consumerGroup", group, "batch", "100"))
		if p == nil {
			return got
		}
		items := make([]map[string]any, len(p.Messages))
		for i, m := range p.Messages {
			items[i] = e2e.AckItem(m, "completed")
			got = append(got, m.TransactionID)
		}
		s.AckBatchOK(t, group, items...)
	}
}

// decode reads a 200 answer into v.
func decode(t *testing.T, r *e2e.Response, v any) {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("not JSON (%v): %s", err, r.Body)
	}
}
