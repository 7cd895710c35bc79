package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

var (
	errTxIDRequired      = apiError{fasthttp.StatusBadRequest, "transactionId is required"}
	errPartitionRequired = apiError{fasthttp.StatusBadRequest, "partitionId is required to ensure message uniqueness"}
	errPartitionUUID     = apiError{fasthttp.StatusBadRequest, "partitionId must be a UUID"}
	errAcksRequired      = apiError{fasthttp.StatusBadRequest, "acknowledgments array is required"}
	errBatchTxID         = apiError{fasthttp.StatusBadRequest, "Each acknowledgment must have a valid transactionId string"}
	errBatchPartition    = apiError{fasthttp.StatusBadRequest, "Each acknowledgment must have a valid partitionId string to ensure message uniqueness"}
	errStatusString      = apiError{fasthttp.StatusBadRequest, "status must be a string"}
	errGroupString       = apiError{fasthttp.StatusBadRequest, "consumerGroup must be a string or null"}
	errSeconds           = apiError{fasthttp.StatusBadRequest, "seconds must be a positive integer"}
	errOpsRequired       = apiError{fasthttp.StatusBadRequest, "operations array required"}
	errOpsEmpty          = apiError{fasthttp.StatusBadRequest, "operations array cannot be empty"}
)

type rawAck struct {
	TransactionID json.RawMessage `json:"transactionId"`
	PartitionID   json.RawMessage `json:"partitionId"`
	Status        json.RawMessage `json:"status"`
	ConsumerGroup json.RawMessage `json:"consumerGroup"`
	LeaseID       json.RawMessage `json:"leaseId"`
	Error         json.RawMessage `json:"error"`
}

// parseAck validates one acknowledgement. badLease reports a leaseId that
// cannot be a live lease (not a UUID): a per-item failure, not a 400.
func parseAck(r *rawAck, txErr, partErr apiError) (it queengo.AckItem, badLease bool, e *apiError) {
	tx, ok, isNull := jsonString(r.TransactionID)
	if !ok || isNull || tx == "" {
		return it, false, &txErr
	}
	ps, ok, isNull := jsonString(r.PartitionID)
	if !ok || isNull || ps == "" {
		return it, false, &partErr
	}
	pid, err := uuid.Parse(ps)
	if err != nil {
		return it, false, &errPartitionUUID
	}
	status, ok, _ := jsonString(r.Status)
	if !ok {
		return it, false, &errStatusString
	}
	if status == "" {
		status = "completed"
	}
	group, ok, _ := jsonString(r.ConsumerGroup)
	if !ok {
		return it, false, &errGroupString
	}
	if group == "" {
		group = queengo.QueueModeGroup
	}
	lease, ok, _ := jsonString(r.LeaseID)
	if !ok {
		return it, false, &apiError{fasthttp.StatusBadRequest, "leaseId must be a string or null"}
	}
	var lid uuid.UUID
	if lease != "" {
		if lid, err = uuid.Parse(lease); err != nil {
			badLease = true
		}
	}
	msg, ok, _ := jsonString(r.Error)
	if !ok {
		return it, false, &apiError{fasthttp.StatusBadRequest, "error must be a string or null"}
	}
	return queengo.AckItem{PartitionID: pid, TransactionID: tx, Status: status, Group: group, LeaseID: lid, Error: msg}, badLease, nil
}

func decodeBody(body []byte, v any) *apiError {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return &errEmptyBody
	}
	if err := json.Unmarshal(body, v); err != nil {
		e := badRequest("Invalid JSON: " + err.Error())
		return &e
	}
	return nil
}

func (s *Server) handleAck(ctx *fasthttp.RequestCtx) {
	var r rawAck
	if e := decodeBody(ctx.PostBody(), &r); e != nil {
		writeError(ctx, *e)
		return
	}
	it, badLease, e := parseAck(&r, errTxIDRequired, errPartitionRequired)
	if e != nil {
		writeError(ctx, *e)
		return
	}
	s.ack(ctx, []queengo.AckItem{it}, []bool{badLease})
}

func (s *Server) handleAckBatch(ctx *fasthttp.RequestCtx) {
	var body struct {
		Acknowledgments json.RawMessage `json:"acknowledgments"`
		ConsumerGroup   json.RawMessage `json:"consumerGroup"`
	}
	if e := decodeBody(ctx.PostBody(), &body); e != nil {
		writeError(ctx, *e)
		return
	}
	var raws []rawAck
	if len(body.Acknowledgments) == 0 || body.Acknowledgments[0] != '[' || json.Unmarshal(body.Acknowledgments, &raws) != nil {
		writeError(ctx, errAcksRequired)
		return
	}
	if len(raws) == 0 {
		writeJSON(ctx, fasthttp.StatusOK, []byte("[]"))
		return
	}
	group, ok, _ := jsonString(body.ConsumerGroup)
	if !ok {
		writeError(ctx, errGroupString)
		return
	}
	if group == "" {
		group = queengo.QueueModeGroup
	}
	items := make([]queengo.AckItem, len(raws))
	bad := make([]bool, len(raws))
	for i := range raws {
		// The body-level group applies to every item.
		raws[i].ConsumerGroup = nil
		var e *apiError
		if items[i], bad[i], e = parseAck(&raws[i], errBatchTxID, errBatchPartition); e != nil {
			writeError(ctx, *e)
			return
		}
		items[i].Group = group
	}
	s.ack(ctx, items, bad)
}

// ack runs the valid items and answers one result per item, in order.
func (s *Server) ack(ctx *fasthttp.RequestCtx, items []queengo.AckItem, badLease []bool) {
	defer ackDuration.UpdateDuration(time.Now())
	ackRequests.Inc()
	ackItems.Add(len(items))
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
			s.log.Error("ack failed", "err", err)
			writeError(ctx, storeError(err))
			return
		}
	}
	buf := make([]byte, 0, 160*len(items))
	buf = append(buf, '[')
	k := 0
	for i := range items {
		r := queengo.AckResult{Error: "Invalid or expired lease"}
		if !badLease[i] {
			r = res[k]
			k++
		}
		if !r.Success {
			ackFailed.Inc()
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
		buf = appendStringOrNull(buf, r.Error)
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
			writeError(ctx, badRequest("Invalid JSON: "+err.Error()))
			return
		}
		if len(req.Seconds) > 0 && string(req.Seconds) != "null" {
			n, ok := jsonInt(req.Seconds)
			if !ok || n <= 0 {
				writeError(ctx, errSeconds)
				return
			}
			seconds = n
		}
	}
	var expires, reason string
	if lease, err := uuid.Parse(leaseText); err != nil {
		reason = "Lease not found"
	} else if expires, reason, err = s.store.ExtendLease(ctx, lease, seconds); err != nil {
		writeError(ctx, storeError(err))
		return
	}
	buf := append(make([]byte, 0, 160), `[{"index":0,"leaseId":`...)
	buf = appendString(buf, leaseText)
	buf = append(buf, `,"success":`...)
	buf = appendBool(buf, reason == "")
	buf = append(buf, `,"error":`...)
	buf = appendStringOrNull(buf, reason)
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
			e := badRequest("operation " + strconv.Itoa(i) + " must be an object")
			return nil, &e
		}
		typ, _, _ := jsonString(op.Type)
		switch typ {
		case "ack":
			it, badLease, e := parseAck(&op.Ack, errTxIDRequired, errPartitionRequired)
			if e != nil {
				return nil, e
			}
			if badLease {
				e := apiError{fasthttp.StatusConflict, "ACK operation failed: Invalid or expired lease"}
				return nil, &e
			}
			switch it.Status {
			case "completed", "success", "failed", "retry", "dlq":
			default:
				e := badRequest("ACK operation failed: unknown status " + strconv.Quote(it.Status))
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
			e := badRequest("Unknown operation type: " + typ)
			return nil, &e
		}
	}
	return ops, nil
}

func (s *Server) handleTransaction(ctx *fasthttp.RequestCtx) {
	txID := uuid.Must(uuid.NewV7()).String()
	ops, e := parseTransaction(ctx.PostBody())
	if e != nil {
		writeTxFailure(ctx, txID, *e)
		return
	}
	res, err := s.broker.Transaction(ctx, ops)
	if err != nil {
		if errors.Is(err, queengo.ErrConflict) {
			msg := err.Error()
			if i := bytes.Index([]byte(msg), []byte("ACK operation failed")); i >= 0 {
				msg = msg[i:]
			}
			writeTxFailure(ctx, txID, apiError{fasthttp.StatusConflict, msg})
			return
		}
		s.log.Error("transaction failed", "err", err)
		writeTxFailure(ctx, txID, storeError(err))
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

func writeTxFailure(ctx *fasthttp.RequestCtx, txID string, e apiError) {
	buf := append(make([]byte, 0, 128), `{"transactionId":`...)
	buf = appendString(buf, txID)
	buf = append(buf, `,"success":false,"error":`...)
	buf = appendString(buf, e.Message)
	buf = append(buf, `,"results":[]}`...)
	writeJSON(ctx, e.Status, buf)
}
