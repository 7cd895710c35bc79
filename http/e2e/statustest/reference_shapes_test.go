package statustest

import (
	"context"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// The analytics routes answer in the reference server's shapes, with the
// fields its dashboard reads (issue 43): timeRange, bucketMinutes and the
// route's series.

// objects reads an array of objects at key of m.
func objects(t *testing.T, m map[string]any, key string) []map[string]any {
	t.Helper()
	a, ok := m[key].([]any)
	if !ok {
		t.Fatalf("%s is not an array: %v", key, m[key])
	}
	out := make([]map[string]any, len(a))
	for i, x := range a {
		if out[i], ok = x.(map[string]any); !ok {
			t.Fatalf("%s[%d] is not an object: %v", key, i, x)
		}
	}
	return out
}

// wantBoard checks the frame every object answer has: timeRange with the
// window asked for and bucketMinutes.
func wantBoard(t *testing.T, what string, m map[string]any, from string, bucketMinutes float64) {
	t.Helper()
	wantKeys(t, what, m, "timeRange", "bucketMinutes")
	tr, _ := m["timeRange"].(map[string]any)
	f, _ := time.Parse(time.RFC3339Nano, from)
	if tr["from"] != f.UTC().Format("2006-01-02T15:04:05.000Z") || tr["to"] == nil {
		t.Fatalf("%s: timeRange %v, want from %s", what, m["timeRange"], from)
	}
	if m["bucketMinutes"] != bucketMinutes {
		t.Fatalf("%s: bucketMinutes %v, want %v", what, m["bucketMinutes"], bucketMinutes)
	}
}

// portOf is the port a broker serves on, the end of its workerId.
func portOf(t *testing.T, s *e2e.Server) string {
	t.Helper()
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// /analytics/system-metrics: per replica (a broker process) its time
// series of {avg, min, max, last} CPU (the reference's unit, hundredths of
// a percent), memory and pool; workerId selects one replica.
func TestAnalytics_SystemMetricsInTheReferenceShape(t *testing.T) {
	t.Parallel()
	s := shared(t)
	port, _ := strconv.Atoi(portOf(t, s))
	from := since(10 * time.Minute)
	var me map[string]any
	waitFor(t, 10*time.Second, "this broker's replica with two samples", func() error {
		var m map[string]any
		getJSON(t, s, "/api/v1/analytics/system-metrics"+e2e.Query("from", from), &m)
		wantBoard(t, "system-metrics", m, from, 1)
		wantKeys(t, "system-metrics", m, "replicas", "replicaCount", "pointCount")
		replicas := objects(t, m, "replicas")
		if m["replicaCount"] != float64(len(replicas)) || num(t, m, "pointCount") < 1 {
			return errorf("replicaCount %v, pointCount %v, %d replicas", m["replicaCount"], m["pointCount"], len(replicas))
		}
		for _, r := range replicas {
			if r["port"] == float64(port) {
				me = r
			}
		}
		if me == nil {
			return errorf("no replica on port %d: %v", port, replicas)
		}
		if ts := objects(t, me, "timeSeries"); len(ts) == 0 || num(t, ts[len(ts)-1], "sampleCount") < 2 {
			return errorf("time series %v", ts)
		}
		return nil
	})
	wantKeys(t, "replica", me, "hostname", "port", "workerId", "timeSeries")
	ts := objects(t, me, "timeSeries")
	last := ts[len(ts)-1]
	wantKeys(t, "point", last, "timestamp", "sampleCount", "metrics")
	m := last["metrics"].(map[string]any)
	for _, p := range [][]string{{"cpu", "user_us"}, {"cpu", "system_us"}, {"memory", "rss_bytes"},
		{"memory", "virtual_bytes"}, {"database", "pool_size"}, {"database", "pool_idle"}, {"database", "pool_active"}} {
		wantKeys(t, p[0]+"."+p[1], m[p[0]].(map[string]any)[p[1]].(map[string]any), "avg", "min", "max", "last")
	}
	if num(t, m, "memory", "rss_bytes", "last") <= 0 || num(t, m, "database", "pool_size", "max") < 1 ||
		num(t, m, "cpu", "user_us", "max") < 0 {
		t.Fatalf("metrics %v", m)
	}
	if ss, _ := m["shared_state"].(map[string]any); ss == nil || ss["enabled"] != false || ss["queue_backoff"] == nil {
		t.Fatalf("shared_state %v", m["shared_state"])
	}
	id, _ := me["workerId"].(string)
	var one map[string]any
	getJSON(t, s, "/api/v1/analytics/system-metrics"+e2e.Query("from", from, "workerId", id), &one)
	if r := objects(t, one, "replicas"); len(r) != 1 || r[0]["workerId"] != id {
		t.Fatalf("workerId %s selects %v", id, r)
	}
}

// /analytics/worker-metrics: the requests and messages of every broker per
// bucket (newest first, with rates per second), the brokers' last minutes,
// each queue's pops over the window and the cluster's totals. On a
// database of its own, the figures are exactly the test's requests.
func TestAnalytics_WorkerMetricsInTheReferenceShape(t *testing.T) {
	t.Parallel()
	s := ownBroker(t, "workers", fastSamples...)
	from := since(time.Minute)
	// The counts are growth from the broker's first sample: wait for it.
	waitFor(t, 10*time.Second, "the broker's first sample", func() error {
		var m map[string]any
		getJSON(t, s, "/api/v1/analytics/worker-metrics"+e2e.Query("from", from), &m)
		if len(objects(t, m, "workers")) == 0 {
			return errorf("no sample yet")
		}
		return nil
	})
	q := e2e.Unique(t, "wm")
	s.Configure(t, q, map[string]any{"retryLimit": 0})
	s.PushN(t, q, "", 3)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "3", "wait", "false"))
	s.AckOK(t, p.Messages[0], "completed", "")
	s.AckOK(t, p.Messages[1], "failed", "")
	var m map[string]any
	waitFor(t, 10*time.Second, "the requests in the time series", func() error {
		getJSON(t, s, "/api/v1/analytics/worker-metrics"+e2e.Query("from", from), &m)
		ts := objects(t, m, "timeSeries")
		for k, want := range map[string]float64{"pushMessages": 3, "popMessages": 3, "ackMessages": 2, "pushRequests": 1,
			"popRequests": 1, "ackRequests": 2, "ackSuccess": 2, "ackFailed": 0, "dlqCount": 1, "dbErrors": 0} {
			if got := seriesTotal(ts, k); got != want {
				return errorf("%s sums to %v, want %v: %v", k, got, want, ts)
			}
		}
		if qs := objects(t, m, "queues"); len(qs) != 1 || qs[0]["queueName"] != q || qs[0]["popCount"] != float64(3) {
			return errorf("queues %v", qs)
		}
		return nil
	})
	wantBoard(t, "worker-metrics", m, from, 1)
	ts := objects(t, m, "timeSeries")
	if m["pointCount"] != float64(len(ts)) {
		t.Fatalf("pointCount %v, %d points", m["pointCount"], len(ts))
	}
	stamps := make([]string, len(ts))
	var perSec float64
	for i, p := range ts {
		wantKeys(t, "point", p, "timestamp", "pushPerSecond", "popPerSecond", "ackPerSecond", "avgLagMs", "maxLagMs",
			"avgFreeSlots", "dbConnections", "backoffSize", "avgEventLoopLagMs", "jobsDone")
		stamps[i] = p["timestamp"].(string)
		perSec += p["pushPerSecond"].(float64)
	}
	if !sort.IsSorted(sort.Reverse(sort.StringSlice(stamps))) {
		t.Fatalf("points not newest first: %v", stamps)
	}
	if perSec != 0.05 { // 3 messages over one-minute buckets
		t.Fatalf("pushPerSecond sums to %v, want 0.05", perSec)
	}
	workers := objects(t, m, "workers")
	if len(workers) != 1 || num(t, workers[0], "messagesProcessed") < 1 || num(t, workers[0], "dbConnections") < 1 {
		t.Fatalf("workers %v", workers)
	}
	wantKeys(t, "worker", workers[0], "hostname", "workerId", "freeSlots", "backoffSize", "lastSeen")
	sum := m["summary"].(map[string]any)
	for k, want := range map[string]float64{"totalPushMessages": 3, "totalPopMessages": 3, "totalAckMessages": 2,
		"totalPushRequests": 1, "totalPopRequests": 1, "totalAckRequests": 2, "totalAckFailed": 0, "totalDlq": 1,
		"totalDbErrors": 0, "pendingMessages": 0} {
		if sum[k] != want {
			t.Fatalf("summary %s = %v, want %v: %v", k, sum[k], want, sum)
		}
	}
}

// /analytics/queue-lag: a bare array, newest first, of each queue's pops
// and time lag per minute (the dashboard divides popCount by 60).
func TestAnalytics_QueueLagInTheReferenceShape(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "rlag")
	from := since(time.Minute)
	s.PushN(t, q, "", 4)
	s.PopOK(t, e2e.PopQueue(q, "batch", "2", "wait", "false"))
	waitFor(t, 10*time.Second, "the queue's pops and lag", func() error {
		r := s.Get(t, "/api/v1/analytics/queue-lag"+e2e.Query("queue", q, "from", from))
		var rows []map[string]any
		r.JSON(t, &rows)
		var pops, maxLag float64
		var stamps []string
		for _, row := range rows {
			wantKeys(t, "row", row, "queueName", "popCount", "avgLagMs", "maxLagMs", "bucketTime")
			if row["queueName"] != q {
				return errorf("queue filter let %v through", row["queueName"])
			}
			pops += row["popCount"].(float64)
			maxLag = max(maxLag, row["maxLagMs"].(float64))
			stamps = append(stamps, row["bucketTime"].(string))
		}
		if !sort.IsSorted(sort.Reverse(sort.StringSlice(stamps))) {
			return errorf("rows not newest first: %v", stamps)
		}
		if pops != 2 || maxLag <= 0 {
			return errorf("popCount %v, maxLagMs %v: %v", pops, maxLag, rows)
		}
		return nil
	})
}

// /analytics/queue-ops: per bucket and queue its pushes, pops and acks
// (per second too), partitions and parked long polls; an idle queue with a
// parked poll is in the series too; queues lists the series' queues.
func TestAnalytics_QueueOpsInTheReferenceShape(t *testing.T) {
	t.Parallel()
	s := shared(t)
	busy, idle := e2e.Unique(t, "ops"), e2e.Unique(t, "opsidle")
	from := since(time.Minute)
	s.PushN(t, busy, "", 5)
	p := s.PopOK(t, e2e.PopQueue(busy, "batch", "2", "wait", "false"))
	s.AckOK(t, p.Messages[0], "completed", "")
	s.Configure(t, idle, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = s.PopCtx(ctx, e2e.PopQueue(idle, "wait", "true", "timeout", "30000")) }()
	for _, q := range []string{busy, idle} {
		waitFor(t, 10*time.Second, "queue-ops of "+q, func() error {
			var m map[string]any
			getJSON(t, s, "/api/v1/analytics/queue-ops"+e2e.Query("queue", q, "from", from), &m)
			wantBoard(t, "queue-ops", m, from, 1)
			series := objects(t, m, "series")
			for _, row := range series {
				wantKeys(t, "row", row, "bucket", "queueName", "pushMessages", "popMessages", "ackSuccess", "pushPerSecond",
					"popPerSecond", "ackPerSecond", "emptyPerSecond", "partitionCount", "parkedCount", "avgLagMs", "maxLagMs",
					"transactions", "popEmpty")
				if row["queueName"] != q {
					return errorf("queue filter let %v through", row["queueName"])
				}
			}
			if qs, _ := m["queues"].([]any); len(qs) != 1 || qs[0] != q {
				return errorf("queues %v", m["queues"])
			}
			if q == busy {
				if seriesTotal(series, "pushMessages") != 5 || seriesTotal(series, "popMessages") != 2 ||
					seriesTotal(series, "ackSuccess") != 1 || seriesTotal(series, "pushPerSecond") == 0 {
					return errorf("series %v", series)
				}
				return nil
			}
			if seriesTotal(series, "parkedCount") <= 0 {
				return errorf("no parked poll in %v", series)
			}
			return nil
		})
	}
}

// /analytics/queue-parked-replicas: per bucket, queue and replica the
// average of its parked long polls; replicas lists the brokers that
// sampled.
func TestAnalytics_ParkedReplicasInTheReferenceShape(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "rpark")
	from := since(time.Minute)
	s.Configure(t, q, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = s.PopCtx(ctx, e2e.PopQueue(q, "wait", "true", "timeout", "30000")) }()
	port := ":" + portOf(t, s)
	waitFor(t, 10*time.Second, "the parked poll", func() error {
		var m map[string]any
		getJSON(t, s, "/api/v1/analytics/queue-parked-replicas"+e2e.Query("queue", q, "from", from), &m)
		wantBoard(t, "queue-parked-replicas", m, from, 1)
		replicas := objects(t, m, "replicas")
		if len(replicas) == 0 {
			return errorf("no replicas")
		}
		for _, row := range objects(t, m, "series") {
			wantKeys(t, "row", row, "bucket", "queueName", "hostname", "workerId", "parkedCount")
			id, _ := row["workerId"].(string)
			if row["queueName"] == q && strings.HasSuffix(id, port) && row["parkedCount"].(float64) > 0 {
				return nil
			}
		}
		return errorf("no row of the parked poll: %v", m["series"])
	})
}

// /analytics/retention: per bucket in which something was removed, the
// messages retention dropped and eviction dead-lettered, and their totals.
func TestAnalytics_RetentionInTheReferenceShape(t *testing.T) {
	t.Parallel()
	s := ownBroker(t, "evictions", append([]string{"EVICTION_INTERVAL=200"}, fastSamples...)...)
	q := e2e.Unique(t, "evict")
	from := since(time.Minute)
	s.Configure(t, q, map[string]any{"maxWaitTimeSeconds": 1})
	s.PushN(t, q, "", 3)
	waitFor(t, 20*time.Second, "the evicted messages", func() error {
		var m map[string]any
		getJSON(t, s, "/api/v1/analytics/retention"+e2e.Query("from", from), &m)
		wantBoard(t, "retention", m, from, 1)
		wantKeys(t, "totals", m["totals"].(map[string]any), "retentionMsgs", "completedRetentionMsgs", "evictionMsgs",
			"totalMsgs", "eventCount")
		series := objects(t, m, "series")
		for _, row := range series {
			wantKeys(t, "row", row, "bucket", "retentionMsgs", "evictionMsgs", "totalMsgs")
		}
		if seriesTotal(series, "evictionMsgs") < 3 || num(t, m, "totals", "evictionMsgs") < 3 ||
			num(t, m, "totals", "totalMsgs") < 3 {
			return errorf("series %v, totals %v", series, m["totals"])
		}
		return nil
	})
}
