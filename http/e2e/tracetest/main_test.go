// Package tracetest holds the black-box HTTP tests of message traces
// (docs/api.md "Traces"; issue 12): recording
// a trace for a stored message, reading a message's traces, the traces of a
// name with their messages' payloads, the names list with its counts, the
// defaults, the 400s and 404s, pagination, and traces going with their
// queue.
//
// Every test shares one lazily started broker on the package database, with
// an encryption key so sealed payloads can be checked too; e2e.Main
// stops it at the end.
package tracetest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "trace") }

// encryptionKey is an AES-256 key as QUEEN_ENCRYPTION_KEY takes it.
const encryptionKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

// shared returns the package's one broker (e2e.Shared).
func shared(t testing.TB) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "QUEEN_ENCRYPTION_KEY="+encryptionKey)
}

// trace is one element of a traces answer: every field of the by-name form
// (the by-message form has a subset).
type trace struct {
	ID             string          `json:"id"`
	TransactionID  *string         `json:"transaction_id"`
	PartitionID    *string         `json:"partition_id"`
	EventType      string          `json:"event_type"`
	Data           json.RawMessage `json:"data"`
	ConsumerGroup  string          `json:"consumer_group"`
	WorkerID       string          `json:"worker_id"`
	CreatedAt      string          `json:"created_at"`
	QueueName      *string         `json:"queue_name"`
	PartitionName  *string         `json:"partition_name"`
	MessagePayload json.RawMessage `json:"message_payload"`
	TraceNames     []string        `json:"trace_names"`
}

type pagination struct {
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
}

type byName struct {
	Traces     []trace     `json:"traces"`
	Total      *int        `json:"total"`
	Pagination *pagination `json:"pagination"`
}

type traceName struct {
	Name     string `json:"trace_name"`
	Traces   int    `json:"trace_count"`
	Messages int    `json:"message_count"`
	LastSeen string `json:"last_seen"`
}

type namesList struct {
	Names      []traceName `json:"trace_names"`
	Total      *int        `json:"total"`
	Pagination *pagination `json:"pagination"`
}

// record posts a trace and requires a 201 {"success":true,"traceId":uuid};
// it returns the trace id.
func record(t testing.TB, s *e2e.Server, body map[string]any) string {
	t.Helper()
	r := s.Post(t, "/api/v1/traces", body)
	if r.Status != 201 {
		t.Fatalf("POST /api/v1/traces %v: %d %s", body, r.Status, r.Body)
	}
	var out struct {
		Success bool   `json:"success"`
		TraceID string `json:"traceId"`
	}
	r.JSON(t, &out)
	if !out.Success || !e2e.IsUUID(out.TraceID) {
		t.Fatalf("trace answer %s", r.Body)
	}
	return out.TraceID
}

// traceBody is a trace of message m with data and names (nil: none).
func traceBody(m e2e.PushedMessage, data any, names any) map[string]any {
	b := map[string]any{"transactionId": m.Tx, "partitionId": m.PartitionID, "data": data}
	if names != nil {
		b["traceNames"] = names
	}
	return b
}

// ofMessage is GET /api/v1/traces/:partitionId/:transactionId.
func ofMessage(t testing.TB, s *e2e.Server, pid, tx string) []trace {
	t.Helper()
	r := s.Get(t, "/api/v1/traces/"+pid+"/"+tx)
	if r.Status != 200 {
		t.Fatalf("GET traces of %s: %d %s", tx, r.Status, r.Body)
	}
	var out struct {
		Traces []trace `json:"traces"`
	}
	r.JSON(t, &out)
	if out.Traces == nil {
		t.Fatalf("traces of %s: no traces array: %s", tx, r.Body)
	}
	return out.Traces
}

// ofName is GET /api/v1/traces/by-name/:name with query pairs.
func ofName(t testing.TB, s *e2e.Server, name string, pairs ...string) byName {
	t.Helper()
	path := "/api/v1/traces/by-name/" + name + e2e.Query(pairs...)
	r := s.Get(t, path)
	if r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	var out byName
	r.JSON(t, &out)
	if out.Traces == nil || out.Total == nil || out.Pagination == nil {
		t.Fatalf("GET %s: want traces, total and pagination: %s", path, r.Body)
	}
	return out
}

// names is GET /api/v1/traces/names with query pairs.
func names(t testing.TB, s *e2e.Server, pairs ...string) namesList {
	t.Helper()
	path := "/api/v1/traces/names" + e2e.Query(pairs...)
	r := s.Get(t, path)
	if r.Status != 200 {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	var out namesList
	r.JSON(t, &out)
	if out.Names == nil || out.Total == nil || out.Pagination == nil {
		t.Fatalf("GET %s: want trace_names, total and pagination: %s", path, r.Body)
	}
	return out
}

// findName returns the entry of name in the names list (all of it, a page
// of 1000 at a time), or false.
func findName(t testing.TB, s *e2e.Server, name string) (traceName, bool) {
	t.Helper()
	for off := 0; ; off += 1000 {
		l := names(t, s, "limit", "1000", "offset", fmt.Sprint(off))
		for _, n := range l.Names {
			if n.Name == name {
				return n, true
			}
		}
		if len(l.Names) < 1000 {
			return traceName{}, false
		}
	}
}
