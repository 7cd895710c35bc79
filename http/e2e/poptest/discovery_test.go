package poptest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// TestPop_DiscoveryRequiresNamespaceOrTask: the discovery route with neither
// namespace nor task answers 400 with exactly
// {"success":false,"error":"namespace or task is required","messages":[]}.
func TestPop_DiscoveryRequiresNamespaceOrTask(t *testing.T) {
	t.Parallel()
	s := shared(t)
	const want = `{"success":false,"error":"namespace or task is required","messages":[]}`
	for _, path := range []string{
		e2e.PopDiscovery(),
		e2e.PopDiscovery("namespace", "", "task", ""),
		e2e.PopDiscovery("consumerGroup", "g", "batch", "10", "wait", "true", "timeout", "10000"),
	} {
		r := s.TryPop(t, path)
		if r.Status != 400 || string(r.Body) != want {
			t.Fatalf("GET %s: %d %q, want 400 %s", path, r.Status, r.Body, want)
		}
		if r.Elapsed >= atOnce {
			t.Fatalf("GET %s: answered after %v", path, r.Elapsed)
		}
	}
}

// TestPop_DiscoveryScope: the discovery route serves the queues of its scope
// (namespace, task or both, as derived from dotted names) and only them; its
// top-level queue is "".
func TestPop_DiscoveryScope(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "disc")
	other := e2e.Unique(t, "disc-other")
	inBoth := ns + ".alpha.q"
	inNs := ns + ".beta.q"
	outside := other + ".alpha.q"
	txBoth, txNs := s.PushN(t, inBoth, "p", 1).TxIDs(), s.PushN(t, inNs, "p", 1).TxIDs()
	s.PushN(t, outside, "p", 1)

	p := s.PopOK(t, e2e.PopDiscovery("namespace", ns, "consumerGroup", "ns", "batch", "10", "partitions", "0"))
	if p.Queue != "" {
		t.Fatalf("top-level queue %q on the discovery route, want \"\"", p.Queue)
	}
	got := map[string]bool{}
	for _, tx := range p.TxIDs() {
		got[tx] = true
	}
	if len(p.Messages) != 2 || !got[txBoth[0]] || !got[txNs[0]] {
		t.Fatalf("namespace %s: delivered %v, want %v and %v", ns, p.TxIDs(), txBoth, txNs)
	}
	e2e.WantTxIDs(t, "namespace and task",
		s.PopOK(t, e2e.PopDiscovery("namespace", ns, "task", "alpha", "consumerGroup", "both", "batch", "10",
			"partitions", "0")), txBoth)
	s.PopEmpty(t, e2e.PopDiscovery("namespace", ns, "task", "gamma", "consumerGroup", "none"))
}

// TestPop_DiscoveryByTaskOnly: task alone is a scope of its own.
func TestPop_DiscoveryByTaskOnly(t *testing.T) {
	t.Parallel()
	s := shared(t)
	task := e2e.Unique(t, "task")
	q := e2e.Unique(t, "taskns") + "." + task + ".q"
	txs := s.PushN(t, q, "p", 2).TxIDs()
	p := s.PopOK(t, e2e.PopDiscovery("task", task, "consumerGroup", "g", "batch", "10"))
	e2e.WantTxIDs(t, "task "+task, p, txs)
	if p.Queue != "" {
		t.Fatalf("top-level queue %q, want \"\"", p.Queue)
	}
}

// TestPop_DiscoveryServesHigherPriorityFirst: queues with a higher priority
// (configure options.priority) are served first.
func TestPop_DiscoveryServesHigherPriorityFirst(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "prio")
	low, mid, high := ns+".t.low", ns+".t.mid", ns+".t.high"
	s.Configure(t, low, map[string]any{"priority": 1})
	s.Configure(t, mid, map[string]any{"priority": 5})
	s.Configure(t, high, map[string]any{"priority": 10})
	// Pushed lowest priority first, so neither age nor name order helps.
	txLow := s.PushN(t, low, "Default", 2).TxIDs()
	txMid := s.PushN(t, mid, "Default", 2).TxIDs()
	txHigh := s.PushN(t, high, "Default", 2).TxIDs()
	want := slices.Concat(txHigh, txMid, txLow)
	var got []string
	for range want {
		p := s.PopOK(t, e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "batch", "1", "autoAck", "true"))
		got = append(got, p.TxIDs()...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("served %v, want high, mid, low: %v", got, want)
	}
	// One pop with a budget spanning queues starts with the highest.
	p := s.PopOK(t, e2e.PopDiscovery("namespace", ns, "consumerGroup", "h", "batch", "3", "partitions", "0"))
	e2e.WantTxIDs(t, "batch=3 across queues", p, slices.Concat(txHigh, txMid[:1]))
}

// TestPop_UnknownQueueCreatesQueueRow: a queue-scoped pop on a queue that does
// not exist creates its queen.queues row (column defaults, lease_time 60,
// namespace and task derived from the dotted name) and answers 204; on both
// queue-scoped routes.
func TestPop_UnknownQueueCreatesQueueRow(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "unknown")
	for _, tc := range []struct{ name, queue, path, ns, task string }{
		{"wildcard", ns + ".wtask.orders", "", ns, "wtask"},
		{"single", ns + ".stask.orders.v2", "", ns, "stask"},
		{"wildcard, no dot", ns + "-plain", "", ns + "-plain", ""},
		{"single, one dot", ns + ".only", "", ns, "only"},
	} {
		path := e2e.PopQueue(tc.queue)
		if tc.name[:6] == "single" {
			path = e2e.PopPartition(tc.queue, "some-partition")
		}
		if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.queues WHERE name = $1`, tc.queue); n != 0 {
			t.Fatalf("%s exists before the pop", tc.queue)
		}
		s.PopEmpty(t, path)
		var (
			namespace, task                             string
			lease, retryLimit, retryDelay, prio, window int
			delayed, minPop                             int
		)
		err := e2e.DB.QueryRow(`SELECT namespace, task, lease_time, retry_limit, retry_delay, priority,
       window_buffer, delayed_processing, min_pop_wait_time FROM queen.queues WHERE name = $1`, []any{tc.queue},
			&namespace, &task, &lease, &retryLimit, &retryDelay, &prio, &window, &delayed, &minPop)
		if err != nil {
			t.Fatalf("%s: the pop on %s left no queen.queues row: %v", tc.name, tc.queue, err)
		}
		if namespace != tc.ns || task != tc.task || lease != 60 || retryLimit != 3 || retryDelay != 1000 ||
			prio != 0 || window != 0 || delayed != 0 || minPop != 0 {
			t.Fatalf("%s: row %q/%q lease %d retry %d/%d priority %d window %d delayed %d minPop %d; want %q/%q, column defaults",
				tc.name, namespace, task, lease, retryLimit, retryDelay, prio, window, delayed, minPop, tc.ns, tc.task)
		}
		// A second pop on it is an ordinary empty pop.
		s.PopEmpty(t, path)
	}
}

// TestPop_DiscoveryReadsItsOwnWrites: a discovery pop that starts after a
// push to a queue new to its scope was answered sees that push, whether the
// push went to the same broker process (its scope's list of queues was read
// a moment before the queue existed) or to another one on the database.
func TestPop_DiscoveryReadsItsOwnWrites(t *testing.T) {
	t.Parallel()
	db := e2e.CreateDB(t, "discrw")
	a := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: []string{"DB_POOL_SIZE=3"}})
	b := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: []string{"DB_POOL_SIZE=3"}})
	for _, c := range []struct {
		name   string
		pushTo *e2e.Server
		tries  int
	}{{"same process", a, 20}, {"another process", b, 5}} {
		t.Run(c.name, func(t *testing.T) {
			ns := e2e.Unique(t, "rw")
			for i := range c.tries {
				// The scope reads its queues now, before the new queue exists.
				a.PopEmpty(t, e2e.PopDiscovery("namespace", ns, "consumerGroup", "g"))
				q := fmt.Sprintf("%s.t%d", ns, i)
				tx := c.pushTo.PushN(t, q, "", 1).TxIDs()
				p := a.Pop(t, e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "wait", "false"))
				if p == nil {
					t.Fatalf("try %d: the pop after the push to new queue %s answered 204", i, q)
				}
				e2e.WantTxIDs(t, "the pop after the push", p, tx)
			}
		})
	}
}
