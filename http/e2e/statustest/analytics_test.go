package statustest

import (
	"context"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

type seriesAnswer struct {
	From, To      string
	BucketSeconds int
	Series        []map[string]any
}

// With format=queengo every series route answers queengo's series, {from,
// to, bucketSeconds, series}; the default bucket is whole minutes, and the
// process series have this broker's rows.
func TestAnalytics_SeriesShapes(t *testing.T) {
	t.Parallel()
	s := shared(t)
	from := since(10 * time.Minute)
	waitFor(t, 10*time.Second, "process series", func() error {
		for _, c := range []struct {
			route string
			keys  []string
			rows  bool
		}{
			{"system-metrics", []string{"timestamp", "instances", "cpuPercent", "rssBytes", "goroutines", "poolTotal"}, true},
			{"worker-metrics", []string{"timestamp", "workerId", "hostname", "pid", "pushRequests", "popRequests", "ackRequests"}, true},
			{"queue-lag", nil, false},
			{"queue-ops", nil, false},
			{"queue-parked-replicas", nil, false},
			{"retention", []string{"timestamp", "droppedSegments", "droppedMessages", "evictedMessages", "removedPartitions"}, true},
		} {
			var r seriesAnswer
			getJSON(t, s, "/api/v1/analytics/"+c.route+"?format=queengo&from="+from, &r)
			if r.From == "" || r.To == "" || r.BucketSeconds != 60 || r.Series == nil {
				return errorf("%s: %+v", c.route, r)
			}
			if c.rows && len(r.Series) == 0 {
				return errorf("%s: no points", c.route)
			}
			for _, p := range r.Series {
				for _, k := range c.keys {
					if _, ok := p[k]; !ok {
						return errorf("%s: point without %s: %v", c.route, k, p)
					}
				}
			}
		}
		return nil
	})
}

// /analytics/worker-metrics filters by workerId and hostname.
func TestAnalytics_WorkerMetricsFilters(t *testing.T) {
	t.Parallel()
	s := shared(t)
	from := since(10 * time.Minute)
	var r seriesAnswer
	waitFor(t, 10*time.Second, "worker points", func() error {
		getJSON(t, s, "/api/v1/analytics/worker-metrics?format=queengo&from="+from, &r)
		if len(r.Series) == 0 {
			return errorf("no points")
		}
		return nil
	})
	id, _ := r.Series[0]["workerId"].(string)
	host, _ := r.Series[0]["hostname"].(string)
	getJSON(t, s, "/api/v1/analytics/worker-metrics"+e2e.Query("format", "queengo", "from", from, "workerId", id, "hostname", host), &r)
	for _, p := range r.Series {
		if p["workerId"] != id {
			t.Fatalf("workerId filter let %v through", p["workerId"])
		}
	}
	if len(r.Series) == 0 {
		t.Fatal("the worker's own id filtered everything out")
	}
	getJSON(t, s, "/api/v1/analytics/worker-metrics"+e2e.Query("format", "queengo", "from", from, "workerId", "nobody:1"), &r)
	if len(r.Series) != 0 {
		t.Fatalf("unknown worker: %v", r.Series)
	}
}

// /analytics/queue-lag: a queue with unconsumed messages shows its offset
// lag and a time lag that grows.
func TestAnalytics_QueueLagOfABacklog(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "lag")
	s.PushN(t, q, "", 4)
	waitFor(t, 10*time.Second, "lag sampled", func() error {
		var r seriesAnswer
		getJSON(t, s, "/api/v1/analytics/queue-lag"+e2e.Query("format", "queengo", "queue", q, "from", since(time.Minute), "bucketSeconds", "1"), &r)
		for _, p := range r.Series {
			if p["offsetLag"] == float64(4) && p["pending"] == float64(4) && p["maxLagMs"].(float64) > 0 {
				return nil
			}
		}
		return errorf("no point with offsetLag 4 and a time lag: %v", r.Series)
	})
}

// /analytics/queue-parked-replicas: a long poll parked on a queue shows as
// one parked pop on one replica.
func TestAnalytics_ParkedReplicas(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "park")
	s.Configure(t, q, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = s.PopCtx(ctx, e2e.PopQueue(q, "wait", "true", "timeout", "30000")) }()
	waitFor(t, 10*time.Second, "parked pop sampled", func() error {
		var r seriesAnswer
		getJSON(t, s, "/api/v1/analytics/queue-parked-replicas"+e2e.Query("format", "queengo", "queue", q, "from", since(time.Minute), "bucketSeconds", "1"), &r)
		for _, p := range r.Series {
			if p["queue"] != q {
				return errorf("queue filter let %v through", p["queue"])
			}
			if p["parked"] == float64(1) && p["replicas"] == float64(1) {
				return nil
			}
		}
		return errorf("no point with the parked pop: %v", r.Series)
	})
}

// /analytics/postgres-stats: the live statistics of the database.
func TestAnalytics_PostgresStats(t *testing.T) {
	t.Parallel()
	s := shared(t)
	var m map[string]any
	getJSON(t, s, "/api/v1/analytics/postgres-stats", &m)
	wantKeys(t, "postgres stats", m, "database", "serverVersion", "databaseSizeBytes", "stats", "cacheHitRatio", "connections", "tables")
	var version string
	if err := e2e.DB.QueryRow("SHOW server_version", nil, &version); err != nil {
		t.Fatal(err)
	}
	if m["database"] != e2e.DB.Name || m["serverVersion"] != version || num(t, m, "databaseSizeBytes") <= 0 {
		t.Fatalf("postgres stats %v", m)
	}
	tables := m["tables"].([]any)
	found := false
	for _, x := range tables {
		if x.(map[string]any)["table"] == "metrics_samples" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no metrics_samples among %v", tables)
	}
}

// Without a queue filter the queue series read the row of every queue
// together: a queue's pushes count in it, and a point says how many queues
// it covers.
func TestQueueOps_AllQueuesTogether(t *testing.T) {
	t.Parallel()
	s := shared(t)
	from := since(time.Minute)
	s.PushN(t, e2e.Unique(t, "all"), "", 7)
	waitFor(t, 10*time.Second, "the pushes in the series of every queue", func() error {
		var r seriesAnswer
		getJSON(t, s, "/api/v1/analytics/queue-ops"+e2e.Query("format", "queengo", "from", from, "bucketSeconds", "1"), &r)
		if got := seriesTotal(r.Series, "ingested"); got < 7 {
			return errorf("ingested %v, want at least 7", got)
		}
		for _, p := range r.Series {
			if p["queues"].(float64) >= 1 {
				return nil
			}
		}
		return errorf("no point covers a queue: %v", r.Series)
	})
}
