package http

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// StatusAdmin is what the status and analytics routes (docs/api-admin.md "Status, analytics and metrics") need of the Broker.
type StatusAdmin interface {
	StatusQueues(ctx context.Context, f queengo.StatusFilter, limit, offset int) ([]queengo.QueueFigures, int, error)
	DeadLetterSummary(ctx context.Context, f queengo.StatusFilter, topN int) (queengo.DeadLetterSummary, error)
	QueueDetail(ctx context.Context, name string, limit, offset int) (queengo.QueueDetail, error)
	QueueMessages(ctx context.Context, name string, limit, offset int) ([]queengo.QueueMessage, error)
	PostgresStats(ctx context.Context) (queengo.PostgresStats, error)
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
	StatusTotals(ctx context.Context, f queengo.StatusFilter) ([]queengo.QueueFigures, time.Time, error)
	MetricsSnapshot() *queengo.MetricsSnapshot
	ClusterTotals() queengo.ClusterTotals
	BackoffStats() queengo.BackoffStats
	Instance() string
	PopMaintenanceOn() bool
	ProcessStats() queengo.ProcessStats
	// Settings is the configuration of this process, secrets hidden.
	Settings() []queengo.Setting
}

// statusRoutes are the status and analytics routes (docs/api-admin.md "Status, analytics and metrics") of the route table.
func (s *Server) statusRoutes() []route {
	return []route{
		{fasthttp.MethodGet, "/api/v1/status", levelReadOnly, s.handleStatus},
		{fasthttp.MethodGet, "/api/v1/status/queues", levelReadOnly, s.handleStatusQueues},
		{fasthttp.MethodGet, "/api/v1/status/queues/{queue}", levelReadOnly, s.handleStatusQueue},
		{fasthttp.MethodGet, "/api/v1/status/queues/{queue}/messages", levelReadOnly, s.handleStatusMessages},
		{fasthttp.MethodGet, "/api/v1/status/analytics", levelReadOnly, s.handleStatusAnalytics},
		{fasthttp.MethodGet, "/api/v1/status/buffers", levelReadOnly, s.handleStatusBuffers},
		{fasthttp.MethodGet, "/api/v1/analytics/system-metrics", levelReadOnly, s.handleSystemMetrics},
		{fasthttp.MethodGet, "/api/v1/analytics/worker-metrics", levelReadOnly, s.handleWorkerMetrics},
		{fasthttp.MethodGet, "/api/v1/analytics/postgres-stats", levelReadOnly, s.handlePostgresStats},
		{fasthttp.MethodGet, "/api/v1/analytics/queue-lag", levelReadOnly, s.handleQueueLag},
		{fasthttp.MethodGet, "/api/v1/analytics/queue-ops", levelReadOnly, s.handleQueueOps},
		{fasthttp.MethodGet, "/api/v1/analytics/queue-parked-replicas", levelReadOnly, s.handleParkedReplicas},
		{fasthttp.MethodGet, "/api/v1/analytics/retention", levelReadOnly, s.handleRetentionAnalytics},
		{fasthttp.MethodGet, "/api/v1/system/shared-state", levelAdmin, s.handleSharedState},
		// The configuration names the database and the auth setup: admin,
		// as the other /system routes.
		{fasthttp.MethodGet, "/api/v1/system/config", levelAdmin, s.handleSystemConfig},
	}
}

// handleSharedState answers the reference's cluster-sync view: queengo
// has no such sync (no UDP state between processes), so it is not
// enabled; the processes share state through PostgreSQL, and the figures
// are this process's and the processes sampling on the database.
func (s *Server) handleSharedState(ctx *fasthttp.RequestCtx) {
	s.writeJSONValue(ctx, map[string]any{"enabled": false, "running": false, "transport": "postgresql",
		"reason":    "broker processes share state through PostgreSQL (tables, LISTEN/NOTIFY), not a cluster sync",
		"server_id": s.broker.Instance(), "maintenance_mode": s.broker.PushMaintenanceOn(),
		"pop_maintenance_mode": s.broker.PopMaintenanceOn(),
		"server_health":        map[string]any{"servers_alive": s.broker.ClusterTotals().Processes}})
}

// handleSystemConfig answers the configuration this process runs with
// (docs/api-admin.md "GET /api/v1/system/config"): each process its own,
// so it names itself.
func (s *Server) handleSystemConfig(ctx *fasthttp.RequestCtx) {
	s.writeJSONValue(ctx, map[string]any{"instance": s.broker.Instance(), "version": s.cfg.Version,
		"settings": s.broker.Settings()})
}

// The bounds of the status routes' parameters (docs/api-admin.md "Status,
// analytics and metrics").
const (
	statusQueuesLimitDefault = 100
	statusQueuesLimitMax     = 1000
	partitionsLimitDefault   = 100
	partitionsLimitMax       = 1000
	messagesLimitDefault     = 50
	messagesLimitMax         = 1000
	// messagesOffsetMax bounds how deep the message list pages: the page is
	// found by reading the index of offset+limit segments per partition.
	messagesOffsetMax = 10_000
	// statusWindowDefault is /status's window when from is absent.
	statusWindowDefault = time.Hour
	// seriesWindowMax caps a series window; seriesPointsMax its buckets.
	seriesWindowMax = 31 * 24 * time.Hour
	seriesPointsMax = 1500
	// topErrorsN is how many error texts /status lists.
	topErrorsN = 5
	// workersWindow is the span /status summarises each instance over.
	workersWindow = 5 * time.Minute
)

// statusFilter reads the queue, namespace and task query parameters.
func statusFilter(args *fasthttp.Args) (queengo.StatusFilter, *apiError) {
	var f queengo.StatusFilter
	var e *apiError
	if f.Queue, e = nameParam(args, "queue"); e != nil {
		return f, e
	}
	if f.Namespace, e = nameParam(args, "namespace"); e != nil {
		return f, e
	}
	f.Task, e = nameParam(args, "task")
	return f, e
}

// timeArg reads an optional ISO-8601 query parameter; absent gives def.
func timeArg(args *fasthttp.Args, key string, def time.Time) (time.Time, *apiError) {
	v := string(args.Peek(key))
	if v == "" {
		return def, nil
	}
	t, ok := parseTime(v)
	if !ok {
		e := errTimeParam(key)
		return time.Time{}, &e
	}
	return t, nil
}

// window reads from and to: to defaults to now, from to to - def. from
// must be before to, and the window at most seriesWindowMax.
func window(args *fasthttp.Args, def time.Duration) (from, to time.Time, e *apiError) {
	if to, e = timeArg(args, "to", time.Now()); e != nil {
		return
	}
	if from, e = timeArg(args, "from", to.Add(-def)); e != nil {
		return
	}
	switch {
	case !from.Before(to):
		e = &errWindowOrder
	case to.Sub(from) > seriesWindowMax:
		e = &errWindowTooLong
	}
	return from.UTC(), to.UTC(), e
}

// autoBucket is the bucket of a window when the request names none: whole
// minutes, about 60 to 120 points.
func autoBucket(from, to time.Time) time.Duration {
	return max(time.Minute, (to.Sub(from) / 60).Truncate(time.Minute))
}

// writeJSONValue answers v as JSON (the admin routes' encoding).
func (s *Server) writeJSONValue(ctx *fasthttp.RequestCtx, v any) {
	buf, err := json.Marshal(v)
	if err != nil {
		s.writeFailure(ctx, errInternal, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// isoTime formats t as the API's times; nil for the zero time.
func isoTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// countsOf makes the messages object of the status routes, the one the
// resource routes answer too (sql/functions/status.sql defines each figure).
func countsOf(retained, pending, processing, completed, failed, dead int64) countsJSON {
	return counts(queengo.MessageCounts{Total: retained, Pending: pending, Processing: processing,
		Completed: completed, Failed: failed, DeadLetter: dead})
}

func (s *Server) handleStatus(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	f, e := statusFilter(args)
	var from, to time.Time
	var limit int
	if e == nil {
		from, to, e = window(args, statusWindowDefault)
	}
	if e == nil {
		limit, e = intParam(args, "limit", statusQueuesLimitDefault, 1, statusQueuesLimitMax)
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	bucket := autoBucket(from, to)
	queues, at, err := s.broker.StatusTotals(ctx, f)
	var dlq queengo.DeadLetterSummary
	var through, workers queengo.Series
	if err == nil {
		dlq, err = s.broker.DeadLetterSummary(ctx, f, topErrorsN)
	}
	if err == nil {
		through, err = s.broker.QueueSeries(ctx, queengo.SeriesQuery{From: from, To: to, Bucket: bucket, Filter: f})
	}
	now := time.Now()
	if err == nil {
		workers, err = s.broker.WorkerSeries(ctx, queengo.SeriesQuery{From: now.Add(-workersWindow), To: now, Bucket: workersWindow})
	}
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	var tot queengo.QueueFigures
	list := make([]any, 0, min(limit, len(queues)))
	for i := range queues {
		q := &queues[i]
		tot.Retained += q.Retained
		tot.Pending += q.Pending
		tot.Processing += q.Processing
		tot.Completed += q.Completed
		tot.Failed += q.Failed
		tot.Leases += q.Leases
		tot.PartitionsLeased += q.PartitionsLeased
		tot.Leased += q.Leased
		tot.LeasedAcked += q.LeasedAcked
		if i < limit {
			list = append(list, map[string]any{"id": q.QueueID, "name": q.Name, "namespace": q.Namespace,
				"task": q.Task, "partitions": q.Partitions, "totalConsumed": q.Consumed})
		}
	}
	// The request figures and errors of the workers' last minutes.
	var ws []struct {
		PushRequests, PushMessages, PopRequests, PopMessages, AckRequests, AckItems, AckFailed, DBErrors int64
	}
	if err := json.Unmarshal(workers, &ws); err != nil {
		s.writeFailure(ctx, errInternal, err)
		return
	}
	var push, pushMsgs, pop, popMsgs, ack, ackItems, ackFailed, dbErrors int64
	for _, w := range ws {
		push, pushMsgs, pop, popMsgs = push+w.PushRequests, pushMsgs+w.PushMessages, pop+w.PopRequests, popMsgs+w.PopMessages
		ack, ackItems, ackFailed, dbErrors = ack+w.AckRequests, ackItems+w.AckItems, ackFailed+w.AckFailed, dbErrors+w.DBErrors
	}
	ratio := func(n, d int64) float64 {
		if d == 0 {
			return 0
		}
		return math.Round(float64(n)/float64(d)*100) / 100
	}
	statsAge := max(int64(now.Sub(at).Seconds()), 0)
	var points []json.RawMessage
	if err := json.Unmarshal(through, &points); err != nil {
		s.writeFailure(ctx, errInternal, err)
		return
	}
	counts := countsOf(tot.Retained, tot.Pending, tot.Processing, tot.Completed, tot.Failed, dlq.Total)
	s.writeJSONValue(ctx, map[string]any{
		"timeRange":     map[string]any{"from": isoTime(from), "to": isoTime(to)},
		"bucketMinutes": int(bucket / time.Minute),
		"pointCount":    len(points),
		"throughput":    through,
		"queues":        list,
		"messages": map[string]any{"total": counts.Total, "pending": counts.Pending, "processing": counts.Processing,
			"completed": counts.Completed, "failed": counts.Failed, "deadLetter": counts.DeadLetter,
			"requests":        map[string]int64{"push": push, "pop": pop, "ack": ack},
			"batchEfficiency": map[string]float64{"push": ratio(pushMsgs, push), "pop": ratio(popMsgs, pop), "ack": ratio(ackItems, ack)}},
		"leases": map[string]any{"active": tot.Leases, "partitionsWithLeases": tot.PartitionsLeased,
			"totalBatchSize": tot.Leased, "totalAcked": tot.LeasedAcked},
		"deadLetterQueue": map[string]any{"totalMessages": dlq.Total, "affectedPartitions": dlq.AffectedPartitions,
			"topErrors": dlq.TopErrors},
		"workers":  workers,
		"errors":   map[string]int64{"dbErrors": dbErrors, "ackFailed": ackFailed, "dlqMessages": dlq.Total},
		"statsAge": statsAge,
	})
}

func (s *Server) handleStatusQueues(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	f, e := statusFilter(args)
	var limit, offset int
	if e == nil {
		// from and to are accepted, as by the reference, and unused; they
		// are still validated.
		_, _, e = window(args, statusWindowDefault)
	}
	if e == nil {
		limit, e = intParam(args, "limit", statusQueuesLimitDefault, 1, statusQueuesLimitMax)
	}
	if e == nil {
		offset, e = offsetParam(args, "offset")
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	queues, total, err := s.broker.StatusQueues(ctx, f, limit, offset)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	list := make([]any, len(queues))
	for i := range queues {
		q := &queues[i]
		list[i] = map[string]any{"id": q.QueueID, "name": q.Name, "namespace": q.Namespace, "task": q.Task,
			"createdAt": isoTime(q.CreatedAt), "partitions": q.Partitions,
			"messages": map[string]int64{"total": q.Retained, "pending": q.Pending, "processing": q.Processing}}
	}
	s.writeJSONValue(ctx, map[string]any{"queues": list,
		"pagination": map[string]int{"limit": limit, "offset": offset}, "total": total})
}

func (s *Server) handleStatusQueue(ctx *fasthttp.RequestCtx) {
	name, e := pathName(ctx, "queue")
	args := ctx.QueryArgs()
	var limit, offset int
	if e == nil {
		limit, e = intParam(args, "limit", partitionsLimitDefault, 1, partitionsLimitMax)
	}
	if e == nil {
		offset, e = offsetParam(args, "offset")
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	d, err := s.broker.QueueDetail(ctx, name, limit, offset)
	if err != nil {
		s.writeFailure(ctx, failureOf(err, errQueueNotFound), err)
		return
	}
	o := d.Queue.Options
	parts := make([]any, len(d.Partitions))
	for i := range d.Partitions {
		p := &d.Partitions[i]
		c := countsOf(p.Retained, p.Pending, p.Processing, p.Completed, p.Failed, p.DeadLetters)
		last := p.LastWriteAt
		if p.LastConsumedAt.After(last) {
			last = p.LastConsumedAt
		}
		parts[i] = map[string]any{"id": p.ID, "name": p.Name, "createdAt": isoTime(p.CreatedAt), "messages": c,
			"stats": map[string]any{"total": c.Total, "pending": c.Pending, "processing": c.Processing,
				"completed": c.Completed, "failed": c.Failed, "deadLetter": c.DeadLetter, "head": p.Head,
				"groups": p.Groups, "offsetLag": p.OffsetLag, "activeLeases": p.Leases,
				"oldestUnconsumedAt": isoTime(p.OldestUnconsumedAt)},
			// queengo counts messages, not the batches they were
			// consumed in.
			"cursor":        map[string]any{"totalConsumed": p.Consumed, "batchesConsumed": p.BatchesConsumed},
			"lastActivity":  isoTime(last),
			"oldestMessage": isoTime(p.OldestMessageAt), "newestMessage": isoTime(p.NewestMessageAt)}
	}
	t := &d.Totals
	c := countsOf(t.Retained, t.Pending, t.Processing, t.Completed, t.Failed, t.DeadLetters)
	s.writeJSONValue(ctx, map[string]any{
		"queue": map[string]any{"id": d.Queue.ID, "name": d.Queue.Name, "namespace": d.Queue.Namespace,
			"task": d.Queue.Task, "priority": o.Priority, "createdAt": isoTime(d.CreatedAt),
			"config": map[string]any{"leaseTime": o.LeaseTime, "retryLimit": o.RetryLimit, "retryDelay": o.RetryDelay,
				"ttl": o.TTL, "maxQueueSize": o.MaxSize, "deadLetterQueue": o.DeadLetterQueue,
				"dlqAfterMaxRetries": o.DLQAfterMaxRetries, "delayedProcessing": o.DelayedProcessing,
				"windowBuffer": o.WindowBuffer, "retentionSeconds": o.RetentionSeconds,
				"completedRetentionSeconds": o.CompletedRetentionSeconds, "retentionEnabled": o.RetentionEnabled,
				"encryptionEnabled": o.EncryptionEnabled, "maxWaitTimeSeconds": o.MaxWaitTimeSeconds,
				"minPopWaitTime": o.MinPopWaitTime}},
		"partitions": parts,
		"pagination": map[string]int{"limit": limit, "offset": offset, "total": d.PartitionCount},
		"totals": map[string]any{"messages": c, "total": c.Total, "pending": c.Pending, "processing": c.Processing,
			"completed": c.Completed, "failed": c.Failed, "deadLetter": c.DeadLetter, "partitions": d.PartitionCount,
			"offsetLag": t.OffsetLag, "totalConsumed": t.Consumed},
	})
}

func (s *Server) handleStatusMessages(ctx *fasthttp.RequestCtx) {
	name, e := pathName(ctx, "queue")
	args := ctx.QueryArgs()
	var limit, offset int
	if e == nil {
		limit, e = intParam(args, "limit", messagesLimitDefault, 1, messagesLimitMax)
	}
	if e == nil {
		offset, e = intParam(args, "offset", 0, 0, messagesOffsetMax)
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	list, err := s.broker.QueueMessages(ctx, name, limit, offset)
	if err != nil {
		s.writeFailure(ctx, failureOf(err, errQueueNotFound), err)
		return
	}
	buf := append(make([]byte, 0, 64+len(list)*256), '[')
	for i := range list {
		m := &list[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"id":`...)
		buf = appendUUID(buf, m.ID)
		buf = append(buf, `,"transactionId":`...)
		buf = appendString(buf, m.TransactionID)
		buf = append(buf, `,"partitionId":`...)
		buf = appendUUID(buf, m.PartitionID)
		buf = append(buf, `,"queuePath":`...)
		buf = appendString(buf, name+"/"+m.Partition)
		buf = append(buf, `,"queue":`...)
		buf = appendString(buf, name)
		buf = append(buf, `,"partition":`...)
		buf = appendString(buf, m.Partition)
		buf = append(buf, `,"offset":`...)
		buf = appendInt(buf, int(m.Offset))
		buf = append(buf, `,"status":`...)
		buf = appendString(buf, m.Status)
		buf = append(buf, `,"createdAt":`...)
		buf = appendString(buf, m.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000Z"))
		buf = append(buf, '}')
	}
	buf = append(buf, ']')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// analyticsIntervals are /status/analytics' buckets.
var analyticsIntervals = map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}

func (s *Server) handleStatusAnalytics(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	interval := string(args.Peek("interval"))
	if interval == "" {
		interval = "hour"
	}
	bucket, ok := analyticsIntervals[interval]
	if !ok {
		s.writeError(ctx, errIntervalParam)
		return
	}
	f, e := statusFilter(args)
	var from, to time.Time
	if e == nil {
		from, to, e = window(args, 24*time.Hour)
	}
	if e == nil && to.Sub(from)/bucket > seriesPointsMax {
		e = &errTooManyPoints
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	points, err := s.broker.QueueSeries(ctx, queengo.SeriesQuery{From: from, To: to, Bucket: bucket, Filter: f})
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	s.writeJSONValue(ctx, map[string]any{"dataPoints": points, "interval": interval,
		"from": isoTime(from), "to": isoTime(to)})
}

func (s *Server) handleStatusBuffers(ctx *fasthttp.RequestCtx) {
	// Not derived from ctx: a timer that fires as the handler returns
	// would read the RequestCtx's values while fasthttp recycles it.
	c, cancel := context.WithTimeout(context.Background(), healthTimeout)
	err := s.broker.Health(c)
	cancel()
	// pending and failed are this process's file buffer (issue 13); one
	// worker, so no note.
	st := s.broker.BufferStats()
	s.writeJSONValue(ctx, map[string]any{"pending": st.Pending, "failed": st.Failed, "dbHealthy": err == nil, "worker": 0,
		"bufferEnabled": st.Enabled, "bufferActive": st.Active, "bufferHealthy": st.Healthy})
}
