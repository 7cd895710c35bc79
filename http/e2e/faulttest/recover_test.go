package faulttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 8, defect 4: the broker's background loops outlive a freeze. After
// the thaw, a push made by another broker process wakes a long poll parked
// here at once (the LISTEN connection carried on; the poll's own re-check is
// 20 s away), and a pop maintenance switch made by another process takes
// effect here within the refresh interval (the refresh loop carried on).
func TestFrozenDatabase_BackgroundLoopsRecoverAfterThaw(t *testing.T) {
	db := e2e.CreateDB(t, "faultbg")
	a, p := startProxied(t, db, "POP_WAIT_INITIAL_INTERVAL_MS=20000", "POP_WAIT_MAX_INTERVAL_MS=20000")
	listeners := func() int64 {
		var n int64
		if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
   AND application_name = 'queengo-listener'`, nil, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := e2e.Eventually(15*time.Second, 200*time.Millisecond, func() error {
		if n := listeners(); n < 1 {
			return fmt.Errorf("%d listeners", n)
		}
		return nil
	}); err != nil {
		t.Fatalf("the proxied broker's listener: %v", err)
	}
	b, err := e2e.StartURL(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Stop()
		noRace(t, b)
	})
	bStarted := time.Now()
	q := e2e.Unique(t, "bg")
	b.Configure(t, q, nil)
	// Let the proxied broker know the queue before the freeze.
	if r := a.Pop(t, e2e.PopQueue(q, "consumerGroup", "warm", "batch", "1")); r != nil {
		t.Fatalf("pop of an empty queue: %+v", r)
	}

	// Long enough for every loop of the proxied broker to meet the freeze:
	// the maintenance refresh (every second), the peer count and the listener.
	p.Freeze()
	time.Sleep(2*requestTimeout + time.Second)
	p.Thaw()

	// The other broker counts listeners every 5 s: by now it knows of ours.
	if d := 6*time.Second - time.Since(bStarted); d > 0 {
		time.Sleep(d)
	}
	type outcome struct {
		r       *e2e.Response
		err     error
		elapsed time.Duration
	}
	poll := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		r, err := a.DoCtx(ctx, "GET", e2e.PopQueue(q, "consumerGroup", "g-wake", "batch", "1", "wait", "true",
			"timeout", "15000"), nil)
		poll <- outcome{r, err, time.Since(start)}
	}()
	time.Sleep(time.Second) // the poll finds nothing and parks
	pushed := time.Now()
	b.Push(t, e2e.PushItem{Queue: q, TransactionID: e2e.TxID("wake"), Payload: 1})
	var o outcome
	select {
	case o = <-poll:
	case <-time.After(25 * time.Second):
		t.Fatal("the long poll never answered")
	}
	if o.err != nil || o.r.Status != 200 {
		t.Fatalf("long poll after the thaw: %v %+v", o.err, o.r)
	}
	if wake := time.Since(pushed); wake > 3*time.Second {
		t.Fatalf("a push by the other broker woke the long poll here after %v, want within 3s (LISTEN lost?)", wake)
	}

	// Pop maintenance switched by another process applies here within the
	// refresh interval. A fresh group per look: a pop that is served would
	// take the message from its group.
	setMaintenance := func(on bool) {
		t.Helper()
		if err := db.Exec(`INSERT INTO queen.system_state (key, value) VALUES ('pop_maintenance_mode', jsonb_build_object('enabled', $1::boolean))
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, on); err != nil {
			t.Fatal(err)
		}
	}
	looks := 0
	look := func() int {
		looks++
		r := a.Get(t, e2e.PopQueue(q, "consumerGroup", fmt.Sprintf("g-look-%d", looks), "subscriptionMode", "all",
			"batch", "1"))
		return r.Status
	}
	setMaintenance(true)
	t.Cleanup(func() { setMaintenance(false) })
	if err := e2e.Eventually(4*time.Second, 200*time.Millisecond, func() error {
		if st := look(); st != 204 {
			return fmt.Errorf("pop answered %d", st)
		}
		return nil
	}); err != nil {
		t.Fatalf("maintenance switched on by another process: %v after 4s, want 204", err)
	}
	setMaintenance(false)
	if err := e2e.Eventually(4*time.Second, 200*time.Millisecond, func() error {
		if st := look(); st != 200 {
			return fmt.Errorf("pop answered %d", st)
		}
		return nil
	}); err != nil {
		t.Fatalf("maintenance switched off by another process: %v after 4s, want 200", err)
	}
}

// Issue 8, defect 4, with the database down rather than frozen: requests
// answer a 5xx with a JSON error at once, and the broker serves again, without
// a restart, once the database is back.
func TestCutDatabase_RequestsAnswer5xxAndRecover(t *testing.T) {
	s, p := startProxied(t, nil)
	q := e2e.Unique(t, "cut")
	s.Push(t, e2e.PushItem{Queue: q, Partition: "P", TransactionID: e2e.TxID("before"), Payload: 1})
	m := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "10"))

	p.Cut()
	for _, c := range []struct {
		name, method, path string
		body               any
	}{
		{"push", "POST", "/api/v1/push", map[string]any{"items": []e2e.PushItem{
			{Queue: q, Partition: "P", TransactionID: e2e.TxID("cut"), Payload: 2}}}},
		{"ack", "POST", "/api/v1/ack", e2e.AckBody(m.Messages[0], "completed", "g")},
		{"configure", "POST", "/api/v1/configure", map[string]any{"queue": q}},
		{"pop without wait", "GET", e2e.PopQueue(q, "consumerGroup", "g2", "batch", "1"), nil},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout+slack+5*time.Second)
		start := time.Now()
		r, err := s.DoCtx(ctx, c.method, c.path, c.body)
		el := time.Since(start)
		cancel()
		switch {
		case err != nil:
			t.Errorf("%s with the database down: %v", c.name, err)
			continue
		case el > requestTimeout+slack:
			t.Errorf("%s with the database down answered after %v", c.name, el)
		}
		if err := checkJSONError(r); err != nil {
			t.Errorf("%s with the database down: %v", c.name, err)
		}
		t.Logf("%-16s %5v %d %s", c.name, el.Round(time.Millisecond), r.Status, r.Body)
	}

	p.Restore()
	if err := e2e.Eventually(15*time.Second, 200*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := s.DoCtx(ctx, "POST", "/api/v1/ack", e2e.AckBody(m.Messages[0], "completed", "g"))
		switch {
		case err != nil:
			return err
		case r.Status != 200:
			return fmt.Errorf("%d %s", r.Status, r.Body)
		}
		return nil
	}); err != nil {
		t.Fatalf("ack after the database came back: %v", err)
	}
	s.Push(t, e2e.PushItem{Queue: q, Partition: "P", TransactionID: e2e.TxID("after"), Payload: 3})
	if p := s.Pop(t, e2e.PopQueue(q, "consumerGroup", "g2", "batch", "10")); p == nil {
		t.Fatal("pop after the database came back: 204, want messages")
	}
}
