// Command goadmin calls every method of the Go SDK's Admin once against a
// broker whose data admin.mjs made (the queue, partition ids and message ids
// come as arguments), and prints one JSON line per call: {"method", "ok",
// "error"?}. A call fails when the SDK returns an error: an HTTP error, or
// an answer it cannot decode into the value it declares (most methods decode
// into a JSON object).
//
//	go run . <broker URL> <queue> <partition id> <transaction id> <trace name>
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	queen "github.com/smartpricing/queen/clients/client-go"
)

func main() {
	url, q, pid, tx, trace := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5]
	client, err := queen.New(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	a := client.Admin()
	ctx := context.Background()
	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	to := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	obj := func(_ map[string]interface{}, err error) error { return err }
	text := func(_ string, err error) error { return err }
	calls := []struct {
		method string
		call   func() error
	}{
		{"GetOverview", func() error { return obj(a.GetOverview(ctx)) }},
		{"GetNamespaces", func() error { return obj(a.GetNamespaces(ctx)) }},
		{"GetTasks", func() error { return obj(a.GetTasks(ctx)) }},
		{"ListQueues", func() error { return obj(a.ListQueues(ctx, queen.ListQueuesParams{Limit: 10})) }},
		{"GetQueue", func() error { return obj(a.GetQueue(ctx, q)) }},
		{"GetPartitions", func() error { return obj(a.GetPartitions(ctx, q)) }},
		{"ListMessages", func() error { return obj(a.ListMessages(ctx, queen.ListMessagesParams{Queue: q, Limit: 10})) }},
		{"GetMessage", func() error { return obj(a.GetMessage(ctx, pid, tx)) }},
		{"GetTracesByName", func() error { return obj(a.GetTracesByName(ctx, trace, 10, 0)) }},
		{"GetTraceNames", func() error { return obj(a.GetTraceNames(ctx, 10, 0)) }},
		{"GetTracesForMessage", func() error { return obj(a.GetTracesForMessage(ctx, pid, tx)) }},
		{"GetStatus", func() error { return obj(a.GetStatus(ctx, queen.GetStatusParams{})) }},
		{"GetQueueStats", func() error { return obj(a.GetQueueStats(ctx, "", "")) }},
		{"GetQueueDetail", func() error { return obj(a.GetQueueDetail(ctx, q, true)) }},
		{"GetAnalytics", func() error { return obj(a.GetAnalytics(ctx, from, to)) }},
		{"ListConsumerGroups", func() error { return obj(a.ListConsumerGroups(ctx)) }},
		{"RefreshConsumerStats", func() error { return obj(a.RefreshConsumerStats(ctx)) }},
		{"GetConsumerGroup", func() error { return obj(a.GetConsumerGroup(ctx, "g")) }},
		{"GetLaggingConsumers", func() error { return obj(a.GetLaggingConsumers(ctx, 0)) }},
		{"SeekConsumerGroup", func() error {
			return obj(a.SeekConsumerGroup(ctx, "g", q, queen.SeekConsumerGroupOptions{ToEnd: true}))
		}},
		{"SeekConsumerGroupPartition", func() error {
			return obj(a.SeekConsumerGroupPartition(ctx, "g", q, "p1", queen.SeekConsumerGroupOptions{ToEnd: true}))
		}},
		{"Health", func() error { return obj(a.Health(ctx)) }},
		{"Metrics", func() error { return text(a.Metrics(ctx)) }},
		{"PrometheusMetrics", func() error { return text(a.PrometheusMetrics(ctx)) }},
		{"GetMaintenanceMode", func() error { return obj(a.GetMaintenanceMode(ctx)) }},
		{"SetMaintenanceMode", func() error { return obj(a.SetMaintenanceMode(ctx, false)) }},
		{"GetPopMaintenanceMode", func() error { return obj(a.GetPopMaintenanceMode(ctx)) }},
		{"SetPopMaintenanceMode", func() error { return obj(a.SetPopMaintenanceMode(ctx, false)) }},
		{"GetSystemMetrics", func() error { return obj(a.GetSystemMetrics(ctx, from, to)) }},
		{"GetWorkerMetrics", func() error { return obj(a.GetWorkerMetrics(ctx, from, to)) }},
		{"GetPostgresStats", func() error { return obj(a.GetPostgresStats(ctx)) }},
		{"ListDLQ", func() error { return obj(a.ListDLQ(ctx, queen.ListDLQParams{Queue: q, Limit: 10})) }},
		{"GetQueueLagAnalytics", func() error { return obj(a.GetQueueLagAnalytics(ctx, from, to)) }},
		{"GetQueueOpsAnalytics", func() error { return obj(a.GetQueueOpsAnalytics(ctx, from, to)) }},
		{"GetQueueParkedReplicas", func() error { return obj(a.GetQueueParkedReplicas(ctx, from, to)) }},
		{"GetRetentionAnalytics", func() error { return obj(a.GetRetentionAnalytics(ctx, from, to)) }},
		{"DeleteMessage", func() error { return obj(a.DeleteMessage(ctx, pid, tx)) }},
		{"DeleteConsumerGroupForQueue", func() error { return obj(a.DeleteConsumerGroupForQueue(ctx, "g", q, true)) }},
	}
	enc := json.NewEncoder(os.Stdout)
	for _, c := range calls {
		line := map[string]any{"method": c.method, "ok": true}
		if err := c.call(); err != nil {
			line["ok"], line["error"] = false, err.Error()
		}
		_ = enc.Encode(line)
	}
}
