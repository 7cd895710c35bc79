package resourcetest

import (
	"fmt"
	"math"
	"net/url"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

type overview struct {
	Queues     int    `json:"queues"`
	Partitions int    `json:"partitions"`
	Namespaces int    `json:"namespaces"`
	Tasks      int    `json:"tasks"`
	Messages   counts `json:"messages"`
	Lag        struct {
		Time   map[string]float64 `json:"time"`
		Offset map[string]float64 `json:"offset"`
	} `json:"lag"`
	Throughput struct {
		Ingested  *float64 `json:"ingestedPerSecond"`
		Processed *float64 `json:"processedPerSecond"`
	} `json:"throughput"`
	Timestamp string `json:"timestamp"`
	StatsAge  *int   `json:"statsAge"`
}

// The overview counts queues, partitions, namespaces, tasks and messages by
// status across the broker: after pushes, a pop and an ack, each figure
// moved by exactly what the test did (it runs alone, so nothing else moves
// them).
func TestOverview_FiguresAfterPushPopAck(t *testing.T) {
	s := shared(t)
	var before overview
	getFresh(t, s, "/api/v1/resources/overview", &before)
	q := e2e.Unique(t, "ov") + "." + e2e.Unique(t, "work") + ".q"
	s.PushN(t, q, "a", 3)
	s.PushN(t, q, "b", 2)
	p := s.PopOK(t, e2e.PopPartition(q, "a", "batch", "2"))
	if len(p.Messages) != 2 {
		t.Fatalf("popped %d, want 2", len(p.Messages))
	}
	s.AckOK(t, p.Messages[0], "completed", "")

	var after overview
	getFresh(t, s, "/api/v1/resources/overview", &after)
	want := counts{Total: 5, Pending: 3, Processing: 1, Completed: 1}
	got := counts{Total: after.Messages.Total - before.Messages.Total,
		Pending:    after.Messages.Pending - before.Messages.Pending,
		Processing: after.Messages.Processing - before.Messages.Processing,
		Completed:  after.Messages.Completed - before.Messages.Completed,
		Failed:     after.Messages.Failed - before.Messages.Failed,
		DeadLetter: after.Messages.DeadLetter - before.Messages.DeadLetter}
	if got != want {
		t.Fatalf("message figures moved by %+v, want %+v", got, want)
	}
	if d := [4]int{after.Queues - before.Queues, after.Partitions - before.Partitions,
		after.Namespaces - before.Namespaces, after.Tasks - before.Tasks}; d != [4]int{1, 2, 1, 1} {
		t.Fatalf("queues, partitions, namespaces, tasks moved by %v, want 1, 2, 1, 1", d)
	}
	for _, k := range []string{"avg", "median", "min", "max"} {
		if _, ok := after.Lag.Offset[k]; !ok {
			t.Fatalf("lag.offset lacks %s: %+v", k, after.Lag)
		}
		if _, ok := after.Lag.Time[k]; !ok {
			t.Fatalf("lag.time lacks %s: %+v", k, after.Lag)
		}
	}
	// The one cursor the test created lags by one message (offset 2 of 3
	// is leased, committed 1): the maximum is at least that.
	if after.Lag.Offset["max"] < 2 {
		t.Fatalf("lag.offset.max = %v, want >= 2", after.Lag.Offset["max"])
	}
	if after.Throughput.Ingested == nil || *after.Throughput.Ingested < 5.0/60-1e-9 {
		t.Fatalf("ingestedPerSecond = %v, want >= 5/60", after.Throughput.Ingested)
	}
	// processedPerSecond comes from the metrics collector's samples: null
	// before the first, then a rate, never negative.
	if p := after.Throughput.Processed; p != nil && *p < 0 {
		t.Fatalf("processedPerSecond = %v, want null or >= 0", *p)
	}
	if after.StatsAge == nil || *after.StatsAge != 0 {
		t.Fatalf("statsAge = %v, want 0", after.StatsAge)
	}
	parseTS(t, after.Timestamp)
}

// The queue list is newest first, filtered by namespace and task, paginated
// by limit and offset, with total and the figures of each queue.
func TestResourceQueues_ListFiltersAndPagination(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "lq")
	names := []string{ns + ".t1.a", ns + ".t1.b", ns + ".t2.c"}
	for i, q := range names {
		s.PushN(t, q, "", i+1)
	}
	var l queueList
	get(t, s, "/api/v1/resources/queues"+e2e.Query("namespace", ns), &l)
	if l.Total != 3 || len(l.Queues) != 3 {
		t.Fatalf("namespace %s: %d queues (total %d), want 3", ns, len(l.Queues), l.Total)
	}
	for i, q := range l.Queues {
		want := names[2-i] // newest first
		if q.Name != want || q.Namespace != ns || q.Partitions != 1 || q.Messages.Total != int64(3-i) ||
			q.Messages.Pending != int64(3-i) || q.Messages.Processing != 0 {
			t.Fatalf("queue %d = %+v, want %s with %d pending messages in 1 partition", i, q, want, 3-i)
		}
		parseTS(t, q.CreatedAt)
	}
	if l.Pagination != (pagination{100, 0}) {
		t.Fatalf("pagination = %+v, want the defaults 100, 0", l.Pagination)
	}
	get(t, s, "/api/v1/resources/queues"+e2e.Query("namespace", ns, "limit", "2"), &l)
	if len(l.Queues) != 2 || l.Total != 3 || l.Queues[0].Name != names[2] || l.Queues[1].Name != names[1] {
		t.Fatalf("limit 2: %+v", l)
	}
	get(t, s, "/api/v1/resources/queues"+e2e.Query("namespace", ns, "limit", "2", "offset", "2"), &l)
	if len(l.Queues) != 1 || l.Queues[0].Name != names[0] || l.Pagination != (pagination{2, 2}) {
		t.Fatalf("offset 2: %+v", l)
	}
	get(t, s, "/api/v1/resources/queues"+e2e.Query("namespace", ns, "task", "t1"), &l)
	if l.Total != 2 || len(l.Queues) != 2 || l.Queues[0].Task != "t1" {
		t.Fatalf("task t1: %+v", l)
	}
}

// One queue: its stored options, its partitions by name with their figures
// and times, paged by partitionLimit and partitionOffset, and the totals
// over all of them.
func TestResourceQueue_DetailOptionsPartitionsTotals(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "detail") + ".t.q"
	s.Configure(t, q, map[string]any{"leaseTime": 123, "retryLimit": 7})
	s.PushN(t, q, "p1", 1)
	s.PushN(t, q, "p2", 2)
	s.PushN(t, q, "p3", 3)
	p := s.PopOK(t, e2e.PopPartition(q, "p3", "batch", "2", "consumerGroup", "g"))
	s.AckOK(t, p.Messages[0], "completed", "g")

	d := getQueue(t, s, q)
	if d.Name != q || d.Options["leaseTime"] != float64(123) || d.Options["retryLimit"] != float64(7) {
		t.Fatalf("queue = %s with options %v, want leaseTime 123, retryLimit 7", d.Name, d.Options)
	}
	if d.PartitionCount != 4 || len(d.Partitions) != 4 {
		t.Fatalf("%d partitions (count %d), want 4 (Default, p1, p2, p3)", len(d.Partitions), d.PartitionCount)
	}
	wantNames := []string{"Default", "p1", "p2", "p3"}
	for i, pt := range d.Partitions {
		if pt.Name != wantNames[i] {
			t.Fatalf("partition %d = %s, want %s (by name)", i, pt.Name, wantNames[i])
		}
		if pt.Stats != pt.Messages {
			t.Fatalf("stats %+v differ from messages %+v", pt.Stats, pt.Messages)
		}
	}
	if c := d.Partitions[0].Stats; c != (counts{}) || d.Partitions[0].OldestMessage != nil {
		t.Fatalf("empty Default: %+v, oldest %v", c, d.Partitions[0].OldestMessage)
	}
	if c := d.Partitions[2].Stats; c != (counts{Total: 2, Pending: 2}) {
		t.Fatalf("p2 = %+v, want 2 pending (no group contacted it)", c)
	}
	if c := d.Partitions[3].Stats; c != (counts{Total: 3, Pending: 1, Processing: 1, Completed: 1}) {
		t.Fatalf("p3 = %+v, want 1 pending, 1 processing, 1 completed", c)
	}
	p3 := d.Partitions[3]
	if p3.OldestMessage == nil || p3.NewestMessage == nil ||
		parseTS(t, *p3.NewestMessage).Before(parseTS(t, *p3.OldestMessage)) {
		t.Fatalf("p3 oldest %v newest %v", p3.OldestMessage, p3.NewestMessage)
	}
	if d.Totals != (counts{Total: 6, Pending: 4, Processing: 1, Completed: 1}) {
		t.Fatalf("totals = %+v", d.Totals)
	}
	d = getQueue(t, s, q, "partitionLimit", "2", "partitionOffset", "2")
	if len(d.Partitions) != 2 || d.Partitions[0].Name != "p2" || d.PartitionCount != 4 || d.Totals.Total != 6 ||
		d.PartitionPagination != (pagination{2, 2}) {
		t.Fatalf("page 2 of 2: %+v", d)
	}
}

// A failed ack counts the message as failed (and still pending) until the
// group consumes it; a dead letter counts in deadLetter and as completed.
func TestResourceQueue_FailedAndDeadLetterFigures(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "fail") + ".t.q"
	s.Configure(t, q, map[string]any{"retryLimit": 1, "retryDelay": 0})
	s.PushN(t, q, "", 2)
	p := s.PopOK(t, e2e.PopQueue(q))
	s.AckOK(t, p.Messages[0], "failed", "")
	d := getQueue(t, s, q)
	if d.Totals != (counts{Total: 2, Pending: 2, Failed: 1}) {
		t.Fatalf("after a failure: %+v, want 2 pending, 1 failed", d.Totals)
	}
	p = s.PopOK(t, e2e.PopQueue(q))
	if r := s.AckOK(t, p.Messages[0], "failed", ""); !r.DLQ {
		t.Fatalf("second failure with retryLimit 1 did not dead-letter: %+v", r)
	}
	d = getQueue(t, s, q)
	if d.Totals != (counts{Total: 2, Pending: 1, Completed: 1, DeadLetter: 1}) {
		t.Fatalf("after the dead letter: %+v, want 1 pending, 1 completed, 1 dead letter", d.Totals)
	}
}

// An unknown queue is 404 {"error":"queue not found"}; a name that breaks
// the name rule is 400.
func TestResourceQueue_Unknown404BadName400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	e2e.WantError(t, s.Get(t, "/api/v1/resources/queues/"+e2e.Unique(t, "none")), 404, "queue not found")
	e2e.WantError(t, s.Get(t, "/api/v1/resources/queues/a%01b"), 400, "control characters")
	e2e.WantError(t, s.Get(t, "/api/v1/resources/partitions?queue="+e2e.Unique(t, "none")), 404, "queue not found")
}

type grouping struct {
	Namespace  string `json:"namespace"`
	Task       string `json:"task"`
	Queues     int    `json:"queues"`
	Partitions int    `json:"partitions"`
	Messages   struct {
		Total   int64 `json:"total"`
		Pending int64 `json:"pending"`
	} `json:"messages"`
}

// Namespaces and tasks: one entry each, with their queues, partitions and
// message figures, by name, paginated.
func TestResourceNamespacesAndTasks(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "nsx")
	task := e2e.Unique(t, "task")
	s.PushN(t, ns+"."+task+".a", "", 2)
	s.PushN(t, ns+"."+task+".b", "p1", 1)
	s.PushN(t, ns+"."+task+".b", "p2", 1)

	find := func(path, key, name string) grouping {
		t.Helper()
		for offset := 0; ; offset += 1000 {
			var l map[string]any
			getFresh(t, s, path+e2e.Query("limit", "1000", "offset", fmt.Sprint(offset)), &l)
			list, _ := l[key].([]any)
			if _, ok := l["total"].(float64); !ok {
				t.Fatalf("%s: no total: %v", path, l)
			}
			for _, e := range list {
				m := e.(map[string]any)
				if m[key[:len(key)-1]] == name {
					return grouping{Queues: int(m["queues"].(float64)), Partitions: int(m["partitions"].(float64)),
						Messages: struct {
							Total   int64 `json:"total"`
							Pending int64 `json:"pending"`
						}{int64(m["messages"].(map[string]any)["total"].(float64)),
							int64(m["messages"].(map[string]any)["pending"].(float64))}}
				}
			}
			if len(list) < 1000 {
				t.Fatalf("%s: %s not listed", path, name)
			}
		}
	}
	for _, c := range []struct{ path, key, name string }{
		{"/api/v1/resources/namespaces", "namespaces", ns},
		{"/api/v1/resources/tasks", "tasks", task},
	} {
		g := find(c.path, c.key, c.name)
		if g.Queues != 2 || g.Partitions != 3 || g.Messages.Total != 4 || g.Messages.Pending != 4 {
			t.Fatalf("%s %s: %+v, want 2 queues, 3 partitions, 4 pending messages", c.key, c.name, g)
		}
	}
	var l struct {
		Namespaces []grouping  `json:"namespaces"`
		Total      int         `json:"total"`
		Pagination *pagination `json:"pagination"`
	}
	get(t, s, "/api/v1/resources/namespaces?limit=1", &l)
	if len(l.Namespaces) != 1 || l.Total < 1 || l.Pagination == nil || l.Pagination.Limit != 1 {
		t.Fatalf("limit 1: %+v", l)
	}
}

type partitionList struct {
	Partitions []partitionEntry `json:"partitions"`
	Total      int              `json:"total"`
	Pagination pagination       `json:"pagination"`
}

// The partition list (JS/Py admin.getPartitions): by queue and partition
// name, filtered by queue, namespace or task, paginated, with head,
// figures and last write.
func TestResourcePartitions_ListFiltersAndPagination(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "parts")
	q := ns + ".t.q"
	for i, name := range []string{"x1", "x2", "x3"} {
		s.PushN(t, q, name, i+1)
	}
	var l partitionList
	get(t, s, "/api/v1/resources/partitions"+e2e.Query("queue", q), &l)
	if l.Total != 3 || len(l.Partitions) != 3 {
		t.Fatalf("%d partitions (total %d), want 3", len(l.Partitions), l.Total)
	}
	for i, p := range l.Partitions {
		n := int64(i + 1)
		if p.Name != fmt.Sprintf("x%d", i+1) || p.Queue != q || p.Head != n ||
			p.Messages != (counts{Total: n, Pending: n}) || p.LastWriteAt == nil || !e2e.IsUUID(p.ID) {
			t.Fatalf("partition %d = %+v", i, p)
		}
	}
	get(t, s, "/api/v1/resources/partitions"+e2e.Query("namespace", ns, "limit", "1", "offset", "1"), &l)
	if l.Total != 3 || len(l.Partitions) != 1 || l.Partitions[0].Name != "x2" || l.Pagination != (pagination{1, 1}) {
		t.Fatalf("namespace page 2 of 3: %+v", l)
	}
}

// Every bound and name rule of the resource routes answers 400, never a
// page: limits outside 1..1000, negative offsets, non-integers, bad names.
func TestResourceParams_BadInput400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, path := range []string{
		"/api/v1/resources/queues?limit=0",
		"/api/v1/resources/queues?limit=1001",
		"/api/v1/resources/queues?offset=-1",
		"/api/v1/resources/queues?limit=ten",
		"/api/v1/resources/queues?namespace=" + url.QueryEscape("a\x01"),
		"/api/v1/resources/queues/q?partitionLimit=0",
		"/api/v1/resources/queues/q?partitionOffset=x",
		"/api/v1/resources/namespaces?limit=5000",
		"/api/v1/resources/tasks?offset=" + fmt.Sprint(int64(math.MaxInt32)+1),
		"/api/v1/resources/partitions?limit=-3",
		"/api/v1/resources/partitions?queue=" + url.QueryEscape("a\x7f"),
	} {
		e2e.WantErrorBody(t, s.Get(t, path), 400)
	}
	e2e.WantErrorBody(t, s.Delete(t, "/api/v1/queues/q/clear?partition="+url.QueryEscape("a\x01")), 400)
}

// The overview's figures are computed at most once per 5 s and reused
// for up to 30 s (statsAge says how old they are): a read right after a
// push still answers the figures from before it; POST /api/v1/stats/refresh
// makes the next read compute anew, with statsAge 0.
func TestOverview_FiguresAreSharedUntilRefresh(t *testing.T) {
	s := shared(t)
	var before overview
	getFresh(t, s, "/api/v1/resources/overview", &before)
	start := time.Now()
	s.PushN(t, e2e.Unique(t, "ovcache"), "p", 3)

	var cached overview
	get(t, s, "/api/v1/resources/overview", &cached)
	if time.Since(start) < 25*time.Second { // else the box was too slow for the rule
		if cached.Messages.Total != before.Messages.Total || cached.Queues != before.Queues {
			t.Fatalf("a read within the figures' age computed anew: total %d -> %d, queues %d -> %d",
				before.Messages.Total, cached.Messages.Total, before.Queues, cached.Queues)
		}
	}
	var fresh overview
	getFresh(t, s, "/api/v1/resources/overview", &fresh)
	if fresh.Messages.Total != before.Messages.Total+3 || fresh.Queues != before.Queues+1 {
		t.Fatalf("after the refresh: total %d -> %d, queues %d -> %d; want +3 and +1",
			before.Messages.Total, fresh.Messages.Total, before.Queues, fresh.Queues)
	}
	if fresh.StatsAge == nil || *fresh.StatsAge != 0 {
		t.Fatalf("statsAge = %v after the refresh, want 0", fresh.StatsAge)
	}
}
