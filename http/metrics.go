package http

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// serverMetrics are the counters of the HTTP face, registered in the
// Server's set and exported on /metrics/prometheus.
type serverMetrics struct {
	pushRequests, pushMessages, pushDuplicates, pushFailed *metrics.Counter
	popRequests, popMessages, popEmpty, popErrors          *metrics.Counter
	ackRequests, ackItems, ackFailed                       *metrics.Counter
	transactions, deadLettered                             *metrics.Counter
	cyclesCommitted, cyclesRefused                         *metrics.Counter
	cycleDuration                                          *metrics.PrometheusHistogram
	pushDuration, popDuration, ackDuration                 *metrics.PrometheusHistogram
}

func newServerMetrics(set *metrics.Set) serverMetrics {
	return serverMetrics{
		pushRequests:   set.NewCounter(`queengo_push_requests_total`),
		pushMessages:   set.NewCounter(`queengo_push_messages_total`),
		pushDuplicates: set.NewCounter(`queengo_push_duplicates_total`),
		pushFailed:     set.NewCounter(`queengo_push_failed_total`),
		popRequests:    set.NewCounter(`queengo_pop_requests_total`),
		popMessages:    set.NewCounter(`queengo_pop_messages_total`),
		popEmpty:       set.NewCounter(`queengo_pop_empty_total`),
		popErrors:      set.NewCounter(`queengo_pop_errors_total`),
		ackRequests:    set.NewCounter(`queengo_ack_requests_total`),
		ackItems:       set.NewCounter(`queengo_ack_items_total`),
		ackFailed:      set.NewCounter(`queengo_ack_item_failures_total`),
		transactions:   set.NewCounter(`queengo_transactions_total`),
		deadLettered:   set.NewCounter(`queengo_dead_lettered_messages_total`),
		// A refused cycle changed nothing: bad input, an ack that did not
		// hold, a missing query or partition, a database failure.
		cyclesCommitted: set.NewCounter(`queengo_stream_cycles_total{result="committed"}`),
		cyclesRefused:   set.NewCounter(`queengo_stream_cycles_total{result="refused"}`),
		cycleDuration:   set.NewPrometheusHistogramExt(`queengo_request_duration_seconds{route="stream_cycle"}`, secondsBuckets),
		pushDuration:    set.NewPrometheusHistogramExt(`queengo_request_duration_seconds{route="push"}`, secondsBuckets),
		popDuration:     set.NewPrometheusHistogramExt(`queengo_request_duration_seconds{route="pop"}`, secondsBuckets),
		ackDuration:     set.NewPrometheusHistogramExt(`queengo_request_duration_seconds{route="ack"}`, secondsBuckets),
	}
}

// secondsBuckets are the request latency histograms' buckets (Prometheus'
// kind, le): from half a millisecond to an hour, a long poll's longest.
var secondsBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}

// databaseErrors are the error table's entries that mean the database
// failed a request; their counts are RequestCounts.DBErrors.
var databaseErrors = []apiError{errDatabase, errRowMissing, errDatabaseNoConn, errDatabaseUnavailable,
	errDatabaseTimedOut, errPopNoConn, errPopUnavailable, errPopTimedOut, errPopFailed}

// RequestCounts reads the server's request counters, for the metrics
// collector's process rows.
func (s *Server) RequestCounts() queengo.RequestCounts {
	var db uint64
	for _, e := range databaseErrors {
		db += s.errorCounter(e.Code).Get()
	}
	m := &s.m
	return queengo.RequestCounts{
		PushRequests: m.pushRequests.Get(), PushMessages: m.pushMessages.Get(), PushDuplicates: m.pushDuplicates.Get(),
		PushFailed: m.pushFailed.Get(), PopRequests: m.popRequests.Get(), PopMessages: m.popMessages.Get(),
		PopEmpty: m.popEmpty.Get(), PopErrors: m.popErrors.Get(), AckRequests: m.ackRequests.Get(),
		AckItems: m.ackItems.Get(), AckFailed: m.ackFailed.Get(), DBErrors: db,
		Transactions: m.transactions.Get(), DeadLettered: m.deadLettered.Get(),
	}
}

// handlePrometheus writes every queengo_* family, then Queen's families
// under Queen's names (docs/api-admin.md "GET /metrics/prometheus"): the process's
// own figures live, the per-queue ones from the metrics collector's last
// sample (no database query per scrape).
func (s *Server) handlePrometheus(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("text/plain; version=0.0.4; charset=utf-8")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	s.metrics.WritePrometheus(ctx)
	metrics.WriteProcessMetrics(ctx)
	var w promWriter
	s.writeQueenFamilies(&w)
	_, _ = ctx.Write(w.Bytes())
}

// promWriter writes Prometheus text families.
type promWriter struct{ bytes.Buffer }

// family writes the HELP and TYPE lines of a family.
func (w *promWriter) family(name, typ, help string) {
	w.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

// sample writes one sample; labels alternate names and values.
func (w *promWriter) sample(name string, v float64, labels ...string) {
	w.WriteString(name)
	if len(labels) > 0 {
		w.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(labels[i] + `="` + promEscaper.Replace(labels[i+1]) + `"`)
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	w.WriteByte('\n')
}

var promEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (s *Server) writeQueenFamilies(w *promWriter) {
	p := s.broker.ProcessStats()
	total, idle, acquired := s.broker.PoolStats()
	w.family("queen_uptime_seconds", "gauge", "Seconds since the queen process started.")
	w.sample("queen_uptime_seconds", time.Since(s.started).Seconds())
	w.family("queen_cpu_user_microseconds_total", "counter", "Cumulative user CPU time consumed by the process, in microseconds.")
	w.sample("queen_cpu_user_microseconds_total", float64(p.CPUUserUs))
	w.family("queen_cpu_system_microseconds_total", "counter", "Cumulative system CPU time consumed by the process, in microseconds.")
	w.sample("queen_cpu_system_microseconds_total", float64(p.CPUSystemUs))
	w.family("queen_process_resident_memory_bytes", "gauge", "Resident set size of the queen process, in bytes.")
	w.sample("queen_process_resident_memory_bytes", float64(p.RSSBytes))
	w.family("queen_process_virtual_memory_bytes", "gauge", "Virtual memory size of the queen process, in bytes.")
	w.sample("queen_process_virtual_memory_bytes", float64(p.VirtualBytes))
	w.family("queen_db_pool_size", "gauge", "Total connections in the asynchronous Postgres pool.")
	w.sample("queen_db_pool_size", float64(total))
	w.family("queen_db_pool_idle", "gauge", "Idle connections currently available in the asynchronous Postgres pool.")
	w.sample("queen_db_pool_idle", float64(idle))
	w.family("queen_db_pool_active", "gauge", "Connections currently checked out from the asynchronous Postgres pool.")
	w.sample("queen_db_pool_active", float64(acquired))
	buffer := s.broker.BufferStats()
	w.family("queen_maintenance_mode_enabled", "gauge", "1 when push maintenance mode is active (push requests are buffered to disk), 0 otherwise.")
	w.sample("queen_maintenance_mode_enabled", boolFloat(s.broker.PushMaintenanceOn()))
	w.family("queen_file_buffer_pending", "gauge", "Push events currently buffered to disk awaiting database flush.")
	w.sample("queen_file_buffer_pending", float64(buffer.Pending))
	w.family("queen_file_buffer_failed", "gauge", "Push events that failed to flush from the file buffer.")
	w.sample("queen_file_buffer_failed", float64(buffer.Failed))
	w.family("queen_file_buffer_db_healthy", "gauge", "1 if the file buffer believes the database is healthy, 0 otherwise.")
	w.sample("queen_file_buffer_db_healthy", boolFloat(buffer.DBHealthy))
	w.family("queen_pop_maintenance_mode_enabled", "gauge", "1 when pop maintenance mode is on in this process.")
	w.sample("queen_pop_maintenance_mode_enabled", boolFloat(s.broker.PopMaintenanceOn()))
	bo := s.broker.BackoffStats()
	w.family("queen_queue_backoff_groups", "gauge", "Total consumer groups currently in pop-backoff across all queues.")
	w.sample("queen_queue_backoff_groups", float64(bo.Groups))
	w.family("queen_queue_backoff_queues", "gauge", "Number of queues that have at least one consumer group in backoff.")
	w.sample("queen_queue_backoff_queues", float64(bo.Queues))
	w.family("queen_queue_backoff_avg_interval_milliseconds", "gauge",
		"Average backoff interval across all backed-off groups, in milliseconds.")
	w.sample("queen_queue_backoff_avg_interval_milliseconds", float64(bo.AvgInterval)/float64(time.Millisecond))
	writeClusterFamilies(w, s.broker.ClusterTotals())

	snap := s.broker.MetricsSnapshot()
	if snap == nil {
		return // no sample yet
	}
	qs := slices.Clone(snap.Queues)
	slices.SortFunc(qs, func(a, b queengo.QueueRates) int { return strings.Compare(a.Figures.Name, b.Figures.Name) })
	age := time.Since(snap.At).Seconds()
	perQueue := []struct {
		name, typ, help string
		v               func(*queengo.QueueRates) float64
	}{
		{"queen_queue_push_messages_per_minute", "gauge", "Messages pushed to the queue per minute, over the last minute of samples.",
			func(q *queengo.QueueRates) float64 { return q.PushPerMinute }},
		{"queen_queue_pop_messages_per_minute", "gauge", "Messages handed out for the first time per minute, over the last minute of samples.",
			func(q *queengo.QueueRates) float64 { return q.PopPerMinute }},
		{"queen_queue_ack_per_minute", "gauge", "Messages committed (acked, dead-lettered or auto-acked) per minute, over the last minute of samples.",
			func(q *queengo.QueueRates) float64 { return q.AckPerMinute }},
		{"queen_queue_parked_consumers", "gauge", "Long polls parked on the queue in this process, at the last sample.",
			func(q *queengo.QueueRates) float64 { return float64(q.Parked) }},
		{"queen_queue_metrics_age_seconds", "gauge", "Age of the sample the queue's families come from.",
			func(*queengo.QueueRates) float64 { return age }},
		{"queen_dlq_depth_by_queue", "gauge", "Messages in DLQ per queue.",
			func(q *queengo.QueueRates) float64 { return float64(q.Figures.DeadLetters) }},
	}
	for _, f := range perQueue {
		w.family(f.name, f.typ, f.help)
		for i := range qs {
			w.sample(f.name, f.v(&qs[i]), "queue", qs[i].Figures.Name)
		}
	}
	w.family("queen_queue_pop_lag_milliseconds", "gauge",
		"Age of the queue's oldest unconsumed message (stat=max), at the last sample.")
	for i := range qs {
		w.sample("queen_queue_pop_lag_milliseconds", float64(qs[i].TimeLagMs), "queue", qs[i].Figures.Name, "stat", "max")
	}
	w.family("queen_dlq_depth", "gauge", "Messages currently sitting in the dead-letter queue.")
	w.sample("queen_dlq_depth", float64(snap.DeadLetters), "scope", "cluster")
}

// writeClusterFamilies writes the queen_cluster_* counters: every broker
// process's counts added up (queengo.ClusterTotals), under the reference's
// names, HELP and labels.
func writeClusterFamilies(w *promWriter, t queengo.ClusterTotals) {
	for _, f := range []struct {
		name, help string
		v          uint64
	}{
		{"queen_cluster_push_requests_total", "Cumulative push HTTP requests handled across the cluster.", t.PushRequests},
		{"queen_cluster_pop_requests_total", "Cumulative pop HTTP requests handled across the cluster.", t.PopRequests},
		{"queen_cluster_ack_requests_total", "Cumulative ack HTTP requests handled across the cluster.", t.AckRequests},
		{"queen_cluster_transactions_total", "Cumulative transaction calls handled across the cluster.", t.Transactions},
		{"queen_cluster_push_messages_total", "Cumulative messages pushed across the cluster.", t.PushMessages},
		{"queen_cluster_pop_messages_total",
			"Cumulative messages popped across the cluster (may exceed push_messages due to consumer-group fan-out).",
			t.PopMessages},
		{"queen_cluster_ack_messages_total", "Cumulative ack attempts across the cluster.", t.AckMessages},
	} {
		w.family(f.name, "counter", f.help)
		w.sample(f.name, float64(f.v), "scope", "cluster")
	}
	w.family("queen_cluster_ack_total", "counter", "Cumulative acks across the cluster, by result.")
	w.sample("queen_cluster_ack_total", float64(t.AckMessages-min(t.AckFailed, t.AckMessages)), "scope", "cluster",
		"result", "success")
	w.sample("queen_cluster_ack_total", float64(t.AckFailed), "scope", "cluster", "result", "failed")
	w.family("queen_cluster_db_errors_total", "counter", "Cumulative database errors observed across the cluster.")
	w.sample("queen_cluster_db_errors_total", float64(t.DBErrors), "scope", "cluster")
	w.family("queen_cluster_dlq_total", "counter", "Cumulative messages routed to the dead-letter queue across the cluster.")
	w.sample("queen_cluster_dlq_total", float64(t.DeadLettered), "scope", "cluster")
}

// handleMetrics is the JSON summary the SDKs' admin.metrics() returns. The
// rates are per second since the process started.
func (s *Server) handleMetrics(ctx *fasthttp.RequestCtx) {
	up := time.Since(s.started).Seconds()
	reqs := s.m.pushRequests.Get() + s.m.popRequests.Get() + s.m.ackRequests.Get()
	msgs := s.m.pushMessages.Get()
	p := s.broker.ProcessStats()
	total, idle, acquired := s.broker.PoolStats()
	buf := append(make([]byte, 0, 512), `{"uptime":`...)
	buf = appendFloat(buf, up)
	buf = append(buf, `,"requests":{"total":`...)
	buf = appendUint(buf, reqs)
	buf = append(buf, `,"rate":`...)
	buf = appendFloat(buf, float64(reqs)/up)
	buf = append(buf, `},"messages":{"total":`...)
	buf = appendUint(buf, msgs)
	buf = append(buf, `,"rate":`...)
	buf = appendFloat(buf, float64(msgs)/up)
	buf = append(buf, `},"database":{"poolSize":`...)
	buf = appendInt(buf, int(total))
	buf = append(buf, `,"idleConnections":`...)
	buf = appendInt(buf, int(idle))
	buf = append(buf, `,"activeConnections":`...)
	buf = appendInt(buf, int(acquired))
	// The pool does not expose how many acquires wait right now.
	buf = append(buf, `,"waitingRequests":null},"memory":{"rss":`...)
	buf = appendUint(buf, p.RSSBytes)
	buf = append(buf, `,"heapTotal":`...)
	buf = appendUint(buf, p.HeapSysBytes)
	buf = append(buf, `,"heapUsed":`...)
	buf = appendUint(buf, p.HeapAllocBytes)
	// external and arrayBuffers are Node.js's; a Go process has neither.
	buf = append(buf, `,"external":0,"arrayBuffers":0},"cpu":{"user":`...)
	buf = appendInt(buf, int(p.CPUUserUs))
	buf = append(buf, `,"system":`...)
	buf = appendInt(buf, int(p.CPUSystemUs))
	buf = append(buf, `},"goroutines":`...)
	buf = appendInt(buf, p.Goroutines)
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}
