package app

import (
	"log/slog"
	"strings"
)

// ignoredVar is a reference server's variable set in the environment that
// queengo does not read, and why.
type ignoredVar struct{ name, why string }

// referenceIgnored are the reference server's variables that tune parts
// queengo does not have (its engine, threads, sidecar pool, UDP peers),
// each with the reason an operator reads in the log. The names are the
// ones its binary reads (docs/operations.md "The reference server's
// variables").
var referenceIgnored = []struct {
	names []string
	why   string
}{
	{[]string{"NUM_WORKERS", "UV_THREADPOOL_SIZE", "UV_USE_IO_URING"},
		"no worker threads or event loops to size: one Go process uses every core (GOMAXPROCS)"},
	{[]string{"WORKER_ID"}, "a process is named by its host and port (metrics instance, system routes)"},
	{[]string{"WEBAPP_ROOT"}, "the dashboard is built into the binary"},
	{[]string{"UWS_HTTP_MAX_HEADERS_SIZE"}, "uWebSockets' limit; queengo's HTTP server has its own"},
	{[]string{"DB_THREAD_POOL_SERVICE_THREADS"}, "background jobs run on goroutines, not a thread pool"},
	{[]string{"SIDECAR_POOL_SIZE"},
		"no sidecar pool: push, pop and ack use the one pool of DB_POOL_SIZE connections; give it what the two pools had, if PostgreSQL's max_connections allows"},
	{[]string{"SIDECAR_MICRO_BATCH_WAIT_MS", "SIDECAR_MAX_ITEMS_PER_TX", "SIDECAR_MAX_BATCH_SIZE", "SIDECAR_MAX_PENDING_COUNT"},
		"no sidecar micro-batching: requests that arrive together share a statement without waiting"},
	{[]string{"RESPONSE_TIMER_INTERVAL_MS", "RESPONSE_BATCH_SIZE", "RESPONSE_BATCH_MAX"},
		"no response queue: a request's goroutine writes its own answer"},
	{[]string{"LIBQUEEN_INFLIGHT_DEADLINE_MS"}, "no libqueen: DB_REQUEST_TIMEOUT_MS bounds a request's database work"},
	{append([]string{"QUEEN_CONCURRENCY_MODE", "QUEEN_VEGAS_MIN_LIMIT", "QUEEN_VEGAS_MAX_LIMIT", "QUEEN_VEGAS_ALPHA",
		"QUEEN_VEGAS_BETA", "QUEEN_VEGAS_RTT_WINDOW_SAMPLES", "QUEEN_VEGAS_RTT_MIN_WINDOW_SEC",
		"QUEEN_VEGAS_UPDATE_INTERVAL_MS"}, operationTuning()...),
		"no adaptive concurrency limit or per-operation batching: DB_POOL_SIZE and DB_POOL_ACQUIRE_TIMEOUT_MS bound the load"},
	{[]string{"QUEUE_BACKOFF_CLEANUP_THRESHOLD"}, "long-poll back-off state goes with the idle queue's actor"},
	{[]string{"METRICS_AGGREGATE_INTERVAL_S"}, "the collector writes every sample (METRICS_SAMPLE_INTERVAL_MS); nothing is aggregated in memory"},
	{[]string{"STATS_INTERVAL_MS", "STATS_RECONCILE_INTERVAL_MS"},
		"no statistics tables to refresh or reconcile: the status and analytics routes count live from the partitions and cursors"},
	{[]string{"STATS_HISTORY_RETENTION_DAYS"}, "queue history is the metrics collector's samples, kept METRICS_RETENTION_DAYS days"},
	{[]string{"PARTITION_LOOKUP_RECONCILE_INTERVAL_MS", "PARTITION_LOOKUP_RECONCILE_LOOKBACK_SECONDS"},
		"no partition lookup table to reconcile: a discovery pop reads the partitions themselves"},
	{[]string{"QUEEN_UDP_PEERS", "QUEEN_UDP_NOTIFY_PORT"}, "processes wake each other's long polls through PostgreSQL LISTEN/NOTIFY"},
	{[]string{"QUEEN_SYNC_ENABLED", "QUEEN_SYNC_SECRET", "QUEEN_SYNC_HEARTBEAT_MS", "QUEEN_SYNC_DEAD_THRESHOLD_MS",
		"QUEEN_SYNC_RECV_BUFFER_MB", "QUEEN_CACHE_PARTITION_MAX", "QUEEN_CACHE_PARTITION_TTL_MS", "QUEEN_CACHE_REFRESH_INTERVAL_MS"},
		"state is shared through PostgreSQL, not a UDP cache (GET /api/v1/system/shared-state)"},
}

// operationTuning are the reference's per-operation tuning names,
// QUEEN_<operation>_<setting>.
func operationTuning() []string {
	var out []string
	for _, op := range []string{"PUSH", "POP", "ACK", "TRANSACTION", "RENEW_LEASE", "CUSTOM"} {
		for _, s := range []string{"PREFERRED_BATCH_SIZE", "MAX_HOLD_MS", "MAX_CONCURRENT"} {
			out = append(out, "QUEEN_"+op+"_"+s)
		}
	}
	return out
}

// partNames are the PG_* variables a DatabaseURL is built from.
var partNames = []string{"PG_HOST", "PG_PORT", "PG_USER", "PG_PASSWORD", "PG_DB", "PG_USE_SSL", "PG_SSL_REJECT_UNAUTHORIZED"}

// ignoredIn lists the variables of the environment that queengo does not
// read: the reference's names of referenceIgnored, the PG_* parts when
// DATABASE_URL is set, and PG_SSL_REJECT_UNAUTHORIZED without PG_USE_SSL.
func ignoredIn(getenv func(string) string) []ignoredVar {
	var out []ignoredVar
	set := func(name string) bool { return strings.TrimSpace(getenv(name)) != "" }
	for _, g := range referenceIgnored {
		for _, n := range g.names {
			if set(n) {
				out = append(out, ignoredVar{n, g.why})
			}
		}
	}
	if set("DATABASE_URL") {
		for _, n := range partNames {
			if set(n) {
				out = append(out, ignoredVar{n, "DATABASE_URL is set and wins: put this in it (sslmode for PG_USE_SSL)"})
			}
		}
	} else if set("PG_SSL_REJECT_UNAUTHORIZED") && !strings.EqualFold(strings.TrimSpace(getenv("PG_USE_SSL")), "true") {
		out = append(out, ignoredVar{"PG_SSL_REJECT_UNAUTHORIZED", "PG_USE_SSL is not true: no TLS is asked for, as with the reference"})
	}
	return out
}

// logIgnored logs, once per variable, each reference variable of the
// environment that queengo does not read, with the reason.
func (c *Config) logIgnored(log *slog.Logger) {
	for _, v := range c.ignored {
		log.Warn("ignored: "+v.name, "var", v.name, "why", v.why)
	}
}
