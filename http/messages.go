package http

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// messageAdmin is what the per-message routes need of the Broker, beside
// GetMessage (in Broker itself).
type messageAdmin interface {
	ListMessages(ctx context.Context, f queengo.MessageFilter) (queengo.MessageList, error)
	DeleteMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageChange, error)
	MoveToDLQ(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageChange, error)
	RetryMessage(ctx context.Context, partition uuid.UUID, txid string) (queengo.MessageRetry, error)
}

// The bounds of the message list (docs/api-admin.md, "GET /api/v1/messages").
const (
	messageLimitDefault = 200
	messageLimitMax     = 1000
	messageWindow       = time.Hour // from's default: to minus this
)

// messageFilter reads the list's query: queue, partition, ns (or
// namespace), task, consumerGroup as names; status one of the four; from
// and to ISO-8601 (defaults: the last hour); limit and offset.
func messageFilter(args *fasthttp.Args, now time.Time) (queengo.MessageFilter, *apiError) {
	var f queengo.MessageFilter
	var e *apiError
	for _, p := range []struct {
		key string
		dst *string
	}{{"queue", &f.Queue}, {"partition", &f.Partition}, {"ns", &f.Namespace}, {"task", &f.Task},
		{"consumerGroup", &f.Group}} {
		if *p.dst, e = nameParam(args, p.key); e != nil {
			return f, e
		}
	}
	if f.Namespace == "" {
		if f.Namespace, e = nameParam(args, "namespace"); e != nil {
			return f, e
		}
	}
	switch f.Status = string(args.Peek("status")); f.Status {
	case "", queengo.StatusPending, queengo.StatusProcessing, queengo.StatusCompleted, queengo.StatusDeadLetter:
	default:
		return f, &errMessageStatus
	}
	f.To = now
	for _, p := range []struct {
		key string
		dst *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := string(args.Peek(p.key)); v != "" {
			t, ok := parseTime(v)
			if !ok {
				e := errTimeParam(p.key)
				return f, &e
			}
			*p.dst = t
		}
	}
	if len(args.Peek("from")) == 0 {
		f.From = f.To.Add(-messageWindow)
	}
	if f.From.After(f.To) {
		return f, &errMessageWindow
	}
	if f.Limit, e = intParam(args, "limit", messageLimitDefault, 1, messageLimitMax); e != nil {
		return f, e
	}
	f.Offset, e = offsetParam(args, "offset")
	return f, e
}

type messageEntryJSON struct {
	ID             string   `json:"id"`
	TransactionID  string   `json:"transactionId"`
	PartitionID    string   `json:"partitionId"`
	QueuePath      string   `json:"queuePath"`
	Queue          string   `json:"queue"`
	Partition      string   `json:"partition"`
	Namespace      string   `json:"namespace"`
	Task           string   `json:"task"`
	Status         string   `json:"status"`
	QueueStatus    *string  `json:"queueStatus"`
	BusStatus      busJSON  `json:"busStatus"`
	TraceID        *string  `json:"traceId"`
	ProducerSub    *string  `json:"producerSub"`
	QueuePriority  int      `json:"queuePriority"`
	CreatedAt      string   `json:"createdAt"`
	LeaseExpiresAt jsonTime `json:"leaseExpiresAt"`
}

type busJSON struct {
	ConsumedBy  int `json:"consumedBy"`
	TotalGroups int `json:"totalGroups"`
}

func (s *Server) handleListMessages(ctx *fasthttp.RequestCtx) {
	f, e := messageFilter(ctx.QueryArgs(), time.Now())
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	l, err := s.broker.ListMessages(ctx, f)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	out := make([]messageEntryJSON, len(l.Messages))
	for i := range l.Messages {
		m := &l.Messages[i]
		out[i] = messageEntryJSON{ID: m.ID.String(), TransactionID: m.TransactionID, PartitionID: m.PartitionID.String(),
			QueuePath: m.Queue + "/" + m.Partition, Queue: m.Queue, Partition: m.Partition, Namespace: m.Namespace,
			Task: m.Task, Status: m.Status, BusStatus: busJSON{m.ConsumedBy, m.TotalGroups},
			QueuePriority: m.Priority, CreatedAt: m.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000Z"),
			LeaseExpiresAt: jsonTime(m.LeaseExpiresAt)}
		if m.QueueStatus != "" {
			out[i].QueueStatus = &m.QueueStatus
		}
		if m.TraceID != uuid.Nil {
			t := m.TraceID.String()
			out[i].TraceID = &t
		}
		if m.ProducerSub != "" {
			out[i].ProducerSub = &m.ProducerSub
		}
	}
	mode := "none"
	switch {
	case l.HasQueueMode && l.BusGroups > 0:
		mode = "hybrid"
	case l.HasQueueMode:
		mode = "queue"
	case l.BusGroups > 0:
		mode = "bus"
	}
	type modeJSON struct {
		HasQueueMode   bool   `json:"hasQueueMode"`
		BusGroupsCount int    `json:"busGroupsCount"`
		Type           string `json:"type"`
	}
	s.writeObject(ctx, struct {
		Messages   []messageEntryJSON `json:"messages"`
		Mode       modeJSON           `json:"mode"`
		Pagination paginationJSON     `json:"pagination"`
		Truncated  bool               `json:"truncated"`
	}{out, modeJSON{l.HasQueueMode, l.BusGroups, mode}, paginationJSON{f.Limit, f.Offset}, l.Truncated})
}

// messagePath reads the :partitionId (a UUID) and :transactionId of a
// per-message route.
func messagePath(ctx *fasthttp.RequestCtx) (uuid.UUID, string, *apiError) {
	pid, e := pathUUID(ctx, "partitionId")
	if e != nil {
		return pid, "", e
	}
	txid, e := pathText(ctx, "transactionId")
	if e == nil {
		e = checkTxID(txid)
	}
	return pid, txid, e
}

func (s *Server) handleDeleteMessage(ctx *fasthttp.RequestCtx) {
	pid, txid, e := messagePath(ctx)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	if _, err := s.broker.DeleteMessage(ctx, pid, txid); err != nil {
		s.writeFailure(ctx, failureOf(err, errMessageNotFound), err)
		return
	}
	s.writeObject(ctx, struct {
		Success       bool   `json:"success"`
		PartitionID   string `json:"partitionId"`
		TransactionID string `json:"transactionId"`
		Message       string `json:"message"`
	}{true, pid.String(), txid, "Message deleted successfully"})
}

func (s *Server) handleMoveToDLQ(ctx *fasthttp.RequestCtx) {
	pid, txid, e := messagePath(ctx)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	ch, err := s.broker.MoveToDLQ(ctx, pid, txid)
	if err != nil {
		s.writeFailure(ctx, failureOf(err, errMessageNotFound), err)
		return
	}
	if len(ch.Groups) == 0 {
		s.writeError(ctx, errMessageResolved)
		return
	}
	s.m.deadLettered.Add(len(ch.Groups))
	s.writeObject(ctx, struct {
		Success        bool     `json:"success"`
		PartitionID    string   `json:"partitionId"`
		TransactionID  string   `json:"transactionId"`
		ConsumerGroups []string `json:"consumerGroups"`
	}{true, pid.String(), txid, ch.Groups})
}

func (s *Server) handleRetryMessage(ctx *fasthttp.RequestCtx) {
	pid, txid, e := messagePath(ctx)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	r, err := s.broker.RetryMessage(ctx, pid, txid)
	if err != nil {
		s.writeFailure(ctx, failureOf(err, errMessageNotFound), err)
		return
	}
	if r.Requeued == nil && len(r.Reset) == 0 {
		s.writeError(ctx, errNotRetryable)
		return
	}
	type requeued struct {
		MessageID      string   `json:"messageId"`
		TransactionID  string   `json:"transactionId"`
		ConsumerGroups []string `json:"consumerGroups"`
	}
	var rq *requeued
	if r.Requeued != nil {
		rq = &requeued{r.Requeued.ID.String(), r.Requeued.TransactionID, r.RequeuedGroups}
	}
	reset := r.Reset
	if reset == nil {
		reset = []string{}
	}
	s.writeObject(ctx, struct {
		Success       bool      `json:"success"`
		PartitionID   string    `json:"partitionId"`
		TransactionID string    `json:"transactionId"`
		Requeued      *requeued `json:"requeued"`
		Reset         []string  `json:"reset"`
	}{true, pid.String(), txid, rq, reset})
}
