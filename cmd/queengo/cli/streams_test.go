package cli_test

import (
	"strings"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// streams list, show and reset: the stream queries with their source, sink,
// group, lag and state, as a person and as a script sees them.
func TestCLI_Streams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sink, name := e2e.Unique(t, "cli-sink"), e2e.Unique(t, "cli-query")
	b.s.PushN(t, b.queue, "p", 3)
	r := b.s.Post(t, "/streams/v1/queries", map[string]any{"name": name, "source_queue": b.queue, "sink_queue": sink, "config_hash": "h"})
	var reg struct {
		QueryID string `json:"query_id"`
	}
	r.JSON(t, &reg)
	p := b.s.PopOK(t, e2e.PopQueue(b.queue, "consumerGroup", "cli-streams", "batch", "2", "wait", "false"))
	last := p.Messages[len(p.Messages)-1]
	if r := b.s.Post(t, "/streams/v1/cycle", map[string]any{"query_id": reg.QueryID, "partition_id": last.PartitionID,
		"consumer_group": "cli-streams", "state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}},
		"ack": map[string]any{"transactionId": last.TransactionID, "leaseId": last.LeaseID}}); r.Status != 200 {
		t.Fatalf("cycle: %d %s", r.Status, r.Body)
	}

	var list []map[string]any
	b.runJSON(t, &list, "streams", "list")
	found := false
	for _, e := range list {
		if e["name"] == name {
			found = true
			if e["sourceQueue"] != b.queue || e["sinkQueue"] != sink || e["lag"] != 1.0 || e["stateRows"] != 1.0 {
				t.Fatalf("--json entry: %v", e)
			}
		}
	}
	if !found {
		t.Fatalf("%s missing from streams list --json: %v", name, list)
	}
	out := b.run(t, "", "streams", "list").want(t, 0).stdout
	if !strings.HasPrefix(out, "QUERY ") || !strings.Contains(out, name) {
		t.Fatalf("streams list:\n%s", out)
	}
	out = b.run(t, "", "streams", "show", name).want(t, 0).stdout
	if !strings.Contains(out, "source "+b.queue) || !strings.Contains(out, "group cli-streams") || !strings.Contains(out, "PARTITION") {
		t.Fatalf("streams show:\n%s", out)
	}
	out = b.run(t, "", "streams", "reset", name).want(t, 0).stdout
	if !strings.Contains(out, "1 state rows deleted") {
		t.Fatalf("streams reset:\n%s", out)
	}
	if r := b.run(t, "", "streams", "show", "no-such-query"); r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Fatalf("show of an unknown query: %+v", r)
	}
}
