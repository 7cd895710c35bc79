package http

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// TraceAdmin is what the trace routes (docs/api.md "Traces") need of the Broker.
type TraceAdmin interface {
	RecordTrace(ctx context.Context, t queengo.NewTrace) (uuid.UUID, error)
	MessageTraces(ctx context.Context, partition uuid.UUID, txid string, limit, offset int) ([]queengo.Trace, error)
	TracesByName(ctx context.Context, name string, limit, offset int) ([]queengo.Trace, int64, error)
	TraceNames(ctx context.Context, limit, offset int) ([]queengo.TraceName, int64, error)
}

// traceRoutes are the trace routes (docs/api.md "Traces") of the route table.
func (s *Server) traceRoutes() []route {
	return []route{
		{fasthttp.MethodPost, "/api/v1/traces", levelReadWrite, s.handleRecordTrace},
		{fasthttp.MethodGet, "/api/v1/traces/names", levelReadOnly, s.handleTraceNames},
		{fasthttp.MethodGet, "/api/v1/traces/by-name/{traceName}", levelReadOnly, s.handleTracesByName},
		{fasthttp.MethodGet, "/api/v1/traces/{partitionId}/{transactionId}", levelReadOnly, s.handleMessageTraces},
	}
}

// The bounds of a trace (docs/api.md, "Traces"). A trace is an event record
// read back in pages of up to traceLimitMax: its data is kept small so a
// page stays a few megabytes at most.
const (
	maxTraceData      = 64 << 10 // bytes of compact JSON
	maxTraceNames     = 32
	maxEventTypeLen   = 255
	traceLimitMax     = 1000
	traceLimitDefault = 100 // by message and by name
	namesLimitDefault = 50
	defaultEventType  = "info"
)

// traceFields are a trace body's fields, decoded but not validated.
type traceFields struct {
	txid, part, group, event     string
	txidK, partK, groupK, eventK kind
	data                         []byte // raw JSON; nil when absent
	spaced                       bool   // data has whitespace to compact
	names                        []string
	namesBad                     bool // traceNames is neither a string, an array of strings nor null
}

// readTrace reads the trace body object at the cursor.
func readTrace(s *scanner) (traceFields, error) {
	var f traceFields
	err := s.object(0, func(key string) error {
		var err error
		switch key {
		case "transactionId":
			f.txid, f.txidK, err = optString(s)
		case "partitionId":
			f.part, f.partK, err = optString(s)
		case "consumerGroup":
			f.group, f.groupK, err = optString(s)
		case "eventType":
			f.event, f.eventK, err = optString(s)
		case "data":
			s.ws()
			start := s.i
			s.spaced = false
			err = s.skip(1)
			f.data, f.spaced = s.b[start:s.i], s.spaced
		case "traceNames":
			f.names, f.namesBad, err = readTraceNames(s)
		default:
			err = s.skip(1)
		}
		return err
	})
	return f, err
}

// readTraceNames reads traceNames: a string (one name), an array of strings,
// or null (none). bad reports any other shape.
func readTraceNames(s *scanner) (names []string, bad bool, err error) {
	switch s.peek() {
	case 'n':
		return nil, false, s.literal("null")
	case '"':
		v, err := s.str()
		return []string{v}, false, err
	case '[':
		err = s.array(1, func() error {
			if s.peek() != '"' {
				bad = true
				return s.skip(2)
			}
			v, err := s.str()
			names = append(names, v)
			return err
		})
		return names, bad, err
	}
	return nil, true, s.skip(1)
}

// checkTrace validates a trace body into t.
func checkTrace(f *traceFields) (t queengo.NewTrace, e *apiError) {
	if f.txidK != kindString || f.txid == "" || f.partK != kindString || f.part == "" {
		return t, &errTraceMessageRequired
	}
	pid, err := uuid.Parse(f.part)
	if err != nil {
		return t, &errPartitionUUID
	}
	if e := checkTxID(f.txid); e != nil {
		return t, e
	}
	if f.data == nil {
		return t, &errTraceDataRequired
	}
	data := f.data
	if f.spaced {
		var b bytes.Buffer
		if err := json.Compact(&b, data); err != nil {
			return t, invalidJSON(err)
		}
		data = b.Bytes()
	}
	if len(data) > maxTraceData {
		return t, &errTraceDataTooLarge
	}
	if f.groupK == kindOther {
		return t, &errGroupString
	}
	group := f.group
	if group == "" {
		group = queengo.QueueModeGroup
	}
	if e := checkName("consumerGroup", group); e != nil {
		return t, e
	}
	if f.eventK == kindOther {
		return t, &errEventTypeString
	}
	event := f.event
	if event == "" {
		event = defaultEventType
	}
	if len(event) > maxEventTypeLen {
		return t, &errEventTypeTooLong
	}
	if e := checkText("eventType", event); e != nil {
		return t, e
	}
	if f.namesBad {
		return t, &errTraceNamesShape
	}
	if len(f.names) > maxTraceNames {
		return t, &errTraceNamesTooMany
	}
	for _, n := range f.names {
		if e := checkName("trace", n); e != nil {
			return t, e
		}
	}
	// Sorted and distinct, as queen.record_trace needs them.
	names := slices.Compact(slices.Sorted(slices.Values(f.names)))
	if names == nil {
		names = []string{}
	}
	return queengo.NewTrace{PartitionID: pid, TransactionID: f.txid, Group: group, EventType: event,
		Data: data, Names: names}, nil
}

func (s *Server) handleRecordTrace(ctx *fasthttp.RequestCtx) {
	sc := &scanner{b: ctx.PostBody()}
	if sc.end() {
		s.writeError(ctx, errEmptyBody)
		return
	}
	switch sc.peek() {
	case '{':
	default:
		if err := sc.skip(0); err != nil {
			s.writeError(ctx, *invalidJSON(err))
			return
		}
		s.writeError(ctx, errTraceMessageRequired)
		return
	}
	f, err := readTrace(sc)
	if err == nil && !sc.end() {
		err = errTrailing
	}
	if err != nil {
		s.writeError(ctx, *invalidJSON(err))
		return
	}
	t, e := checkTrace(&f)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	id, err := s.broker.RecordTrace(ctx, t)
	if err != nil {
		s.writeFailure(ctx, failureOf(err, errMessageNotFound), err)
		return
	}
	buf := append(make([]byte, 0, 64), `{"success":true,"traceId":`...)
	buf = appendUUID(buf, id)
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusCreated, buf)
}

// tracePageParams reads limit (default def, 1 to traceLimitMax) and offset.
func tracePageParams(ctx *fasthttp.RequestCtx, def int) (limit, offset int, e *apiError) {
	args := ctx.QueryArgs()
	if limit, e = intParam(args, "limit", def, 1, traceLimitMax); e != nil {
		return 0, 0, e
	}
	offset, e = offsetParam(args, "offset")
	return limit, offset, e
}

func (s *Server) handleMessageTraces(ctx *fasthttp.RequestCtx) {
	pid, e := pathUUID(ctx, "partitionId")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	txid, e := pathText(ctx, "transactionId")
	if e == nil {
		e = checkTxID(txid)
	}
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	limit, offset, e := tracePageParams(ctx, traceLimitMax)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	list, err := s.broker.MessageTraces(ctx, pid, txid, limit, offset)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 64+len(list)*256), `{"traces":[`...)
	for i := range list {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendTrace(buf, &list[i], false)
	}
	buf = append(buf, `]}`...)
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

func (s *Server) handleTracesByName(ctx *fasthttp.RequestCtx) {
	name, e := pathName(ctx, "traceName")
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	limit, offset, e := tracePageParams(ctx, traceLimitDefault)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	list, total, err := s.broker.TracesByName(ctx, name, limit, offset)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 128+len(list)*512), `{"traces":[`...)
	for i := range list {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendTrace(buf, &list[i], true)
	}
	buf = append(buf, `],"total":`...)
	buf = strconv.AppendInt(buf, total, 10)
	buf = appendTracePage(buf, limit, offset)
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

func (s *Server) handleTraceNames(ctx *fasthttp.RequestCtx) {
	limit, offset, e := tracePageParams(ctx, namesLimitDefault)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	list, total, err := s.broker.TraceNames(ctx, limit, offset)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 128+len(list)*128), `{"trace_names":[`...)
	for i, n := range list {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"trace_name":`...)
		buf = appendString(buf, n.Name)
		buf = append(buf, `,"trace_count":`...)
		buf = strconv.AppendInt(buf, n.Traces, 10)
		buf = append(buf, `,"message_count":`...)
		buf = strconv.AppendInt(buf, n.Messages, 10)
		buf = append(buf, `,"last_seen":`...)
		buf = appendTraceTime(buf, n.LastSeen)
		buf = append(buf, '}')
	}
	buf = append(buf, `],"total":`...)
	buf = strconv.AppendInt(buf, total, 10)
	buf = appendTracePage(buf, limit, offset)
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// appendTrace appends one trace object; withMessage adds the by-name fields
// (transaction_id, partition_id, queue_name, partition_name,
// message_payload).
func appendTrace(buf []byte, t *queengo.Trace, withMessage bool) []byte {
	buf = append(buf, `{"id":`...)
	buf = appendUUID(buf, t.ID)
	if withMessage {
		buf = append(buf, `,"transaction_id":`...)
		buf = appendString(buf, t.TransactionID)
		buf = append(buf, `,"partition_id":`...)
		buf = appendUUID(buf, t.PartitionID)
	}
	buf = append(buf, `,"event_type":`...)
	buf = appendString(buf, t.EventType)
	buf = append(buf, `,"data":`...)
	buf = append(buf, t.Data...)
	buf = append(buf, `,"consumer_group":`...)
	buf = appendString(buf, t.Group)
	buf = append(buf, `,"worker_id":`...)
	buf = appendString(buf, t.WorkerID)
	buf = append(buf, `,"created_at":`...)
	buf = appendTraceTime(buf, t.CreatedAt)
	if withMessage {
		buf = append(buf, `,"queue_name":`...)
		buf = appendString(buf, t.Queue)
		buf = append(buf, `,"partition_name":`...)
		buf = appendString(buf, t.Partition)
		buf = append(buf, `,"message_payload":`...)
		if t.Payload == nil {
			buf = append(buf, "null"...)
		} else {
			buf = append(buf, t.Payload...)
		}
	}
	buf = append(buf, `,"trace_names":[`...)
	for i, n := range t.Names {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, n)
	}
	return append(buf, `]}`...)
}

// appendTraceTime appends a trace time as the reference formats it: UTC,
// milliseconds (docs/api.md conventions, timestamps).
func appendTraceTime(buf []byte, t time.Time) []byte {
	return appendString(buf, t.UTC().Format("2006-01-02T15:04:05.000Z"))
}

func appendTracePage(buf []byte, limit, offset int) []byte {
	buf = append(buf, `,"pagination":{"limit":`...)
	buf = appendInt(buf, limit)
	buf = append(buf, `,"offset":`...)
	buf = appendInt(buf, offset)
	return append(buf, `}}`...)
}
