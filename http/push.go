package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// rawPushItem is a push item as the transaction route decodes it.
type rawPushItem struct {
	Queue         json.RawMessage `json:"queue"`
	Partition     json.RawMessage `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID json.RawMessage `json:"transactionId"`
	TraceID       json.RawMessage `json:"traceId"`
}

// kind is the JSON type of an optional string field.
type kind uint8

const (
	kindAbsent kind = iota // missing or null
	kindString
	kindOther
)

// itemFields are one push item's fields, decoded but not yet validated.
type itemFields struct {
	queue, partition, txid, trace     string
	queueK, partitionK, txidK, traceK kind
	payload                           []byte // raw JSON; nil when absent
	spaced                            bool   // payload has whitespace to compact
}

// parsePush validates a push body in one pass. Any problem rejects the whole
// request, so nothing of a bad request is written. Payloads are copied out of
// the body (compacted when they carry whitespace) into one buffer.
func parsePush(body []byte) ([]queengo.PushItem, *apiError) {
	s := &scanner{b: body}
	if s.end() {
		return nil, &errEmptyBody
	}
	if s.peek() != '{' {
		if err := s.skip(0); err != nil {
			return nil, invalidJSON(err)
		}
		return nil, &errItemsRequired
	}
	var items []itemFields
	found := false
	var semantic *apiError // a well-formed body with the wrong shape
	err := s.object(0, func(key string) error {
		if key != "items" {
			return s.skip(1)
		}
		found, semantic, items = true, nil, items[:0]
		if s.peek() != '[' {
			semantic = &errItemsRequired
			return s.skip(1)
		}
		return s.array(1, func() error {
			if s.peek() != '{' {
				semantic = &errItemObject
				return s.skip(2)
			}
			f, err := readItem(s)
			items = append(items, f)
			return err
		})
	})
	if err == nil && !s.end() {
		err = errTrailing
	}
	switch {
	case err != nil:
		return nil, invalidJSON(err)
	case semantic != nil:
		return nil, semantic
	case !found:
		return nil, &errItemsRequired
	}
	size := 0
	for i := range items {
		size += len(items[i].payload)
	}
	arena := make([]byte, 0, size)
	out := make([]queengo.PushItem, len(items))
	for i := range items {
		if e := buildItem(&out[i], &items[i], &arena); e != nil {
			return nil, e
		}
	}
	return out, nil
}

// readItem reads the push item object at the cursor.
func readItem(s *scanner) (itemFields, error) {
	var f itemFields
	err := s.object(2, func(key string) error {
		var err error
		switch key {
		case "queue":
			f.queue, f.queueK, err = optString(s)
		case "partition":
			f.partition, f.partitionK, err = optString(s)
		case "transactionId":
			f.txid, f.txidK, err = optString(s)
		case "traceId":
			f.trace, f.traceK, err = optString(s)
		case "payload":
			s.ws()
			start := s.i
			s.spaced = false
			err = s.skip(3)
			f.payload, f.spaced = s.b[start:s.i], s.spaced
		default:
			err = s.skip(3)
		}
		return err
	})
	return f, err
}

// optString reads a value that should be a string or null.
func optString(s *scanner) (string, kind, error) {
	switch s.peek() {
	case '"':
		v, err := s.str()
		return v, kindString, err
	case 'n':
		return "", kindAbsent, s.literal("null")
	}
	return "", kindOther, s.skip(2)
}

// buildItem validates one item's fields into p; the payload is appended to
// arena, whose capacity the caller sized so it never moves.
func buildItem(p *queengo.PushItem, f *itemFields, arena *[]byte) *apiError {
	if f.queueK != kindString {
		return &errQueueString
	}
	if e := checkName("queue", f.queue); e != nil {
		return e
	}
	p.Queue = f.queue
	if f.partitionK == kindOther {
		return &errPartitionString
	}
	p.Partition = f.partition
	if p.Partition == "" {
		p.Partition = queengo.DefaultPartition
	}
	if e := checkName("partition", p.Partition); e != nil {
		return e
	}
	if f.txidK == kindOther {
		return &errTxIDString
	}
	if e := checkTxID(f.txid); e != nil {
		return e
	}
	p.TransactionID = f.txid
	if p.TransactionID == "" {
		p.TransactionID = uuid.NewString()
	}
	if f.traceK == kindOther {
		return &errTraceIDString
	}
	if f.trace != "" {
		id, err := uuid.Parse(f.trace)
		if err != nil || len(f.trace) != 36 {
			return &errTraceIDUUID
		}
		p.TraceID = id
	}
	start := len(*arena)
	switch {
	case f.payload == nil:
		*arena = append(*arena, "null"...)
	case f.spaced:
		b := bytes.NewBuffer(*arena)
		if err := json.Compact(b, f.payload); err != nil {
			return invalidJSON(err)
		}
		*arena = b.Bytes()
	default:
		*arena = append(*arena, f.payload...)
	}
	p.Payload = (*arena)[start:len(*arena):len(*arena)]
	p.ID = uuid.Must(uuid.NewV7())
	return nil
}

// fillItem validates an item decoded by encoding/json (the transaction route).
func fillItem(p *queengo.PushItem, ri *rawPushItem) *apiError {
	if e := textErrors(namedRaw{"queue", ri.Queue}, namedRaw{"partition", ri.Partition}, namedRaw{"transactionId", ri.TransactionID}, namedRaw{"traceId", ri.TraceID}); e != nil {
		return e
	}
	var f itemFields
	f.queue, f.queueK = rawString(ri.Queue)
	f.partition, f.partitionK = rawString(ri.Partition)
	f.txid, f.txidK = rawString(ri.TransactionID)
	f.trace, f.traceK = rawString(ri.TraceID)
	if len(ri.Payload) > 0 {
		// encoding/json lets invalid UTF-8 through in strings; the
		// scanner refuses it, as on the push route.
		sc := &scanner{b: ri.Payload}
		if err := sc.skip(0); err != nil {
			return invalidJSON(fmt.Errorf("payload: %w", err))
		}
		f.payload, f.spaced = ri.Payload, true
	}
	arena := make([]byte, 0, len(f.payload)+4)
	return buildItem(p, &f, &arena)
}

// textError reports a JSON string field that has no valid UTF-8 form (invalid
// bytes or a lone surrogate escape), naming the field; nil for anything else.
func textError(field string, raw json.RawMessage) *apiError {
	if len(raw) == 0 || raw[0] != '"' {
		return nil
	}
	sc := &scanner{b: raw}
	if _, err := sc.str(); err != nil && (errors.Is(err, errNotUTF8) || errors.Is(err, errSurrogate)) {
		return invalidJSON(fieldError(field, err))
	}
	return nil
}

// namedRaw is a JSON field read by encoding/json, with its name.
type namedRaw struct {
	name string
	raw  json.RawMessage
}

// textErrors is textError over several fields, first failure first.
func textErrors(fields ...namedRaw) *apiError {
	for _, f := range fields {
		if e := textError(f.name, f.raw); e != nil {
			return e
		}
	}
	return nil
}

// rawString decodes an optional string field read by encoding/json.
func rawString(raw json.RawMessage) (string, kind) {
	v, ok, isNull := jsonString(raw)
	switch {
	case !ok:
		return "", kindOther
	case isNull:
		return "", kindAbsent
	}
	return v, kindString
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
	// The scanner, not encoding/json: it refuses invalid UTF-8 and lone
	// surrogates where encoding/json would substitute U+FFFD.
	sc := &scanner{b: raw}
	s, err := sc.str()
	if err != nil || !sc.end() {
		return "", false, false
	}
	return s, true, false
}

func (s *Server) handlePush(ctx *fasthttp.RequestCtx) {
	defer s.m.pushDuration.UpdateDuration(time.Now())
	s.m.pushRequests.Inc()
	if s.draining.Load() {
		s.writeError(ctx, errShuttingDown)
		return
	}
	items, e := parsePush(ctx.PostBody())
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	if len(items) == 0 {
		writeJSON(ctx, fasthttp.StatusCreated, []byte("[]"))
		return
	}
	// Not ctx itself: fasthttp cancels it when shutdown begins, and a push
	// whose segment is being committed must hear the outcome (a 500 for a
	// stored message would make the client retry into a duplicate).
	results, err := s.broker.Push(context.WithoutCancel(ctx), items)
	if err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	failed := 0
	allFull := true // every failed item was refused by maxSize
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
		switch r.Status {
		case queengo.PushDuplicate:
			s.m.pushDuplicates.Inc()
		case queengo.PushFailed:
			s.m.pushFailed.Inc()
		}
		switch {
		case r.Status == queengo.PushBuffered:
			// Queen's buffered item, plus the transaction id the broker
			// assigned (the replay stores the item under it).
			buf = append(buf, `,"queue":`...)
			buf = appendString(buf, items[i].Queue)
			buf = append(buf, `,"partition":`...)
			buf = appendString(buf, items[i].Partition)
			buf = append(buf, `,"transactionId":`...)
			buf = appendString(buf, r.TransactionID)
		case r.Status == queengo.PushFailed:
			failed++
			allFull = allFull && errors.Is(r.Err, queengo.ErrQueueFull)
			buf = append(buf, `,"error":`...)
			buf = appendString(buf, failure(r.Err).Message)
		default:
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
	s.m.pushMessages.Add(len(results) - failed)
	status := fasthttp.StatusCreated
	if failed == len(results) {
		// Nothing was written: not a 2xx, which the Go SDK would read as
		// success. A full queue is the client's backpressure (409, retry
		// once consumers made room); anything else is a 5xx the SDKs retry.
		status = fasthttp.StatusInternalServerError
		if allFull {
			status = fasthttp.StatusConflict
		}
	}
	writeJSON(ctx, status, buf)
}
