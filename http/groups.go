package http

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// GroupAdmin is what the consumer-group admin routes (docs/api-admin.md "Consumer groups")
// need of the Broker.
type GroupAdmin interface {
	ListGroups(ctx context.Context, limit, offset int) ([]queengo.GroupSummary, error)
	LaggingGroups(ctx context.Context, minLag time.Duration, limit, offset int) ([]queengo.GroupPartition, error)
	GroupPartitions(ctx context.Context, group string, limit, offset int) ([]queengo.GroupPartition, error)
	DeleteGroup(ctx context.Context, group, queue string, metadata bool) (queengo.GroupDeleted, error)
	SeekGroup(ctx context.Context, seek queengo.GroupSeek) (queengo.GroupSought, error)
	RefreshStats(ctx context.Context) (queengo.StatsReport, error)
}

// The bounds of the consumer-group pages (docs/api-admin.md, "Consumer groups"):
// a page of the list, of the lagging cursors and of one group's cursors.
// The list's default covers 1,000 queues' worth of (group, queue) pairs of
// one group in one call.
const (
	groupLimitDefault = 1000
	groupLimitMax     = 10000
	// lagDefaultSeconds is the reference server's minLagSeconds default.
	lagDefaultSeconds = 3600
)

// groupRoutes are the consumer-group admin routes of the route table.
// "lagging" is a literal segment, which the router prefers over {group}.
func (s *Server) groupRoutes() []route {
	return []route{
		{fasthttp.MethodGet, "/api/v1/consumer-groups", levelReadOnly, s.handleListGroups},
		{fasthttp.MethodGet, "/api/v1/consumer-groups/lagging", levelReadOnly, s.handleLaggingGroups},
		{fasthttp.MethodGet, "/api/v1/consumer-groups/{group}", levelReadOnly, s.handleGetGroup},
		{fasthttp.MethodDelete, "/api/v1/consumer-groups/{group}", levelAdmin, s.handleDeleteGroup},
		{fasthttp.MethodDelete, "/api/v1/consumer-groups/{group}/queues/{queue}", levelAdmin, s.handleDeleteGroup},
		{fasthttp.MethodPost, "/api/v1/consumer-groups/{group}/subscription", levelReadWrite, s.handleSubscription},
		{fasthttp.MethodPost, "/api/v1/consumer-groups/{group}/queues/{queue}/seek", levelReadWrite, s.handleSeekGroup},
		{fasthttp.MethodPost, "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek",
			levelReadWrite, s.handleSeekPartition},
		{fasthttp.MethodPost, "/api/v1/stats/refresh", levelAdmin, s.handleStatsRefresh},
	}
}

// groupPage reads limit and offset within the consumer-group bounds.
func groupPage(args *fasthttp.Args) (limit, offset int, e *apiError) {
	if limit, e = intParam(args, "limit", groupLimitDefault, 1, groupLimitMax); e != nil {
		return 0, 0, e
	}
	offset, e = offsetParam(args, "offset")
	return limit, offset, e
}

// appendGroupTime writes t as ISO-8601 UTC with milliseconds.
func appendGroupTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z")
	return append(dst, '"')
}

func appendGroupTimeOrNull(dst []byte, t *time.Time) []byte {
	if t == nil {
		return append(dst, "null"...)
	}
	return appendGroupTime(dst, *t)
}

func (s *Server) handleListGroups(ctx *fasthttp.RequestCtx) {
	limit, offset, e := groupPage(ctx.QueryArgs())
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	list, err := s.broker.ListGroups(ctx, limit, offset)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 64+len(list)*400), '[')
	for i := range list {
		g := &list[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"name":`...)
		buf = appendString(buf, g.Group)
		buf = append(buf, `,"topics":[`...)
		buf = appendString(buf, g.Queue)
		buf = append(buf, `],"queueName":`...)
		buf = appendString(buf, g.Queue)
		buf = append(buf, `,"partitions":`...)
		buf = appendInt(buf, g.Partitions)
		buf = append(buf, `,"members":`...)
		buf = appendInt(buf, g.Members)
		buf = append(buf, `,"partitionsWithLag":`...)
		buf = appendInt(buf, g.PartitionsWithLag)
		buf = append(buf, `,"totalLag":`...)
		buf = strconv.AppendInt(buf, g.TotalLag, 10)
		buf = append(buf, `,"maxTimeLag":`...)
		buf = strconv.AppendInt(buf, g.MaxTimeLag, 10)
		buf = append(buf, `,"state":`...)
		buf = appendString(buf, g.State())
		buf = append(buf, `,"lastActivity":`...)
		buf = appendGroupTimeOrNull(buf, g.LastActivity)
		buf = append(buf, `,"subscriptionMode":`...)
		if sub := g.Subscription; sub != nil {
			buf = appendString(buf, sub.Mode)
			buf = append(buf, `,"subscriptionTimestamp":`...)
			buf = appendGroupTimeOrNull(buf, sub.From)
			buf = append(buf, `,"subscriptionCreatedAt":`...)
			buf = appendGroupTime(buf, sub.CreatedAt)
		} else {
			buf = append(buf, `null,"subscriptionTimestamp":null,"subscriptionCreatedAt":null`...)
		}
		buf = append(buf, '}')
	}
	buf = append(buf, ']')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

func (s *Server) handleLaggingGroups(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	minLag, e := intParam(args, "minLagSeconds", lagDefaultSeconds, 0, math.MaxInt32)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	limit, offset, e := groupPage(args)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	list, err := s.broker.LaggingGroups(ctx, time.Duration(minLag)*time.Second, limit, offset)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 64+len(list)*400), '[')
	for i := range list {
		g := &list[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"consumer_group":`...)
		buf = appendString(buf, g.Group)
		buf = append(buf, `,"queue_name":`...)
		buf = appendString(buf, g.Queue)
		buf = append(buf, `,"partition_name":`...)
		buf = appendString(buf, g.Partition)
		buf = append(buf, `,"partition_id":`...)
		buf = appendUUID(buf, g.PartitionID)
		buf = append(buf, `,"worker_id":`...)
		buf = appendUUIDOrNull(buf, g.LeaseID)
		buf = append(buf, `,"offset_lag":`...)
		buf = strconv.AppendInt(buf, g.OffsetLag, 10)
		buf = append(buf, `,"time_lag_seconds":`...)
		buf = strconv.AppendInt(buf, g.TimeLagSeconds, 10)
		buf = append(buf, `,"lag_hours":`...)
		buf = strconv.AppendFloat(buf, math.Round(float64(g.TimeLagSeconds)/36)/100, 'f', -1, 64)
		buf = append(buf, `,"oldest_unconsumed_at":`...)
		buf = appendGroupTimeOrNull(buf, g.OldestUnconsumedAt)
		buf = append(buf, `,"last_consumed_at":`...)
		buf = appendGroupTimeOrNull(buf, g.LastConsumedAt)
		buf = append(buf, '}')
	}
	buf = append(buf, ']')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

func (s *Server) handleGetGroup(ctx *fasthttp.RequestCtx) {
	group, e := pathName(ctx, "group")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	limit, offset, e := groupPage(ctx.QueryArgs())
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	list, err := s.broker.GroupPartitions(ctx, group, limit, offset)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 64+len(list)*300), '{')
	for i := range list {
		g := &list[i]
		switch {
		case i == 0:
		case g.Queue != list[i-1].Queue:
			buf = append(buf, "]},"...)
		default:
			buf = append(buf, ',')
		}
		if i == 0 || g.Queue != list[i-1].Queue {
			buf = appendString(buf, g.Queue)
			buf = append(buf, `:{"partitions":[`...)
		}
		buf = append(buf, `{"partition":`...)
		buf = appendString(buf, g.Partition)
		buf = append(buf, `,"partitionId":`...)
		buf = appendUUID(buf, g.PartitionID)
		buf = append(buf, `,"workerId":`...)
		buf = appendUUIDOrNull(buf, g.LeaseID)
		buf = append(buf, `,"lastConsumedAt":`...)
		buf = appendGroupTimeOrNull(buf, g.LastConsumedAt)
		buf = append(buf, `,"totalConsumed":`...)
		buf = strconv.AppendInt(buf, g.TotalConsumed, 10)
		buf = append(buf, `,"offsetLag":`...)
		buf = strconv.AppendInt(buf, g.OffsetLag, 10)
		buf = append(buf, `,"timeLagSeconds":`...)
		buf = strconv.AppendInt(buf, g.TimeLagSeconds, 10)
		buf = append(buf, `,"leaseActive":`...)
		buf = appendBool(buf, g.LeaseID != uuid.Nil)
		buf = append(buf, '}')
	}
	if len(list) > 0 {
		buf = append(buf, "]}"...)
	}
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// handleDeleteGroup serves both deletes: of the group on every queue, and,
// with a queue in the path, on that queue only.
func (s *Server) handleDeleteGroup(ctx *fasthttp.RequestCtx) {
	group, e := pathName(ctx, "group")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	var queue string
	if ctx.UserValue("queue") != nil {
		if queue, e = pathName(ctx, "queue"); e != nil {
			s.writeError(ctx, *e)
			return
		}
	}
	meta, e := boolParam(ctx.QueryArgs(), "deleteMetadata", true)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	res, err := s.broker.DeleteGroup(ctx, group, queue, meta)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 160), `{"success":true,"consumerGroup":`...)
	buf = appendString(buf, group)
	if queue != "" {
		buf = append(buf, `,"queueName":`...)
		buf = appendString(buf, queue)
	}
	buf = append(buf, `,"deletedPartitions":`...)
	buf = appendInt(buf, len(res.Cursors))
	buf = append(buf, `,"metadataDeleted":`...)
	buf = appendBool(buf, meta)
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// parseSeek reads a seek body: {"toEnd": true} or {"timestamp": "<ISO>"};
// toEnd wins when both are given.
func parseSeek(body []byte, seek *queengo.GroupSeek) *apiError {
	var req struct {
		ToEnd     json.RawMessage `json:"toEnd"`
		Timestamp json.RawMessage `json:"timestamp"`
	}
	if e := decodeBody(body, &req); e != nil {
		return e
	}
	switch string(req.ToEnd) {
	case "", "null", "false":
	case "true":
		seek.ToEnd = true
		return nil
	default:
		return &errSeekToEndBool
	}
	v, ok, isNull := jsonString(req.Timestamp)
	if isNull {
		return &errSeekTarget
	}
	t, parsed := parseTime(v)
	if !ok || !parsed {
		e := errTimeParam("timestamp")
		return &e
	}
	seek.At = t
	return nil
}

func (s *Server) handleSeekGroup(ctx *fasthttp.RequestCtx) {
	var seek queengo.GroupSeek
	var e *apiError
	if seek.Group, e = pathName(ctx, "group"); e == nil {
		if seek.Queue, e = pathName(ctx, "queue"); e == nil {
			e = parseSeek(bytes.TrimSpace(ctx.PostBody()), &seek)
		}
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	res, err := s.broker.SeekGroup(ctx, seek)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 200), `{"success":true,"consumerGroup":`...)
	buf = appendString(buf, seek.Group)
	buf = append(buf, `,"queueName":`...)
	buf = appendString(buf, seek.Queue)
	buf = append(buf, `,"seekToEnd":`...)
	buf = appendBool(buf, seek.ToEnd)
	buf = append(buf, `,"targetTimestamp":`...)
	if seek.ToEnd {
		buf = append(buf, "null"...)
	} else {
		buf = appendGroupTime(buf, seek.At)
	}
	buf = append(buf, `,"partitionsUpdated":`...)
	buf = appendInt(buf, len(res.Moved))
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// handleSeekPartition moves one partition's cursor to its end; it reads no
// body.
func (s *Server) handleSeekPartition(ctx *fasthttp.RequestCtx) {
	seek := queengo.GroupSeek{ToEnd: true}
	var e *apiError
	if seek.Group, e = pathName(ctx, "group"); e == nil {
		if seek.Queue, e = pathName(ctx, "queue"); e == nil {
			seek.Partition, e = pathName(ctx, "partition")
		}
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	res, err := s.broker.SeekGroup(ctx, seek)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	updated := len(res.Moved) > 0
	buf := append(make([]byte, 0, 200), `{"success":true,"consumerGroup":`...)
	buf = appendString(buf, seek.Group)
	buf = append(buf, `,"queueName":`...)
	buf = appendString(buf, seek.Queue)
	buf = append(buf, `,"partitionName":`...)
	buf = appendString(buf, seek.Partition)
	buf = append(buf, `,"updated":`...)
	buf = appendBool(buf, updated)
	buf = append(buf, `,"cursorMovedTo":`...)
	if updated {
		buf = appendGroupTimeOrNull(buf, res.HeadAt)
	} else {
		buf = append(buf, "null"...)
	}
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// handleStatsRefresh answers the statistics report computed now: every
// figure queengo reports is computed when asked, so there is nothing to
// rebuild, and no derived rows to clean. It reads no body.
func (s *Server) handleStatsRefresh(ctx *fasthttp.RequestCtx) {
	rep, err := s.broker.RefreshStats(ctx)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 512), '{')
	for i, st := range []struct {
		name string
		step *queengo.StatsStep
	}{{"partition", &rep.Partition}, {"queue", &rep.Queue}, {"namespace", &rep.Namespace}, {"task", &rep.Task},
		{"system", &rep.System}} {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, st.name)
		buf = append(buf, ":{"...)
		for _, c := range st.step.Counts {
			buf = appendString(buf, c.Name)
			buf = append(buf, ':')
			buf = strconv.AppendInt(buf, c.Value, 10)
			buf = append(buf, ',')
		}
		buf = append(buf, `"durationMs":`...)
		buf = appendFloat(buf, float64(st.step.Duration)/float64(time.Millisecond))
		buf = append(buf, '}')
	}
	buf = append(buf, `,"cleanup":{"skipped":true,"reason":"no precomputed statistics to clean"}}`...)
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

func (s *Server) handleSubscription(ctx *fasthttp.RequestCtx) {
	group, e := pathName(ctx, "group")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	body := bytes.TrimSpace(ctx.PostBody())
	if len(body) == 0 {
		s.writeError(ctx, errEmptyBody)
		return
	}
	var req struct {
		TS json.RawMessage `json:"subscriptionTimestamp"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeError(ctx, *invalidJSON(err))
		return
	}
	v, ok, isNull := jsonString(req.TS)
	if isNull {
		s.writeError(ctx, errSubscriptionTSNull)
		return
	}
	t, parsed := parseTime(v)
	if !ok || !parsed {
		s.writeError(ctx, errTimeParam("subscriptionTimestamp"))
		return
	}
	n, err := s.broker.SetSubscription(ctx, group, t)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 160), `{"success":true,"consumerGroup":`...)
	buf = appendString(buf, group)
	buf = append(buf, `,"newTimestamp":`...)
	buf = appendString(buf, t.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	buf = append(buf, `,"rowsUpdated":`...)
	buf = appendInt(buf, n)
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}
