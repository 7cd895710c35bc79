package http

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// The /api/v1/analytics routes: time series of the collector's samples,
// each answered as {from, to, bucketSeconds, series} (docs/api-admin.md), and the
// live PostgreSQL statistics.

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

func (s *Server) handleSystemMetrics(ctx *fasthttp.RequestCtx) {
	s.series(ctx, s.broker.SystemSeries, nil)
}

func (s *Server) handleWorkerMetrics(ctx *fasthttp.RequestCtx) {
	s.series(ctx, s.broker.WorkerSeries, func(args *fasthttp.Args, q *queengo.SeriesQuery) *apiError {
		var e *apiError
		if q.Hostname, e = textParam(args, "hostname"); e != nil {
			return e
		}
		q.Instance, e = textParam(args, "workerId")
		return e
	})
}

func (s *Server) handleQueueLag(ctx *fasthttp.RequestCtx) { s.series(ctx, s.broker.QueueSeries, nil) }

func (s *Server) handleQueueOps(ctx *fasthttp.RequestCtx) { s.series(ctx, s.broker.QueueSeries, nil) }

func (s *Server) handleParkedReplicas(ctx *fasthttp.RequestCtx) {
	s.series(ctx, s.broker.ParkedSeries, nil)
}

func (s *Server) handleRetentionAnalytics(ctx *fasthttp.RequestCtx) {
	s.series(ctx, s.broker.RetentionSeries, nil)
}

func (s *Server) handlePostgresStats(ctx *fasthttp.RequestCtx) {
	stats, err := s.broker.PostgresStats(ctx)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, stats)
}
