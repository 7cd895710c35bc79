package dashboardtest

import (
	"strconv"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// The Streams page (issue 42): the stream queries with their source, sink,
// group, lag and state rows as GET /api/v1/streams has them; a query's page
// per source partition; its reset, confirmed, deletes the state.
func TestDashboard_Streams(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.s
	s.PushN(t, "clicks", "eu", 3)
	s.PushN(t, "clicks", "us", 1)
	r := s.Post(t, "/streams/v1/queries", map[string]any{"name": "clicks-per-minute", "source_queue": "clicks",
		"sink_queue": "clicks.per-minute", "config_hash": "h"})
	var reg struct {
		QueryID string `json:"query_id"`
	}
	r.JSON(t, &reg)
	p := s.PopOK(t, e2e.PopPartition("clicks", "eu", "consumerGroup", "streams.clicks", "batch", "2", "wait", "false"))
	last := p.Messages[len(p.Messages)-1]
	if r := s.Post(t, "/streams/v1/cycle", map[string]any{"query_id": reg.QueryID, "partition_id": last.PartitionID,
		"consumer_group": "streams.clicks", "state_ops": []any{
			map[string]any{"type": "upsert", "key": "w1", "value": map[string]any{"sum": 2}},
			map[string]any{"type": "upsert", "key": "w2", "value": map[string]any{"sum": 1}}},
		"ack": map[string]any{"transactionId": last.TransactionID, "leaseId": last.LeaseID}}); r.Status != 200 {
		t.Fatalf("cycle: %d %s", r.Status, r.Body)
	}

	var list struct {
		Queries []struct {
			Name      string `json:"name"`
			Lag       int64  `json:"lag"`
			StateRows int64  `json:"stateRows"`
		} `json:"queries"`
	}
	getJSON(t, s, "/api/v1/streams", &list)
	if len(list.Queries) != 1 || list.Queries[0].Lag != 2 || list.Queries[0].StateRows != 2 {
		t.Fatalf("the API lists %+v", list.Queries)
	}
	b.open(t, "/streams")
	row := `[data-test=streams-table] tr[data-query="clicks-per-minute"]`
	b.waitText(t, row+` [data-col=lag]`, strconv.FormatInt(list.Queries[0].Lag, 10))
	b.waitText(t, row+` [data-col=rows]`, strconv.FormatInt(list.Queries[0].StateRows, 10))
	b.screenshot(t, "streams")

	b.open(t, "/streams/clicks-per-minute")
	b.waitText(t, `[data-test=stream-name]`, "clicks-per-minute")
	b.waitText(t, `[data-test=stream-partitions] tr[data-partition=eu] [data-col=rows]`, "2")
	b.waitText(t, `[data-test=stream-partitions] tr[data-partition=eu] [data-col=lag]`, "1")
	b.waitText(t, `[data-test=stream-partitions] tr[data-partition=us] [data-col=lag]`, "1")
	b.screenshot(t, "stream")
	b.click(t, `[data-test=stream-reset]`)
	b.waitText(t, `[data-test=confirm] h3`, "Reset clicks-per-minute?")
	b.click(t, `[data-test=confirm-ok]`)
	b.waitText(t, `[data-test=notice]`, "clicks-per-minute: 2 state rows deleted")
	b.waitText(t, `[data-test=stream-partitions] tr[data-partition=eu] [data-col=rows]`, "0")
	getJSON(t, s, "/api/v1/streams", &list)
	if list.Queries[0].StateRows != 0 {
		t.Fatalf("state rows after the reset: %d", list.Queries[0].StateRows)
	}
}
