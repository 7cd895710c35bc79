package main

import (
	"errors"
	"fmt"

	"github.com/queengo/queengo/http/client"
	"github.com/valyala/fastjson"
)

// The answers of push, pop and ack, the requests every scenario repeats, are
// decoded with fastjson (valyala, the author of the fasthttp client the
// harness already uses) rather than encoding/json. The load generator
// shares two cores with the broker and PostgreSQL, and encoding/json's
// reflective decoding was three quarters of its CPU in a consume run at
// batch 100 (docs/performance.md "The dated record": "2026-12-05, later"): CPU taken from the
// servers being measured. fastjson parses into a reusable tree without
// reflection; the other answers (admin, buffer) stay on encoding/json.
var parsers fastjson.ParserPool

// parse parses b with a pooled parser and hands the tree to read, which must
// not keep it: the parser reuses it once read returns.
func parse(b []byte, read func(v *fastjson.Value) error) error {
	p := parsers.Get()
	defer parsers.Put(p)
	v, err := p.ParseBytes(b)
	if err != nil {
		return err
	}
	return read(v)
}

// decodePop decodes a pop's 200 answer (docs/pop-routes.md) into res: for each
// message its transactionId, partitionId and leaseId, and its data
// re-encoded compactly into one buffer shared by the batch.
func decodePop(b []byte, res *PopResponse) error {
	return parse(b, func(v *fastjson.Value) error {
		readPop(v, res)
		return nil
	})
}

// readPop fills res from a pop answer's tree.
func readPop(v *fastjson.Value, res *PopResponse) {
	msgs := v.GetArray("messages")
	res.Acks = make([]client.Ack, len(msgs))
	res.Data = make([][]byte, len(msgs))
	ends := make([]int, len(msgs))
	var data []byte
	for i, m := range msgs {
		a := &res.Acks[i]
		a.TransactionID = string(m.GetStringBytes("transactionId"))
		a.PartitionID = string(m.GetStringBytes("partitionId"))
		a.LeaseID = string(m.GetStringBytes("leaseId"))
		if d := m.Get("data"); d != nil {
			data = d.MarshalTo(data)
		}
		ends[i] = len(data)
	}
	start := 0
	for i := range res.Data {
		res.Data[i] = data[start:ends[i]:ends[i]]
		start = ends[i]
	}
}

// decodeAck checks a batch ack's answer (docs/api.md "POST /api/v1/ack/batch"), an array of
// {"success": bool, "error": string|null}: the first item that did not
// succeed is an error, with the item's error text.
func decodeAck(b []byte) error {
	var failed error
	err := parse(b, func(v *fastjson.Value) error {
		items, err := v.Array()
		if err != nil {
			return err
		}
		for _, it := range items {
			if !it.GetBool("success") {
				failed = errors.New("item not acknowledged")
				if msg := it.GetStringBytes("error"); msg != nil {
					failed = errors.New(string(msg))
				}
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("error decoding answer: %w", err)
	}
	return failed
}

// decodePush counts a push answer's items (docs/api.md "POST /api/v1/push") by status into res:
// queued (or buffered), duplicate, anything else failed with its first error.
func decodePush(b []byte, res *PushResult) error {
	return parse(b, func(v *fastjson.Value) error {
		items, err := v.Array()
		if err != nil {
			return err
		}
		countPush(items, res)
		return nil
	})
}

// countPush adds a push answer's items to res.
func countPush(items []*fastjson.Value, res *PushResult) {
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
}
