package http

import (
	"bytes"
	"encoding/json"

	"github.com/valyala/fasthttp"
)

// GroupAdmin is what the consumer-group admin routes (shared/spec/api.md §6)
// need of the Broker.
type GroupAdmin interface{}

// groupRoutes are the consumer-group admin routes of the route table.
func (s *Server) groupRoutes() []route {
	return []route{
		{fasthttp.MethodPost, "/api/v1/consumer-groups/{group}/subscription", levelReadWrite, s.handleSubscription},
	}
}

func (s *Server) handleSubscription(ctx *fasthttp.RequestCtx) {
	group, e := pathName(ctx, "group")
	if e != nil {
		writeError(ctx, *e)
		return
	}
	body := bytes.TrimSpace(ctx.PostBody())
	if len(body) == 0 {
		writeError(ctx, errEmptyBody)
		return
	}
	var req struct {
		TS json.RawMessage `json:"subscriptionTimestamp"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(ctx, *invalidJSON(err))
		return
	}
	v, ok, isNull := jsonString(req.TS)
	if isNull {
		writeError(ctx, errSubscriptionTSNull)
		return
	}
	t, parsed := parseTime(v)
	if !ok || !parsed {
		writeError(ctx, errTimeParam("subscriptionTimestamp"))
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
