package http

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// FuzzParsePush feeds arbitrary bodies to the push parser: it must never
// panic, must reject what is not JSON, and whatever it accepts must be safe
// to store: valid names, a transaction id, a payload that is valid JSON.
func FuzzParsePush(f *testing.F) {
	for _, s := range []string{
		`{"items":[{"queue":"q","payload":{"a":1}}]}`,
		`{"items":[{"queue":"q.t","partition":"p","transactionId":"t","traceId":"0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90","payload":null}]}`,
		`{"items":[]}`, `{"items":{}}`, `{}`, ``, `[`, `{"items":[1]}`, `{"items":[{"queue":1}]}`,
		`{"items":[{"queue":"a b"}]}`, `{"items":[{"queue":"q","payload":  [1, 2 ,3 ] }]}`,
		"{\"items\":[{\"queue\":\"q\"}]}\x00x", "{\"items\":[{\"queue\":\"q\"}]}\x00", " \x00{\"items\":[]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		items, e := parsePush(body)
		if e != nil {
			if e.Status != fasthttp.StatusBadRequest || e.Message == "" {
				t.Fatalf("rejection is not a 400 with a message: %+v", e)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		// Differential: encoding/json must see the same payloads, compacted.
		var ref struct {
			Items []struct {
				Payload json.RawMessage `json:"payload"`
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &ref); err == nil && len(ref.Items) == len(items) {
			for i, it := range ref.Items {
				want := []byte("null")
				if it.Payload != nil {
					var b bytes.Buffer
					_ = json.Compact(&b, it.Payload)
					want = b.Bytes()
				}
				if !bytes.Equal(items[i].Payload, want) {
					t.Fatalf("item %d payload %q, encoding/json says %q", i, items[i].Payload, want)
				}
			}
		}
		for _, it := range items {
			if strings.IndexByte(it.TransactionID, 0) >= 0 || !utf8.ValidString(it.TransactionID) {
				t.Fatalf("transaction id %q cannot be stored as text", it.TransactionID)
			}
			if checkName("queue", it.Queue) != nil || checkName("partition", it.Partition) != nil {
				t.Fatalf("accepted bad names %q/%q", it.Queue, it.Partition)
			}
			if it.TransactionID == "" || len(it.TransactionID) > maxTxIDLen {
				t.Fatalf("bad transaction id %q", it.TransactionID)
			}
			if !json.Valid(it.Payload) {
				t.Fatalf("payload %q is not JSON", it.Payload)
			}
		}
	})
}

// FuzzParseConfigure: never panics; accepted options are in range.
func FuzzParseConfigure(f *testing.F) {
	for _, s := range []string{
		`{"queue":"q"}`, `{"queue":"q","namespace":null,"options":{"leaseTime":"30","minPopWaitTime":99999}}`,
		`{"queue":"q","options":{"retryLimit":-1}}`, `{"options":{}}`, `{"queue":"q","options":{"priority":-5,"retentionEnabled":"true"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		name, _, _, o, e := parseConfigure(body)
		if e != nil {
			if e.Status != fasthttp.StatusBadRequest {
				t.Fatalf("rejection is not a 400: %+v", e)
			}
			return
		}
		if checkName("queue", name) != nil {
			t.Fatalf("accepted bad queue name %q", name)
		}
		if o.MinPopWaitTime < 0 || o.MinPopWaitTime > 60000 || o.LeaseTime < 0 || o.RetryLimit < 0 {
			t.Fatalf("options out of range: %+v", o)
		}
	})
}

// FuzzParseTransaction: never panics; every accepted operation is complete.
func FuzzParseTransaction(f *testing.F) {
	for _, s := range []string{
		`{"operations":[{"type":"ack","transactionId":"t","partitionId":"0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90"}]}`,
		`{"operations":[{"type":"push","items":[{"queue":"q","payload":1}]}]}`,
		`{"operations":[{"type":"push","queue":"q","data":{"x":1}}]}`,
		`{"operations":[]}`, `{"operations":[{"type":"nope"}]}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ops, e := parseTransaction(body)
		if e != nil {
			return
		}
		if len(ops) == 0 {
			t.Fatal("accepted a transaction without operations")
		}
		for _, op := range ops {
			switch {
			case op.Ack != nil:
				if op.Ack.TransactionID == "" || op.Ack.Group == "" {
					t.Fatalf("incomplete ack %+v", op.Ack)
				}
			case op.Push != nil:
				if !json.Valid(op.Push.Payload) || checkName("queue", op.Push.Queue) != nil {
					t.Fatalf("bad push %+v", op.Push)
				}
			default:
				t.Fatal("empty operation")
			}
		}
	})
}

// FuzzAppendString: the hand-written encoder agrees with encoding/json.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `quo"te`, "back\\slash", "\n\t\r\x00\x1f", "é☃𝄞", "\u2028\u2029", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := appendString(nil, s)
		var got string
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("%q encoded as invalid JSON %s: %v", s, enc, err)
		}
		want := s
		if !utf8.ValidString(s) {
			// encoding/json replaces each invalid byte with U+FFFD, as
			// appendString does.
			b, _ := json.Marshal(s)
			_ = json.Unmarshal(b, &want)
		}
		if got != want {
			t.Fatalf("%q round-tripped as %q, want %q", s, got, want)
		}
	})
}

// FuzzParseAckBatch: never panics; accepted acks are complete and carry the
// body-level group.
func FuzzParseAckBatch(f *testing.F) {
	for _, s := range []string{
		`{"acknowledgments":[{"transactionId":"t","partitionId":"0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90","leaseId":null}],"consumerGroup":"g"}`,
		`{"acknowledgments":[]}`, `{"acknowledgments":{}}`, `{"acknowledgments":[1]}`, `{}`, ``,
		`{"acknowledgments":[{"transactionId":"t","partitionId":"x"}]}`,
		`{"acknowledgments":[{"transactionId":"t\u0000","partitionId":"0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90","error":"\ud800"}]}`,
		"{\"acknowledgments\":[{\"transactionId\":\"t\",\"partitionId\":\"0198f2c1-9a7b-7d20-8e31-4c5d6e7f8a90\"}],\"consumerGroup\":\"g\"}\x00x",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		items, bad, e := parseAckBatch(body)
		if e != nil {
			if e.Status != fasthttp.StatusBadRequest {
				t.Fatalf("rejection is not a 400: %+v", e)
			}
			return
		}
		if !json.Valid(body) || len(bad) != len(items) {
			t.Fatalf("accepted %q", body)
		}
		for _, it := range items {
			if it.TransactionID == "" || it.Group == "" || it.Status == "" {
				t.Fatalf("incomplete ack %+v", it)
			}
			for _, v := range []string{it.TransactionID, it.Group, it.Status, it.Error} {
				if strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
					t.Fatalf("ack field %q cannot be stored as text", v)
				}
			}
		}
	})
}

// FuzzParsePop feeds arbitrary query strings to the pop parameter parser: it
// must never panic, must answer 400 naming a parameter or accept, and what
// it accepts lies within the documented caps.
func FuzzParsePop(f *testing.F) {
	for _, s := range []string{
		"batch=10&wait=true&timeout=1000", "batch=abc", "batch=0", "batch=10001", "partitions=-1",
		"partitions=2147483648", "leaseSeconds=2147483648", "leaseSeconds=-5", "timeout=9223372036854775807",
		"timeout=-1", "consumerGroup=%00", "consumerGroup=a%20b", "consumerGroup=%FF", "subscriptionFrom=now",
		"subscriptionMode=new&subscriptionFrom=2026-01-02T03:04:05Z",
	} {
		f.Add(s)
	}
	srv := &Server{cfg: Config{PopTimeout: 30 * time.Second}}
	f.Fuzz(func(t *testing.T, query string) {
		var args fasthttp.Args
		args.Parse(query)
		var r queengo.PopRequest
		if e := srv.parsePop(&args, &r); e != nil {
			if e.Status != fasthttp.StatusBadRequest || e.Message == "" {
				t.Fatalf("rejection is not a 400 with a message: %+v", e)
			}
			return
		}
		switch {
		case r.Batch < 1 || r.Batch > maxBatch:
			t.Fatalf("batch %d accepted", r.Batch)
		case r.Partitions < 0 || r.Partitions > maxPartitionsCap:
			t.Fatalf("partitions %d accepted", r.Partitions)
		case r.Timeout < 0 || r.Timeout > maxTimeoutMs*time.Millisecond:
			t.Fatalf("timeout %v accepted", r.Timeout)
		case r.LeaseSeconds < 0 || r.LeaseSeconds > maxLeaseSeconds:
			t.Fatalf("leaseSeconds %d accepted", r.LeaseSeconds)
		case r.Group != queengo.QueueModeGroup && checkName("consumerGroup", r.Group) != nil:
			t.Fatalf("consumerGroup %q accepted", r.Group)
		}
	})
}

// FuzzCheckName: a name that passes is storable text without control
// characters, within the length limit.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"orders", "my queue", "orders/eu", "café", "a\tb", "a\x00b", "\xff", "\u0085", strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkName("queue", s) != nil {
			return
		}
		if s == "" || len(s) > queengo.MaxNameLen || !utf8.ValidString(s) {
			t.Fatalf("accepted %q", s)
		}
		for _, r := range s {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f {
				t.Fatalf("accepted %q with control character %U", s, r)
			}
		}
	})
}
