package main

import (
	"errors"
	"fmt"

	"github.com/valyala/fastjson"
)

// The answers of push, pop and ack, the requests every scenario repeats, are
// decoded with fastjson (valyala, the author of the fasthttp client the
// harness already uses) rather than encoding/json. The load generator
// shares two cores with the broker and PostgreSQL, and encoding/json's
// reflective decoding was three quarters of its CPU in a consume run at
// batch 100 (docs/benchmarks.md, "2026-12-05, later"): CPU taken from the
// servers being measured. fastjson parses into a reusable tree without
// reflection; the other answers (admin, buffer) stay on encoding/json.
var parsers fastjson.ParserPool

// decodePop decodes a pop's 200 answer (pop-routes.md) into res: for each
// message its transactionId, partitionId, leaseId and data, the data
// re-encoded compactly into one buffer shared by the batch.
func decodePop(b []byte, res *PopResponse) error {
	p := parsers.Get()
	defer parsers.Put(p)
	v, err := p.ParseBytes(b)
	if err != nil {
		return err
	}
	msgs := v.GetArray("messages")
	res.Messages = make([]PopMessage, len(msgs))
	ends := make([]int, len(msgs))
	var data []byte
	for i, m := range msgs {
		pm := &res.Messages[i]
		pm.TransactionID = string(m.GetStringBytes("transactionId"))
		pm.PartitionID = string(m.GetStringBytes("partitionId"))
		pm.LeaseID = string(m.GetStringBytes("leaseId"))
		if d := m.Get("data"); d != nil {
			data = d.MarshalTo(data)
		}
		ends[i] = len(data)
	}
	start := 0
	for i := range res.Messages {
		res.Messages[i].Data = data[start:ends[i]:ends[i]]
		start = ends[i]
	}
	return nil
}

// decodeAck checks a batch ack's answer (api.md 4.4), an array of
// {"success": bool, "error": string|null}: the first item that did not
// succeed is an error, with the item's error text.
func decodeAck(b []byte) error {
	p := parsers.Get()
	defer parsers.Put(p)
	v, err := p.ParseBytes(b)
	var items []*fastjson.Value
	if err == nil {
		items, err = v.Array()
	}
	if err != nil {
		return fmt.Errorf("error decoding answer: %w", err)
	}
	for _, it := range items {
		if !it.GetBool("success") {
			if msg := it.GetStringBytes("error"); msg != nil {
				return errors.New(string(msg))
			}
			return errors.New("item not acknowledged")
		}
	}
	return nil
}

// decodePush counts a push answer's items (api.md 4.1) by status into res:
// queued (or buffered), duplicate, anything else failed with its first error.
func decodePush(b []byte, res *PushResult) error {
	p := parsers.Get()
	defer parsers.Put(p)
	v, err := p.ParseBytes(b)
	if err != nil {
		return err
	}
	items, err := v.Array()
	if err != nil {
		return err
	}
	for _, it := range items {
		switch string(it.GetStringBytes("status")) {
		case "queued", "buffered":
			res.Queued++
		case "duplicate":
			res.Duplicate++
		default:
			res.Failed++
			if msg := it.GetStringBytes("error"); res.FirstError == "" && msg != nil {
				res.FirstError = string(msg)
			}
		}
	}
	return nil
}
