package poptest

import (
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// TestD6_SubscriptionRouteRewritesDurableRecord: POST
// /api/v1/consumer-groups/:group/subscription rewrites the group's durable
// record; partitions the group has not contacted yet then start after the
// last segment created before the new time, whatever a later pop carries,
// and cursors that exist do not move.
func TestD6_SubscriptionRouteRewritesDurableRecord(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "subroute")
	g := e2e.Unique(t, "g")
	s.PushN(t, q, "a", 1)
	// The group's first pop carries a mode: its durable record says new.
	s.PopEmpty(t, e2e.PopPartition(q, "a", "consumerGroup", g, "subscriptionMode", "new"))
	s.PushN(t, q, "b", 2).TxIDs() // b: written before the new subscription time
	cut := time.Now().UTC()
	time.Sleep(20 * time.Millisecond)
	b2 := s.PushN(t, q, "b", 1).TxIDs()

	r := s.Post(t, "/api/v1/consumer-groups/"+g+"/subscription", map[string]any{"subscriptionTimestamp": cut.Format(time.RFC3339Nano)})
	if r.Status != 200 {
		t.Fatalf("subscription: %d %s", r.Status, r.Body)
	}
	var res struct {
		Success       bool   `json:"success"`
		ConsumerGroup string `json:"consumerGroup"`
		NewTimestamp  string `json:"newTimestamp"`
		RowsUpdated   int    `json:"rowsUpdated"`
	}
	r.JSON(t, &res)
	if !res.Success || res.ConsumerGroup != g || res.RowsUpdated != 1 || res.NewTimestamp == "" {
		t.Fatalf("answer %+v, want success for %s with one record", res, g)
	}
	if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.subscriptions s JOIN queen.queues q ON q.id = s.queue_id
 WHERE q.name = $1 AND s.consumer_group = $2 AND s.mode = 'timestamp'`, q, g); n != 1 {
		t.Fatalf("%d timestamp records, want 1", n)
	}
	// b was never contacted: it starts after the cut, even for a pop that
	// asks for all; a's cursor existed (seeded at its head) and stays put.
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", g, "subscriptionMode", "all", "batch", "10", "partitions", "0",
		"autoAck", "true"))
	e2e.WantTxIDs(t, "after the rewritten subscription", p, b2)
}

// TestD6_SubscriptionRouteBadInput: the route needs a body with an ISO-8601
// subscriptionTimestamp; anything else is a 400 {"error"} that changes
// nothing.
func TestD6_SubscriptionRouteBadInput(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, body := range []string{``, `{}`, `{"subscriptionTimestamp":null}`, `{"subscriptionTimestamp":12}`,
		`{"subscriptionTimestamp":"yesterday"}`, `{"subscriptionTimestamp":`} {
		r := s.Do(t, "POST", "/api/v1/consumer-groups/g/subscription", body)
		if r.Status != 400 || !strings.Contains(string(r.Body), `"error"`) {
			t.Errorf("body %q: %d %s, want 400 {\"error\":...}", body, r.Status, r.Body)
		}
	}
}

// TestD6_SubscriptionRouteUnknownGroupIs404: a group with neither a cursor
// nor a subscription record anywhere is unknown to the route, as to every
// other consumer-group route: 404 {"error":"consumer group not found"},
// and no record is written.
func TestD6_SubscriptionRouteUnknownGroupIs404(t *testing.T) {
	t.Parallel()
	s := shared(t)
	g := e2e.Unique(t, "never")
	e2e.WantError(t, s.Post(t, "/api/v1/consumer-groups/"+g+"/subscription",
		map[string]any{"subscriptionTimestamp": "2026-01-01T00:00:00Z"}), 404, "consumer group not found")
	if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.subscriptions WHERE consumer_group = $1`, g); n != 0 {
		t.Fatalf("%d records written for an unknown group", n)
	}
}

// TestD6_DefaultSubscriptionModeAndBatchFromTheEnvironment: a broker started
// with DEFAULT_SUBSCRIPTION_MODE=new and DEFAULT_BATCH_SIZE=2 (the reference
// server's variables) gives a pop that sends neither a new group's durable
// record new (the backlog is skipped) and a batch of 2; a pop that sends
// them gets what it sent.
func TestD6_DefaultSubscriptionModeAndBatchFromTheEnvironment(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t, "DEFAULT_SUBSCRIPTION_MODE=new", "DEFAULT_BATCH_SIZE=2")
	q := e2e.Unique(t, "envdefaults")
	s.PushN(t, q, "p", 3) // the backlog
	s.PopEmpty(t, e2e.PopQueue(q, "consumerGroup", "g"))
	later := s.PushN(t, q, "p", 3).TxIDs()
	e2e.WantTxIDs(t, "g after the backlog, batch 2", s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "autoAck", "true")), later[:2])
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "h", "subscriptionMode", "all", "batch", "10", "autoAck", "true"))
	if len(p.Messages) != 6 {
		t.Fatalf("a pop sending subscriptionMode=all and batch=10 got %v, want all 6", p.TxIDs())
	}
}
