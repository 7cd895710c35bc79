package http

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// The /api/v1/analytics routes: time series of the collector's samples, in
// the shapes the reference server's dashboard reads ({timeRange,
// bucketMinutes, ...}, docs/api-admin.md "The analytics routes"), or with
// ?format=queengo queengo's own series, {from, to, bucketSeconds, series};
// and the live PostgreSQL statistics.

// analyticsWindowDefault is a series' window when from is absent.
const analyticsWindowDefault = time.Hour

// seriesQuery reads what every series route takes: from, to, bucketSeconds
// (default: whole minutes, about 60 to 120 points) and the queue filters.
func seriesQuery(args *fasthttp.Args) (queengo.SeriesQuery, *apiError) {
	var q queengo.SeriesQuery
	var e *apiError
	if q.Filter, e = statusFilter(args); e != nil {
		return q, e
	}
	if q.From, q.To, e = window(args, analyticsWindowDefault); e != nil {
		return q, e
	}
	secs, e := intParam(args, "bucketSeconds", int(autoBucket(q.From, q.To)/time.Second), 1, 86400)
	if e != nil {
		return q, e
	}
	q.Bucket = time.Duration(secs) * time.Second
	if q.To.Sub(q.From)/q.Bucket > seriesPointsMax {
		return q, &errTooManyPoints
	}
	return q, nil
}

// serveSeries answers one series route.
func (s *Server) serveSeries(ctx *fasthttp.RequestCtx, q queengo.SeriesQuery,
	read func(context.Context, queengo.SeriesQuery) (queengo.Series, error)) {
	series, err := read(ctx, q)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	s.writeJSONValue(ctx, map[string]any{"from": isoTime(q.From), "to": isoTime(q.To),
		"bucketSeconds": int(q.Bucket / time.Second), "series": series})
}

// series parses a series route's parameters, with extra for its own, and
// answers it.
func (s *Server) series(ctx *fasthttp.RequestCtx, read func(context.Context, queengo.SeriesQuery) (queengo.Series, error),
	extra func(*fasthttp.Args, *queengo.SeriesQuery) *apiError) {
	args := ctx.QueryArgs()
	q, e := seriesQuery(args)
	if e == nil && extra != nil {
		e = extra(args, &q)
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	s.serveSeries(ctx, q, read)
}

// analyticsRoute is one analytics route: board reads its answer in the
// reference's shape, series queengo's series (?format=queengo).
type analyticsRoute struct {
	board, series func(context.Context, queengo.SeriesQuery) (queengo.Series, error)
	// extra reads the route's own parameters.
	extra func(*fasthttp.Args, *queengo.SeriesQuery) *apiError
	// minuteBuckets: the reference's route answers rows of one minute (its
	// dashboard divides their counts by 60), as long as the window holds at
	// most seriesPointsMax of them.
	minuteBuckets bool
	// bare: the answer is an array, as the reference's, with no timeRange.
	bare bool
	// summary: the answer carries the cluster totals (worker-metrics).
	summary bool
}

// analytics answers an analytics route.
func (s *Server) analytics(ctx *fasthttp.RequestCtx, r analyticsRoute) {
	args := ctx.QueryArgs()
	switch string(args.Peek("format")) {
	case "queengo":
		s.series(ctx, r.series, r.extra)
		return
	case "":
	default:
		s.writeError(ctx, errFormatParam)
		return
	}
	var q queengo.SeriesQuery
	var e *apiError
	if q.Filter, e = statusFilter(args); e != nil {
		s.writeError(ctx, *e)
		return
	}
	from, to, e := window(args, analyticsWindowDefault)
	if e == nil && r.extra != nil {
		e = r.extra(args, &q)
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	q.Bucket = boardBucket(from, to)
	if r.minuteBuckets && to.Sub(from) <= seriesPointsMax*time.Minute {
		q.Bucket = time.Minute
	}
	// Buckets start on whole multiples of their length, as the
	// reference's minutes do; the first may start before from.
	q.From, q.To = from.Truncate(q.Bucket), to
	body, err := r.board(ctx, q)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	if r.bare {
		var b bytes.Buffer
		if err := json.Compact(&b, body); err != nil {
			s.writeFailure(ctx, errInternal, err)
			return
		}
		writeJSON(ctx, fasthttp.StatusOK, b.Bytes())
		return
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		s.writeFailure(ctx, errInternal, err)
		return
	}
	out := make(map[string]any, len(m)+3)
	for k, v := range m {
		out[k] = v
	}
	out["timeRange"] = map[string]any{"from": isoTime(from), "to": isoTime(to)}
	out["bucketMinutes"] = int(q.Bucket / time.Minute)
	if r.summary {
		out["summary"] = clusterSummary(s.broker.ClusterTotals())
	}
	s.writeJSONValue(ctx, out)
}

// boardBucket is the reference's bucket for a window: a minute up to an
// hour, 5 minutes up to 6 hours, 15 up to a day, an hour up to a week, 6
// hours past it.
func boardBucket(from, to time.Time) time.Duration {
	switch m := to.Sub(from).Round(time.Minute); {
	case m <= time.Hour:
		return time.Minute
	case m <= 6*time.Hour:
		return 5 * time.Minute
	case m <= 24*time.Hour:
		return 15 * time.Minute
	case m <= 7*24*time.Hour:
		return time.Hour
	default:
		return 6 * time.Hour
	}
}

// clusterSummary is worker-metrics' summary: the counts of every broker
// process on the database since each started (where the reference has
// lifetime totals).
func clusterSummary(t queengo.ClusterTotals) map[string]any {
	return map[string]any{"totalPushMessages": t.PushMessages, "totalPopMessages": t.PopMessages,
		"totalAckMessages": t.AckMessages, "totalPushRequests": t.PushRequests, "totalPopRequests": t.PopRequests,
		"totalAckRequests": t.AckRequests, "totalDbErrors": t.DBErrors, "totalAckFailed": t.AckFailed,
		"totalDlq": t.DeadLettered, "pendingMessages": int64(t.PushMessages) - int64(t.PopMessages)}
}

// workerFilters reads the process routes' hostname and workerId (an
// instance's host:port).
func workerFilters(args *fasthttp.Args, q *queengo.SeriesQuery) *apiError {
	var e *apiError
	if q.Hostname, e = textParam(args, "hostname"); e != nil {
		return e
	}
	q.Instance, e = textParam(args, "workerId")
	return e
}

func (s *Server) handleSystemMetrics(ctx *fasthttp.RequestCtx) {
	s.analytics(ctx, analyticsRoute{board: s.broker.SystemMetrics, series: s.broker.SystemSeries, extra: workerFilters})
}

func (s *Server) handleWorkerMetrics(ctx *fasthttp.RequestCtx) {
	s.analytics(ctx, analyticsRoute{board: s.broker.WorkerMetrics, series: s.broker.WorkerSeries, extra: workerFilters,
		summary: true})
}

func (s *Server) handleQueueLag(ctx *fasthttp.RequestCtx) {
	s.analytics(ctx, analyticsRoute{board: s.broker.QueueLag, series: s.broker.QueueSeries, minuteBuckets: true, bare: true})
}

func (s *Server) handleQueueOps(ctx *fasthttp.RequestCtx) {
	s.analytics(ctx, analyticsRoute{board: s.broker.QueueOps, series: s.broker.QueueSeries})
}

func (s *Server) handleParkedReplicas(ctx *fasthttp.RequestCtx) {
	s.analytics(ctx, analyticsRoute{board: s.broker.QueueParkedReplicas, series: s.broker.ParkedSeries})
}

func (s *Server) handleRetentionAnalytics(ctx *fasthttp.RequestCtx) {
	s.analytics(ctx, analyticsRoute{board: s.broker.RetentionTimeseries, series: s.broker.RetentionSeries})
}

func (s *Server) handlePostgresStats(ctx *fasthttp.RequestCtx) {
	stats, err := s.broker.PostgresStats(ctx)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, stats)
}
