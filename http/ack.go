package http

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

type rawAck struct {
	TransactionID json.RawMessage `json:"transactionId"`
	PartitionID   json.RawMessage `json:"partitionId"`
	Status        json.RawMessage `json:"status"`
	ConsumerGroup json.RawMessage `json:"consumerGroup"`
	LeaseID       json.RawMessage `json:"leaseId"`
	Error         json.RawMessage `json:"error"`
}

// ackFields is one acknowledgement's fields, decoded but not validated.
type ackFields struct {
	txid, part, status, group, lease, msg       string
	txidK, partK, statusK, groupK, leaseK, msgK kind
}

// fieldsFromRaw decodes an acknowledgement read by encoding/json (the
// transaction route).
func fieldsFromRaw(r *rawAck) ackFields {
	var f ackFields
	f.txid, f.txidK = rawString(r.TransactionID)
	f.part, f.partK = rawString(r.PartitionID)
	f.status, f.statusK = rawString(r.Status)
	f.group, f.groupK = rawString(r.ConsumerGroup)
	f.lease, f.leaseK = rawString(r.LeaseID)
	f.msg, f.msgK = rawString(r.Error)
	return f
}

// readAck reads the acknowledgement object at the cursor.
func readAck(s *scanner) (ackFields, error) {
	var f ackFields
	err := s.object(1, func(key string) error {
		var err error
		switch key {
		case "transactionId":
			f.txid, f.txidK, err = optString(s)
		case "partitionId":
			f.part, f.partK, err = optString(s)
		case "status":
			f.status, f.statusK, err = optString(s)
		case "consumerGroup":
			f.group, f.groupK, err = optString(s)
		case "leaseId":
			f.lease, f.leaseK, err = optString(s)
		case "error":
			f.msg, f.msgK, err = optString(s)
		default:
			err = s.skip(2)
		}
		return err
	})
	return f, err
}

// checkAck validates one acknowledgement. badLease reports a leaseId that
// cannot be a live lease (not a UUID): a per-item failure, not a 400.
func checkAck(f *ackFields, txErr, partErr apiError) (it queengo.AckItem, badLease bool, e *apiError) {
	if f.txidK != kindString || f.txid == "" {
		return it, false, &txErr
	}
	if f.partK != kindString || f.part == "" {
		return it, false, &partErr
	}
	pid, err := uuid.Parse(f.part)
	if err != nil {
		return it, false, &errPartitionUUID
	}
	if f.statusK == kindOther {
		return it, false, &errStatusString
	}
	status := f.status
	if status == "" {
		status = "completed"
	}
	if f.groupK == kindOther {
		return it, false, &errGroupString
	}
	group := f.group
	if group == "" {
		group = queengo.QueueModeGroup
	}
	if f.leaseK == kindOther {
		return it, false, &errLeaseString
	}
	var lid uuid.UUID
	if f.lease != "" {
		if lid, err = uuid.Parse(f.lease); err != nil {
			badLease = true
		}
	}
	if f.msgK == kindOther {
		return it, false, &errErrorString
	}
	if e = checkTxID(f.txid); e == nil {
		if e = checkName("consumerGroup", group); e == nil {
			if e = checkText("status", status); e == nil {
				e = checkText("error", f.msg)
			}
		}
	}
	if e != nil {
		return it, false, e
	}
	return queengo.AckItem{PartitionID: pid, TransactionID: f.txid, Status: status, Group: group, LeaseID: lid, Error: f.msg}, badLease, nil
}

func decodeBody(body []byte, v any) *apiError {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return &errEmptyBody
	}
	if err := json.Unmarshal(body, v); err != nil {
		return invalidJSON(err)
	}
	return nil
}

func (s *Server) handleAck(ctx *fasthttp.RequestCtx) {
	sc := &scanner{b: ctx.PostBody()}
	if sc.end() {
		s.writeError(ctx, errEmptyBody)
		return
	}
	if sc.peek() != '{' {
		s.writeError(ctx, *invalidJSON(errSyntax))
		return
	}
	f, err := readAck(sc)
	if err == nil && !sc.end() {
		err = errTrailing
	}
	if err != nil {
		s.writeError(ctx, *invalidJSON(err))
		return
	}
	it, badLease, e := checkAck(&f, errTxIDRequired, errPartitionRequired)
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	s.ack(ctx, []queengo.AckItem{it}, []bool{badLease})
}

// parseAckBatch reads a batch ack body in one pass. The body-level
// consumerGroup applies to every item.
func parseAckBatch(body []byte) ([]queengo.AckItem, []bool, *apiError) {
	sc := &scanner{b: body}
	if sc.end() {
		return nil, nil, &errEmptyBody
	}
	if sc.peek() != '{' {
		if err := sc.skip(0); err != nil {
			return nil, nil, invalidJSON(err)
		}
		return nil, nil, &errAcksRequired
	}
	var fields []ackFields
	found, notArray := false, false
	var group string
	var groupK kind
	err := sc.object(0, func(key string) error {
		switch key {
		case "acknowledgments":
			found = true
			if sc.peek() != '[' {
				notArray = true
				return sc.skip(1)
			}
			fields = fields[:0]
			return sc.array(1, func() error {
				if sc.peek() != '{' {
					notArray = true
					return sc.skip(2)
				}
				f, err := readAck(sc)
				fields = append(fields, f)
				return err
			})
		case "consumerGroup":
			var err error
			group, groupK, err = optString(sc)
			return err
		}
		return sc.skip(1)
	})
	if err == nil && !sc.end() {
		err = errTrailing
	}
	if err != nil {
		return nil, nil, invalidJSON(err)
	}
	if !found || notArray {
		return nil, nil, &errAcksRequired
	}
	if groupK == kindOther {
		return nil, nil, &errGroupString
	}
	items := make([]queengo.AckItem, len(fields))
	bad := make([]bool, len(fields))
	for i := range fields {
		fields[i].group, fields[i].groupK = group, groupK
		var e *apiError
		if items[i], bad[i], e = checkAck(&fields[i], errBatchTxID, errBatchPartition); e != nil {
			return nil, nil, e
		}
	}
	return items, bad, nil
}

func (s *Server) handleAckBatch(ctx *fasthttp.RequestCtx) {
	items, bad, e := parseAckBatch(ctx.PostBody())
	if e != nil {
		s.writeError(ctx, *e)
		return
	}
	if len(items) == 0 {
		writeJSON(ctx, fasthttp.StatusOK, []byte("[]"))
		return
	}
	s.ack(ctx, items, bad)
}

// ack runs the valid items and answers one result per item, in order.
func (s *Server) ack(ctx *fasthttp.RequestCtx, items []queengo.AckItem, badLease []bool) {
	defer s.m.ackDuration.UpdateDuration(time.Now())
	s.m.ackRequests.Inc()
	s.m.ackItems.Add(len(items))
	var run []queengo.AckItem
	for i := range items {
		if !badLease[i] {
			run = append(run, items[i])
		}
	}
	var res []queengo.AckResult
	if len(run) > 0 {
		var err error
		if res, err = s.broker.Ack(ctx, run); err != nil {
			s.writeFailure(ctx, failure(err), err)
			return
		}
	}
	buf := make([]byte, 0, 160*len(items))
	buf = append(buf, '[')
	k := 0
	for i := range items {
		r := queengo.AckResult{Failure: queengo.AckLeaseInvalid}
		if !badLease[i] {
			r = res[k]
			k++
		}
		if !r.Success {
			s.m.ackFailed.Inc()
		}
		if r.DLQ {
			s.m.deadLettered.Inc()
		}
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"index":`...)
		buf = appendInt(buf, i)
		buf = append(buf, `,"transactionId":`...)
		buf = appendString(buf, items[i].TransactionID)
		buf = append(buf, `,"success":`...)
		buf = appendBool(buf, r.Success)
		buf = append(buf, `,"error":`...)
		buf = appendStringOrNull(buf, failureText(r.Failure))
		buf = append(buf, `,"queueName":`...)
		buf = appendStringOrNull(buf, r.Queue)
		buf = append(buf, `,"partitionName":`...)
		buf = appendStringOrNull(buf, r.Partition)
		buf = append(buf, `,"leaseReleased":`...)
		buf = appendBool(buf, r.LeaseReleased)
		buf = append(buf, `,"dlq":`...)
		buf = appendBool(buf, r.DLQ)
		buf = append(buf, '}')
	}
	buf = append(buf, ']')
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// extendDefaultSeconds is the extension of a request without a body.
const extendDefaultSeconds = 60

func (s *Server) handleExtend(ctx *fasthttp.RequestCtx) {
	leaseText, _ := ctx.UserValue("leaseId").(string)
	seconds := extendDefaultSeconds
	if body := bytes.TrimSpace(ctx.PostBody()); len(body) > 0 {
		var req struct {
			Seconds json.RawMessage `json:"seconds"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			s.writeError(ctx, *invalidJSON(err))
			return
		}
		if len(req.Seconds) > 0 && string(req.Seconds) != "null" {
			n, ok := jsonInt(req.Seconds)
			if !ok || n <= 0 {
				s.writeError(ctx, errSeconds)
				return
			}
			seconds = n
		}
	}
	var (
		expires string
		failed  queengo.AckFailure
	)
	if lease, err := uuid.Parse(leaseText); err != nil {
		failed = queengo.LeaseNotFound
	} else if expires, failed, err = s.broker.ExtendLease(ctx, lease, seconds); err != nil {
		s.writeFailure(ctx, failure(err), err)
		return
	}
	buf := append(make([]byte, 0, 160), `[{"index":0,"leaseId":`...)
	buf = appendString(buf, leaseText)
	buf = append(buf, `,"success":`...)
	buf = appendBool(buf, failed == "")
	buf = append(buf, `,"error":`...)
	buf = appendStringOrNull(buf, failureText(failed))
	buf = append(buf, `,"expiresAt":`...)
	buf = appendStringOrNull(buf, expires)
	buf = append(buf, `}]`...)
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// rawOp is one transaction operation, decoded twice: as an ack, and for
// its type and push items.
type rawOp struct {
	Type  json.RawMessage
	Items []json.RawMessage
	Ack   rawAck
}

// parseTransaction flattens the operations: each push item becomes one
// operation, as the reference server does.
func parseTransaction(body []byte) ([]queengo.TxOp, *apiError) {
	var req struct {
		Operations json.RawMessage `json:"operations"`
	}
	if e := decodeBody(body, &req); e != nil {
		return nil, e
	}
	var raws []json.RawMessage
	if len(req.Operations) == 0 || req.Operations[0] != '[' || json.Unmarshal(req.Operations, &raws) != nil {
		return nil, &errOpsRequired
	}
	if len(raws) == 0 {
		return nil, &errOpsEmpty
	}
	var ops []queengo.TxOp
	for i, raw := range raws {
		var op rawOp
		if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &op.Ack) != nil || json.Unmarshal(raw, &struct {
			Type  *json.RawMessage   `json:"type"`
			Items *[]json.RawMessage `json:"items"`
		}{&op.Type, &op.Items}) != nil {
			e := errOpObject(i)
			return nil, &e
		}
		typ, _, _ := jsonString(op.Type)
		switch typ {
		case "ack":
			if e := textErrors(namedRaw{"transactionId", op.Ack.TransactionID}, namedRaw{"consumerGroup", op.Ack.ConsumerGroup}, namedRaw{"status", op.Ack.Status}, namedRaw{"error", op.Ack.Error}); e != nil {
				return nil, e
			}
			f := fieldsFromRaw(&op.Ack)
			it, badLease, e := checkAck(&f, errTxIDRequired, errPartitionRequired)
			if e != nil {
				return nil, e
			}
			if badLease {
				e := errTxConflict(queengo.AckLeaseInvalid)
				return nil, &e
			}
			switch it.Status {
			case "completed", "success", "failed", "retry", "dlq":
			default:
				e := errOpStatus(it.Status)
				return nil, &e
			}
			ops = append(ops, queengo.TxOp{Ack: &it})
		case "push":
			items := op.Items
			if items == nil {
				items = []json.RawMessage{raw}
			}
			for _, itRaw := range items {
				var ri rawPushItem
				if len(itRaw) == 0 || itRaw[0] != '{' || json.Unmarshal(itRaw, &ri) != nil {
					return nil, &errItemObject
				}
				if len(ri.Payload) == 0 {
					var d struct {
						Data json.RawMessage `json:"data"`
					}
					_ = json.Unmarshal(itRaw, &d)
					ri.Payload = d.Data
				}
				var p queengo.PushItem
				if e := fillItem(&p, &ri); e != nil {
					return nil, e
				}
				ops = append(ops, queengo.TxOp{Push: &p})
			}
		default:
			e := errOpType(typ)
			return nil, &e
		}
	}
	return ops, nil
}

func (s *Server) handleTransaction(ctx *fasthttp.RequestCtx) {
	s.m.transactions.Inc()
	txID := uuid.Must(uuid.NewV7()).String()
	ops, e := parseTransaction(ctx.PostBody())
	if e != nil {
		s.writeTxFailure(ctx, txID, *e)
		return
	}
	res, err := s.broker.Transaction(ctx, ops)
	if err != nil {
		e := failure(err)
		s.logFailure(ctx, e, err)
		s.writeTxFailure(ctx, txID, e)
		return
	}
	buf := append(make([]byte, 0, 128+160*len(ops)), `{"transactionId":`...)
	buf = appendString(buf, txID)
	buf = append(buf, `,"success":true,"results":[`...)
	for i, op := range ops {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"index":`...)
		buf = appendInt(buf, i)
		if op.Ack != nil {
			r := res[i].Ack
			buf = append(buf, `,"type":"ack","success":true,"transactionId":`...)
			buf = appendString(buf, op.Ack.TransactionID)
			buf = append(buf, `,"error":null,"dlq":`...)
			buf = appendBool(buf, r.DLQ)
			if r.DLQ {
				s.m.deadLettered.Inc()
			}
		} else {
			r := res[i].Push
			buf = append(buf, `,"type":"push","success":true,"status":"`...)
			buf = append(buf, r.Status...)
			buf = append(buf, `","transactionId":`...)
			buf = appendString(buf, r.TransactionID)
			buf = append(buf, `,"messageId":`...)
			buf = appendUUID(buf, r.MessageID)
			buf = append(buf, `,"partitionId":`...)
			buf = appendUUID(buf, r.PartitionID)
			buf = append(buf, `,"queueName":`...)
			buf = appendString(buf, op.Push.Queue)
		}
		buf = append(buf, '}')
	}
	buf = append(buf, `]}`...)
	writeJSON(ctx, fasthttp.StatusOK, buf)
}

// writeTxFailure answers e in the envelope of the transaction route and
// counts it.
func (s *Server) writeTxFailure(ctx *fasthttp.RequestCtx, txID string, e apiError) {
	s.countError(e)
	buf := append(make([]byte, 0, 128), `{"transactionId":`...)
	buf = appendString(buf, txID)
	buf = append(buf, `,"success":false,"error":`...)
	buf = appendString(buf, e.Message)
	buf = append(buf, `,"results":[]}`...)
	writeJSON(ctx, e.Status, buf)
}
