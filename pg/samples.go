package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// The metrics collector's history (queen.metrics_samples, migration 005):
// the write of one tick and the time series the status and analytics routes
// read. Every series is bounded by its window (an index range on
// sampled_at) and by its bucket count, which the caller caps.

// sampleLeaderKey is the transaction advisory lock the process that writes
// a tick's queue rows holds while it writes them.
var sampleLeaderKey = leaderKey("metrics samples")

// WriteSamples writes one tick in one transaction: the process row always,
// and reads the other instances' newest process rows since OthersSince;
// the queue rows when this process takes the samples lock and no process
// wrote queue rows in the last MinGap; and, by that same process, the
// deletion of at most DeleteLimit samples older than Cutoff. The lock is a
// transaction lock: two processes never decide and write a tick's queue
// rows at once, and the one that comes second within MinGap finds the
// first's rows and writes none.
func (s *Store) WriteSamples(ctx context.Context, w queengo.SampleWrite) (queengo.SampleResult, error) {
	var res queengo.SampleResult
	err := s.withTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO queen.metrics_samples (sampled_at, instance, queue_id, figures)
VALUES ($1, $2, NULL, $3)`, w.At, w.Instance, string(w.Process)); err != nil {
			return err
		}
		if err := readOthers(ctx, tx, w, &res.Others); err != nil {
			return err
		}
		// Every led tick writes a row of every queue together: the newest of
		// those is the newest tick's.
		err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1) AND NOT EXISTS (
    SELECT 1 FROM queen.metrics_samples WHERE queue_id = $3 AND sampled_at > $2)`,
			sampleLeaderKey, w.At.Add(-w.MinGap), pgUUID(queengo.AllQueuesID)).Scan(&res.Led)
		if err != nil || !res.Led {
			return err
		}
		var continuous bool
		if !w.LastWritten.IsZero() {
			err := tx.QueryRow(ctx, `SELECT sampled_at = $1 AND instance = $2 FROM queen.metrics_samples
 WHERE queue_id = $3 ORDER BY sampled_at DESC LIMIT 1`, w.LastWritten, w.Instance, pgUUID(queengo.AllQueuesID)).Scan(&continuous)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if queues := w.Queues(continuous); len(queues) > 0 {
			ats := make([]time.Time, len(queues))
			ids := make([]pgtype.UUID, len(queues))
			figs := make([]string, len(queues))
			for i, q := range queues {
				ats[i], ids[i], figs[i] = q.At, pgUUID(q.QueueID), string(q.Figures)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO queen.metrics_samples (sampled_at, instance, queue_id, figures)
SELECT t, $4, q, f::jsonb FROM unnest($1::timestamptz[], $2::uuid[], $3::text[]) AS u(t, q, f)`,
				ats, ids, figs, w.Instance); err != nil {
				return err
			}
		}
		// ctid: the oldest rows by the sampled_at index, without a key.
		tag, err := tx.Exec(ctx, `DELETE FROM queen.metrics_samples WHERE ctid = ANY (ARRAY(
    SELECT ctid FROM queen.metrics_samples WHERE sampled_at < $1 ORDER BY sampled_at LIMIT $2))`,
			w.Cutoff, w.DeleteLimit)
		res.Deleted = tag.RowsAffected()
		return err
	})
	if err != nil {
		return res, fmt.Errorf("error writing metrics samples: %w", err)
	}
	return res, nil
}

// othersSQL adds up the counters of the newest process row of each other
// instance since $1 (the process rows' index, a few rows per instance);
// the dead letters are the requests' and eviction's.
const othersSQL = `SELECT count(*), ` + othersSums + `
  FROM (SELECT DISTINCT ON (m.instance) m.figures AS f FROM queen.metrics_samples m
         WHERE m.queue_id IS NULL AND m.sampled_at > $1 AND m.instance <> $2
         ORDER BY m.instance, m.sampled_at DESC) l`

const othersSums = `coalesce(sum((f->>'pushRequests')::bigint), 0)::bigint, coalesce(sum((f->>'popRequests')::bigint), 0)::bigint,
       coalesce(sum((f->>'ackRequests')::bigint), 0)::bigint, coalesce(sum((f->>'transactions')::bigint), 0)::bigint,
       coalesce(sum((f->>'pushMessages')::bigint), 0)::bigint, coalesce(sum((f->>'popMessages')::bigint), 0)::bigint,
       coalesce(sum((f->>'ackItems')::bigint), 0)::bigint, coalesce(sum((f->>'ackFailed')::bigint), 0)::bigint,
       coalesce(sum((f->>'dbErrors')::bigint), 0)::bigint,
       coalesce(sum(coalesce((f->>'deadLettered')::bigint, 0) + coalesce((f->>'evictedMessages')::bigint, 0)), 0)::bigint`

// readOthers reads into t the other instances' newest process rows since
// w.OthersSince.
func readOthers(ctx context.Context, tx pgx.Tx, w queengo.SampleWrite, t *queengo.ClusterTotals) error {
	var n [10]int64
	err := tx.QueryRow(ctx, othersSQL, w.OthersSince, w.Instance).Scan(&t.Processes, &n[0], &n[1], &n[2], &n[3],
		&n[4], &n[5], &n[6], &n[7], &n[8], &n[9])
	if err != nil {
		return err
	}
	t.PushRequests, t.PopRequests, t.AckRequests, t.Transactions = uint64(n[0]), uint64(n[1]), uint64(n[2]), uint64(n[3])
	t.PushMessages, t.PopMessages, t.AckMessages, t.AckFailed = uint64(n[4]), uint64(n[5]), uint64(n[6]), uint64(n[7])
	t.DBErrors, t.DeadLettered = uint64(n[8]), uint64(n[9])
	return nil
}

// seriesLookback is how far before a window the series read samples, so
// that the first rows in the window have their predecessors for deltas.
// The collector's interval is capped below it (actors.SampleIntervalMax).
const seriesLookback = 10 * time.Minute

// The arguments of every series statement: $1 from, $2 to, $3 bucket
// seconds, $4 lookback seconds, $5 queue, $6 namespace, $7 task, $8
// hostname, $9 instance.
func seriesArgs(q queengo.SeriesQuery) []any {
	return []any{q.From, q.To, q.Bucket.Seconds(), seriesLookback.Seconds(), q.Filter.Queue, q.Filter.Namespace,
		q.Filter.Task, q.Hostname, q.Instance}
}

// bucketed is the CTE rw of a series: one row per bucket and key (a queue
// id, or an instance) that has samples; f is the key's last sample in the
// bucket, pf its last sample in its previous bucket with any, or else its
// first sample in this bucket (a new queue's row of zeros), so the growth
// of a counter over a bucket is f - pf. The window is read from the
// lookback on, so the first bucket has its predecessor; only the samples
// kept are decoded.
func bucketed(key, rowFilter string) string { return bucketedAs("rw", key, rowFilter) }

// bucketedAs is bucketed under the CTE name (and name_b for its helper), for
// a statement that buckets two kinds of rows.
func bucketedAs(name, key, rowFilter string) string {
	return name + `_b AS (
    SELECT DISTINCT ON (t, k) t, k, f, f0 FROM (
        SELECT date_bin(make_interval(secs => $3), m.sampled_at, $1) AS t, m.` + key + ` AS k, m.sampled_at,
               m.figures AS f, first_value(m.figures) OVER (PARTITION BY date_bin(make_interval(secs => $3), m.sampled_at, $1),
                                                         m.` + key + ` ORDER BY m.sampled_at) AS f0
          FROM queen.metrics_samples m
         WHERE ` + rowFilter + `
           AND m.sampled_at >= $1::timestamptz - make_interval(secs => $4) AND m.sampled_at < $2) s
     ORDER BY t, k, sampled_at DESC),
` + name + ` AS (SELECT t, k, f, coalesce(pf, f0) AS pf
         FROM (SELECT t, k, f, f0, lag(f) OVER (PARTITION BY k ORDER BY t) AS pf FROM ` + name + `_b) x WHERE t >= $1)`
}

// allQueuesRows are the rows of every queue together (queengo.AllQueuesID):
// one a tick, whatever the number of queues.
var allQueuesRows = bucketed("queue_id", `m.queue_id = '`+queengo.AllQueuesID.String()+`'::uuid`)

// filteredRows are the rows of each queue the filter selects.
const filteredRows = `m.queue_id IN (SELECT q.id FROM queen.queues q WHERE ($5 = '' OR q.name = $5)
       AND ($6 = '' OR q.namespace = $6) AND ($7 = '' OR q.task = $7))`

// delta is the growth of a cumulative figure over a bucket (rw); a counter
// that went back (a group deleted, a process restarted) counts as no
// growth.
func delta(key string) string {
	return `greatest((f->>'` + key + `')::bigint - coalesce((pf->>'` + key + `')::bigint, 0), 0)`
}

// queueSeries: per bucket, the messages pushed, committed (processed) and
// handed out (pop) by the queues of rows, per second too, and the gauges
// summed over the queues' last rows in the bucket. The time lags are the
// largest and the average over the queues with one (a row of every queue
// together carries both).
func queueSeries(rows string) string {
	return `WITH ` + rows + `,
d AS (SELECT t, ` + delta("pushed") + ` AS pushed, ` + delta("consumed") + ` AS consumed, ` + delta("handed") + ` AS handed,
             (f->>'timeLagMs')::bigint AS max_lag, coalesce((f->>'avgTimeLagMs')::bigint, (f->>'timeLagMs')::bigint) AS avg_lag
        FROM rw),
gs AS (SELECT t, sum((f->>'pending')::bigint) AS pending, sum((f->>'processing')::bigint) AS processing,
              sum((f->>'offsetLag')::bigint) AS offset_lag, max((f->>'maxOffsetLag')::bigint) AS max_offset_lag,
              sum((f->>'deadLetters')::bigint) AS dead_letters, sum(coalesce((f->>'queues')::bigint, 1)) AS queues
         FROM rw GROUP BY t),
ds AS (SELECT t, sum(pushed) AS pushed, sum(consumed) AS consumed, sum(handed) AS handed,
              avg(avg_lag) FILTER (WHERE avg_lag > 0) AS avg_lag, max(max_lag) AS max_lag FROM d GROUP BY t)
SELECT coalesce(jsonb_agg(jsonb_build_object(
    'timestamp', to_char(ds.t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'messages', ds.pushed, 'ingested', ds.pushed, 'processed', ds.consumed, 'popMessages', ds.handed,
    'ingestedPerSecond', round(ds.pushed / $3::numeric, 3), 'processedPerSecond', round(ds.consumed / $3::numeric, 3),
    'popPerSecond', round(ds.handed / $3::numeric, 3),
    'avgLagMs', round(coalesce(ds.avg_lag, 0)), 'maxLagMs', coalesce(ds.max_lag, 0),
    'pending', gs.pending, 'processing', gs.processing, 'offsetLag', gs.offset_lag, 'maxOffsetLag', gs.max_offset_lag,
    'deadLetters', gs.dead_letters, 'queues', gs.queues) ORDER BY ds.t), '[]'::jsonb)
  FROM ds JOIN gs ON gs.t = ds.t` + typeArgs
}

var (
	allQueuesSeriesSQL = queueSeries(allQueuesRows)
	filteredSeriesSQL  = queueSeries(bucketed("queue_id", filteredRows))
)

// processRows are bucketed process rows (rw, k the instance), of the
// instances on hostname $8 and named $9 when set.
var processRows = bucketed("instance", `m.queue_id IS NULL AND ($8 = '' OR m.figures->>'hostname' = $8)
       AND ($9 = '' OR m.instance = $9)`)

// The unused arguments of a series statement are still typed by it.
const typeArgs = ` WHERE $5::text IS NOT NULL OR $6::text IS NOT NULL OR $7::text IS NOT NULL
   OR $8::text IS NOT NULL OR $9::text IS NOT NULL`

// systemSeriesSQL: per bucket, the CPU the instances spent and their
// memory, goroutines and pool, summed over the instances' last rows.
var systemSeriesSQL = `WITH ` + processRows + `,
d AS (SELECT t, sum(` + delta("cpuUserUs") + `) AS cpu_user, sum(` + delta("cpuSystemUs") + `) AS cpu_system
        FROM rw GROUP BY t),
g AS (SELECT t, count(*) AS instances, sum((f->>'rssBytes')::bigint) AS rss,
             sum((f->>'heapAllocBytes')::bigint) AS heap, sum((f->>'goroutines')::bigint) AS goroutines,
             sum((f->>'poolTotal')::bigint) AS pool_total, sum((f->>'poolIdle')::bigint) AS pool_idle,
             sum((f->>'poolAcquired')::bigint) AS pool_acquired
        FROM rw GROUP BY t)
SELECT coalesce(jsonb_agg(jsonb_build_object(
    'timestamp', to_char(d.t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'instances', g.instances,
    'cpuUserSeconds', round(d.cpu_user / 1e6, 3), 'cpuSystemSeconds', round(d.cpu_system / 1e6, 3),
    'cpuPercent', round((d.cpu_user + d.cpu_system) / 1e4 / $3::numeric, 2),
    'rssBytes', g.rss, 'heapAllocBytes', g.heap, 'goroutines', g.goroutines,
    'poolTotal', g.pool_total, 'poolIdle', g.pool_idle, 'poolAcquired', g.pool_acquired) ORDER BY d.t), '[]'::jsonb)
  FROM d JOIN g ON g.t = d.t` + typeArgs

// workerSeriesSQL: per bucket and instance, the requests and messages it
// served, its CPU and its last gauges.
var workerSeriesSQL = `WITH ` + processRows + `,
d AS (SELECT t, k, sum(` + delta("pushRequests") + `) AS push_requests, sum(` + delta("pushMessages") + `) AS push_messages,
             sum(` + delta("popRequests") + `) AS pop_requests, sum(` + delta("popMessages") + `) AS pop_messages,
             sum(` + delta("popEmpty") + `) AS pop_empty, sum(` + delta("ackRequests") + `) AS ack_requests,
             sum(` + delta("ackItems") + `) AS ack_items, sum(` + delta("ackFailed") + `) AS ack_failed,
             sum(` + delta("dbErrors") + `) AS db_errors,
             sum(` + delta("cpuUserUs") + ` + ` + delta("cpuSystemUs") + `) AS cpu
        FROM rw GROUP BY t, k)
SELECT coalesce(jsonb_agg(jsonb_build_object(
    'timestamp', to_char(d.t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'workerId', d.k,
    'hostname', l.f->>'hostname', 'pid', (l.f->>'pid')::bigint,
    'pushRequests', d.push_requests, 'pushMessages', d.push_messages, 'popRequests', d.pop_requests,
    'popMessages', d.pop_messages, 'popEmpty', d.pop_empty, 'ackRequests', d.ack_requests, 'ackItems', d.ack_items,
    'ackFailed', d.ack_failed, 'dbErrors', d.db_errors, 'cpuPercent', round(d.cpu / 1e4 / $3::numeric, 2),
    'rssBytes', (l.f->>'rssBytes')::bigint, 'goroutines', (l.f->>'goroutines')::bigint,
    'parked', (l.f->>'parked')::bigint, 'poolAcquired', (l.f->>'poolAcquired')::bigint)
    ORDER BY d.t, d.k), '[]'::jsonb)
  FROM d JOIN rw l ON l.t = d.t AND l.k = d.k` + typeArgs

// parkedSeriesSQL: per bucket and queue, the long polls parked on it over
// all instances (each instance's last row) and how many instances
// (replicas) had any.
var parkedSeriesSQL = `WITH ` + processRows + `,
p AS (SELECT l.t, e.key AS queue, sum(e.value::bigint) AS parked, count(*) FILTER (WHERE e.value::bigint > 0) AS replicas
        FROM rw l CROSS JOIN LATERAL jsonb_each_text(coalesce(l.f->'parkedByQueue', '{}'::jsonb)) e
       WHERE $5 = '' OR e.key = $5
       GROUP BY l.t, e.key)
SELECT coalesce(jsonb_agg(jsonb_build_object(
    'timestamp', to_char(p.t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'queue', p.queue,
    'parked', p.parked, 'replicas', p.replicas) ORDER BY p.t, p.queue), '[]'::jsonb)
  FROM p WHERE $6::text IS NOT NULL OR $7::text IS NOT NULL`

// retentionSeriesSQL: per bucket, what retention, eviction and partition
// cleanup removed, over all instances (the queengo_retention_* counters).
var retentionSeriesSQL = `WITH ` + processRows + `,
d AS (SELECT t, sum(` + delta("retentionDroppedSegments") + `) AS segments,
             sum(` + delta("retentionDroppedMessages") + `) AS messages,
             sum(` + delta("retentionDroppedBytes") + `) AS bytes, sum(` + delta("evictedMessages") + `) AS evicted,
             sum(` + delta("retentionRemovedPartitions") + `) AS partitions
        FROM rw GROUP BY t)
SELECT coalesce(jsonb_agg(jsonb_build_object(
    'timestamp', to_char(d.t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
    'droppedSegments', d.segments, 'droppedMessages', d.messages, 'droppedBytes', d.bytes,
    'evictedMessages', d.evicted, 'removedPartitions', d.partitions) ORDER BY d.t), '[]'::jsonb)
  FROM d` + typeArgs

// series runs one series statement.
func (s *Store) series(ctx context.Context, what, sql string, q queengo.SeriesQuery) (queengo.Series, error) {
	var out []byte
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, sql, seriesArgs(q)...).Scan(&out)
	})
	if err != nil {
		return nil, fmt.Errorf("error reading the %s series: %w", what, err)
	}
	return out, nil
}

// QueueSeries is the throughput and lag series of the queues q selects:
// without a filter, from the rows of every queue together (one a tick).
func (s *Store) QueueSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	if q.Filter == (queengo.StatusFilter{}) {
		return s.series(ctx, "queue", allQueuesSeriesSQL, q)
	}
	return s.series(ctx, "queue", filteredSeriesSQL, q)
}

// SystemSeries is the process series summed over the instances.
func (s *Store) SystemSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return s.series(ctx, "system", systemSeriesSQL, q)
}

// WorkerSeries is the process series per instance.
func (s *Store) WorkerSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return s.series(ctx, "worker", workerSeriesSQL, q)
}

// ParkedSeries is the parked long polls per queue over the instances.
func (s *Store) ParkedSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return s.series(ctx, "parked", parkedSeriesSQL, q)
}

// RetentionSeries is what the data lifecycle removed per bucket.
func (s *Store) RetentionSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return s.series(ctx, "retention", retentionSeriesSQL, q)
}
