package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// The streams routes (docs/api.md "Streams", issue 42): the Queen SDKs'
// streaming runtimes register a query, read its state and commit cycles
// here; the operators themselves run in the SDK. Every answer carries
// success; a failure is {"success":false,"error":"..."} with the table's
// status.

// streamRoutes are the streams routes; the SDKs send them with the data
// path's credentials.
func (s *Server) streamRoutes() []route {
	return []route{
		{fasthttp.MethodPost, "/streams/v1/queries", levelReadWrite, s.handleStreamRegister},
		{fasthttp.MethodPost, "/streams/v1/state/get", levelReadWrite, s.handleStreamState},
		{fasthttp.MethodPost, "/streams/v1/cycle", levelReadWrite, s.handleStreamCycle},
	}
}

// writeStreamError answers e in the streams envelope and counts it.
func (s *Server) writeStreamError(ctx *fasthttp.RequestCtx, e apiError) {
	s.countError(e)
	buf := append(make([]byte, 0, 96), `{"success":false,"error":`...)
	buf = appendString(buf, e.Message)
	buf = append(buf, '}')
	writeJSON(ctx, e.Status, buf)
}

// writeStreamFailure answers err, a failure the broker reported.
func (s *Server) writeStreamFailure(ctx *fasthttp.RequestCtx, err error) {
	e := failure(err)
	s.logFailure(ctx, e, err)
	s.writeStreamError(ctx, e)
}

// streamText reads an optional string field: "" when absent or null, an
// error naming field for another type or text PostgreSQL cannot hold.
func streamText(field string, raw json.RawMessage) (string, *apiError) {
	v, k := rawString(raw)
	if k == kindOther {
		e := errStreamField(field, "must be a string")
		return "", &e
	}
	if e := textError(field, raw); e != nil {
		return "", e
	}
	return v, checkText(field, v)
}

// streamUUID reads a required UUID field.
func streamUUID(field string, raw json.RawMessage) (uuid.UUID, *apiError) {
	v, e := streamText(field, raw)
	if e != nil {
		return uuid.Nil, e
	}
	if v == "" {
		e := errStreamField(field, "is required")
		return uuid.Nil, &e
	}
	id, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		e := errStreamField(field, "must be a UUID")
		return uuid.Nil, &e
	}
	return id, nil
}

// streamBool reads an optional boolean field, def when absent or null.
func streamBool(field string, raw json.RawMessage, def bool) (bool, *apiError) {
	switch string(raw) {
	case "", "null":
		return def, nil
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	e := errStreamField(field, "must be a boolean")
	return false, &e
}

// streamArray reads an optional array field into its elements.
func streamArray(field string, raw json.RawMessage) ([]json.RawMessage, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var out []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &out) != nil {
		e := errStreamField(field, "must be an array")
		return nil, &e
	}
	return out, nil
}

// streamObject decodes an element that must be a JSON object.
func streamObject(field string, raw json.RawMessage, v any) *apiError {
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, v) != nil {
		e := errStreamField(field, "must be an object")
		return &e
	}
	return nil
}

// streamName reads a required name field (a query, a queue).
func streamName(field string, raw json.RawMessage) (string, *apiError) {
	v, e := streamText(field, raw)
	if e != nil {
		return "", e
	}
	if v == "" {
		e := errStreamField(field, "is required")
		return "", &e
	}
	if len(v) > queengo.MaxNameLen {
		e := errStreamField(field, fmt.Sprintf("must be at most %d bytes", queengo.MaxNameLen))
		return "", &e
	}
	return v, nil
}

// parseStreamRegistration reads POST /streams/v1/queries.
func parseStreamRegistration(body []byte) (queengo.StreamRegistration, *apiError) {
	var r queengo.StreamRegistration
	var req struct {
		Name        json.RawMessage `json:"name"`
		SourceQueue json.RawMessage `json:"source_queue"`
		SinkQueue   json.RawMessage `json:"sink_queue"`
		ConfigHash  json.RawMessage `json:"config_hash"`
		Reset       json.RawMessage `json:"reset"`
	}
	if e := decodeObject(body, &req); e != nil {
		return r, e
	}
	var e *apiError
	if r.Name, e = streamName("name", req.Name); e != nil {
		return r, e
	}
	if r.SourceQueue, e = streamName("source_queue", req.SourceQueue); e != nil {
		return r, e
	}
	if e = checkName("source_queue", r.SourceQueue); e != nil {
		return r, e
	}
	if r.SinkQueue, e = streamText("sink_queue", req.SinkQueue); e != nil {
		return r, e
	}
	if r.SinkQueue != "" {
		if e = checkName("sink_queue", r.SinkQueue); e != nil {
			return r, e
		}
	}
	if r.ConfigHash, e = streamName("config_hash", req.ConfigHash); e != nil {
		return r, e
	}
	if r.Reset, e = streamBool("reset", req.Reset, false); e != nil {
		return r, e
	}
	return r, nil
}

// decodeObject decodes a body that must be a JSON object.
func decodeObject(body []byte, v any) *apiError {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] != '{' {
		return &errStreamBodyObject
	}
	return decodeBody(body, v)
}

func (s *Server) handleStreamRegister(ctx *fasthttp.RequestCtx) {
	r, e := parseStreamRegistration(ctx.PostBody())
	if e != nil {
		s.writeStreamError(ctx, *e)
		return
	}
	res, err := s.broker.RegisterStream(ctx, r)
	if err != nil {
		s.writeStreamFailure(ctx, err)
		return
	}
	buf := append(make([]byte, 0, 192), `{"success":true,"query_id":`...)
	buf = appendUUID(buf, res.ID)
	buf = append(buf, `,"name":`...)
	buf = appendString(buf, r.Name)
	buf = append(buf, `,"config_hash":`...)
	buf = appendString(buf, r.ConfigHash)
	buf = append(buf, `,"fresh":`...)
	buf = appendBool(buf, res.Fresh)
	buf = append(buf, `,"reset":`...)
	buf = appendBool(buf, res.DidReset)
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// parseStateFilter reads POST /streams/v1/state/get.
func parseStateFilter(body []byte) (queengo.StateFilter, *apiError) {
	var f queengo.StateFilter
	var req struct {
		QueryID     json.RawMessage `json:"query_id"`
		PartitionID json.RawMessage `json:"partition_id"`
		Keys        json.RawMessage `json:"keys"`
		KeyPrefix   json.RawMessage `json:"key_prefix"`
		Ripe        json.RawMessage `json:"ripe_at_or_before"`
	}
	if e := decodeObject(body, &req); e != nil {
		return f, e
	}
	var e *apiError
	if f.Query, e = streamUUID("query_id", req.QueryID); e != nil {
		return f, e
	}
	if f.Partition, e = streamUUID("partition_id", req.PartitionID); e != nil {
		return f, e
	}
	keys, e := streamArray("keys", req.Keys)
	if e != nil {
		return f, e
	}
	for i, raw := range keys {
		field := "keys[" + strconv.Itoa(i) + "]"
		k, e := streamText(field, raw)
		if e == nil && len(raw) > 0 && raw[0] != '"' {
			ee := errStreamField(field, "must be a string")
			e = &ee
		}
		if e != nil {
			return f, e
		}
		f.Keys = append(f.Keys, k)
	}
	if f.KeyPrefix, e = streamText("key_prefix", req.KeyPrefix); e != nil {
		return f, e
	}
	// The reference ignores a ripe_at_or_before that is not a number.
	if len(req.Ripe) > 0 {
		if n, err := strconv.ParseFloat(string(req.Ripe), 64); err == nil {
			v := int64(n)
			f.RipeAtOrBefore = &v
		}
	}
	return f, nil
}

func (s *Server) handleStreamState(ctx *fasthttp.RequestCtx) {
	f, e := parseStateFilter(ctx.PostBody())
	if e != nil {
		s.writeStreamError(ctx, *e)
		return
	}
	rows, err := s.broker.StreamState(ctx, f)
	if err != nil {
		s.writeStreamFailure(ctx, err)
		return
	}
	n := 32
	for _, r := range rows {
		n += 64 + len(r.Key) + len(r.Value)
	}
	buf := append(make([]byte, 0, n), `{"success":true,"rows":[`...)
	for i, r := range rows {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"key":`...)
		buf = appendString(buf, r.Key)
		buf = append(buf, `,"value":`...)
		buf = append(buf, r.Value...)
		buf = append(buf, `,"updated_at":"`...)
		buf = r.UpdatedAt.UTC().AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, `"}`...)
	}
	buf = append(buf, `]}`...)
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// parseCycle reads POST /streams/v1/cycle.
func parseCycle(body []byte) (*queengo.Cycle, *apiError) {
	var req struct {
		QueryID       json.RawMessage `json:"query_id"`
		PartitionID   json.RawMessage `json:"partition_id"`
		ConsumerGroup json.RawMessage `json:"consumer_group"`
		StateOps      json.RawMessage `json:"state_ops"`
		PushItems     json.RawMessage `json:"push_items"`
		Ack           json.RawMessage `json:"ack"`
		ReleaseLease  json.RawMessage `json:"release_lease"`
	}
	if e := decodeObject(body, &req); e != nil {
		return nil, e
	}
	cy := &queengo.Cycle{}
	var e *apiError
	if cy.Query, e = streamUUID("query_id", req.QueryID); e != nil {
		return nil, e
	}
	if cy.Partition, e = streamUUID("partition_id", req.PartitionID); e != nil {
		return nil, e
	}
	if cy.Group, e = streamText("consumer_group", req.ConsumerGroup); e != nil {
		return nil, e
	}
	if cy.Group == "" {
		cy.Group = queengo.QueueModeGroup
	}
	if e = checkName("consumer_group", cy.Group); e != nil {
		return nil, e
	}
	if cy.ReleaseLease, e = streamBool("release_lease", req.ReleaseLease, true); e != nil {
		return nil, e
	}
	ops, e := streamArray("state_ops", req.StateOps)
	if e != nil {
		return nil, e
	}
	for i, raw := range ops {
		op, e := parseStateOp("state_ops["+strconv.Itoa(i)+"]", raw)
		if e != nil {
			return nil, e
		}
		cy.Ops = append(cy.Ops, op)
	}
	items, e := streamArray("push_items", req.PushItems)
	if e != nil {
		return nil, e
	}
	for i, raw := range items {
		var ri rawPushItem
		if e := streamObject("push_items["+strconv.Itoa(i)+"]", raw, &ri); e != nil {
			return nil, e
		}
		var p queengo.PushItem
		if e := fillItem(&p, &ri); e != nil {
			ee := errStreamField("push_items["+strconv.Itoa(i)+"]:", e.Message)
			return nil, &ee
		}
		cy.Push = append(cy.Push, p)
	}
	if len(req.Ack) > 0 && string(req.Ack) != "null" {
		a, e := parseCycleAck(req.Ack)
		if e != nil {
			return nil, e
		}
		cy.Ack = a
	}
	return cy, nil
}

// parseStateOp reads one state op: {type: upsert|delete, key, value?}.
func parseStateOp(field string, raw json.RawMessage) (queengo.StateOp, *apiError) {
	var op queengo.StateOp
	var r struct {
		Type  json.RawMessage `json:"type"`
		Key   json.RawMessage `json:"key"`
		Value json.RawMessage `json:"value"`
	}
	if e := streamObject(field, raw, &r); e != nil {
		return op, e
	}
	typ, _ := rawString(r.Type)
	switch typ {
	case "upsert":
	case "delete":
		op.Delete = true
	default:
		e := errStreamOpType(field+".type", string(r.Type))
		return op, &e
	}
	if len(r.Key) == 0 || r.Key[0] != '"' {
		e := errStreamField(field+".key", "must be a string")
		return op, &e
	}
	key, e := streamText(field+".key", r.Key)
	if e != nil {
		return op, e
	}
	if len(key) > queengo.MaxStateKeyLen {
		e := errStreamField(field+".key", fmt.Sprintf("must be at most %d bytes", queengo.MaxStateKeyLen))
		return op, &e
	}
	op.Key = key
	if op.Delete {
		return op, nil
	}
	v := r.Value
	if len(v) == 0 || string(v) == "null" {
		// The reference stores {} for an upsert without a value.
		v = json.RawMessage(`{}`)
	}
	if len(v) > queengo.MaxStateValueLen {
		e := errStateValueTooLarge(field + ".value")
		return op, &e
	}
	// The scanner refuses invalid UTF-8 and lone surrogates; jsonb refuses
	// \u0000.
	sc := &scanner{b: v}
	if err := sc.skip(0); err != nil {
		return op, invalidJSON(fieldError(field+".value", err))
	}
	if bytes.Contains(v, []byte(`\u0000`)) {
		e := errNULField(field + ".value")
		return op, &e
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return op, invalidJSON(fieldError(field+".value", err))
	}
	op.Value = b.Bytes()
	return op, nil
}

// parseCycleAck reads a cycle's ack: {transactionId, leaseId?, status?,
// count?, error?}; count is the SDK's tally and is not needed (the offsets
// the ack resolves follow from the message it names).
func parseCycleAck(raw json.RawMessage) (*queengo.CycleAck, *apiError) {
	var r struct {
		TransactionID json.RawMessage `json:"transactionId"`
		LeaseID       json.RawMessage `json:"leaseId"`
		Status        json.RawMessage `json:"status"`
		Error         json.RawMessage `json:"error"`
	}
	if e := streamObject("ack", raw, &r); e != nil {
		return nil, e
	}
	a := &queengo.CycleAck{}
	var e *apiError
	if a.TransactionID, e = streamText("ack.transactionId", r.TransactionID); e != nil {
		return nil, e
	}
	if a.TransactionID == "" {
		e := errStreamField("ack.transactionId", "is required")
		return nil, &e
	}
	if len(a.TransactionID) > maxTxIDLen {
		e := errStreamField("ack.transactionId", fmt.Sprintf("must be at most %d bytes", maxTxIDLen))
		return nil, &e
	}
	lease, e := streamText("ack.leaseId", r.LeaseID)
	if e != nil {
		return nil, e
	}
	if lease != "" {
		id, err := uuid.Parse(lease)
		if err != nil || len(lease) != 36 {
			e := errStreamField("ack.leaseId", "must be a UUID")
			return nil, &e
		}
		a.LeaseID = id
	}
	if a.Status, e = streamText("ack.status", r.Status); e != nil {
		return nil, e
	}
	switch a.Status {
	case "":
		a.Status = "completed"
	case "completed", "success", "failed", "dlq":
	default:
		e := errStreamField("ack.status", "must be completed, success, failed or dlq")
		return nil, &e
	}
	if a.Error, e = streamText("ack.error", r.Error); e != nil {
		return nil, e
	}
	return a, nil
}

func (s *Server) handleStreamCycle(ctx *fasthttp.RequestCtx) {
	cy, e := parseCycle(ctx.PostBody())
	if e != nil {
		s.m.cyclesRefused.Inc()
		s.writeStreamError(ctx, *e)
		return
	}
	start := time.Now()
	res, err := s.broker.Cycle(ctx, cy)
	if err != nil {
		s.m.cyclesRefused.Inc()
		s.writeStreamFailure(ctx, err)
		return
	}
	s.m.cyclesCommitted.Inc()
	s.m.cycleDuration.UpdateDuration(start)
	buf := make([]byte, 0, 256+160*len(res.Push))
	buf = append(buf, `{"success":true,"query_id":`...)
	buf = appendUUID(buf, cy.Query)
	buf = append(buf, `,"partition_id":`...)
	buf = appendUUID(buf, cy.Partition)
	buf = append(buf, `,"state_ops_applied":`...)
	buf = appendInt(buf, len(cy.Ops))
	buf = append(buf, `,"push_results":[`...)
	for i, r := range res.Push {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"index":`...)
		buf = appendInt(buf, i)
		buf = append(buf, `,"transaction_id":`...)
		buf = appendString(buf, r.TransactionID)
		buf = append(buf, `,"status":"`...)
		buf = append(buf, r.Status...)
		buf = append(buf, `","message_id":`...)
		buf = appendUUID(buf, r.MessageID)
		buf = append(buf, `,"partition_id":`...)
		buf = appendUUID(buf, r.PartitionID)
		buf = append(buf, `,"queueName":`...)
		buf = appendString(buf, cy.Push[i].Queue)
		buf = append(buf, '}')
	}
	buf = append(buf, `],"ack_result":`...)
	if cy.Ack == nil {
		buf = append(buf, `null`...)
	} else {
		buf = append(buf, `{"success":true,"count":`...)
		buf = strconv.AppendInt(buf, res.Acked, 10)
		buf = append(buf, `,"lease_released":`...)
		buf = appendBool(buf, res.LeaseReleased)
		buf = append(buf, `,"dlq":`...)
		buf = appendBool(buf, res.DLQ)
		buf = append(buf, '}')
	}
	buf = append(buf, '}')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}
