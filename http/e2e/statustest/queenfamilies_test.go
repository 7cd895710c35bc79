package statustest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// The queen_* families issue 43 adds to /metrics/prometheus, with the
// reference server's names, types, HELP texts and labels.

// wantFamily fails unless body declares name with the reference's HELP and
// TYPE lines.
func wantFamily(t *testing.T, body []byte, name, typ, help string) {
	t.Helper()
	for _, line := range []string{"# HELP " + name + " " + help + "\n", "# TYPE " + name + " " + typ + "\n"} {
		if !strings.Contains(string(body), line) {
			t.Fatalf("no line %q in /metrics/prometheus", strings.TrimSpace(line))
		}
	}
}

// promAt reads the sample of name with labels, failing the test without
// one.
func promAt(t *testing.T, body []byte, name, labels string) float64 {
	t.Helper()
	v, ok := e2e.PromValue(body, name, labels)
	if !ok {
		t.Fatalf("no sample %s{%s}", name, labels)
	}
	return v
}

// queen_cluster_* add up the requests of every broker process on the
// database: what one broker served shows in the other's families once its
// collector sampled it (the reference's semantics, probed: an ack applied
// with status failed is a success that dead-letters, an ack of an unknown
// message a failure), and at once in its own.
func TestPrometheus_ClusterFamiliesAddUpEveryProcess(t *testing.T) {
	t.Parallel()
	db := e2e.CreateDB(t, "cluster")
	env := append([]string{"DB_POOL_SIZE=3"}, fastSamples...)
	a := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: env})
	b := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: env})
	q := e2e.Unique(t, "cluster")
	b.Configure(t, q, map[string]any{"retryLimit": 0})
	b.PushN(t, q, "", 3)
	p := b.PopOK(t, e2e.PopQueue(q, "batch", "3", "wait", "false"))
	b.AckOK(t, p.Messages[0], "completed", "")
	if r := b.AckOK(t, p.Messages[1], "failed", ""); !r.DLQ {
		t.Fatalf("a failed ack at retryLimit 0: %+v, want it dead-lettered", r)
	}
	if r := b.Ack(t, map[string]any{"transactionId": "nobody", "partitionId": p.Messages[2].PartitionID}); r.Success {
		t.Fatalf("an ack of an unknown message succeeded: %+v", r)
	}
	if r := b.Post(t, "/api/v1/transaction", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": q, "payload": map[string]any{"t": 1}}}},
	}}); r.Status != 200 {
		t.Fatalf("transaction: %d %s", r.Status, r.Body)
	}
	want := []struct {
		name, labels, help string
		v                  float64
	}{
		{"queen_cluster_push_requests_total", `scope="cluster"`, "Cumulative push HTTP requests handled across the cluster.", 1},
		{"queen_cluster_pop_requests_total", `scope="cluster"`, "Cumulative pop HTTP requests handled across the cluster.", 1},
		{"queen_cluster_ack_requests_total", `scope="cluster"`, "Cumulative ack HTTP requests handled across the cluster.", 3},
		{"queen_cluster_transactions_total", `scope="cluster"`, "Cumulative transaction calls handled across the cluster.", 1},
		{"queen_cluster_push_messages_total", `scope="cluster"`, "Cumulative messages pushed across the cluster.", 3},
		{"queen_cluster_pop_messages_total", `scope="cluster"`,
			"Cumulative messages popped across the cluster (may exceed push_messages due to consumer-group fan-out).", 3},
		{"queen_cluster_ack_messages_total", `scope="cluster"`, "Cumulative ack attempts across the cluster.", 3},
		{"queen_cluster_ack_total", `scope="cluster",result="success"`, "Cumulative acks across the cluster, by result.", 2},
		{"queen_cluster_ack_total", `scope="cluster",result="failed"`, "Cumulative acks across the cluster, by result.", 1},
		{"queen_cluster_db_errors_total", `scope="cluster"`, "Cumulative database errors observed across the cluster.", 0},
		{"queen_cluster_dlq_total", `scope="cluster"`,
			"Cumulative messages routed to the dead-letter queue across the cluster.", 1},
	}
	check := func(s *e2e.Server) error {
		body := s.Get(t, "/metrics/prometheus").Body
		for _, w := range want {
			wantFamily(t, body, w.name, "counter", w.help)
			if v := promAt(t, body, w.name, w.labels); v != w.v {
				return errorf("%s{%s} = %v, want %v", w.name, w.labels, v, w.v)
			}
		}
		return nil
	}
	if err := check(b); err != nil {
		t.Fatalf("the broker that served the requests: %v", err)
	}
	waitFor(t, 10*time.Second, "the other broker's totals", func() error { return check(a) })
}

// queen_file_buffer_db_healthy is 1 while the push buffer believes the
// database answers, 0 once a push found it unreachable, and 1 again when
// the buffer's probe reaches it.
func TestPrometheus_FileBufferDBHealthy(t *testing.T) {
	t.Parallel()
	db := e2e.CreateDB(t, "dbhealthy")
	proxy, url := e2e.StartDBProxy(t, db.URL)
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: url, Env: []string{"FILE_BUFFER_DIR=" + t.TempDir(),
		"DB_REQUEST_TIMEOUT_MS=1500", "DB_POOL_ACQUIRE_TIMEOUT_MS=1000", "DB_POOL_SIZE=3"}})
	t.Cleanup(proxy.Restore)
	healthy := func() float64 {
		body := s.Get(t, "/metrics/prometheus").Body
		wantFamily(t, body, "queen_file_buffer_db_healthy", "gauge",
			"1 if the file buffer believes the database is healthy, 0 otherwise.")
		return promAt(t, body, "queen_file_buffer_db_healthy", "")
	}
	if v := healthy(); v != 1 {
		t.Fatalf("with the database up: %v, want 1", v)
	}
	q := e2e.Unique(t, "dbh")
	proxy.Cut()
	if res := s.Push(t, e2e.PushItem{Queue: q, Payload: 1}); res[0].Status != "buffered" {
		t.Fatalf("a push with the database cut: %+v, want it buffered", res)
	}
	if v := healthy(); v != 0 {
		t.Fatalf("after a push found the database unreachable: %v, want 0", v)
	}
	proxy.Restore()
	waitFor(t, 20*time.Second, "the buffer finds the database again", func() error {
		if v := healthy(); v != 1 {
			return errorf("%v", v)
		}
		return nil
	})
}

// queen_queue_backoff_*: a long poll on an empty queue re-checks every
// POP_WAIT_INITIAL_INTERVAL_MS for POP_WAIT_BACKOFF_THRESHOLD empty checks,
// then ever less often: its group shows as backed off, its queue as a queue
// with one, at an average interval past the initial one; when the poll
// ends, they are gone.
func TestPrometheus_QueueBackoff(t *testing.T) {
	t.Parallel()
	s := ownBroker(t, "backoff", "POP_WAIT_INITIAL_INTERVAL_MS=50", "POP_WAIT_BACKOFF_THRESHOLD=1",
		"POP_WAIT_MAX_INTERVAL_MS=400")
	read := func() (groups, queues, avg float64) {
		body := s.Get(t, "/metrics/prometheus").Body
		wantFamily(t, body, "queen_queue_backoff_groups", "gauge", "Total consumer groups currently in pop-backoff across all queues.")
		wantFamily(t, body, "queen_queue_backoff_queues", "gauge", "Number of queues that have at least one consumer group in backoff.")
		wantFamily(t, body, "queen_queue_backoff_avg_interval_milliseconds", "gauge",
			"Average backoff interval across all backed-off groups, in milliseconds.")
		return promAt(t, body, "queen_queue_backoff_groups", ""), promAt(t, body, "queen_queue_backoff_queues", ""),
			promAt(t, body, "queen_queue_backoff_avg_interval_milliseconds", "")
	}
	if g, q, avg := read(); g != 0 || q != 0 || avg != 0 {
		t.Fatalf("before any long poll: %v groups, %v queues, %v ms", g, q, avg)
	}
	q := e2e.Unique(t, "backoff")
	s.Configure(t, q, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var polls sync.WaitGroup
	for _, g := range []string{"g1", "g2"} {
		polls.Go(func() { _, _ = s.PopCtx(ctx, e2e.PopQueue(q, "consumerGroup", g, "wait", "true", "timeout", "30000")) })
	}
	waitFor(t, 10*time.Second, "two groups in back-off", func() error {
		if g, qs, avg := read(); g != 2 || qs != 1 || avg <= 50 || avg > 400 {
			return errorf("%v groups, %v queues, average %v ms", g, qs, avg)
		}
		return nil
	})
	cancel()
	polls.Wait()
	waitFor(t, 10*time.Second, "no group in back-off after the polls left", func() error {
		if g, qs, avg := read(); g != 0 || qs != 0 || avg != 0 {
			return errorf("%v groups, %v queues, average %v ms", g, qs, avg)
		}
		return nil
	})
}
