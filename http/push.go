package http

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// maxTxIDLen keeps transaction ids well inside PostgreSQL's btree row limit.
const maxTxIDLen = 1024

type rawPushBody struct {
	Items json.RawMessage `json:"items"`
}

type rawPushItem struct {
	Queue         json.RawMessage `json:"queue"`
	Partition     json.RawMessage `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID json.RawMessage `json:"transactionId"`
	TraceID       json.RawMessage `json:"traceId"`
}

// parsePush validates a push body. Any problem rejects the whole request, so
// nothing of a bad request is written.
func parsePush(body []byte) ([]queengo.PushItem, *apiError) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, &errEmptyBody
	}
	var raw rawPushBody
	if err := json.Unmarshal(body, &raw); err != nil {
		e := badRequest("Invalid JSON: " + err.Error())
		return nil, &e
	}
	if len(raw.Items) == 0 || raw.Items[0] != '[' {
		return nil, &errItemsRequired
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw.Items, &items); err != nil {
		return nil, &errItemsRequired
	}
	out := make([]queengo.PushItem, len(items))
	for i, it := range items {
		if len(it) == 0 || it[0] != '{' {
			return nil, &errItemObject
		}
		var ri rawPushItem
		if err := json.Unmarshal(it, &ri); err != nil {
			e := badRequest("Invalid JSON: " + err.Error())
			return nil, &e
		}
		if e := fillItem(&out[i], &ri); e != nil {
			return nil, e
		}
	}
	return out, nil
}

func fillItem(p *queengo.PushItem, ri *rawPushItem) *apiError {
	q, ok, isNull := jsonString(ri.Queue)
	if !ok || isNull {
		return &errQueueString
	}
	if e := checkName("queue", q); e != nil {
		return e
	}
	p.Queue = q
	part, ok, _ := jsonString(ri.Partition)
	if !ok {
		return &errPartitionString
	}
	if part == "" {
		part = queengo.DefaultPartition
	}
	if e := checkName("partition", part); e != nil {
		return e
	}
	p.Partition = part
	tx, ok, _ := jsonString(ri.TransactionID)
	if !ok {
		return &errTxIDString
	}
	if len(tx) > maxTxIDLen {
		return &errTxIDTooLong
	}
	if tx == "" {
		tx = uuid.NewString()
	}
	p.TransactionID = tx
	tr, ok, _ := jsonString(ri.TraceID)
	if !ok {
		return &errTraceIDString
	}
	if tr != "" {
		id, err := uuid.Parse(tr)
		if err != nil || len(tr) != 36 {
			return &errTraceIDUUID
		}
		p.TraceID = id
	}
	if len(ri.Payload) == 0 {
		p.Payload = []byte("null")
	} else {
		p.Payload = compactJSON(ri.Payload)
	}
	p.ID = uuid.Must(uuid.NewV7())
	return nil
}

// jsonString decodes an optional JSON string. ok is false for a value of
// another type; a missing value or null is ("", true, true).
func jsonString(raw json.RawMessage) (s string, ok, isNull bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true, true
	}
	if raw[0] != '"' {
		return "", false, false
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, false
	}
	return s, true, false
}

// compactJSON drops insignificant whitespace so stored payloads are as small
// as the producer's data allows; it copies, so the result outlives the
// request buffer.
func compactJSON(raw []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(raw))
	if err := json.Compact(&b, raw); err != nil {
		return append([]byte(nil), raw...)
	}
	return b.Bytes()
}

// checkName enforces the name rules: 1 to 255 bytes of [A-Za-z0-9_.:-].
func checkName(what, s string) *apiError {
	if s == "" {
		e := badRequest(what + " name must not be empty")
		return &e
	}
	if len(s) > queengo.MaxNameLen {
		e := badRequest(fmt.Sprintf("%s name must be at most %d bytes", what, queengo.MaxNameLen))
		return &e
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-') {
			e := badRequest(fmt.Sprintf("%s name %q may only contain letters, digits and _ . : -", what, s))
			return &e
		}
	}
	return nil
}

func (s *Server) handlePush(ctx *fasthttp.RequestCtx) {
	items, e := parsePush(ctx.PostBody())
	if e != nil {
		writeError(ctx, *e)
		return
	}
	if len(items) == 0 {
		writeJSON(ctx, fasthttp.StatusCreated, []byte("[]"))
		return
	}
	results, err := s.broker.Push(ctx, items)
	if err != nil {
		writeError(ctx, storeError(err))
		return
	}
	failed := 0
	buf := make([]byte, 0, 160*len(results))
	buf = append(buf, '[')
	for i := range results {
		r := &results[i]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"index":`...)
		buf = appendInt(buf, i)
		buf = append(buf, `,"transaction_id":`...)
		buf = appendString(buf, r.TransactionID)
		buf = append(buf, `,"status":"`...)
		buf = append(buf, r.Status...)
		buf = append(buf, '"')
		if r.Status == queengo.PushFailed {
			failed++
			buf = append(buf, `,"error":`...)
			buf = appendString(buf, r.Error)
		} else {
			buf = append(buf, `,"message_id":`...)
			buf = appendUUID(buf, r.MessageID)
			buf = append(buf, `,"partition_id":`...)
			buf = appendUUID(buf, r.PartitionID)
			buf = append(buf, `,"trace_id":`...)
			buf = appendUUIDOrNull(buf, r.TraceID)
		}
		buf = append(buf, `,"queueName":`...)
		buf = appendString(buf, items[i].Queue)
		buf = append(buf, '}')
	}
	buf = append(buf, ']')
	status := fasthttp.StatusCreated
	if failed == len(results) {
		// Nothing was written: a 5xx lets the SDKs retry, and keeps the Go
		// SDK from reading a non-queued body as success.
		status = fasthttp.StatusInternalServerError
	}
	writeJSON(ctx, status, buf)
}
