package poptest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// maintenance reads or sets pop maintenance and checks the answer's shape.
func maintenance(t *testing.T, s *e2e.Server, set *bool) bool {
	t.Helper()
	var r *e2e.Response
	if set == nil {
		r = s.Get(t, "/api/v1/system/maintenance/pop")
	} else {
		r = s.Post(t, "/api/v1/system/maintenance/pop", map[string]any{"enabled": *set})
	}
	if r.Status != 200 {
		t.Fatalf("maintenance: %d %s", r.Status, r.Body)
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("maintenance: %v: %s", err, r.Body)
	}
	on, ok := m["popMaintenanceMode"].(bool)
	if _, msg := m["message"].(string); !ok || !msg || len(m) != 2 {
		t.Fatalf("maintenance answer %s, want {popMaintenanceMode, message}", r.Body)
	}
	return on
}

// TestD11_PopMaintenance: GET/POST /api/v1/system/maintenance/pop. While pop
// maintenance is on, every pop answers a bare 204: at once with wait=false,
// after parking until its timeout with wait=true (D11). The flag lives in
// PostgreSQL, so a second broker process on the same database follows it
// within about 2 s (it reads the flag every second; checked after 5 s, for
// a loaded box). Pushes keep working. (Its own database: the switch is
// process-wide.)
func TestD11_PopMaintenance(t *testing.T) {
	t.Parallel()
	const followWithin = 5 * time.Second
	db := e2e.CreateDB(t, "popmaint")
	a := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: []string{"DB_POOL_SIZE=2"}})
	b := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: []string{"DB_POOL_SIZE=2"}})
	ns := e2e.Unique(t, "maint")
	q := ns + ".t.q"
	a.PushN(t, q, "p", 2)
	on, off := true, false

	for _, bad := range []any{map[string]any{}, map[string]any{"enabled": "yes"}} {
		if r := a.Post(t, "/api/v1/system/maintenance/pop", bad); r.Status != 400 {
			t.Fatalf("POST %v: %d %s, want 400", bad, r.Status, r.Body)
		}
	}
	if maintenance(t, a, nil) || maintenance(t, b, nil) {
		t.Fatal("pop maintenance is on before anyone switched it")
	}
	if !maintenance(t, a, &on) {
		t.Fatal("POST enabled=true answered popMaintenanceMode false")
	}
	switched := time.Now()
	if !maintenance(t, a, nil) {
		t.Fatal("GET after enabling answered false")
	}
	var flag bool
	if err := db.QueryRow(`SELECT (value->>'enabled')::boolean FROM queen.system_state WHERE key = 'pop_maintenance_mode'`, nil, &flag); err != nil || !flag {
		t.Fatalf("queen.system_state pop_maintenance_mode: %v, %v; want true", flag, err)
	}

	paths := func(group string) []string {
		return []string{
			e2e.PopQueue(q, "consumerGroup", group, "batch", "10"),
			e2e.PopPartition(q, "p", "consumerGroup", group, "batch", "10"),
			e2e.PopDiscovery("namespace", ns, "consumerGroup", group, "batch", "10"),
		}
	}
	// On the broker that switched it: at once with wait=false, although
	// messages are there.
	for _, path := range paths("a") {
		if r := a.PopEmpty(t, path); r.Elapsed >= atOnce {
			t.Fatalf("%s: paused pop with wait=false answered after %v", path, r.Elapsed)
		}
	}
	// After the timeout with wait=true.
	for _, path := range paths("a-wait") {
		r := a.PopEmpty(t, path+"&wait=true&timeout=1000")
		if r.Elapsed < time.Second || r.Elapsed >= time.Second+atOnce {
			t.Fatalf("%s: paused pop with wait=true answered after %v, want at its 1000ms timeout", path, r.Elapsed)
		}
	}
	a.PushN(t, q, "p", 1).TxIDs() // pushes keep working

	// The other process follows the flag in PostgreSQL within about 2s
	// (5s: slack for a loaded box; one that never follows fails the same).
	sleepUntil(switched.Add(followWithin))
	for _, path := range paths("b") {
		b.PopEmpty(t, path)
	}
	if r := b.PopEmpty(t, paths("b-wait")[0]+"&wait=true&timeout=800"); r.Elapsed < 800*time.Millisecond {
		t.Fatalf("paused pop with wait=true on the second broker answered after %v, before its timeout", r.Elapsed)
	}

	if maintenance(t, a, &off) {
		t.Fatal("POST enabled=false answered popMaintenanceMode true")
	}
	resumed := time.Now()
	if p := a.PopOK(t, paths("a-after")[0]); len(p.Messages) != 3 {
		t.Fatalf("after maintenance on the switching broker: %v, want 3 messages", p.TxIDs())
	}
	p := b.PopUntil(t, paths("b-after")[0], followWithin, 50*time.Millisecond)
	at := time.Now()
	t.Logf("the second broker resumed %v after the switch", at.Sub(resumed))
	if len(p.Messages) != 3 {
		t.Fatalf("second broker delivered %v %v after the switch, want 3 messages", p.TxIDs(), at.Sub(resumed))
	}
	if maintenance(t, b, nil) {
		t.Fatal("GET on the second broker still says on")
	}
}

// TestD11_PopMaintenanceHoldsLongPollsAlreadyParked: a long poll parked
// before pop maintenance is switched on delivers nothing while it is on,
// though a push wakes it: it answers a bare 204 at its timeout, and the
// message waits for the first pop after maintenance. (Its own database:
// the switch is process-wide.) The pop is seen parked on the broker's live
// gauge (queengo_parked_pops), not the sampled figures: its timeout, 8 s,
// is the test's length, and a loaded machine samples late.
func TestD11_PopMaintenanceHoldsLongPollsAlreadyParked(t *testing.T) {
	t.Parallel()
	db := e2e.CreateDB(t, "popmaintpark")
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL})
	q := e2e.Unique(t, "maintpark")
	s.Configure(t, q, nil)
	ch := async(context.Background(), s, e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "8000"))
	err := e2e.Eventually(8*time.Second, 10*time.Millisecond, func() error {
		if v, _ := e2e.PromValue(s.Get(t, "/metrics/prometheus").Body, "queengo_parked_pops", ""); v != 1 {
			return fmt.Errorf("%v parked", v)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the long poll never parked: %v", err)
	}
	on, off := true, false
	maintenance(t, s, &on)
	pushed := s.PushN(t, q, "p", 1).TxIDs()
	o := await(t, ch, 20*time.Second)
	if err := o.r.Bare204(); err != nil {
		t.Fatalf("the parked pop under maintenance: %v", err)
	}
	maintenance(t, s, &off)
	if p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "g")); len(p.Messages) != 1 || p.TxIDs()[0] != pushed[0] {
		t.Fatalf("after maintenance: %v, want %v", p.TxIDs(), pushed)
	}
}
