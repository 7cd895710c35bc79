package pushtest

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// configureDefaults is the options object of a configure that sets nothing
// (docs/api.md "POST /api/v1/configure").
func configureDefaults() map[string]any {
	return map[string]any{
		"priority": 0.0, "leaseTime": 300.0, "retryLimit": 3.0, "retryDelay": 1000.0, "maxSize": 0.0,
		"ttl": 3600.0, "deadLetterQueue": false, "dlqAfterMaxRetries": false, "delayedProcessing": 0.0,
		"windowBuffer": 0.0, "retentionSeconds": 0.0, "completedRetentionSeconds": 0.0,
		"retentionEnabled": false, "encryptionEnabled": false, "maxWaitTimeSeconds": 0.0, "minPopWaitTime": 0.0,
	}
}

// defaultRow is the queen.queues row a configure that sets nothing stores.
func defaultRow() e2e.QueueRow {
	return e2e.QueueRow{LeaseTime: 300, RetryLimit: 3, RetryDelay: 1000, TTL: 3600}
}

// implicitRow is the queen.queues row of a queue a push created (column
// defaults; lease_time 60 per docs/api.md "POST /api/v1/configure").
func implicitRow(ns, task string) e2e.QueueRow {
	return e2e.QueueRow{Namespace: ns, Task: task, LeaseTime: 60, RetryLimit: 3, RetryDelay: 1000, TTL: 3600}
}

func rowWithID(r e2e.QueueRow, id string) e2e.QueueRow { r.ID = id; return r }

// defaultPartition returns the id of the queue's Default partition and the
// number of partitions the queue has.
func defaultPartition(t testing.TB, queue string) (id string, n int) {
	t.Helper()
	err := e2e.DB.QueryRow(`SELECT coalesce((SELECT p.id::text FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 AND p.name = 'Default'), ''),
 (SELECT count(*)::int FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1)`,
		[]any{queue}, &id, &n)
	if err != nil {
		t.Fatal(err)
	}
	return id, n
}

// a configure that sets nothing answers the documented shape
// with every option at its configure default (leaseTime 300, minPopWaitTime
// 0), stores exactly that, and creates the Default partition.
func TestQ5_ConfigureDefaultsAndResponseShape(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "cfg-defaults")
	c := s.ConfigureBody(t, map[string]any{"queue": q})
	if c.Body["queue"] != q || c.Body["namespace"] != "" || c.Body["task"] != "" {
		t.Fatalf("queue/namespace/task = %v/%v/%v", c.Body["queue"], c.Body["namespace"], c.Body["task"])
	}
	if !reflect.DeepEqual(c.Options, configureDefaults()) {
		t.Fatalf("options\n got %v\nwant %v", c.Options, configureDefaults())
	}
	row := e2e.ReadQueue(t, q)
	if want := rowWithID(defaultRow(), c.Body["queueId"].(string)); row != want {
		t.Fatalf("queen.queues row\n got %+v\nwant %+v", row, want)
	}
	pid, n := defaultPartition(t, q)
	if pid != c.Body["partitionId"] || n != 1 {
		t.Fatalf("Default partition %q (of %d partitions), response partitionId %v", pid, n, c.Body["partitionId"])
	}
}

// keyed is the shared broker with an encryption key: without one,
// configure refuses encryptionEnabled (cryptotest).
func keyed(t testing.TB) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "QUEEN_ENCRYPTION_KEY="+strings.Repeat("5a", 32))
}

// every option is stored in its column and reported back.
func TestQ5_ConfigureAllOptionsStored(t *testing.T) {
	t.Parallel()
	s := keyed(t)
	q := e2e.Unique(t, "cfg-all")
	opts := map[string]any{
		"priority": 7.0, "leaseTime": 45.0, "retryLimit": 9.0, "retryDelay": 2500.0, "maxSize": 1234.0,
		"ttl": 77.0, "deadLetterQueue": true, "dlqAfterMaxRetries": true, "delayedProcessing": 5.0,
		"windowBuffer": 6.0, "retentionSeconds": 8000.0, "completedRetentionSeconds": 900.0,
		"retentionEnabled": true, "encryptionEnabled": true, "maxWaitTimeSeconds": 11.0, "minPopWaitTime": 1500.0,
	}
	c := s.ConfigureBody(t, map[string]any{"queue": q, "namespace": "ns1", "task": "tk1", "options": opts})
	if c.Body["namespace"] != "ns1" || c.Body["task"] != "tk1" {
		t.Fatalf("namespace/task = %v/%v", c.Body["namespace"], c.Body["task"])
	}
	if !reflect.DeepEqual(c.Options, opts) {
		t.Fatalf("options\n got %v\nwant %v", c.Options, opts)
	}
	want := e2e.QueueRow{ID: c.Body["queueId"].(string), Namespace: "ns1", Task: "tk1", LeaseTime: 45, RetryLimit: 9,
		RetryDelay: 2500, Priority: 7, MaxQueueSize: 1234, TTL: 77, DelayedProcessing: 5, WindowBuffer: 6,
		RetentionSeconds: 8000, CompletedRetentionSeconds: 900, MaxWaitTimeSeconds: 11, MinPopWait: 1500,
		DeadLetterQueue: true, DLQAfterMaxRetries: true, RetentionEnabled: true, Enc: true}
	if row := e2e.ReadQueue(t, q); row != want {
		t.Fatalf("queen.queues row\n got %+v\nwant %+v", row, want)
	}
}

// docs/api.md "POST /api/v1/configure": minPopWaitTime is in ms, 0 by default, clamped to 60000.
func TestConfigure_MinPopWaitTimeClamp(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, tc := range []struct {
		in   any // nil: option left out
		want int
	}{{nil, 0}, {0, 0}, {1, 1}, {59999, 59999}, {60000, 60000}, {60001, 60000}, {120000, 60000}, {2147483647, 60000}} {
		t.Run(fmt.Sprint(tc.in), func(t *testing.T) {
			t.Parallel()
			q := e2e.Unique(t, "cfg-mpwt")
			opts := map[string]any{}
			if tc.in != nil {
				opts["minPopWaitTime"] = tc.in
			}
			c := s.ConfigureBody(t, map[string]any{"queue": q, "options": opts})
			if c.Options["minPopWaitTime"] != float64(tc.want) {
				t.Fatalf("response minPopWaitTime %v, want %d", c.Options["minPopWaitTime"], tc.want)
			}
			if got := e2e.ReadQueue(t, q).MinPopWait; got != tc.want {
				t.Fatalf("min_pop_wait_time %d, want %d", got, tc.want)
			}
		})
	}
}

// configure is a full replace. Options left out go back to their
// defaults, namespace and task to "", the queue keeps its id and its Default
// partition. Unknown option keys (also namespace inside options, Q-4) are
// ignored.
func TestConfigure_FullReplace(t *testing.T) {
	t.Parallel()
	s := keyed(t)
	q := e2e.Unique(t, "cfg-replace")
	first := s.ConfigureBody(t, map[string]any{"queue": q, "namespace": "n", "task": "t", "options": map[string]any{
		"leaseTime": 10, "retryLimit": 0, "retryDelay": 5, "priority": 3, "maxSize": 10, "ttl": 20,
		"deadLetterQueue": true, "dlqAfterMaxRetries": true, "delayedProcessing": 1, "windowBuffer": 2,
		"retentionSeconds": 30, "completedRetentionSeconds": 40, "retentionEnabled": true,
		"encryptionEnabled": true, "maxWaitTimeSeconds": 50, "minPopWaitTime": 60,
	}})
	if first.Options["retryLimit"] != 0.0 || first.Options["leaseTime"] != 10.0 {
		t.Fatalf("first configure options %v", first.Options)
	}
	second := s.ConfigureBody(t, map[string]any{"queue": q, "options": map[string]any{"namespace": "zzz", "bogus": 1}})
	if !reflect.DeepEqual(second.Options, configureDefaults()) {
		t.Fatalf("options after the second configure\n got %v\nwant %v", second.Options, configureDefaults())
	}
	if second.Body["namespace"] != "" || second.Body["task"] != "" {
		t.Fatalf("namespace/task after the second configure = %q/%q, want \"\"/\"\"", second.Body["namespace"], second.Body["task"])
	}
	if second.Body["queueId"] != first.Body["queueId"] || second.Body["partitionId"] != first.Body["partitionId"] {
		t.Fatalf("queueId/partitionId changed: %v/%v then %v/%v", first.Body["queueId"], first.Body["partitionId"],
			second.Body["queueId"], second.Body["partitionId"])
	}
	if row, want := e2e.ReadQueue(t, q), rowWithID(defaultRow(), first.Body["queueId"].(string)); row != want {
		t.Fatalf("queen.queues row\n got %+v\nwant %+v", row, want)
	}
	// No options object at all is the same full replace.
	s.ConfigureBody(t, map[string]any{"queue": q, "namespace": "n2", "options": map[string]any{"leaseTime": 99}})
	third := s.ConfigureBody(t, map[string]any{"queue": q})
	if !reflect.DeepEqual(third.Options, configureDefaults()) || third.Body["namespace"] != "" {
		t.Fatalf("configure without options did not reset: %v", third.Body)
	}
	if row := e2e.ReadQueue(t, q); row.LeaseTime != 300 || row.Namespace != "" {
		t.Fatalf("queen.queues row after configure without options: %+v", row)
	}
	// JS and Python send null namespace/task: treated as absent.
	fourth := s.ConfigureBody(t, map[string]any{"queue": q, "namespace": nil, "task": nil, "options": nil})
	if fourth.Body["namespace"] != "" || fourth.Body["task"] != "" || !reflect.DeepEqual(fourth.Options, configureDefaults()) {
		t.Fatalf("configure with nulls: %v", fourth.Body)
	}
}

// configuring a queue a push created erases its derived namespace and
// task and replaces its implicit lease (60) with the configure default (300).
func TestQ6_ConfigureResetsDerivedNamespace(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := "billing." + e2e.Unique(t, "inv") + ".v2"
	s.Push(t, e2e.PushItem{Queue: q, Payload: 1})
	before := e2e.ReadQueue(t, q)
	if before.Namespace != "billing" || before.LeaseTime != 60 {
		t.Fatalf("push-created row %+v", before)
	}
	c := s.ConfigureBody(t, map[string]any{"queue": q})
	if c.Body["namespace"] != "" || c.Body["task"] != "" || c.Body["queueId"] != before.ID {
		t.Fatalf("configure response %v", c.Body)
	}
	if row, want := e2e.ReadQueue(t, q), rowWithID(defaultRow(), before.ID); row != want {
		t.Fatalf("queen.queues row\n got %+v\nwant %+v", row, want)
	}
	// The message pushed before is still there.
	if n := e2e.QueueCounts(t, q); n.Txids != 1 || n.Heads != 1 {
		t.Fatalf("counts after configure %+v", n)
	}
}

// configure makes sure Default exists (keeping other partitions); a
// push to another partition does not create Default.
func TestQ7_ConfigureCreatesDefaultPartition(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "cfg-default-part")
	s.Push(t, e2e.PushItem{Queue: q, Partition: "p1", Payload: 1})
	if pid, n := defaultPartition(t, q); pid != "" || n != 1 {
		t.Fatalf("after a push to p1: Default %q, %d partitions; want no Default, 1 partition", pid, n)
	}
	c := s.ConfigureBody(t, map[string]any{"queue": q})
	pid, n := defaultPartition(t, q)
	if pid == "" || pid != c.Body["partitionId"] || n != 2 {
		t.Fatalf("after configure: Default %q (response %v), %d partitions; want 2", pid, c.Body["partitionId"], n)
	}
	again := s.ConfigureBody(t, map[string]any{"queue": q})
	if again.Body["partitionId"] != pid {
		t.Fatalf("reconfigure answered partitionId %v, want the existing %s", again.Body["partitionId"], pid)
	}
	if _, n := defaultPartition(t, q); n != 2 {
		t.Fatalf("reconfigure made %d partitions", n)
	}
	// A push without partition goes to that same Default partition.
	res := s.Push(t, e2e.PushItem{Queue: q, Payload: 2})
	if res[0].PartitionID != pid {
		t.Fatalf("push to Default answered partition_id %s, want %s", res[0].PartitionID, pid)
	}
}

// Q-2 and the preface: a push-created queue gets the column defaults
// (lease_time 60, retry_limit 3, retry_delay 1000, ...) and a derived
// namespace and task.
func TestQ2_ImplicitQueueDefaults(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "implicit") + ".task1"
	res := s.Push(t, e2e.PushItem{Queue: q, Payload: 1})
	row := e2e.ReadQueue(t, q)
	if want := rowWithID(implicitRow(strings.SplitN(q, ".", 2)[0], "task1"), row.ID); row != want {
		t.Fatalf("queen.queues row\n got %+v\nwant %+v", row, want)
	}
	// The push created exactly the Default partition, which it answered.
	pid, n := defaultPartition(t, q)
	if n != 1 || pid != res[0].PartitionID {
		t.Fatalf("partitions: Default %q of %d, push answered %s", pid, n, res[0].PartitionID)
	}
}

// a push to an existing queue leaves its configuration untouched.
func TestQ2_PushLeavesConfiguredQueueUntouched(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := "cfgns." + e2e.Unique(t, "keep")
	c := s.ConfigureBody(t, map[string]any{"queue": q, "namespace": "mine", "options": map[string]any{"leaseTime": 77, "priority": 4}})
	s.Push(t, e2e.PushItem{Queue: q, Payload: 1}, e2e.PushItem{Queue: q, Partition: "other", Payload: 2})
	want := rowWithID(defaultRow(), c.Body["queueId"].(string))
	want.Namespace, want.LeaseTime, want.Priority = "mine", 77, 4
	if row := e2e.ReadQueue(t, q); row != want {
		t.Fatalf("queen.queues row after push\n got %+v\nwant %+v", row, want)
	}
}

// namespace is the text before the first dot (the whole name when there
// is none), task the text between the first and second dot, else "".
func TestQ3_NamespaceTaskDerivation(t *testing.T) {
	t.Parallel()
	s := shared(t)
	// u keeps names apart between tests and runs; it has no dot, so where it
	// goes does not change the derivation under test.
	for _, tc := range []struct {
		name           string
		queue, ns, tsk func(u string) string
	}{
		{"orders", func(u string) string { return "orders" + u }, func(u string) string { return "orders" + u }, func(string) string { return "" }},
		{"billing.invoice.v2", func(u string) string { return "billing.invoice.v2" + u }, func(string) string { return "billing" }, func(string) string { return "invoice" }},
		{"a.b", func(u string) string { return "a.b" + u }, func(string) string { return "a" }, func(u string) string { return "b" + u }},
		{"a..b", func(u string) string { return "a..b" + u }, func(string) string { return "a" }, func(string) string { return "" }},
		{"trailing dot", func(u string) string { return "a" + u + "." }, func(u string) string { return "a" + u }, func(string) string { return "" }},
		{"leading dot", func(u string) string { return ".x" + u }, func(string) string { return "" }, func(u string) string { return "x" + u }},
		{"all name characters", func(u string) string { return "Ns:1.t-2_X.y.z" + u }, func(string) string { return "Ns:1" }, func(string) string { return "t-2_X" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := strings.ReplaceAll(e2e.Unique(t, ""), "-", "_")
			q, ns, task := tc.queue(u), tc.ns(u), tc.tsk(u)
			s.Push(t, e2e.PushItem{Queue: q, Payload: 1})
			row := e2e.ReadQueue(t, q)
			if row.Namespace != ns || row.Task != task {
				t.Fatalf("%q: namespace/task = %q/%q, want %q/%q", q, row.Namespace, row.Task, ns, task)
			}
		})
	}
}

// and the preface: a configure that can never succeed is a 400
// {"error"} and writes nothing; strings PostgreSQL could cast are accepted.
func TestQ4_ConfigureBadInput(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "cfg-bad")
	for _, tc := range []struct {
		name, body, msg string
		prefix          bool
	}{
		{"empty body", "", "Empty request body", false},
		{"invalid JSON", "{", "Invalid JSON", true},
		{"no queue", `{"options":{}}`, "queue is required", false},
		{"queue null", `{"queue":null}`, "queue is required", false},
		{"queue number", `{"queue":5}`, "queue is required", false},
		{"queue with a tab", `{"queue":"a\tb"}`, "", false},
		{"queue with NUL", `{"queue":"a\u0000b"}`, "", false},
		{"queue too long", `{"queue":"` + strings.Repeat("q", 256) + `"}`, "", false},
		{"leaseTime not a number", `{"queue":"` + q + `","options":{"leaseTime":"abc"}}`, "", false},
		{"retryLimit negative", `{"queue":"` + q + `","options":{"retryLimit":-1}}`, "", false},
		{"deadLetterQueue not a boolean", `{"queue":"` + q + `","options":{"deadLetterQueue":"maybe"}}`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantErrorText(t, s.Post(t, "/api/v1/configure", tc.body), 400, tc.msg, tc.prefix)
		})
	}
	t.Cleanup(func() {
		if n := e2e.QueueCounts(t, q, "a\tb", strings.Repeat("q", 256)); n != (e2e.Counts{}) {
			t.Errorf("a rejected configure wrote %+v", n)
		}
	})
}

// option values PostgreSQL could cast ("30", "true") are accepted.
func TestQ8_ConfigureCastableStrings(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "cfg-cast")
	c := s.ConfigureBody(t, map[string]any{"queue": q, "options": map[string]any{"leaseTime": "30", "retentionEnabled": "true"}})
	if c.Options["leaseTime"] != 30.0 || c.Options["retentionEnabled"] != true {
		t.Fatalf("options %v", c.Options)
	}
	if row := e2e.ReadQueue(t, q); row.LeaseTime != 30 || !row.RetentionEnabled {
		t.Fatalf("row %+v", row)
	}
}
