package admin

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/queengo/queengo"
)

// StatusStore is what the status and analytics routes and the metrics collector (docs/api-admin.md "Status, analytics and metrics") need of the store.
type StatusStore interface {
	// AllQueueFigures returns the figures of every queue (the collector's
	// tick).
	AllQueueFigures(ctx context.Context) ([]queengo.QueueFigures, error)
	StatusQueues(ctx context.Context, f queengo.StatusFilter, limit, offset int) ([]queengo.QueueFigures, int, error)
	DeadLetterSummary(ctx context.Context, f queengo.StatusFilter, topN int) (queengo.DeadLetterSummary, error)
	QueueDetail(ctx context.Context, name string, limit, offset int) (queengo.QueueDetail, error)
	QueueMessages(ctx context.Context, name string, limit, offset int) ([]queengo.QueueMessage, error)
	PostgresStats(ctx context.Context) (queengo.PostgresStats, error)
	WriteSamples(ctx context.Context, w queengo.SampleWrite) (queengo.SampleResult, error)
	QueueSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
	SystemSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
	WorkerSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
	ParkedSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
	RetentionSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
	SystemMetrics(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
	WorkerMetrics(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
	QueueLag(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
	QueueOps(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
	QueueParkedReplicas(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
	RetentionTimeseries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error)
}

// The status and analytics door: reads only, so nothing is told to the
// actors. Figures are live cursor and segment arithmetic; series come from
// the collector's samples.

// StatusQueues returns one page of the queues f selects, newest first, with
// their live figures, and how many f selects in all.
func (a *Admin) StatusQueues(ctx context.Context, f queengo.StatusFilter, limit, offset int) ([]queengo.QueueFigures, int, error) {
	return a.store.StatusQueues(ctx, f, limit, offset)
}

// StatusTotals returns the figures of every queue f selects, newest first,
// shared between readers (jobs.Figures), and when their computation
// started: what GET /api/v1/status sums, read from figures of every queue
// so that dashboards polling it cost one computation per statsFresh.
func (a *Admin) StatusTotals(ctx context.Context, f queengo.StatusFilter) ([]queengo.QueueFigures, time.Time, error) {
	all, at, err := a.figures.Queues(ctx)
	if err != nil {
		return nil, at, err
	}
	out := make([]queengo.QueueFigures, 0, len(all))
	for _, q := range all {
		if (f.Queue == "" || q.Name == f.Queue) && (f.Namespace == "" || q.Namespace == f.Namespace) &&
			(f.Task == "" || q.Task == f.Task) {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, func(x, y queengo.QueueFigures) int {
		if c := y.CreatedAt.Compare(x.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(x.Name, y.Name)
	})
	return out, at, nil
}

// DeadLetterSummary counts the dead letters of the queues f selects.
func (a *Admin) DeadLetterSummary(ctx context.Context, f queengo.StatusFilter, topN int) (queengo.DeadLetterSummary, error) {
	return a.store.DeadLetterSummary(ctx, f, topN)
}

// QueueDetail returns a queue with its totals and a page of its partitions,
// or an error wrapping queengo.ErrNotFound.
func (a *Admin) QueueDetail(ctx context.Context, name string, limit, offset int) (queengo.QueueDetail, error) {
	return a.store.QueueDetail(ctx, name, limit, offset)
}

// QueueMessages returns a page of a queue's messages, newest first, or an
// error wrapping queengo.ErrNotFound.
func (a *Admin) QueueMessages(ctx context.Context, name string, limit, offset int) ([]queengo.QueueMessage, error) {
	return a.store.QueueMessages(ctx, name, limit, offset)
}

// PostgresStats is the live view of the database.
func (a *Admin) PostgresStats(ctx context.Context) (queengo.PostgresStats, error) {
	return a.store.PostgresStats(ctx)
}

// QueueSeries is the throughput and lag series of the queues q selects.
func (a *Admin) QueueSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.QueueSeries(ctx, q)
}

// SystemSeries is the process series summed over the broker instances.
func (a *Admin) SystemSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.SystemSeries(ctx, q)
}

// WorkerSeries is the process series per broker instance.
func (a *Admin) WorkerSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.WorkerSeries(ctx, q)
}

// ParkedSeries is the parked long polls per queue over the instances.
func (a *Admin) ParkedSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.ParkedSeries(ctx, q)
}

// RetentionSeries is what the data lifecycle removed, per bucket.
func (a *Admin) RetentionSeries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.RetentionSeries(ctx, q)
}

// The analytics routes in the reference dashboard's shapes
// (docs/api-admin.md "The analytics routes").

// SystemMetrics is each broker instance's CPU, memory and pool per bucket.
func (a *Admin) SystemMetrics(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.SystemMetrics(ctx, q)
}

// WorkerMetrics is the instances' requests and messages per bucket, each
// instance's last minutes and each queue's pops over the window.
func (a *Admin) WorkerMetrics(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.WorkerMetrics(ctx, q)
}

// QueueLag is each queue's pops and time lag per bucket, newest first.
func (a *Admin) QueueLag(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.QueueLag(ctx, q)
}

// QueueOps is each queue's throughput, lag, partitions and parked pops per
// bucket.
func (a *Admin) QueueOps(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.QueueOps(ctx, q)
}

// QueueParkedReplicas is the parked long polls per queue and instance per
// bucket.
func (a *Admin) QueueParkedReplicas(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.QueueParkedReplicas(ctx, q)
}

// RetentionTimeseries is what retention and eviction removed per bucket.
func (a *Admin) RetentionTimeseries(ctx context.Context, q queengo.SeriesQuery) (queengo.Series, error) {
	return a.store.RetentionTimeseries(ctx, q)
}
