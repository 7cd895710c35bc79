package jobs

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// Defaults and bounds of CollectorConfig.
const (
	// SampleIntervalDefault is METRICS_SAMPLE_INTERVAL_MS. The reference
	// samples in memory every second and writes a row per queue every
	// minute (METRICS_AGGREGATE_INTERVAL_S 60); queengo writes every
	// sample. A tick at 1,000 queues x 10 partitions x 3 groups, every
	// queue with a backlog, took about 300 ms of one database connection
	// on the 2-core development box (docs/admin-internals.md "Metrics
	// collector"): at 30 s that is about 0.5% of the database's two cores,
	// within the 1% budget, where 10 s would pass it; the dashboards still
	// get two points a minute and the per-minute rates three samples.
	SampleIntervalDefault = 30 * time.Second
	// SampleIntervalMin and SampleIntervalMax bound it: under 100 ms the
	// tick would be a load of its own; over 5 minutes a series could not
	// find a row's predecessor within its lookback (10 minutes).
	SampleIntervalMin = 100 * time.Millisecond
	SampleIntervalMax = 5 * time.Minute
	// SampleRetentionDefault is METRICS_RETENTION_DAYS (7) as a duration.
	SampleRetentionDefault = 7 * 24 * time.Hour
	// maxQueueRows caps the queue rows of one tick (one multi-row insert);
	// queues past it (in name order) are left out of that tick's history
	// and counted in queengo_metrics_queue_rows_dropped_total.
	maxQueueRows = 10_000
	// sampleDeleteBatch caps the expired samples one tick deletes: at the
	// default interval 30 s, 5,000 rows a tick drains 600,000 an hour, far
	// above the 120,000 an hour 1,000 busy queues write, in short
	// statements.
	sampleDeleteBatch = 5_000
	// rateWindow is the span the per-minute rates are taken over.
	rateWindow = time.Minute
	// othersWindowMin is the shortest window in which another process's
	// newest row must lie for its counters to count in the cluster totals
	// (the window is 3 intervals, at least this): a process that stopped
	// leaves them after it, a live one that samples at another interval
	// (up to a third of the window) stays in.
	othersWindowMin = time.Minute
)

// CollectorConfig configures the metrics collector. Zero fields take the
// defaults above.
type CollectorConfig struct {
	// Interval is METRICS_SAMPLE_INTERVAL_MS.
	Interval time.Duration
	// Retention is METRICS_RETENTION_DAYS: older samples are deleted.
	Retention time.Duration
	// Instance names this process in the samples (its process rows and
	// /analytics/worker-metrics' workerId); Hostname is its host.
	Instance, Hostname string
	// Requests reads this process's request counters (package http's
	// queengo_* counters); nil: none are recorded.
	Requests func() queengo.RequestCounts
	// Parked reads this process's parked long polls per queue
	// (Broker.ParkedByQueue), and ParkedTotal all of them, discovery
	// scopes' included (Broker.ParkedTotal); nil: none are recorded.
	Parked      func() map[string]int64
	ParkedTotal func() int64
	// Backoff reads this process's long polls in back-off
	// (Broker.BackoffStats); nil: none are recorded.
	Backoff func() queengo.BackoffStats
	// Lifecycle is the process's retention service, whose counters the
	// process rows carry; nil: none.
	Lifecycle *Retention
	// Metrics is the set the collector's own figures are registered in
	// (the broker process's, served on /metrics/prometheus); nil: a set of
	// its own that nothing serves.
	Metrics *metrics.Set
}

// CollectorStore is what the collector needs of the database layer.
type CollectorStore interface {
	AllQueueFigures(ctx context.Context) ([]queengo.QueueFigures, error)
	WriteSamples(ctx context.Context, w queengo.SampleWrite) (queengo.SampleResult, error)
	PoolStats() (total, idle, acquired int32)
}

// Collector samples, every Interval, the database-wide figures of every
// queue (one aggregate statement over partition and cursor rows) and this
// process's own figures, and writes them to queen.metrics_samples in one
// transaction on a pooled connection: the process row always, the queue
// rows when it is the tick's leader (docs/admin-internals.md "Metrics
// collector"). It keeps the last minute of queue figures in memory for
// /metrics/prometheus. Nothing of it runs on the push or pop path.
type Collector struct {
	cfg   CollectorConfig
	store CollectorStore
	log   *slog.Logger
	clock func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	count  collectorCounters
	latest atomic.Pointer[queengo.MetricsSnapshot]
	// others are the other processes' counters as the last tick read them.
	others atomic.Pointer[queengo.ClusterTotals]

	// Only the loop touches these.
	history []rateSample
	prev    map[uuid.UUID]queueState
	ledAt   time.Time // the previous tick this process led; zero: none
	// lastWritten is the time of this process's newest queue rows (every
	// led tick writes at least the row of every queue together) while it
	// led every tick since; zero: none.
	lastWritten time.Time
}

// NewCollector returns the collector, not yet running.
func NewCollector(cfg CollectorConfig, store CollectorStore, log *slog.Logger) *Collector {
	if cfg.Interval <= 0 {
		cfg.Interval = SampleIntervalDefault
	}
	if cfg.Retention <= 0 {
		cfg.Retention = SampleRetentionDefault
	}
	if log == nil {
		log = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Collector{cfg: cfg, store: store, log: log, clock: time.Now, ctx: ctx, cancel: cancel,
		count: newCollectorCounters(cfg.Metrics), prev: map[uuid.UUID]queueState{}}
}

// Start samples now and then every Interval.
func (c *Collector) Start() {
	c.wg.Add(1)
	go c.loop()
}

// Stop ends the collector, cancelling a tick in flight; call it before
// closing the store.
func (c *Collector) Stop() {
	c.cancel()
	c.wg.Wait()
}

func (c *Collector) loop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		c.tick(c.ctx)
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// collectorCounters are the collector's own figures.
type collectorCounters struct {
	ticks, failures, queueRows, dropped, deleted *metrics.Counter
	tickTime                                     *metrics.PrometheusHistogram
}

func newCollectorCounters(set *metrics.Set) collectorCounters {
	return collectorCounters{
		ticks:     set.NewCounter(`queengo_metrics_samples_ticks_total`),
		failures:  set.NewCounter(`queengo_metrics_samples_failures_total`),
		queueRows: set.NewCounter(`queengo_metrics_samples_queue_rows_total`),
		dropped:   set.NewCounter(`queengo_metrics_queue_rows_dropped_total`),
		deleted:   set.NewCounter(`queengo_metrics_samples_deleted_total`),
		tickTime:  set.NewPrometheusHistogramExt(`queengo_metrics_sample_duration_seconds`, secondsBuckets),
	}
}

// secondsBuckets are the tick duration histogram's buckets (Prometheus'
// kind, le), from half a millisecond to 30 s.
var secondsBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// processStartTime is when this process started, for its uptime.
var processStartTime = time.Now()

// Snapshot is the last sample in this process; nil before the first tick.
func (c *Collector) Snapshot() *queengo.MetricsSnapshot { return c.latest.Load() }

// tick is one sample: read, publish in memory, write.
func (c *Collector) tick(ctx context.Context) {
	start := time.Now()
	// PostgreSQL keeps microseconds: the tick's time round-trips exactly.
	at := c.clock().Truncate(time.Microsecond)
	figs, err := c.store.AllQueueFigures(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.count.failures.Inc()
			c.log.Warn("metrics collector: reading queue figures failed", "err", err)
		}
		return
	}
	parkedBy := map[string]int64{}
	if c.cfg.Parked != nil {
		parkedBy = c.cfg.Parked()
	}
	c.publish(at, figs, parkedBy)
	rows := make(map[uuid.UUID]queueRow, len(figs))
	for i := range figs {
		rows[figs[i].QueueID] = rowOf(&figs[i], at)
	}
	var next map[uuid.UUID]queueState
	var written int
	last := c.lastWritten
	// The queue rows are decided once the store knows whether this
	// process's rows are the newest (continuous; see selectRows).
	queues := func(continuous bool) []queengo.QueueSample {
		prevAt := c.ledAt
		if !continuous {
			prevAt = time.Time{}
		}
		var write []queengo.QueueSample
		write, next = selectRows(c.prev, figs, rows, at, prevAt)
		if len(write) > maxQueueRows {
			c.count.dropped.Add(len(write) - maxQueueRows)
			write = write[:maxQueueRows]
		}
		written = len(write)
		last = at
		return append(write, queengo.QueueSample{QueueID: queengo.AllQueuesID, At: at, Figures: mustJSON(totalOf(rows))})
	}
	proc, _ := json.Marshal(c.processRow(parkedBy))
	res, err := c.store.WriteSamples(ctx, queengo.SampleWrite{At: at, Instance: c.cfg.Instance, Process: proc,
		Queues: queues, LastWritten: c.lastWritten, MinGap: c.cfg.Interval / 2, Cutoff: at.Add(-c.cfg.Retention),
		DeleteLimit: sampleDeleteBatch, OthersSince: at.Add(-max(3*c.cfg.Interval, othersWindowMin))})
	if err != nil {
		if ctx.Err() == nil {
			c.count.failures.Inc()
			c.log.Warn("metrics collector: writing samples failed", "err", err)
		}
		return
	}
	c.count.ticks.Inc()
	c.count.deleted.AddInt64(res.Deleted)
	c.others.Store(&res.Others)
	// A tick this process did not lead (another process wrote the queue
	// rows within MinGap, or this one did: a slow tick makes the ticker's
	// next fire come early) leaves the state of the last one it led: the
	// next led tick asks the store whether those rows are still the newest,
	// and if so the queues created meanwhile get their row of zeros there.
	// Forgetting it made that tick not continuous, and those queues' first
	// messages never counted in the rates.
	if res.Led {
		c.count.queueRows.Add(written)
		c.prev, c.ledAt, c.lastWritten = next, at, last
	}
	c.count.tickTime.UpdateDuration(start)
}

// queueRow is a queue's row in queen.metrics_samples (its JSON keys are
// what the series statements of pg/samples.go read).
type queueRow struct {
	Pushed       int64 `json:"pushed"`
	Consumed     int64 `json:"consumed"`
	Handed       int64 `json:"handed"` // consumed + processing: messages handed out at least once
	Pending      int64 `json:"pending"`
	Processing   int64 `json:"processing"`
	Completed    int64 `json:"completed"`
	Retained     int64 `json:"retained"`
	OffsetLag    int64 `json:"offsetLag"`
	MaxOffsetLag int64 `json:"maxOffsetLag"`
	TimeLagMs    int64 `json:"timeLagMs"`
	DeadLetters  int64 `json:"deadLetters"`
	Partitions   int   `json:"partitions"`
	Leases       int   `json:"leases"`
}

// totalRow is the row of every queue together (queengo.AllQueuesID): the
// sums of their rows, with the largest time lag in TimeLagMs and the
// average over the queues with one in AvgTimeLagMs.
type totalRow struct {
	queueRow
	AvgTimeLagMs int64 `json:"avgTimeLagMs"`
	Queues       int   `json:"queues"`
}

func totalOf(rows map[uuid.UUID]queueRow) totalRow {
	var t totalRow
	var lagSum, lagged int64
	for _, r := range rows {
		t.Pushed += r.Pushed
		t.Consumed += r.Consumed
		t.Handed += r.Handed
		t.Pending += r.Pending
		t.Processing += r.Processing
		t.Completed += r.Completed
		t.Retained += r.Retained
		t.OffsetLag += r.OffsetLag
		t.MaxOffsetLag = max(t.MaxOffsetLag, r.MaxOffsetLag)
		t.TimeLagMs = max(t.TimeLagMs, r.TimeLagMs)
		t.DeadLetters += r.DeadLetters
		t.Partitions += r.Partitions
		t.Leases += r.Leases
		if r.TimeLagMs > 0 {
			lagSum, lagged = lagSum+r.TimeLagMs, lagged+1
		}
	}
	if lagged > 0 {
		t.AvgTimeLagMs = lagSum / lagged
	}
	t.Queues = len(rows)
	return t
}

func rowOf(f *queengo.QueueFigures, at time.Time) queueRow {
	return queueRow{Pushed: f.Pushed, Consumed: f.Consumed, Handed: f.Consumed + f.Processing,
		Pending: f.Pending, Processing: f.Processing, Completed: f.Completed, Retained: f.Retained,
		OffsetLag: f.OffsetLag, MaxOffsetLag: f.MaxOffsetLag, TimeLagMs: timeLag(f.OldestUnconsumedAt, at),
		DeadLetters: f.DeadLetters, Partitions: f.Partitions, Leases: f.Leases}
}

// timeLag is the age at at of the oldest unconsumed message, 0 for none.
func timeLag(oldest, at time.Time) int64 {
	if oldest.IsZero() {
		return 0
	}
	return max(at.Sub(oldest).Milliseconds(), 0)
}

// queueState is a queue's row at the previous tick and whether it was
// written.
type queueState struct {
	row     queueRow
	at      time.Time
	written bool
}

// selectRows decides the queue rows of a tick at at. prevAt is the
// previous tick this process led when the tick is continuous: the newest
// queue rows in the database are this process's (so no other process
// wrote since, and prev, that tick's state, describes the history); zero
// otherwise.
//
// A queue idle at the previous tick and now (same figures, nothing pending
// or in flight) gets no row: most queues of a large installation are idle,
// and their history would be the same row again. A queue that changes after
// skipped ticks gets its previous tick's row too, and a queue created since
// the previous tick gets a row of zeros at it, so the delta between
// consecutive rows never spans a gap and a new queue's first messages count
// (rates stay exact). Without a continuous previous tick every queue gets a
// row. It returns the rows in figs' order and the state for the next tick.
func selectRows(prev map[uuid.UUID]queueState, figs []queengo.QueueFigures, rows map[uuid.UUID]queueRow,
	at, prevAt time.Time) ([]queengo.QueueSample, map[uuid.UUID]queueState) {
	continuous := !prevAt.IsZero()
	next := make(map[uuid.UUID]queueState, len(figs))
	var out []queengo.QueueSample
	for i := range figs {
		id := figs[i].QueueID
		r := rows[id]
		p, seen := prev[id]
		switch {
		case continuous && seen && p.row == r && r.Pending == 0 && r.Processing == 0:
			next[id] = queueState{row: r, at: at}
			continue
		case continuous && seen && !p.written:
			out = append(out, queengo.QueueSample{QueueID: id, At: p.at, Figures: mustJSON(p.row)})
		case continuous && !seen:
			out = append(out, queengo.QueueSample{QueueID: id, At: prevAt, Figures: mustJSON(queueRow{})})
		}
		out = append(out, queengo.QueueSample{QueueID: id, At: at, Figures: mustJSON(r)})
		next[id] = queueState{row: r, at: at, written: true}
	}
	return out, next
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of numbers and strings
	}
	return b
}

// rateSample is the cumulative counters of every queue at one tick.
type rateSample struct {
	at     time.Time
	counts map[uuid.UUID][3]int64 // pushed, handed, consumed
}

// publish keeps the tick's counters for the rates and makes the snapshot
// /metrics/prometheus reads.
func (c *Collector) publish(at time.Time, figs []queengo.QueueFigures, parkedBy map[string]int64) {
	cur := rateSample{at: at, counts: make(map[uuid.UUID][3]int64, len(figs))}
	for i := range figs {
		f := &figs[i]
		cur.counts[f.QueueID] = [3]int64{f.Pushed, f.Consumed + f.Processing, f.Consumed}
	}
	c.history = trimHistory(append(c.history, cur), at)
	base := c.history[0]
	snap := &queengo.MetricsSnapshot{At: at, Queues: make([]queengo.QueueRates, len(figs))}
	for i := range figs {
		f := &figs[i]
		r := perMinute(base, cur, f.QueueID, f.CreatedAt)
		snap.Queues[i] = queengo.QueueRates{Figures: *f, PushPerMinute: r[0], PopPerMinute: r[1], AckPerMinute: r[2],
			TimeLagMs: timeLag(f.OldestUnconsumedAt, at), Parked: parkedBy[f.Name]}
		snap.DeadLetters += f.DeadLetters
	}
	c.latest.Store(snap)
}

// trimHistory drops the samples the rates no longer need: it keeps the
// newest sample at least rateWindow older than now, and everything after.
func trimHistory(h []rateSample, now time.Time) []rateSample {
	keep := 0
	for i := range h {
		if now.Sub(h[i].at) >= rateWindow {
			keep = i
		}
	}
	return append(h[:0], h[keep:]...)
}

// perMinute is a queue's growth per minute of each counter between base
// and cur. A queue base does not know counts from 0 when it was created
// after base, else it has no rate until the history knows it. A counter
// that went back (a group deleted) counts as no growth.
func perMinute(base, cur rateSample, id uuid.UUID, created time.Time) [3]float64 {
	var out [3]float64
	b, ok := base.counts[id]
	el := cur.at.Sub(base.at)
	if !ok && created.After(base.at) {
		ok = true
	}
	if !ok || el <= 0 {
		return out
	}
	c := cur.counts[id]
	for i := range out {
		out[i] = float64(max(c[i]-b[i], 0)) * float64(time.Minute) / float64(el)
	}
	return out
}

// processRow is this process's row in queen.metrics_samples (its JSON keys
// are what the series statements of pg/samples.go read).
func (c *Collector) processRow(parkedBy map[string]int64) map[string]any {
	p := ReadProcess()
	total, idle, acquired := c.store.PoolStats()
	var parked int64
	if c.cfg.ParkedTotal != nil {
		parked = c.cfg.ParkedTotal()
	}
	row := map[string]any{
		"hostname": c.cfg.Hostname, "pid": os.Getpid(), "uptimeSeconds": int64(time.Since(processStartTime).Seconds()),
		"cpuUserUs": p.CPUUserUs, "cpuSystemUs": p.CPUSystemUs, "rssBytes": p.RSSBytes, "heapAllocBytes": p.HeapAllocBytes,
		"heapSysBytes": p.HeapSysBytes, "goroutines": p.Goroutines,
		"poolTotal": total, "poolIdle": idle, "poolAcquired": acquired,
		"parked": parked, "parkedByQueue": parkedBy,
	}
	var lc lifecycleCounts
	if c.cfg.Lifecycle != nil {
		lc = c.cfg.Lifecycle.counts()
	}
	row["retentionDroppedSegments"], row["retentionDroppedMessages"] = lc.droppedSegments, lc.droppedMessages
	row["retentionDroppedBytes"], row["evictedMessages"] = lc.droppedBytes, lc.evicted
	row["retentionRemovedPartitions"] = lc.removedPartitions
	if c.cfg.Requests != nil {
		r := c.cfg.Requests()
		for k, v := range map[string]uint64{"pushRequests": r.PushRequests, "pushMessages": r.PushMessages,
			"pushDuplicates": r.PushDuplicates, "pushFailed": r.PushFailed, "popRequests": r.PopRequests,
			"popMessages": r.PopMessages, "popEmpty": r.PopEmpty, "popErrors": r.PopErrors,
			"ackRequests": r.AckRequests, "ackItems": r.AckItems, "ackFailed": r.AckFailed, "dbErrors": r.DBErrors,
			"transactions": r.Transactions, "deadLettered": r.DeadLettered} {
			row[k] = v
		}
	}
	row["virtualBytes"] = p.VirtualBytes
	if c.cfg.Backoff != nil {
		b := c.cfg.Backoff()
		row["backoffGroups"], row["backoffQueues"], row["backoffKeys"] = b.Groups, b.Queues, b.Keys
		row["backoffAvgIntervalMs"] = b.AvgInterval.Milliseconds()
	}
	return row
}

// Instance names this process in the samples (CollectorConfig.Instance).
func (c *Collector) Instance() string { return c.cfg.Instance }

// ClusterTotals are the request and message counts of every broker process
// on the database: the others' from their newest rows as the last tick read
// them, this one's live (so its own requests count at once). Before the
// first tick only this process counts.
func (c *Collector) ClusterTotals() queengo.ClusterTotals {
	var t queengo.ClusterTotals
	if o := c.others.Load(); o != nil {
		t = *o
	}
	t.Processes++
	if c.cfg.Requests != nil {
		r := c.cfg.Requests()
		t.PushRequests += r.PushRequests
		t.PopRequests += r.PopRequests
		t.AckRequests += r.AckRequests
		t.Transactions += r.Transactions
		t.PushMessages += r.PushMessages
		t.PopMessages += r.PopMessages
		t.AckMessages += r.AckItems
		t.AckFailed += r.AckFailed
		t.DBErrors += r.DBErrors
		t.DeadLettered += r.DeadLettered
	}
	if c.cfg.Lifecycle != nil {
		t.DeadLettered += c.cfg.Lifecycle.counts().evicted
	}
	return t
}

// ReadProcess reads this process's CPU time (getrusage), resident and
// virtual memory (/proc/self/statm; the peak RSS where there is no /proc),
// heap and goroutines.
func ReadProcess() queengo.ProcessStats {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p := queengo.ProcessStats{
		CPUUserUs:   ru.Utime.Sec*1e6 + int64(ru.Utime.Usec),
		CPUSystemUs: ru.Stime.Sec*1e6 + int64(ru.Stime.Usec),
		RSSBytes:    uint64(ru.Maxrss) * 1024, HeapAllocBytes: ms.HeapAlloc, HeapSysBytes: ms.HeapSys,
		Goroutines: runtime.NumGoroutine(),
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 2 {
			page := uint64(os.Getpagesize())
			vms, _ := strconv.ParseUint(f[0], 10, 64)
			rss, _ := strconv.ParseUint(f[1], 10, 64)
			p.VirtualBytes, p.RSSBytes = vms*page, rss*page
		}
	}
	return p
}
