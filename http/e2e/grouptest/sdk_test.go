package grouptest

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// The statistics report is computed now: every step holds real counts and
// its duration, and the counts include what the test just created.
func TestStatsRefresh_Report(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gstats.ns.task"), e2e.Unique(t, "g")
	s.PushN(t, q, "", 2)
	s.PopOK(t, e2e.PopQueue(q, "consumerGroup", g))
	var rep map[string]map[string]any
	// The JS SDK posts {}; Go and Python send no body.
	for _, body := range []any{"{}", nil} {
		decode(t, s.Post(t, "/api/v1/stats/refresh", body), &rep)
		for _, step := range []string{"partition", "queue", "namespace", "task", "system", "cleanup"} {
			if rep[step] == nil {
				t.Fatalf("no %q step: %v", step, rep)
			}
		}
		atLeast := map[string]map[string]float64{
			"partition": {"partitions": 1, "messagesWritten": 2, "cursors": 1, "cursorsWithLag": 1},
			"queue":     {"queues": 1},
			"namespace": {"namespaces": 1},
			"task":      {"tasks": 1},
			"system":    {"consumerGroups": 1, "activeLeases": 1, "totalLag": 2},
		}
		for step, counts := range atLeast {
			for k, min := range counts {
				if v, ok := rep[step][k].(float64); !ok || v < min {
					t.Fatalf("%s.%s = %v, want at least %v", step, k, rep[step][k], min)
				}
			}
			if d, ok := rep[step]["durationMs"].(float64); !ok || d < 0 {
				t.Fatalf("%s.durationMs = %v", step, rep[step]["durationMs"])
			}
		}
		if rep["cleanup"]["skipped"] != true {
			t.Fatalf("cleanup: %v", rep["cleanup"])
		}
	}
}

// The requests of the Queen JS SDK's admin methods, as it builds them
// (names through encodeURIComponent), and the fields its callers read.
func TestGroupAdmin_JSSDKCalls(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gsdk"), "sdk group/"+e2e.Unique(t, "x")
	s.PushN(t, q, "", 2)
	consume(t, s, q, g)
	enc := url.PathEscape(g)

	// listConsumerGroups(): an array.
	var list []map[string]any
	decode(t, s.Get(t, "/api/v1/consumer-groups"), &list)
	if e := listEntry(t, s, g, q); e == nil || e.State != "Stable" {
		t.Fatalf("listConsumerGroups: %+v", e)
	}
	// getConsumerGroup(name): keyed by queue.
	var one map[string]map[string][]map[string]any
	decode(t, s.Get(t, "/api/v1/consumer-groups/"+enc), &one)
	if len(one[q]["partitions"]) != 1 {
		t.Fatalf("getConsumerGroup: %v", one)
	}
	// getLaggingConsumers(60): an array.
	var lag []map[string]any
	decode(t, s.Get(t, "/api/v1/consumer-groups/lagging?minLagSeconds=60"), &lag)
	// seekConsumerGroup(group, queue, {timestamp}) and ({toEnd: true}).
	var sk sought
	decode(t, s.Post(t, "/api/v1/consumer-groups/"+enc+"/queues/"+url.PathEscape(q)+"/seek",
		map[string]any{"timestamp": "2020-01-01T00:00:00.000Z"}), &sk)
	if !sk.Success || sk.PartitionsUpdated != 1 || sk.TargetTimestamp == nil || *sk.TargetTimestamp != "2020-01-01T00:00:00.000Z" {
		t.Fatalf("seekConsumerGroup timestamp: %+v", sk)
	}
	decode(t, s.Post(t, "/api/v1/consumer-groups/"+enc+"/queues/"+url.PathEscape(q)+"/seek",
		map[string]any{"toEnd": true}), &sk)
	// updateConsumerGroupTimestamp(group, ts) still answers.
	var sub map[string]any
	decode(t, s.Post(t, "/api/v1/consumer-groups/"+enc+"/subscription",
		map[string]any{"subscriptionTimestamp": "2020-01-01T00:00:00Z"}), &sub)
	if sub["success"] != true || sub["rowsUpdated"] != float64(1) {
		t.Fatalf("updateConsumerGroupTimestamp: %v", sub)
	}
	// deleteConsumerGroupForQueue(group, queue, false), then
	// deleteConsumerGroup(group, true): the record is the last thing left.
	var d map[string]any
	decode(t, s.Delete(t, "/api/v1/consumer-groups/"+enc+"/queues/"+url.PathEscape(q)+"?deleteMetadata=false"), &d)
	if d["success"] != true || d["deletedPartitions"] != float64(1) || d["metadataDeleted"] != false || d["queueName"] != q {
		t.Fatalf("deleteConsumerGroupForQueue: %v", d)
	}
	d = nil
	decode(t, s.Delete(t, "/api/v1/consumer-groups/"+enc+"?deleteMetadata=true"), &d)
	if d["success"] != true || d["deletedPartitions"] != float64(0) || d["metadataDeleted"] != true ||
		d["consumerGroup"] != g {
		t.Fatalf("deleteConsumerGroup: %v", d)
	}
	if raw, _ := json.Marshal(d); len(d) != 4 {
		t.Fatalf("deleteConsumerGroup keys: %s", raw)
	}
	e2e.WantError(t, s.Get(t, "/api/v1/consumer-groups/"+enc), 404, "consumer group not found")
}
