package http

import (
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

func (s *Server) handleListDLQ(ctx *fasthttp.RequestCtx) {
	args := ctx.QueryArgs()
	var f queengo.DLQFilter
	var e *apiError
	for _, p := range []struct {
		key string
		dst *string
	}{{"queue", &f.Queue}, {"consumerGroup", &f.Group}, {"partition", &f.Partition}} {
		if *p.dst, e = nameParam(args, p.key); e != nil {
			s.writeError(ctx, *e)
			return
		}
	}
	if f.Limit, e = intParam(args, "limit", dlqLimitDefault, 1, dlqLimitMax); e == nil {
		f.Offset, e = offsetParam(args, "offset")
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	for _, p := range []struct {
		key string
		dst **time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := string(args.Peek(p.key)); v != "" {
			t, ok := parseTime(v)
			if !ok {
				s.writeError(ctx, errTimeParam(p.key))
				return
			}
			*p.dst = &t
		}
	}
	list, total, err := s.broker.ListDeadLetters(ctx, f)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 256+len(list)*384), `{"messages":[`...)
	for i := range list {
		d := &list[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"id":`...)
		buf = appendUUID(buf, d.ID)
		buf = append(buf, `,"messageId":`...)
		buf = appendUUID(buf, d.Frame.ID)
		buf = append(buf, `,"transactionId":`...)
		buf = appendString(buf, d.Frame.TransactionID)
		buf = append(buf, `,"partitionId":`...)
		buf = appendUUID(buf, d.PartitionID)
		buf = append(buf, `,"queue":`...)
		buf = appendString(buf, d.Queue)
		buf = append(buf, `,"partition":`...)
		buf = appendString(buf, d.Partition)
		buf = append(buf, `,"consumerGroup":`...)
		buf = appendString(buf, d.Group)
		buf = append(buf, `,"errorMessage":`...)
		buf = appendStringOrNull(buf, d.ErrorMessage)
		buf = append(buf, `,"retryCount":`...)
		buf = appendInt(buf, d.RetryCount)
		buf = append(buf, `,"data":`...)
		buf = append(buf, d.Frame.Payload...)
		buf = append(buf, `,"traceId":`...)
		buf = appendUUIDOrNull(buf, d.Frame.TraceID)
		buf = append(buf, `,"producerSub":`...)
		buf = appendStringOrNull(buf, d.Frame.ProducerSub)
		buf = append(buf, `,"createdAt":`...)
		buf = appendString(buf, d.CreatedAt)
		buf = append(buf, `,"failedAt":`...)
		buf = appendString(buf, d.FailedAt)
		buf = append(buf, '}')
	}
	buf = append(buf, `],"total":`...)
	buf = appendInt(buf, total)
	buf = append(buf, `,"pagination":{"limit":`...)
	buf = appendInt(buf, f.Limit)
	buf = append(buf, `,"offset":`...)
	buf = appendInt(buf, f.Offset)
	buf = append(buf, `}}`...)
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

func pathUUID(ctx *fasthttp.RequestCtx, key string) (uuid.UUID, *apiError) {
	v, _ := ctx.UserValue(key).(string)
	id, err := uuid.Parse(v)
	if err != nil {
		e := errPathUUID(key)
		return uuid.Nil, &e
	}
	return id, nil
}

func (s *Server) handleRequeueDLQ(ctx *fasthttp.RequestCtx) {
	id, e := pathUUID(ctx, "id")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	d, f, err := s.broker.RequeueDeadLetter(ctx, id)
	if err != nil {
		s.writeFailure(ctx, failureOf(err, errDeadLetterNotFound), err)
		return
	}
	buf := append(make([]byte, 0, 256), `{"success":true,"requeued":true,"id":`...)
	buf = appendUUID(buf, id)
	buf = append(buf, `,"queue":`...)
	buf = appendString(buf, d.Queue)
	buf = append(buf, `,"partition":`...)
	buf = appendString(buf, d.Partition)
	buf = append(buf, `,"partitionId":`...)
	buf = appendUUID(buf, d.PartitionID)
	buf = append(buf, `,"messageId":`...)
	buf = appendUUID(buf, f.ID)
	buf = append(buf, `,"transactionId":`...)
	buf = appendString(buf, f.TransactionID)
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

func (s *Server) handleDeleteDLQ(ctx *fasthttp.RequestCtx) {
	id, e := pathUUID(ctx, "id")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	if err := s.broker.DeleteDeadLetter(ctx, id); err != nil {
		s.writeFailure(ctx, failureOf(err, errDeadLetterNotFound), err)
		return
	}
	buf := append(make([]byte, 0, 96), `{"success":true,"deleted":true,"id":`...)
	buf = appendUUID(buf, id)
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

func (s *Server) handleGetMessage(ctx *fasthttp.RequestCtx) {
	pid, txid, e := messagePath(ctx)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	m, err := s.broker.GetMessage(ctx, pid, txid)
	if err != nil {
		s.writeFailure(ctx, failureOf(err, errMessageNotFound), err)
		return
	}
	status, retries, leaseExp := "pending", 0, ""
	for _, g := range m.Groups {
		retries = max(retries, g.Failures)
		if g.Group == queengo.QueueModeGroup {
			status, leaseExp = g.Status, g.LeaseExpiresAt
		}
	}
	buf := append(make([]byte, 0, 1024), `{"id":`...)
	buf = appendUUID(buf, m.ID)
	buf = append(buf, `,"transactionId":`...)
	buf = appendString(buf, m.TransactionID)
	buf = append(buf, `,"partitionId":`...)
	buf = appendUUID(buf, m.PartitionID)
	buf = append(buf, `,"queuePath":`...)
	buf = appendString(buf, m.Queue+"/"+m.Partition)
	buf = append(buf, `,"queue":`...)
	buf = appendString(buf, m.Queue)
	buf = append(buf, `,"partition":`...)
	buf = appendString(buf, m.Partition)
	buf = append(buf, `,"namespace":`...)
	buf = appendString(buf, m.Namespace)
	buf = append(buf, `,"task":`...)
	buf = appendString(buf, m.Task)
	buf = append(buf, `,"status":`...)
	buf = appendString(buf, status)
	buf = append(buf, `,"payload":`...)
	buf = append(buf, m.Payload...)
	buf = append(buf, `,"isEncrypted":`...)
	buf = appendBool(buf, m.Encrypted)
	buf = append(buf, `,"traceId":`...)
	buf = appendUUIDOrNull(buf, m.TraceID)
	buf = append(buf, `,"producerSub":`...)
	buf = appendStringOrNull(buf, m.ProducerSub)
	buf = append(buf, `,"createdAt":`...)
	buf = appendString(buf, m.CreatedAt)
	buf = append(buf, `,"retryCount":`...)
	buf = appendInt(buf, retries)
	buf = append(buf, `,"leaseExpiresAt":`...)
	buf = appendStringOrNull(buf, leaseExp)
	buf = append(buf, `,"queueConfig":{"leaseTime":`...)
	buf = appendInt(buf, m.Options.LeaseTime)
	buf = append(buf, `,"retryLimit":`...)
	buf = appendInt(buf, m.Options.RetryLimit)
	buf = append(buf, `,"retryDelay":`...)
	buf = appendInt(buf, m.Options.RetryDelay)
	buf = append(buf, `,"ttl":`...)
	buf = appendInt(buf, m.Options.TTL)
	buf = append(buf, `,"priority":`...)
	buf = appendInt(buf, m.Options.Priority)
	buf = append(buf, `},"consumerGroups":[`...)
	for i, g := range m.Groups {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"name":`...)
		buf = appendString(buf, g.Group)
		buf = append(buf, `,"status":`...)
		buf = appendString(buf, g.Status)
		buf = append(buf, `,"consumed":`...)
		buf = appendBool(buf, g.Status == "completed")
		buf = append(buf, `,"attempts":`...)
		buf = appendInt(buf, g.Failures)
		buf = append(buf, `,"leaseExpiresAt":`...)
		buf = appendStringOrNull(buf, g.LeaseExpiresAt)
		buf = append(buf, '}')
	}
	buf = append(buf, `]}`...)
	writeJSON(ctx, fasthttp.StatusOK, buf)
}
