package statustest

import (
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// configureIn creates queue in namespace ns and task task.
func configureIn(t *testing.T, s *e2e.Server, queue, ns, task string) {
	t.Helper()
	s.ConfigureBody(t, map[string]any{"queue": queue, "namespace": ns, "task": task})
}

// GET /status/queues: the queues of a namespace, newest first, each with
// its message counts; limit and offset page through them and total counts
// them all.
func TestStatusQueues_FiltersAndPaginates(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "ns")
	names := []string{e2e.Unique(t, "sq"), e2e.Unique(t, "sq"), e2e.Unique(t, "sq")}
	for _, q := range names {
		configureIn(t, s, q, ns, "work")
	}
	s.PushN(t, names[0], "", 4)
	type page struct {
		Queues []struct {
			ID, Name, Namespace, Task, CreatedAt string
			Partitions                           int
			Messages                             struct{ Total, Pending, Processing int }
		}
		Pagination struct{ Limit, Offset int }
		Total      int
	}
	var p page
	getJSON(t, s, "/api/v1/status/queues"+e2e.Query("namespace", ns, "limit", "2"), &p)
	if p.Total != 3 || len(p.Queues) != 2 || p.Pagination.Limit != 2 || p.Pagination.Offset != 0 {
		t.Fatalf("first page: %+v", p)
	}
	if p.Queues[0].Name != names[2] || p.Queues[1].Name != names[1] {
		t.Fatalf("not newest first: %s, %s", p.Queues[0].Name, p.Queues[1].Name)
	}
	getJSON(t, s, "/api/v1/status/queues"+e2e.Query("namespace", ns, "limit", "2", "offset", "2"), &p)
	if p.Total != 3 || len(p.Queues) != 1 || p.Queues[0].Name != names[0] {
		t.Fatalf("second page: %+v", p)
	}
	q := p.Queues[0]
	if q.Namespace != ns || q.Task != "work" || q.Partitions != 1 || q.Messages.Total != 4 || q.Messages.Pending != 4 ||
		q.Messages.Processing != 0 || !e2e.IsUUID(q.ID) || q.CreatedAt == "" {
		t.Fatalf("queue entry: %+v", q)
	}
	getJSON(t, s, "/api/v1/status/queues"+e2e.Query("namespace", ns, "task", "other"), &p)
	if p.Total != 0 || len(p.Queues) != 0 {
		t.Fatalf("task filter: %+v", p)
	}
}

// Bad parameters of the status routes answer 400 with the parameter named.
func TestStatusRoutes_BadParametersAre400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "bad")
	s.PushN(t, q, "", 1)
	for _, c := range []struct{ path, names string }{
		{"/api/v1/status/queues?limit=0", "limit"},
		{"/api/v1/status/queues?limit=1001", "limit"},
		{"/api/v1/status/queues?offset=-1", "offset"},
		{"/api/v1/status/queues?limit=ten", "limit"},
		{"/api/v1/status/queues?namespace=%01x", "namespace"},
		{"/api/v1/status/queues?from=yesterday", "from"},
		{"/api/v1/status?to=2026-13-45", "to"},
		{"/api/v1/status?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", "before"},
		{"/api/v1/status?from=2026-01-01T00:00:00Z&to=2026-12-01T00:00:00Z", "31 days"},
		{"/api/v1/status?limit=5000", "limit"},
		{"/api/v1/status/queues/" + q + "?limit=0", "limit"},
		{"/api/v1/status/queues/" + q + "/messages?limit=1001", "limit"},
		{"/api/v1/status/queues/" + q + "/messages?offset=10001", "offset"},
		{"/api/v1/status/analytics?interval=week", "interval"},
		{"/api/v1/status/analytics?interval=minute&from=2026-11-01T00:00:00Z&to=2026-11-30T00:00:00Z", "buckets"},
		{"/api/v1/analytics/queue-ops?format=queengo&bucketSeconds=0", "bucketSeconds"},
		{"/api/v1/analytics/queue-lag?format=queengo&bucketSeconds=1&from=" + since(2*time.Hour), "buckets"},
		{"/api/v1/analytics/queue-ops?format=grafana", "format"},
		{"/api/v1/analytics/system-metrics?from=" + since(40*24*time.Hour), "31 days"},
		{"/api/v1/analytics/worker-metrics?workerId=%00", "workerId"},
		{"/api/v1/analytics/queue-parked-replicas?queue=" + strings.Repeat("q", 300), "queue"},
	} {
		e2e.WantErrorBody(t, s.Get(t, c.path), 400)
		e2e.WantError(t, s.Get(t, c.path), 400, c.names)
	}
}

// GET /status/queues/:queue: the queue's configuration, and per partition
// the figures of cursor arithmetic: after 5 pushes, a pop of 2 in a group
// and an ack of the first, 1 is completed, 1 processing, 3 pending.
func TestStatusQueue_DetailFiguresFollowCursors(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "detail")
	s.Configure(t, q, map[string]any{"leaseTime": 120, "retryLimit": 7})
	s.PushN(t, q, "", 5)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "consumerGroup", "g", "wait", "false"))
	s.AckOK(t, p.Messages[0], "completed", "g")
	var d struct {
		Queue struct {
			ID, Name string
			Config   map[string]any
		}
		Partitions []struct {
			ID, Name                     string
			Messages                     map[string]float64
			Cursor                       map[string]any
			OldestMessage, NewestMessage *string
			LastActivity                 *string
		}
		Totals     map[string]any
		Pagination struct{ Limit, Offset, Total int }
	}
	getJSON(t, s, "/api/v1/status/queues/"+q, &d)
	if d.Queue.Name != q || d.Queue.Config["leaseTime"] != float64(120) || d.Queue.Config["retryLimit"] != float64(7) {
		t.Fatalf("queue: %+v", d.Queue)
	}
	if len(d.Partitions) != 1 || d.Pagination.Total != 1 {
		t.Fatalf("partitions: %+v", d.Partitions)
	}
	m := d.Partitions[0].Messages
	if m["total"] != 5 || m["completed"] != 1 || m["processing"] != 1 || m["pending"] != 3 {
		t.Fatalf("partition messages %v, want total 5, completed 1, processing 1, pending 3", m)
	}
	if d.Partitions[0].Cursor["totalConsumed"] != float64(1) {
		t.Fatalf("cursor %v, want totalConsumed 1", d.Partitions[0].Cursor)
	}
	if d.Partitions[0].OldestMessage == nil || d.Partitions[0].NewestMessage == nil || d.Partitions[0].LastActivity == nil {
		t.Fatalf("partition times missing: %+v", d.Partitions[0])
	}
	if d.Totals["total"] != float64(5) || d.Totals["pending"] != float64(3) {
		t.Fatalf("totals %v", d.Totals)
	}
}

// An unknown queue is 404 on the detail and message routes.
func TestStatusQueue_UnknownQueueIs404(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "nosuch")
	e2e.WantError(t, s.Get(t, "/api/v1/status/queues/"+q), 404, "queue not found")
	e2e.WantError(t, s.Get(t, "/api/v1/status/queues/"+q+"/messages"), 404, "queue not found")
}

// GET /status/queues/:queue/messages: a bare array of the newest messages
// first; limit and offset page through them, across segments; a message
// its group acked is completed, one in its live lease processing.
func TestStatusMessages_NewestFirstWithStatusAndPages(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "msgs")
	var txs []string
	for range 5 {
		txs = append(txs, s.PushN(t, q, "", 1)[0].Tx)
	}
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "2", "wait", "false"))
	s.AckOK(t, p.Messages[0], "completed", "")
	type msg struct {
		ID, TransactionID, PartitionID, QueuePath, Queue, Partition, Status, CreatedAt string
	}
	var page []msg
	getJSON(t, s, "/api/v1/status/queues/"+q+"/messages?limit=2", &page)
	if len(page) != 2 || page[0].TransactionID != txs[4] || page[1].TransactionID != txs[3] {
		t.Fatalf("first page %+v, want %s, %s", page, txs[4], txs[3])
	}
	m := page[0]
	if !e2e.IsUUID(m.ID) || !e2e.IsUUID(m.PartitionID) || m.Queue != q || m.Partition != "Default" ||
		m.QueuePath != q+"/Default" || m.Status != "pending" || m.CreatedAt == "" {
		t.Fatalf("message entry %+v", m)
	}
	getJSON(t, s, "/api/v1/status/queues/"+q+"/messages?limit=2&offset=3", &page)
	if len(page) != 2 || page[0].TransactionID != txs[1] || page[1].TransactionID != txs[0] {
		t.Fatalf("last page %+v, want %s, %s", page, txs[1], txs[0])
	}
	if page[0].Status != "processing" || page[1].Status != "completed" {
		t.Fatalf("statuses %s, %s, want processing, completed", page[0].Status, page[1].Status)
	}
	getJSON(t, s, "/api/v1/status/queues/"+q+"/messages?offset=5", &page)
	if len(page) != 0 {
		t.Fatalf("past the end: %+v", page)
	}
}

// GET /status: the dashboard object, its live figures for one queue (a
// lease, a dead letter) and its throughput from the samples.
func TestStatus_DashboardFiguresAndThroughput(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "dash")
	s.Configure(t, q, map[string]any{"retryLimit": 0, "retryDelay": 0})
	s.PushN(t, q, "", 6)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "1", "wait", "false"))
	s.AckOK(t, p.Messages[0], "failed", "")
	s.PopOK(t, e2e.PopQueue(q, "batch", "3", "wait", "true", "timeout", "5000"))
	var st map[string]any
	waitFor(t, 10*time.Second, "throughput sampled", func() error {
		st = nil
		s.RefreshStats(t) // the totals are shared for up to 5 s otherwise
		getJSON(t, s, "/api/v1/status?queue="+q+"&from="+since(5*time.Minute), &st)
		var pts []map[string]any
		for _, v := range st["throughput"].([]any) {
			pts = append(pts, v.(map[string]any))
		}
		if got := seriesTotal(pts, "ingested"); got != 6 {
			return errorf("ingested %v, want 6", got)
		}
		return nil
	})
	wantKeys(t, "status", st, "timeRange", "bucketMinutes", "pointCount", "throughput", "queues", "messages",
		"leases", "deadLetterQueue", "workers", "errors", "statsAge")
	msgs := st["messages"].(map[string]any)
	wantKeys(t, "messages", msgs, "total", "pending", "processing", "completed", "failed", "deadLetter", "requests",
		"batchEfficiency")
	if num(t, msgs, "total") != 6 || num(t, msgs, "deadLetter") != 1 || num(t, msgs, "processing") != 3 {
		t.Fatalf("messages %v", msgs)
	}
	if num(t, st, "leases", "active") != 1 || num(t, st, "deadLetterQueue", "totalMessages") != 1 {
		t.Fatalf("leases %v, dlq %v", st["leases"], st["deadLetterQueue"])
	}
	qs := st["queues"].([]any)
	if len(qs) != 1 || qs[0].(map[string]any)["name"] != q {
		t.Fatalf("queues %v", qs)
	}
	if _, ok := st["workers"].([]any); !ok {
		t.Fatalf("workers %v", st["workers"])
	}
}

// GET /status/analytics: dataPoints per interval from the samples.
func TestStatusAnalytics_DataPointsFromSamples(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "an")
	s.PushN(t, q, "", 3)
	waitFor(t, 10*time.Second, "messages sampled", func() error {
		var a struct {
			DataPoints []map[string]any
			Interval   string
			From, To   string
		}
		getJSON(t, s, "/api/v1/status/analytics?interval=minute&queue="+q+"&from="+since(10*time.Minute), &a)
		if a.Interval != "minute" || a.From == "" || a.To == "" {
			return errorf("%+v", a)
		}
		if got := seriesTotal(a.DataPoints, "messages"); got != 3 {
			return errorf("messages %v, want 3", got)
		}
		return nil
	})
}

// GET /status/buffers: a broker without FILE_BUFFER_DIR has no push buffer,
// so nothing is pending or failed in one; dbHealthy is a real ping (the
// buffer itself: package buffertest).
func TestStatusBuffers_NoBufferAndHealthyDatabase(t *testing.T) {
	t.Parallel()
	s := shared(t)
	var b map[string]any
	getJSON(t, s, "/api/v1/status/buffers", &b)
	if b["pending"] != float64(0) || b["failed"] != float64(0) || b["dbHealthy"] != true || b["worker"] != float64(0) {
		t.Fatalf("buffers %v", b)
	}
}

// A message whose ack failed and waits for its retry counts as failed, a
// part of pending, until a group commits past it.
func TestStatusQueue_FailedAckCountsAsFailed(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "failed")
	s.Configure(t, q, map[string]any{"retryDelay": 0})
	s.PushN(t, q, "", 2)
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "1", "wait", "false"))
	s.AckOK(t, p.Messages[0], "failed", "")
	var d struct {
		Totals map[string]any
	}
	getJSON(t, s, "/api/v1/status/queues/"+q, &d)
	if d.Totals["failed"] != float64(1) || d.Totals["pending"] != float64(2) || d.Totals["deadLetter"] != float64(0) {
		t.Fatalf("totals %v, want failed 1, pending 2, deadLetter 0", d.Totals)
	}
}

// GET /resources/overview: throughput.processedPerSecond is the messages
// committed per second over the collector's last minute of samples: 0 on
// an idle broker, above 0 once messages were consumed.
func TestOverview_ProcessedPerSecondFollowsConsumption(t *testing.T) {
	t.Parallel()
	s := ownBroker(t, "processed", fastSamples...)
	processed := func() (float64, error) {
		var o map[string]any
		getJSON(t, s, "/api/v1/resources/overview", &o)
		v, ok := o["throughput"].(map[string]any)["processedPerSecond"].(float64)
		if !ok {
			return 0, errorf("processedPerSecond is %v", o["throughput"])
		}
		return v, nil
	}
	waitFor(t, 10*time.Second, "a figure on an idle broker", func() error {
		if v, err := processed(); err != nil || v != 0 {
			return errorf("%v %v", v, err)
		}
		return nil
	})
	q := e2e.Unique(t, "processed")
	s.PushN(t, q, "", 30)
	s.PopOK(t, e2e.PopQueue(q, "batch", "30", "autoAck", "true", "wait", "false"))
	waitFor(t, 10*time.Second, "the consumption in the figure", func() error {
		if v, err := processed(); err != nil || v <= 0 {
			return errorf("%v %v", v, err)
		}
		return nil
	})
}

// GET /status/queues/:queue: cursor.batchesConsumed counts the batches the
// partition's groups consumed: a leased batch once its last message is
// acked, an auto-acked one at once; a batch a failure hands back counts
// nothing.
func TestStatusQueue_BatchesConsumed(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "batches")
	s.PushN(t, q, "", 6)
	batches := func() float64 {
		var d struct {
			Partitions []struct {
				Cursor map[string]any `json:"cursor"`
			} `json:"partitions"`
		}
		getJSON(t, s, "/api/v1/status/queues/"+q, &d)
		v, ok := d.Partitions[0].Cursor["batchesConsumed"].(float64)
		if !ok {
			t.Fatalf("batchesConsumed is %v", d.Partitions[0].Cursor["batchesConsumed"])
		}
		return v
	}
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "3", "consumerGroup", "g", "wait", "false"))
	s.AckOK(t, p.Messages[0], "completed", "g")
	s.AckOK(t, p.Messages[1], "completed", "g")
	if n := batches(); n != 0 {
		t.Fatalf("a batch two thirds acked: %v batches consumed", n)
	}
	s.AckOK(t, p.Messages[2], "completed", "g")
	if n := batches(); n != 1 {
		t.Fatalf("a batch acked: %v batches consumed, want 1", n)
	}
	s.PopOK(t, e2e.PopQueue(q, "batch", "2", "consumerGroup", "g", "autoAck", "true", "wait", "false"))
	if n := batches(); n != 2 {
		t.Fatalf("after an auto-acked batch: %v batches consumed, want 2", n)
	}
	p = s.PopOK(t, e2e.PopQueue(q, "batch", "1", "consumerGroup", "g", "wait", "false"))
	s.AckOK(t, p.Messages[0], "failed", "g")
	if n := batches(); n != 2 {
		t.Fatalf("after a failed batch: %v batches consumed, want 2", n)
	}
}

// GET /api/v1/system/shared-state: queengo has no cluster sync to enable;
// its answer says so (enabled false, shared through PostgreSQL), names
// this process as the reference's server_id does, and carries its
// maintenance switches and the processes sampling on the database.
func TestSharedState_DisabledStateSharedThroughPostgreSQL(t *testing.T) {
	t.Parallel()
	s := shared(t)
	var m map[string]any
	getJSON(t, s, "/api/v1/system/shared-state", &m)
	wantKeys(t, "shared-state", m, "enabled", "running", "transport", "reason", "server_id", "maintenance_mode",
		"pop_maintenance_mode", "server_health")
	id, _ := m["server_id"].(string)
	if m["enabled"] != false || m["running"] != false || m["transport"] != "postgresql" ||
		!strings.HasSuffix(id, ":"+portOf(t, s)) || m["maintenance_mode"] != false || m["pop_maintenance_mode"] != false {
		t.Fatalf("shared-state %v", m)
	}
	if num(t, m, "server_health", "servers_alive") < 1 {
		t.Fatalf("server_health %v", m["server_health"])
	}
}
