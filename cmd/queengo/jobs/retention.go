package jobs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// Defaults of RetentionConfig, the reference server's (docs/rules.md,
//
const (
	// RetentionIntervalDefault is RETENTION_INTERVAL: segment retention and
	// partition cleanup every 5 minutes.
	RetentionIntervalDefault = 5 * time.Minute
	// EvictionIntervalDefault is EVICTION_INTERVAL: maxWaitTimeSeconds
	// eviction every minute.
	EvictionIntervalDefault = time.Minute
	// RetentionBatchSizeDefault is RETENTION_BATCH_SIZE: messages per
	// transaction. A batch of 1000 small messages commits in a few
	// milliseconds, so the locks it holds (the partition's cursors) are
	// never in the way for long.
	RetentionBatchSizeDefault = 1000
	// PartitionIdleDefault is PARTITION_CLEANUP_DAYS (30) as a duration:
	// the reference server's code, where its docs say 7.
	PartitionIdleDefault = 30 * 24 * time.Hour
)

// RetentionConfig configures the retention service. Zero fields take the
// defaults above.
type RetentionConfig struct {
	// Interval is how often segment retention and idle-partition cleanup
	// run, measured from the start of each run (the first runs at Start).
	Interval time.Duration
	// EvictionInterval is how often maxWaitTimeSeconds eviction runs.
	EvictionInterval time.Duration
	// BatchSize caps the messages one transaction drops, and the
	// partitions one cleanup statement removes; EvictionBatchSize the
	// messages one transaction evicts (zero: BatchSize). A backlog is
	// worked off in many short transactions, never one long one.
	BatchSize         int
	EvictionBatchSize int
	// PartitionIdle: a partition that holds no segment and saw no write, no
	// consumer and no dead letter this long is removed with its cursors.
	PartitionIdle time.Duration
	// Metrics is the set the service's figures are registered in (the
	// broker process's, served on /metrics/prometheus); nil: a set of its
	// own that nothing serves.
	Metrics *metrics.Set
}

// RetentionConn is what the retention service needs from the database
// layer (package pg): a connection of its own, outside the request pool, on
// which the leader locks and every statement of its jobs run.
type RetentionConn interface {
	// Lead runs fn while holding the cluster-wide lock of job; it returns
	// false without running fn when another process holds it.
	Lead(ctx context.Context, job string, fn func(context.Context) error) (bool, error)
	RetentionTargets(ctx context.Context) ([]uuid.UUID, error)
	DropSegments(ctx context.Context, parts []uuid.UUID, limit int) (queengo.Dropped, int, error)
	EvictionTargets(ctx context.Context) ([]queengo.CursorKey, error)
	Evict(ctx context.Context, targets []queengo.CursorKey, limit int) (int64, int, error)
	RemoveIdlePartitions(ctx context.Context, idle time.Duration, limit int) (int, error)
	OldestMessages(ctx context.Context) (map[string]time.Time, error)
	Close()
}

// RetentionConnect opens a RetentionConn; it must end with ctx.
type RetentionConnect func(ctx context.Context) (RetentionConn, error)

// The leader locks: of several broker processes on one database, one runs
// each job at a time and the others skip it. The two jobs have locks of
// their own, so one process may evict while another runs retention.
const (
	jobRetention = "retention"
	jobEviction  = "eviction"
)

// Retention is the data-lifecycle service (D9): it drops expired and
// completed segments, evicts messages that waited past maxWaitTimeSeconds
// into the dead-letter queue, removes idle partitions, and keeps the
// oldest-message-age gauges (docs/retention.md "Retention and eviction").
//
// Each run works through bounded batches until its work is done or half its
// interval has passed, whichever comes first, so its cost per interval is
// bounded whatever the backlog, and a run is over before the next is due; a
// backlog larger than that drains over several runs.
//
// The jobs that are due run one after the other on one connection, opened
// for them and closed after: the service never takes a pooled connection
// and holds at most one connection of its own, none between runs.
type Retention struct {
	cfg     RetentionConfig
	connect RetentionConnect
	log     *slog.Logger
	// clock is what run budgets and message ages are read from.
	clock func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	set   *metrics.Set
	count lifecycleCounters
	// ages holds, per queue, the unix nanoseconds of its oldest retained
	// message, read by the queue's gauge. Only the retention loop touches
	// the map.
	ages map[string]*atomic.Int64
}

// NewRetention returns the service, not yet running.
func NewRetention(cfg RetentionConfig, connect RetentionConnect, log *slog.Logger) *Retention {
	if cfg.Interval <= 0 {
		cfg.Interval = RetentionIntervalDefault
	}
	if cfg.EvictionInterval <= 0 {
		cfg.EvictionInterval = EvictionIntervalDefault
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = RetentionBatchSizeDefault
	}
	if cfg.EvictionBatchSize <= 0 {
		cfg.EvictionBatchSize = cfg.BatchSize
	}
	if cfg.PartitionIdle <= 0 {
		cfg.PartitionIdle = PartitionIdleDefault
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Retention{cfg: cfg, connect: connect, log: log, clock: time.Now, ctx: ctx, cancel: cancel,
		set: cfg.Metrics, count: newLifecycleCounters(cfg.Metrics), ages: map[string]*atomic.Int64{}}
}

// Start runs retention and eviction now and then at their intervals.
func (r *Retention) Start() {
	r.wg.Add(1)
	go r.loop()
}

// Stop ends the service, cancelling the connect or the statement in flight
// (a batch commits or rolls back as a whole); call it before closing the
// store.
func (r *Retention) Stop() {
	r.cancel()
	r.wg.Wait()
}

// job is one of the service's jobs and when it is next due.
type job struct {
	name     string
	interval time.Duration
	run      func(context.Context, RetentionConn)
	next     time.Time
}

// loop runs each job at once and then at its interval, measured from the
// start of each of its runs (docs/rules.md R-1). Jobs due together run one after
// the other, retention first: a long retention run delays this process's
// eviction, as in the reference server, where the two never overlap.
func (r *Retention) loop() {
	defer r.wg.Done()
	jobs := []*job{
		{name: jobRetention, interval: r.cfg.Interval, run: r.retain},
		{name: jobEviction, interval: r.cfg.EvictionInterval, run: r.evict},
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.runDue(r.ctx, jobs)
		next := jobs[0].next
		for _, j := range jobs[1:] {
			if j.next.Before(next) {
				next = j.next
			}
		}
		t.Reset(max(time.Until(next), 0))
	}
}

// runDue runs the jobs that are due on one connection, opened for them and
// closed after. When it cannot be opened, they fail with one log line and
// are tried again at their next interval.
func (r *Retention) runDue(ctx context.Context, jobs []*job) {
	now := time.Now()
	var due []*job
	var names []string
	for _, j := range jobs {
		if !now.Before(j.next) {
			due, names = append(due, j), append(names, j.name)
		}
	}
	c, err := r.connect(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return // Stop
		}
		for _, j := range due {
			j.next = now.Add(j.interval)
			r.runOutcome(j.name, "failed").Inc()
		}
		r.log.Warn("retention service: connecting to the database failed", "jobs", names, "err", err)
		return
	}
	defer c.Close()
	for _, j := range due {
		if ctx.Err() != nil {
			return
		}
		j.next = time.Now().Add(j.interval)
		j.run(ctx, c)
	}
}

// lifecycleCounters are what the service removed, on /metrics/prometheus
// and in the collector's process rows.
type lifecycleCounters struct {
	droppedSegments, droppedMessages, droppedBytes, evicted, removedPartitions *metrics.Counter
}

func newLifecycleCounters(set *metrics.Set) lifecycleCounters {
	return lifecycleCounters{
		droppedSegments:   set.NewCounter(`queengo_retention_dropped_segments_total`),
		droppedMessages:   set.NewCounter(`queengo_retention_dropped_messages_total`),
		droppedBytes:      set.NewCounter(`queengo_retention_dropped_bytes_total`),
		evicted:           set.NewCounter(`queengo_evicted_messages_total`),
		removedPartitions: set.NewCounter(`queengo_retention_removed_partitions_total`),
	}
}

// lifecycleCounts are the counters' values.
type lifecycleCounts struct {
	droppedSegments, droppedMessages, droppedBytes, evicted, removedPartitions uint64
}

// counts reads what the service removed since the process started.
func (r *Retention) counts() lifecycleCounts {
	c := &r.count
	return lifecycleCounts{droppedSegments: c.droppedSegments.Get(), droppedMessages: c.droppedMessages.Get(),
		droppedBytes: c.droppedBytes.Get(), evicted: c.evicted.Get(), removedPartitions: c.removedPartitions.Get()}
}

// runOutcome counts a job's runs: "led" (this process did the work),
// "skipped" (another process held the job's lock) or "failed".
func (r *Retention) runOutcome(job, outcome string) *metrics.Counter {
	return r.set.GetOrCreateCounter(`queengo_retention_runs_total{job="` + job + `",outcome="` + outcome + `"}`)
}

// retain is one retention run: expired and completed segments, then idle
// partitions, under the retention lock; then, in every process, the
// oldest-message gauges.
func (r *Retention) retain(ctx context.Context, c RetentionConn) {
	start := r.clock()
	var d queengo.Dropped
	var removed int
	led, err := c.Lead(ctx, jobRetention, func(ctx context.Context) error {
		var err error
		if d, err = r.dropSegments(ctx, c, start.Add(r.cfg.Interval/2)); err != nil || ctx.Err() != nil {
			return err
		}
		removed, err = c.RemoveIdlePartitions(ctx, r.cfg.PartitionIdle, r.cfg.BatchSize)
		r.count.removedPartitions.Add(removed)
		return err
	})
	r.record(ctx, jobRetention, led, err, d.Segments > 0 || removed > 0, "segments", d.Segments,
		"messages", d.Messages, "bytes", d.Bytes, "partitions_removed", removed, "took", r.clock().Sub(start))
	if ctx.Err() == nil {
		r.refreshAges(ctx, c)
	}
}

// dropSegments works through the retention targets in batches until they
// are done or until passes.
func (r *Retention) dropSegments(ctx context.Context, c RetentionConn, until time.Time) (queengo.Dropped, error) {
	var total queengo.Dropped
	parts, err := c.RetentionTargets(ctx)
	if err != nil {
		return total, err
	}
	for len(parts) > 0 && ctx.Err() == nil && r.clock().Before(until) {
		d, done, err := c.DropSegments(ctx, parts, r.cfg.BatchSize)
		if err != nil {
			return total, err
		}
		if done == 0 && d.Segments == 0 {
			return total, errNoProgress
		}
		r.count.droppedSegments.AddInt64(d.Segments)
		r.count.droppedMessages.AddInt64(d.Messages)
		r.count.droppedBytes.AddInt64(d.Bytes)
		total.Segments += d.Segments
		total.Messages += d.Messages
		total.Bytes += d.Bytes
		parts = parts[done:]
	}
	return total, nil
}

// errNoProgress: a batch neither dropped nor finished anything, which the
// store's contract rules out; the run stops rather than spin.
var errNoProgress = errors.New("a retention batch made no progress")

// evict is one eviction run, under the eviction lock.
func (r *Retention) evict(ctx context.Context, c RetentionConn) {
	start := r.clock()
	until := start.Add(r.cfg.EvictionInterval / 2)
	var total int64
	led, err := c.Lead(ctx, jobEviction, func(ctx context.Context) error {
		targets, err := c.EvictionTargets(ctx)
		if err != nil {
			return err
		}
		for len(targets) > 0 && ctx.Err() == nil && r.clock().Before(until) {
			n, done, err := c.Evict(ctx, targets, r.cfg.EvictionBatchSize)
			if err != nil {
				return err
			}
			if done == 0 && n == 0 {
				return errNoProgress
			}
			r.count.evicted.AddInt64(n)
			total += n
			targets = targets[done:]
		}
		return nil
	})
	r.record(ctx, jobEviction, led, err, total > 0, "evicted", total, "took", r.clock().Sub(start))
}

// record counts a run and logs it: at info when it changed something, at
// warn when it failed. A run Stop cancelled is only logged at debug.
func (r *Retention) record(ctx context.Context, job string, led bool, err error, changed bool, attrs ...any) {
	switch {
	case err != nil && ctx.Err() != nil:
		r.log.Debug(job+" run stopped", append(attrs, "err", err)...)
	case err != nil:
		r.runOutcome(job, "failed").Inc()
		r.log.Warn(job+" run failed", append(attrs, "err", err)...)
	case !led:
		r.runOutcome(job, "skipped").Inc()
		r.log.Debug(job + " run skipped: another process leads it")
	case changed:
		r.runOutcome(job, "led").Inc()
		r.log.Info(job+" run", attrs...)
	default:
		r.runOutcome(job, "led").Inc()
		r.log.Debug(job+" run", attrs...)
	}
}

// refreshAges re-reads the oldest retained message of every queue. A queue
// that holds none (or is gone) loses its gauge.
func (r *Retention) refreshAges(ctx context.Context, c RetentionConn) {
	oldest, err := c.OldestMessages(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("reading the oldest messages failed", "err", err)
		}
		return
	}
	for q := range r.ages {
		if _, ok := oldest[q]; !ok {
			r.set.UnregisterMetric(ageGaugeName(q))
			delete(r.ages, q)
		}
	}
	for q, t := range oldest {
		a := r.ages[q]
		if a == nil {
			a = &atomic.Int64{}
			r.ages[q] = a
			r.set.GetOrCreateGauge(ageGaugeName(q), func() float64 {
				return max(r.clock().Sub(time.Unix(0, a.Load())).Seconds(), 0)
			})
		}
		a.Store(t.UnixNano())
	}
}

// ageGaugeName is the name of a queue's oldest-message-age gauge. The queue
// name is escaped as a Prometheus label value.
func ageGaugeName(queue string) string {
	return `queengo_queue_oldest_message_age_seconds{queue="` + labelEscaper.Replace(queue) + `"}`
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
