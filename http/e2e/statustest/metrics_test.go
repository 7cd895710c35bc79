package statustest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// The collector samples every METRICS_SAMPLE_INTERVAL_MS: the queue's rows
// land in queen.metrics_samples, and the ingest rate of the series follows
// the pushes (30 messages pushed, 30 counted, over buckets of a second).
func TestCollector_SamplesLandAndRatesFollowPushes(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "rate")
	from := since(time.Minute)
	for range 3 {
		s.PushN(t, q, "", 10)
	}
	waitFor(t, 10*time.Second, "30 messages in the queue-ops series", func() error {
		var r struct {
			From, To      string
			BucketSeconds int
			Series        []map[string]any
		}
		getJSON(t, s, "/api/v1/analytics/queue-ops"+e2e.Query("format", "queengo", "queue", q, "from", from, "bucketSeconds", "1"), &r)
		if r.BucketSeconds != 1 || r.From == "" || r.To == "" {
			return errorf("%+v", r)
		}
		if got := seriesTotal(r.Series, "ingested"); got != 30 {
			return errorf("ingested %v, want 30", got)
		}
		var perSec float64
		for _, p := range r.Series {
			perSec += p["ingestedPerSecond"].(float64)
		}
		if perSec != 30 {
			return errorf("ingestedPerSecond sums to %v over 1 s buckets, want 30", perSec)
		}
		return nil
	})
	n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.metrics_samples m JOIN queen.queues q ON q.id = m.queue_id
 WHERE q.name = $1 AND (m.figures->>'pushed')::bigint = 30`, q)
	if n == 0 {
		t.Fatal("no sample with the 30 pushes in queen.metrics_samples")
	}
	if e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.metrics_samples WHERE queue_id IS NULL`) == 0 {
		t.Fatal("no process rows")
	}
}

// Samples older than METRICS_RETENTION_DAYS are deleted by the collector;
// recent ones stay. Old rows are written directly into the database.
func TestCollector_DeletesSamplesPastRetention(t *testing.T) {
	t.Parallel()
	s := shared(t)
	inst := e2e.Unique(t, "old-instance")
	if err := e2e.DB.Exec(`INSERT INTO queen.metrics_samples (sampled_at, instance, queue_id, figures)
SELECT now() - interval '8 days' - make_interval(secs => g), $1, NULL::uuid, '{}'::jsonb FROM generate_series(1, 50) g
UNION ALL SELECT now() - interval '6 days', $1, NULL::uuid, '{}'::jsonb`, inst); err != nil {
		t.Fatal(err)
	}
	s.PushN(t, e2e.Unique(t, "tick"), "", 1)
	waitFor(t, 10*time.Second, "old samples deleted", func() error {
		if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.metrics_samples WHERE instance = $1
 AND sampled_at < now() - interval '7 days'`, inst); n != 0 {
			return errorf("%d old samples left", n)
		}
		return nil
	})
	if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.metrics_samples WHERE instance = $1`, inst); n != 1 {
		t.Fatalf("%d samples of the instance left, want the recent 1", n)
	}
}

// /metrics/prometheus keeps the queengo_* families and adds Queen's, with
// per-queue labels from the collector's samples: after pushes, the queue's
// push rate is above 0; after a dead letter, its DLQ depth is 1; a parked
// long poll shows as a parked consumer.
func TestPrometheus_QueenFamiliesPerQueue(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "prom")
	s.Configure(t, q, map[string]any{"retryLimit": 0})
	s.PushN(t, q, "", 5)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "1", "wait", "false"))
	s.AckOK(t, p.Messages[0], "failed", "")
	parked := e2e.Unique(t, "parked")
	s.Configure(t, parked, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = s.PopCtx(ctx, e2e.PopQueue(parked, "wait", "true", "timeout", "30000")) }()
	label := `queue="` + q + `"`
	waitFor(t, 15*time.Second, "Queen's per-queue families", func() error {
		r := s.Get(t, "/metrics/prometheus")
		if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
			return errorf("status %d, type %s", r.Status, r.Header.Get("Content-Type"))
		}
		for _, name := range []string{"queengo_push_requests_total", "queen_uptime_seconds", "queen_cpu_user_microseconds_total",
			"queen_process_resident_memory_bytes", "queen_db_pool_size", "queen_db_pool_idle", "queen_db_pool_active",
			"queen_maintenance_mode_enabled", "queen_pop_maintenance_mode_enabled"} {
			if _, ok := e2e.PromValue(r.Body, name, ""); !ok {
				return errorf("no %s", name)
			}
		}
		if _, ok := e2e.PromValue(r.Body, "queen_dlq_depth", `scope="cluster"`); !ok {
			return errorf("no queen_dlq_depth{scope=\"cluster\"}")
		}
		if v, _ := e2e.PromValue(r.Body, "queen_queue_push_messages_per_minute", label); v <= 0 {
			return errorf("push rate %v", v)
		}
		if v, _ := e2e.PromValue(r.Body, "queen_queue_ack_per_minute", label); v <= 0 {
			return errorf("ack rate %v", v)
		}
		if v, ok := e2e.PromValue(r.Body, "queen_queue_pop_messages_per_minute", label); !ok || v <= 0 {
			return errorf("pop rate %v", v)
		}
		if v, ok := e2e.PromValue(r.Body, "queen_queue_pop_lag_milliseconds", label+`,stat="max"`); !ok || v <= 0 {
			return errorf("lag %v %v", v, ok)
		}
		if v, _ := e2e.PromValue(r.Body, "queen_dlq_depth_by_queue", label); v != 1 {
			return errorf("dlq depth %v", v)
		}
		if v, _ := e2e.PromValue(r.Body, "queen_queue_parked_consumers", `queue="`+parked+`"`); v != 1 {
			return errorf("parked %v", v)
		}
		if _, ok := e2e.PromValue(r.Body, "queen_queue_metrics_age_seconds", label); !ok {
			return errorf("no metrics age")
		}
		return nil
	})
}

// /metrics keeps its shape with real values.
func TestMetricsJSON_RealValues(t *testing.T) {
	t.Parallel()
	s := shared(t)
	s.PushN(t, e2e.Unique(t, "mj"), "", 2)
	var m map[string]any
	getJSON(t, s, "/metrics", &m)
	wantKeys(t, "metrics", m, "uptime", "requests", "messages", "database", "memory", "cpu")
	wantKeys(t, "database", m["database"].(map[string]any), "poolSize", "idleConnections", "waitingRequests")
	wantKeys(t, "memory", m["memory"].(map[string]any), "rss", "heapTotal", "heapUsed", "external", "arrayBuffers")
	if num(t, m, "uptime") <= 0 || num(t, m, "requests", "total") < 1 || num(t, m, "messages", "total") < 2 ||
		num(t, m, "memory", "rss") <= 0 || num(t, m, "memory", "heapUsed") <= 0 || num(t, m, "cpu", "user") <= 0 ||
		num(t, m, "database", "poolSize") < 1 {
		t.Fatalf("metrics %v", m)
	}
}

// /metrics/prometheus histograms are Prometheus' kind (cumulative `le`
// buckets, `_sum`, `_count`), so histogram_quantile works on them: after a
// push and a pop, the push latency histogram's +Inf bucket counts every
// push and equals its _count, and the claim rounds' sizes have le buckets.
func TestPrometheus_HistogramsHaveLeBuckets(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "hist")
	s.PushN(t, q, "", 1)
	s.PopOK(t, e2e.PopQueue(q, "autoAck", "true")) // a claim round
	r := s.Get(t, "/metrics/prometheus")
	if strings.Contains(string(r.Body), "vmrange") {
		t.Fatal("a histogram with vmrange buckets, which Prometheus cannot read")
	}
	inf, ok := e2e.PromValue(r.Body, "queengo_request_duration_seconds_bucket", `route="push",le="+Inf"`)
	count, _ := e2e.PromValue(r.Body, "queengo_request_duration_seconds_count", `route="push"`)
	if !ok || inf < 1 || inf != count {
		t.Fatalf("push latency: +Inf bucket %v (%v), count %v", inf, ok, count)
	}
	if _, ok := e2e.PromValue(r.Body, "queengo_claim_round_pops_bucket", `le="10000"`); !ok {
		t.Fatal("no le bucket of queengo_claim_round_pops")
	}
}
