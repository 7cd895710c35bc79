package pg

import (
	"context"

	"github.com/queengo/queengo"
)

// The /api/v1/analytics routes in the shapes the reference server's
// dashboard reads (docs/api-admin.md "The analytics routes"), from the
// metrics collector's samples (pg/samples.go). Each statement answers the
// route's fields but timeRange and bucketMinutes, which package http adds;
// the arguments are seriesArgs', the window's from on a bucket boundary.
// Figures queengo has no counterpart for are null.

// seriesTypes types every argument of a series statement, so that a
// statement may leave some unused (an unreferenced CTE is not run).
const seriesTypes = `a AS (SELECT $1::timestamptz, $2::timestamptz, $3::float8, $4::float8, $5::text, $6::text,
                $7::text, $8::text, $9::text)`

// bucketOf is a sample's bucket.
const bucketOf = `date_bin(make_interval(secs => $3), m.sampled_at, $1)`

// inWindow selects the samples of the window.
const inWindow = `m.sampled_at >= $1 AND m.sampled_at < $2`

// processFilter selects the process rows of the instances on hostname $8
// and named $9 when set.
const processFilter = `m.queue_id IS NULL AND ($8 = '' OR m.figures->>'hostname' = $8) AND ($9 = '' OR m.instance = $9)`

// isoSeconds and isoMillis write a bucket's time as the reference does.
func isoSeconds(t string) string {
	return `to_char(` + t + ` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`
}

func isoMillis(t string) string {
	return `to_char(` + t + ` AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`
}

// deltaIn is delta of the bucketed rows of tbl.
func deltaIn(tbl, key string) string {
	return `greatest((` + tbl + `.f->>'` + key + `')::bigint - coalesce((` + tbl + `.pf->>'` + key + `')::bigint, 0), 0)`
}

// stat is the reference's {avg, min, max, last} of a figure over the
// samples of a bucket (x, ordered by at).
func stat(v string) string {
	return `jsonb_build_object('avg', round(avg(` + v + `)::numeric, 2), 'min', min(` + v + `), 'max', max(` + v + `),
        'last', (array_agg(` + v + ` ORDER BY at DESC))[1])`
}

// num reads a figure of a sample f.
func num(key string) string { return `(f->>'` + key + `')::bigint` }

// systemMetricsSQL: per instance (a replica) and bucket, the {avg, min,
// max, last} over its samples of its CPU, memory and pool. CPU is the
// reference's unit, hundredths of a percent of one core (the dashboard
// divides by 100), over the interval since the instance's previous sample
// of the same process.
var systemMetricsSQL = `WITH ` + seriesTypes + `,
s AS (SELECT m.instance AS k, m.sampled_at AS at, m.figures AS f,
             lag(m.figures) OVER w AS pf, lag(m.sampled_at) OVER w AS pat
        FROM queen.metrics_samples m
       WHERE ` + processFilter + `
         AND m.sampled_at >= $1::timestamptz - make_interval(secs => $4) AND m.sampled_at < $2
      WINDOW w AS (PARTITION BY m.instance ORDER BY m.sampled_at)),
x AS (SELECT date_bin(make_interval(secs => $3), at, $1) AS t, k, at, f,
             CASE WHEN pf->>'pid' = f->>'pid' AND at > pat
                  THEN round(greatest(` + num("cpuUserUs") + ` - (pf->>'cpuUserUs')::bigint, 0) / 100.0
                             / extract(epoch FROM at - pat), 2) END AS cpu_user,
             CASE WHEN pf->>'pid' = f->>'pid' AND at > pat
                  THEN round(greatest(` + num("cpuSystemUs") + ` - (pf->>'cpuSystemUs')::bigint, 0) / 100.0
                             / extract(epoch FROM at - pat), 2) END AS cpu_sys
        FROM s WHERE at >= $1),
b AS (SELECT t, k, count(*) AS n, (array_agg(f ORDER BY at DESC))[1] AS last,
             ` + stat("cpu_user") + ` AS cpu_user, ` + stat("cpu_sys") + ` AS cpu_sys,
             ` + stat(num("rssBytes")) + ` AS rss, ` + stat(num("virtualBytes")) + ` AS vms,
             ` + stat(num("poolTotal")) + ` AS pool_size, ` + stat(num("poolIdle")) + ` AS pool_idle,
             ` + stat(num("poolAcquired")) + ` AS pool_active
        FROM x GROUP BY t, k),
r AS (SELECT k, (array_agg(last->>'hostname' ORDER BY t DESC))[1] AS host, count(*) AS points,
             jsonb_agg(jsonb_build_object('timestamp', ` + isoMillis("t") + `, 'sampleCount', n,
               'metrics', jsonb_build_object(
                 'cpu', jsonb_build_object('user_us', cpu_user, 'system_us', cpu_sys),
                 'memory', jsonb_build_object('rss_bytes', rss, 'virtual_bytes', vms),
                 'database', jsonb_build_object('pool_size', pool_size, 'pool_idle', pool_idle, 'pool_active', pool_active),
                 'threadpool', NULL::jsonb, 'registries', NULL::jsonb,
                 'shared_state', jsonb_build_object('enabled', false, 'queue_backoff', jsonb_build_object(
                   'queues_with_backoff', (last->>'backoffQueues')::bigint,
                   'total_backed_off_groups', (last->>'backoffGroups')::bigint,
                   'avg_interval_ms', (last->>'backoffAvgIntervalMs')::bigint))))
               ORDER BY t) AS ts
        FROM b GROUP BY k)
SELECT jsonb_build_object(
    'replicas', coalesce(jsonb_agg(jsonb_build_object('hostname', host, 'port', substring(k FROM ':([0-9]+)$')::integer,
                                                      'workerId', k, 'timeSeries', ts) ORDER BY k), '[]'::jsonb),
    'replicaCount', count(*), 'pointCount', coalesce(sum(points), 0))
  FROM r`

// workerMetricsSQL: per bucket, the requests and messages of every
// instance added up and their pool gauges over the samples; per instance,
// its last five minutes; per queue, the messages handed out and its time
// lag over the window.
var workerMetricsSQL = `WITH ` + seriesTypes + `, ` + processRows + `, ` + bucketedAs("qw", "queue_id", filteredRows) + `,
d AS (SELECT t, sum(` + deltaIn("rw", "pushMessages") + `) AS push_msg, sum(` + deltaIn("rw", "popMessages") + `) AS pop_msg,
             sum(` + deltaIn("rw", "ackItems") + `) AS ack_msg, sum(` + deltaIn("rw", "pushRequests") + `) AS push_req,
             sum(` + deltaIn("rw", "popRequests") + `) AS pop_req, sum(` + deltaIn("rw", "ackRequests") + `) AS ack_req,
             sum(` + deltaIn("rw", "dbErrors") + `) AS db_errs, sum(` + deltaIn("rw", "ackFailed") + `) AS ack_fail,
             sum(` + deltaIn("rw", "deadLettered") + ` + ` + deltaIn("rw", "evictedMessages") + `) AS dlq
        FROM rw GROUP BY t),
g AS (SELECT ` + bucketOf + ` AS t, round(avg((m.figures->>'poolIdle')::numeric)) AS avg_slots,
             min((m.figures->>'poolIdle')::bigint) AS min_slots, max((m.figures->>'poolTotal')::bigint) AS conns,
             max((m.figures->>'backoffGroups')::bigint) AS backoff
        FROM queen.metrics_samples m WHERE ` + processFilter + ` AND ` + inWindow + ` GROUP BY 1),
l AS (SELECT ` + bucketOf + ` AS t, round(avg(coalesce((m.figures->>'avgTimeLagMs')::bigint, 0))) AS avg_lag,
             max((m.figures->>'timeLagMs')::bigint) AS max_lag
        FROM queen.metrics_samples m WHERE m.queue_id = '` + queengo.AllQueuesID.String() + `'::uuid AND ` + inWindow + `
       GROUP BY 1),
w AS (SELECT m.instance AS k, (array_agg(m.figures->>'hostname' ORDER BY m.sampled_at DESC))[1] AS host,
             min((m.figures->>'poolIdle')::bigint) AS free, max((m.figures->>'poolTotal')::bigint) AS conns,
             max((m.figures->>'backoffGroups')::bigint) AS backoff,
             greatest(max(coalesce((m.figures->>'pushMessages')::bigint, 0) + coalesce((m.figures->>'ackItems')::bigint, 0))
                    - min(coalesce((m.figures->>'pushMessages')::bigint, 0) + coalesce((m.figures->>'ackItems')::bigint, 0)), 0) AS msgs,
             max(m.sampled_at) AS seen
        FROM queen.metrics_samples m WHERE m.queue_id IS NULL AND m.sampled_at >= now() - interval '5 minutes' GROUP BY 1),
qs AS (SELECT q.name, sum(` + deltaIn("qw", "handed") + `) AS pops, round(avg((qw.f->>'timeLagMs')::bigint)) AS avg_lag,
              max((qw.f->>'timeLagMs')::bigint) AS max_lag
         FROM qw JOIN queen.queues q ON q.id = qw.k GROUP BY q.name)
SELECT jsonb_build_object(
    'pointCount', (SELECT count(*) FROM d),
    'timeSeries', coalesce((SELECT jsonb_agg(jsonb_build_object('timestamp', ` + isoSeconds("d.t") + `,
        'pushMessages', d.push_msg, 'popMessages', d.pop_msg, 'ackMessages', d.ack_msg,
        'pushRequests', d.push_req, 'popRequests', d.pop_req, 'ackRequests', d.ack_req, 'jobsDone', NULL::bigint,
        'pushPerSecond', round(d.push_msg / $3::numeric, 2), 'popPerSecond', round(d.pop_msg / $3::numeric, 2),
        'ackPerSecond', round(d.ack_msg / $3::numeric, 2),
        'avgEventLoopLagMs', NULL::bigint, 'maxEventLoopLagMs', NULL::bigint,
        'avgFreeSlots', g.avg_slots, 'minFreeSlots', g.min_slots, 'dbConnections', g.conns,
        'avgJobQueueSize', NULL::bigint, 'maxJobQueueSize', NULL::bigint, 'backoffSize', g.backoff,
        'avgLagMs', l.avg_lag, 'maxLagMs', l.max_lag, 'lagCount', NULL::bigint,
        'dbErrors', d.db_errs, 'ackSuccess', greatest(d.ack_msg - d.ack_fail, 0), 'ackFailed', d.ack_fail, 'dlqCount', d.dlq)
        ORDER BY d.t DESC)
      FROM d LEFT JOIN g ON g.t = d.t LEFT JOIN l ON l.t = d.t), '[]'::jsonb),
    'workers', coalesce((SELECT jsonb_agg(jsonb_build_object('hostname', host, 'workerId', k,
        'avgEventLoopLagMs', NULL::bigint, 'maxEventLoopLagMs', NULL::bigint, 'freeSlots', free, 'dbConnections', conns,
        'jobQueueSize', NULL::bigint, 'backoffSize', backoff, 'messagesProcessed', msgs, 'lastSeen', ` + isoSeconds("seen") + `)
        ORDER BY host, k) FROM w), '[]'::jsonb),
    'queues', coalesce((SELECT jsonb_agg(jsonb_build_object('queueName', name, 'popCount', pops, 'avgLagMs', avg_lag,
        'maxLagMs', max_lag) ORDER BY pops DESC, name) FROM qs), '[]'::jsonb))`

// queueRows are the CTEs the queue statements share: rw, the bucketed rows
// of the queues the filter selects; qn, those queues; lg, each one's time
// lag over the samples of a bucket.
var queueRows = seriesTypes + `, ` + bucketed("queue_id", filteredRows) + `,
qn AS (SELECT q.id, q.name FROM queen.queues q
        WHERE ($5 = '' OR q.name = $5) AND ($6 = '' OR q.namespace = $6) AND ($7 = '' OR q.task = $7)),
lg AS (SELECT ` + bucketOf + ` AS t, m.queue_id AS k, round(avg((m.figures->>'timeLagMs')::bigint)) AS avg_lag,
              max((m.figures->>'timeLagMs')::bigint) AS max_lag
         FROM queen.metrics_samples m WHERE m.queue_id IN (SELECT id FROM qn) AND ` + inWindow + ` GROUP BY 1, 2)`

// parkedRows are the CTEs of the parked long polls per queue: pn, each
// instance's samples per bucket; pq, the sum of its parked pops per queue
// over them, so that pq.parked / pn.n is its average.
const parkedRows = `pn AS (SELECT ` + bucketOf + ` AS t, m.instance AS k, count(*) AS n,
              (array_agg(m.figures->>'hostname' ORDER BY m.sampled_at DESC))[1] AS host
         FROM queen.metrics_samples m WHERE m.queue_id IS NULL AND ` + inWindow + ` GROUP BY 1, 2),
pq AS (SELECT ` + bucketOf + ` AS t, m.instance AS k, e.key AS queue, sum(e.value::bigint) AS parked
         FROM queen.metrics_samples m CROSS JOIN LATERAL jsonb_each_text(coalesce(m.figures->'parkedByQueue', '{}'::jsonb)) e
        WHERE m.queue_id IS NULL AND ` + inWindow + ` AND e.key IN (SELECT name FROM qn) GROUP BY 1, 2, 3)`

// queueLagSQL: per bucket and queue with samples, newest first, the
// messages handed out and the time lag (a bare array, as the reference's).
var queueLagSQL = `WITH ` + queueRows + `
SELECT coalesce(jsonb_agg(jsonb_build_object('queueName', qn.name, 'popCount', ` + deltaIn("rw", "handed") + `,
    'avgLagMs', lg.avg_lag, 'maxLagMs', lg.max_lag, 'bucketTime', ` + isoSeconds("rw.t") + `) ORDER BY rw.t DESC, qn.name), '[]'::jsonb)
  FROM rw JOIN qn ON qn.id = rw.k LEFT JOIN lg ON lg.t = rw.t AND lg.k = rw.k`

// queueOpsSQL: per bucket and queue with samples or parked pops, the
// messages pushed, handed out and committed, per second too, its time lag,
// partitions and parked pops (over the instances, each one's average over
// its samples of the bucket); and the queues of the series.
var queueOpsSQL = `WITH ` + queueRows + `, ` + parkedRows + `,
pk AS (SELECT pq.t, qn.id AS k, sum(pq.parked::numeric / pn.n) AS parked
         FROM pq JOIN pn ON pn.t = pq.t AND pn.k = pq.k JOIN qn ON qn.name = pq.queue GROUP BY 1, 2),
keys AS (SELECT t, k FROM rw UNION SELECT t, k FROM pk),
o AS (SELECT keys.t, qn.name, coalesce(` + deltaIn("rw", "pushed") + `, 0) AS pushed,
             coalesce(` + deltaIn("rw", "handed") + `, 0) AS handed, coalesce(` + deltaIn("rw", "consumed") + `, 0) AS consumed,
             (rw.f->>'partitions')::bigint AS partitions, lg.avg_lag, lg.max_lag, coalesce(pk.parked, 0) AS parked
        FROM keys JOIN qn ON qn.id = keys.k
        LEFT JOIN rw ON rw.t = keys.t AND rw.k = keys.k
        LEFT JOIN lg ON lg.t = keys.t AND lg.k = keys.k
        LEFT JOIN pk ON pk.t = keys.t AND pk.k = keys.k)
SELECT jsonb_build_object(
    'series', coalesce(jsonb_agg(jsonb_build_object('bucket', ` + isoSeconds("t") + `, 'queueName', name,
        'pushRequests', NULL::bigint, 'pushMessages', pushed, 'popMessages', handed, 'popEmpty', NULL::bigint,
        'ackRequests', NULL::bigint, 'ackSuccess', consumed, 'ackFailed', NULL::bigint, 'transactions', NULL::bigint,
        'partitionsCreated', NULL::bigint, 'partitionsDeleted', NULL::bigint, 'partitionCount', partitions,
        'avgLagMs', avg_lag, 'maxLagMs', max_lag,
        'pushPerSecond', round(pushed / $3::numeric, 2), 'popPerSecond', round(handed / $3::numeric, 2),
        'ackPerSecond', round(consumed / $3::numeric, 2), 'emptyPerSecond', NULL::numeric,
        'parkedCount', round(parked, 2)) ORDER BY t, name), '[]'::jsonb),
    'queues', coalesce((SELECT jsonb_agg(DISTINCT name ORDER BY name) FROM o), '[]'::jsonb))
  FROM o`

// parkedReplicasSQL: per bucket, queue and instance with parked pops on
// it, the instance's average over its samples of the bucket; and every
// instance that sampled in the window.
var parkedReplicasSQL = `WITH ` + seriesTypes + `,
qn AS (SELECT q.id, q.name FROM queen.queues q
        WHERE ($5 = '' OR q.name = $5) AND ($6 = '' OR q.namespace = $6) AND ($7 = '' OR q.task = $7)),
` + parkedRows + `
SELECT jsonb_build_object(
    'series', coalesce((SELECT jsonb_agg(jsonb_build_object('bucket', ` + isoSeconds("pq.t") + `, 'queueName', pq.queue,
        'hostname', pn.host, 'workerId', pq.k, 'parkedCount', round(pq.parked::numeric / pn.n, 2))
        ORDER BY pq.t, pq.queue, pn.host, pq.k) FROM pq JOIN pn ON pn.t = pq.t AND pn.k = pq.k), '[]'::jsonb),
    'replicas', coalesce((SELECT jsonb_agg(jsonb_build_object('hostname', host, 'workerId', k) ORDER BY host, k)
        FROM (SELECT DISTINCT ON (k) k, host FROM pn ORDER BY k, t DESC) r), '[]'::jsonb))`

// retentionTimeseriesSQL: per bucket in which something was removed, the
// messages retention dropped and eviction dead-lettered over the
// instances, and their totals over the window.
var retentionTimeseriesSQL = `WITH ` + seriesTypes + `, ` + processRows + `,
d AS (SELECT t, sum(` + deltaIn("rw", "retentionDroppedMessages") + `) AS ret, sum(` + deltaIn("rw", "evictedMessages") + `) AS ev
        FROM rw GROUP BY t)
SELECT jsonb_build_object(
    'series', coalesce((SELECT jsonb_agg(jsonb_build_object('bucket', ` + isoSeconds("t") + `, 'retentionMsgs', ret,
        'completedRetentionMsgs', NULL::bigint, 'evictionMsgs', ev, 'totalMsgs', ret + ev, 'eventCount', NULL::bigint)
        ORDER BY t) FROM d WHERE ret + ev > 0), '[]'::jsonb),
    'totals', (SELECT jsonb_build_object('retentionMsgs', coalesce(sum(ret), 0), 'completedRetentionMsgs', NULL::bigint,
        'evictionMsgs', coalesce(sum(ev), 0), 'totalMsgs', coalesce(sum(ret + ev), 0), 'eventCount', NULL::bigint) FROM d))`

// SystemMetrics is /analytics/system-metrics: {replicas, replicaCount,
// pointCount}.
func (s *Store) SystemMetrics(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return s.series(ctx, "system metrics", systemMetricsSQL, q)
}

// WorkerMetrics is /analytics/worker-metrics: {pointCount, timeSeries,
// workers, queues}.
func (s *Store) WorkerMetrics(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return s.series(ctx, "worker metrics", workerMetricsSQL, q)
}

// QueueLag is /analytics/queue-lag: an array of {queueName, popCount,
// avgLagMs, maxLagMs, bucketTime}, newest first.
func (s *Store) QueueLag(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return s.series(ctx, "queue lag", queueLagSQL, q)
}

// QueueOps is /analytics/queue-ops: {series, queues}.
func (s *Store) QueueOps(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return s.series(ctx, "queue ops", queueOpsSQL, q)
}

// QueueParkedReplicas is /analytics/queue-parked-replicas: {series,
// replicas}.
func (s *Store) QueueParkedReplicas(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return s.series(ctx, "parked replicas", parkedReplicasSQL, q)
}

// RetentionTimeseries is /analytics/retention: {series, totals}.
func (s *Store) RetentionTimeseries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return s.series(ctx, "retention", retentionTimeseriesSQL, q)
}
