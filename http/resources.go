package http

import (
	"context"
	"encoding/json"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// ResourceAdmin is what the resource and message routes (docs/api-admin.md "Resources" and "Messages") need of the Broker.
type ResourceAdmin interface {
	Overview(ctx context.Context) (queengo.Overview, error)
	ListQueues(ctx context.Context, f queengo.ResourceFilter) ([]queengo.QueueSummary, int, error)
	GetQueue(ctx context.Context, name string, f queengo.ResourceFilter) (queengo.QueueResource, error)
	ListPartitions(ctx context.Context, f queengo.ResourceFilter) ([]queengo.PartitionSummary, int, error)
	ListGroupings(ctx context.Context, by string, limit, offset int) ([]queengo.GroupingSummary, int, error)
	ClearQueue(ctx context.Context, queue, partition string) (queengo.Cleared, error)
	messageAdmin
}

// resourceRoutes are the resource and message routes (docs/api-admin.md "Resources" and "Messages") of the route table.
func (s *Server) resourceRoutes() []route {
	return []route{
		{fasthttp.MethodGet, "/api/v1/resources/overview", levelReadOnly, s.handleOverview},
		{fasthttp.MethodGet, "/api/v1/resources/queues", levelReadOnly, s.handleListQueues},
		{fasthttp.MethodGet, "/api/v1/resources/queues/{queue}", levelReadOnly, s.handleGetQueue},
		{fasthttp.MethodDelete, "/api/v1/resources/queues/{queue}", levelAdmin, s.handleDeleteQueue},
		{fasthttp.MethodGet, "/api/v1/resources/namespaces", levelReadOnly, s.handleNamespaces},
		{fasthttp.MethodGet, "/api/v1/resources/tasks", levelReadOnly, s.handleTasks},
		{fasthttp.MethodGet, "/api/v1/resources/partitions", levelReadOnly, s.handleListPartitions},
		// The reference has no clear route; emptying a queue is as
		// destructive as deleting it (ADM).
		{fasthttp.MethodDelete, "/api/v1/queues/{queue}/clear", levelAdmin, s.handleClearQueue},
		{fasthttp.MethodGet, "/api/v1/messages", levelReadOnly, s.handleListMessages},
		{fasthttp.MethodGet, "/api/v1/messages/{partitionId}/{transactionId}", levelReadOnly, s.handleGetMessage},
		{fasthttp.MethodDelete, "/api/v1/messages/{partitionId}/{transactionId}", levelReadWrite, s.handleDeleteMessage},
		// The reference has neither; they change messages as a delete
		// does (RW).
		{fasthttp.MethodPost, "/api/v1/messages/{partitionId}/{transactionId}/retry", levelReadWrite, s.handleRetryMessage},
		{fasthttp.MethodPost, "/api/v1/messages/{partitionId}/{transactionId}/dlq", levelReadWrite, s.handleMoveToDLQ},
	}
}

// The bounds of the resource lists (docs/api-admin.md, "Resources").
const (
	resourceLimitDefault = 100
	resourceLimitMax     = 1000
)

// resourcePage reads a page's limit and offset (under the given names).
func resourcePage(args *fasthttp.Args, limitKey, offsetKey string) (limit, offset int, e *apiError) {
	if limit, e = intParam(args, limitKey, resourceLimitDefault, 1, resourceLimitMax); e != nil {
		return 0, 0, e
	}
	offset, e = offsetParam(args, offsetKey)
	return limit, offset, e
}

// writeObject answers v encoded by encoding/json with 200.
func (s *Server) writeObject(ctx *fasthttp.RequestCtx, v any) {
	buf, err := json.Marshal(v)
	if err != nil {
		s.writeFailure(ctx, errInternal, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// jsonTime is a time in responses: RFC 3339 UTC with milliseconds, null
// when zero.
type jsonTime time.Time

func (t jsonTime) MarshalJSON() ([]byte, error) {
	if time.Time(t).IsZero() {
		return []byte("null"), nil
	}
	return time.Time(t).UTC().AppendFormat(append(make([]byte, 0, 26), '"'), `2006-01-02T15:04:05.000Z"`), nil
}

// countsJSON is the messages object of the resource and status routes.
type countsJSON struct {
	Total      int64 `json:"total"`
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
	DeadLetter int64 `json:"deadLetter"`
}

func counts(c queengo.MessageCounts) countsJSON {
	return countsJSON{c.Total, c.Pending, c.Processing, c.Completed, c.Failed, c.DeadLetter}
}

type statsJSON struct {
	Avg    float64 `json:"avg"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

type paginationJSON struct {
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
}

// handleOverview answers the broker-wide figures; statsAge is how many
// seconds ago they were computed (the broker computes them at most once per
// 5 s, actors/figures.go).
func (s *Server) handleOverview(ctx *fasthttp.RequestCtx) {
	o, err := s.broker.Overview(ctx)
	now := time.Now()
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	type lag struct {
		Time   statsJSON `json:"time"`
		Offset statsJSON `json:"offset"`
	}
	type throughput struct {
		Ingested float64 `json:"ingestedPerSecond"`
		// Processed is the messages committed per second over the metrics
		// collector's last minute of samples; null before its first.
		Processed *float64 `json:"processedPerSecond"`
	}
	var processed *float64
	if snap := s.broker.MetricsSnapshot(); snap != nil {
		var perMinute float64
		for i := range snap.Queues {
			perMinute += snap.Queues[i].AckPerMinute
		}
		processed = new(float64)
		*processed = perMinute / 60
	}
	s.writeObject(ctx, struct {
		Queues     int        `json:"queues"`
		Partitions int        `json:"partitions"`
		Namespaces int        `json:"namespaces"`
		Tasks      int        `json:"tasks"`
		Messages   countsJSON `json:"messages"`
		Lag        lag        `json:"lag"`
		Throughput throughput `json:"throughput"`
		Timestamp  jsonTime   `json:"timestamp"`
		StatsAge   int        `json:"statsAge"`
	}{o.Queues, o.Partitions, o.Namespaces, o.Tasks, counts(o.Messages),
		lag{statsJSON(o.LagSeconds), statsJSON(o.LagMessages)}, throughput{Ingested: o.IngestedPerSecond, Processed: processed},
		jsonTime(now), max(int(now.Sub(o.At).Seconds()), 0)})
}

// resourceFilter reads the namespace and task filters and the page.
func resourceFilter(args *fasthttp.Args) (queengo.ResourceFilter, *apiError) {
	var f queengo.ResourceFilter
	var e *apiError
	if f.Namespace, e = nameParam(args, "namespace"); e != nil {
		return f, e
	}
	if f.Task, e = nameParam(args, "task"); e != nil {
		return f, e
	}
	f.Limit, f.Offset, e = resourcePage(args, "limit", "offset")
	return f, e
}

type queueJSON struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Namespace  string   `json:"namespace"`
	Task       string   `json:"task"`
	Priority   int      `json:"priority"`
	CreatedAt  jsonTime `json:"createdAt"`
	Partitions int      `json:"partitions"`
	Messages   struct {
		Total      int64 `json:"total"`
		Pending    int64 `json:"pending"`
		Processing int64 `json:"processing"`
	} `json:"messages"`
}

func (s *Server) handleListQueues(ctx *fasthttp.RequestCtx) {
	f, e := resourceFilter(ctx.QueryArgs())
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	list, total, err := s.broker.ListQueues(ctx, f)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	out := make([]queueJSON, len(list))
	for i, q := range list {
		out[i] = queueJSON{ID: q.ID.String(), Name: q.Name, Namespace: q.Namespace, Task: q.Task,
			Priority: q.Options.Priority, CreatedAt: jsonTime(q.CreatedAt), Partitions: q.Partitions}
		out[i].Messages.Total, out[i].Messages.Pending, out[i].Messages.Processing =
			q.Messages.Total, q.Messages.Pending, q.Messages.Processing
	}
	s.writeObject(ctx, struct {
		Queues     []queueJSON    `json:"queues"`
		Total      int            `json:"total"`
		Pagination paginationJSON `json:"pagination"`
	}{out, total, paginationJSON{f.Limit, f.Offset}})
}

type partitionJSON struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Queue         string     `json:"queue,omitempty"`
	CreatedAt     jsonTime   `json:"createdAt"`
	Head          *int64     `json:"head,omitempty"`
	Messages      countsJSON `json:"messages"`
	Stats         countsJSON `json:"stats"`
	OldestMessage jsonTime   `json:"oldestMessage"`
	NewestMessage jsonTime   `json:"newestMessage"`
	LastWriteAt   *jsonTime  `json:"lastWriteAt,omitempty"`
}

// partitionOut is a partition of the queue detail (stats as the reference
// names them) or, with full, of the partition list (queue, head, last
// write too); both carry the figures as messages and as stats.
func partitionOut(p *queengo.PartitionSummary, full bool) partitionJSON {
	out := partitionJSON{ID: p.ID.String(), Name: p.Name, CreatedAt: jsonTime(p.CreatedAt),
		Messages: counts(p.Messages), Stats: counts(p.Messages), OldestMessage: jsonTime(p.OldestAt),
		NewestMessage: jsonTime(p.NewestAt)}
	if full {
		lw := jsonTime(p.LastWriteAt)
		out.Queue, out.Head, out.LastWriteAt = p.Queue, &p.Head, &lw
	}
	return out
}

func (s *Server) handleGetQueue(ctx *fasthttp.RequestCtx) {
	name, e := pathName(ctx, "queue")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	var f queengo.ResourceFilter
	if f.Limit, f.Offset, e = resourcePage(ctx.QueryArgs(), "partitionLimit", "partitionOffset"); e != nil {
		s.writeError(ctx, *e)
		return
	}
	q, err := s.broker.GetQueue(ctx, name, f)
	if err != nil {
		s.writeFailure(ctx, failureOf(err, errQueueNotFound), err)
		return
	}
	parts := make([]partitionJSON, len(q.Page))
	for i := range q.Page {
		parts[i] = partitionOut(&q.Page[i], false)
	}
	s.writeObject(ctx, struct {
		ID                  string               `json:"id"`
		Name                string               `json:"name"`
		Namespace           string               `json:"namespace"`
		Task                string               `json:"task"`
		CreatedAt           jsonTime             `json:"createdAt"`
		Options             queengo.QueueOptions `json:"options"`
		Partitions          []partitionJSON      `json:"partitions"`
		PartitionCount      int                  `json:"partitionCount"`
		PartitionPagination paginationJSON       `json:"partitionPagination"`
		Totals              countsJSON           `json:"totals"`
	}{q.ID.String(), q.Name, q.Namespace, q.Task, jsonTime(q.CreatedAt), q.Options, parts, q.Partitions,
		paginationJSON{f.Limit, f.Offset}, counts(q.Messages)})
}

func (s *Server) handleListPartitions(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	f, e := resourceFilter(args)
	if e == nil {
		f.Queue, e = nameParam(args, "queue")
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	list, total, err := s.broker.ListPartitions(ctx, f)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	out := make([]partitionJSON, len(list))
	for i := range list {
		out[i] = partitionOut(&list[i], true)
	}
	s.writeObject(ctx, struct {
		Partitions []partitionJSON `json:"partitions"`
		Total      int             `json:"total"`
		Pagination paginationJSON  `json:"pagination"`
	}{out, total, paginationJSON{f.Limit, f.Offset}})
}

type groupingJSON struct {
	Namespace  *string `json:"namespace,omitempty"`
	Task       *string `json:"task,omitempty"`
	Queues     int     `json:"queues"`
	Partitions int     `json:"partitions"`
	Messages   struct {
		Total   int64 `json:"total"`
		Pending int64 `json:"pending"`
	} `json:"messages"`
}

func (s *Server) handleNamespaces(ctx *fasthttp.RequestCtx) { s.listGroupings(ctx, "namespace") }

func (s *Server) handleTasks(ctx *fasthttp.RequestCtx) { s.listGroupings(ctx, "task") }

// listGroupings answers the namespace (by "namespace") or task list.
func (s *Server) listGroupings(ctx *fasthttp.RequestCtx, by string) {
	limit, offset, e := resourcePage(ctx.QueryArgs(), "limit", "offset")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	list, total, err := s.broker.ListGroupings(ctx, by, limit, offset)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	out := make([]groupingJSON, len(list))
	for i := range list {
		g := &list[i]
		out[i] = groupingJSON{Queues: g.Queues, Partitions: g.Partitions}
		if by == "namespace" {
			out[i].Namespace = &g.Name
		} else {
			out[i].Task = &g.Name
		}
		out[i].Messages.Total, out[i].Messages.Pending = g.Messages.Total, g.Messages.Pending
	}
	key := by + "s"
	buf, err := json.Marshal(map[string]any{key: out, "total": total, "pagination": paginationJSON{limit, offset}})
	if err != nil {
		s.writeFailure(ctx, errInternal, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

func (s *Server) handleClearQueue(ctx *fasthttp.RequestCtx) {
	queue, e := pathName(ctx, "queue")
	var part string
	if e == nil {
		part, e = nameParam(ctx.QueryArgs(), "partition")
	}
	if e == nil && part == "" && ctx.QueryArgs().Has("partition") {
		// Present but empty: never widen a destructive call to the whole
		// queue (a script's unset variable would clear everything).
		e = &errEmptyClearPartition
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	c, err := s.broker.ClearQueue(ctx, queue, part)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	s.writeObject(ctx, struct {
		Success           bool   `json:"success"`
		Queue             string `json:"queue"`
		Partition         string `json:"partition,omitempty"`
		ClearedPartitions int    `json:"clearedPartitions"`
		DeletedMessages   int64  `json:"deletedMessages"`
	}{true, queue, part, c.Partitions, c.Messages})
}
