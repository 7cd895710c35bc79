package buffertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 41, defect 2: a broker starts while PostgreSQL is unreachable (it
// used to exit within 10 ms). Until the database answers, pushes are taken
// by the push buffer (buffered), pops and acks answer a retryable 503 and
// /health says the database is disconnected; once it answers, the broker
// migrates the schema (a fresh database here: the first start of a deploy)
// and replays the buffer, and the pushes taken meanwhile are delivered.
func TestStartWithDatabaseDown_ServesAndMigratesOnceItAnswers(t *testing.T) {
	t.Parallel()
	b := &bundle{db: e2e.CreateDB(t, "bufstartdown"), dir: t.TempDir()}
	b.proxy, b.url = e2e.StartDBProxy(t, b.db.URL)
	b.proxy.Cut()
	s := b.start(t)
	q := e2e.Unique(t, "down")

	res := s.Push(t, e2e.PushItem{Queue: q, Partition: "P", TransactionID: e2e.TxID("down"), Payload: 1})
	if res[0].Status != "buffered" {
		t.Fatalf("push while the database is down: %+v, want buffered", res)
	}
	for _, c := range []struct {
		name, method, path string
		body               any
	}{
		{"pop", "GET", e2e.PopQueue(q, "consumerGroup", "g"), nil},
		{"ack", "POST", "/api/v1/ack", map[string]any{"transactionId": "x", "partitionId": "00000000-0000-0000-0000-000000000001",
			"status": "completed", "consumerGroup": "g"}},
		{"health", "GET", "/health", nil},
	} {
		r, err := s.DoCtx(context.Background(), c.method, c.path, c.body)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != 503 || r.Header.Get("Retry-After") == "" && c.name != "health" {
			t.Errorf("%s while the database is down: %d %s (Retry-After %q), want 503", c.name, r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}

	// Ready all the same: the push buffer takes the pushes.
	if r := s.Get(t, "/health/ready"); r.Status != 200 {
		t.Errorf("/health/ready while the database is down, with a buffer: %d %s", r.Status, r.Body)
	}

	b.proxy.Restore()
	if err := e2e.Eventually(20*time.Second, 100*time.Millisecond, func() error {
		if r, err := s.DoCtx(context.Background(), "GET", "/health", nil); err != nil || r.Status != 200 {
			return errors.New("/health not 200")
		}
		return nil
	}); err != nil {
		t.Fatalf("after the database came back: %v", err)
	}
	p := s.PopUntil(t, e2e.PopQueue(q, "consumerGroup", "g", "autoAck", "true"), 20*time.Second, 100*time.Millisecond)
	if len(p.Messages) != 1 {
		t.Fatalf("the buffered push after the database came back: %v", p.TxIDs())
	}
	if n := e2e.QueryInt(t, b.db, `SELECT count(*) FROM queen.schema_migrations`); n == 0 {
		t.Fatal("no migrations recorded")
	}
}
