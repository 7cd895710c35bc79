package cli_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// consume pops and acks every message of queue for group.
func consume(t *testing.T, s *e2e.Server, queue, group string) {
	t.Helper()
	for {
		p := s.Pop(t, e2e.PopQueue(queue, "consumerGroup", group, "batch", "100"))
		if p == nil {
			return
		}
		items := make([]map[string]any, len(p.Messages))
		for i, m := range p.Messages {
			items[i] = e2e.AckItem(m, "completed")
		}
		s.AckBatchOK(t, group, items...)
	}
}

type queueJSON struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Messages   struct {
		Total   int `json:"total"`
		Pending int `json:"pending"`
	} `json:"messages"`
}

// queues lists every queue, with its count, as a person and as a script
// sees it.
func TestCLI_Queues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.PushN(t, b.queue, "", 3)
	b.s.PushN(t, b.queue, "p2", 2)
	var list []queueJSON
	b.runJSON(t, &list, "queues")
	found := false
	for _, q := range list {
		if q.Name == b.queue {
			found = true
			if q.Partitions != 2 || q.Messages.Total != 5 || q.Messages.Pending != 5 {
				t.Fatalf("--json entry: %+v", q)
			}
		}
	}
	if !found {
		t.Fatalf("%s missing from queues --json: %+v", b.queue, list)
	}
	r := b.run(t, "", "queues").want(t, 0)
	if !strings.HasPrefix(r.stdout, "QUEUE ") {
		t.Fatalf("no header:\n%s", r.stdout)
	}
	// QUEUE NAMESPACE TASK PARTITIONS TOTAL PENDING PROCESSING CREATED
	if f := strings.Fields(row(r.stdout, b.queue)); len(f) != 8 || f[3] != "2" || f[4] != "5" || f[5] != "5" || f[6] != "0" {
		t.Fatalf("row of %s: %q\n%s", b.queue, f, r.stdout)
	}
}

// queue NAME shows the queue's figures, every partition and the groups
// reading it; an unknown queue is exit 4 with the server's text.
func TestCLI_Queue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := e2e.Unique(t, "g")
	b.s.PushN(t, b.queue, "", 4)
	b.s.PushN(t, b.queue, "eu/west", 1)
	b.s.PopOK(t, e2e.PopQueue(b.queue, "consumerGroup", g, "batch", "1"))
	var v struct {
		Queue struct {
			Name       string `json:"name"`
			Options    map[string]any
			Partitions []struct {
				Name string `json:"name"`
			} `json:"partitions"`
			Totals struct {
				Total int `json:"total"`
			} `json:"totals"`
		} `json:"queue"`
		Groups []struct {
			Name      string `json:"name"`
			QueueName string `json:"queueName"`
			TotalLag  int    `json:"totalLag"`
		} `json:"groups"`
	}
	b.runJSON(t, &v, "queue", b.queue)
	if v.Queue.Name != b.queue || len(v.Queue.Partitions) != 2 || v.Queue.Totals.Total != 5 || v.Queue.Options["leaseTime"] == nil {
		t.Fatalf("queue --json: %+v", v.Queue)
	}
	if len(v.Groups) != 1 || v.Groups[0].Name != g || v.Groups[0].QueueName != b.queue {
		t.Fatalf("groups of the queue: %+v", v.Groups)
	}
	r := b.run(t, "", "queue", b.queue).want(t, 0)
	// PARTITION TOTAL PENDING PROCESSING COMPLETED FAILED DLQ OLDEST NEWEST
	if f := strings.Fields(row(r.stdout, "Default")); len(f) != 9 || f[1] != "4" {
		t.Fatalf("Default's row: %q\n%s", f, r.stdout)
	}
	if row(r.stdout, "eu/west") == "" || row(r.stdout, g) == "" || !strings.Contains(r.stdout, `"leaseTime"`) {
		t.Fatalf("queue output:\n%s", r.stdout)
	}

	missing := e2e.Unique(t, "missing")
	r = b.run(t, "", "queue", missing).want(t, 4)
	if !strings.Contains(r.stderr, "queue not found") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	r = b.run(t, "", "queue", missing, "--json").want(t, 4)
	var e struct {
		Error  string `json:"error"`
		Status int    `json:"status"`
		Exit   int    `json:"exit"`
	}
	if err := json.Unmarshal([]byte(r.stderr), &e); err != nil || e.Status != 404 || e.Exit != 4 || !strings.Contains(e.Error, "queue not found") {
		t.Fatalf("--json error (%v): %s", err, r.stderr)
	}
}

type groupJSON struct {
	Name       string `json:"name"`
	QueueName  string `json:"queueName"`
	Partitions int    `json:"partitions"`
	TotalLag   int    `json:"totalLag"`
}

// groupLag is the group's totalLag on queue in `groups --json`; -1 when
// the group is not listed there.
func (b *bundle) groupLag(t *testing.T, group string) int {
	t.Helper()
	var list []groupJSON
	b.runJSON(t, &list, "groups")
	for _, e := range list {
		if e.Name == group && e.QueueName == b.queue {
			return e.TotalLag
		}
	}
	return -1
}

// A seek back makes the consumed messages lag again, which groups shows;
// a seek to the end clears it. --lagging lists the lagging cursor.
func TestCLI_SeekThenGroups(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := e2e.Unique(t, "g")
	b.s.PushN(t, b.queue, "", 5)
	consume(t, b.s, b.queue, g)
	if lag := b.groupLag(t, g); lag != 0 {
		t.Fatalf("lag after consuming: %d", lag)
	}

	r := b.run(t, "", "seek", g, b.queue, "--to", "1h").want(t, 0)
	if field(r.stdout, "partitions updated") != "1" || field(r.stdout, "sought to") == "" {
		t.Fatalf("seek output:\n%s", r.stdout)
	}
	if lag := b.groupLag(t, g); lag != 5 {
		t.Fatalf("lag after seeking back: %d, want 5", lag)
	}
	r = b.run(t, "", "groups").want(t, 0)
	// GROUP QUEUE PARTITIONS MEMBERS LAGGING LAG TIME-LAG STATE LAST-ACTIVITY
	var f []string
	for line := range strings.Lines(r.stdout) {
		if c := strings.Fields(line); len(c) == 9 && c[0] == g && c[1] == b.queue {
			f = c
		}
	}
	if f == nil || f[4] != "1" || f[5] != "5" {
		t.Fatalf("row of %s: %q\n%s", g, f, r.stdout)
	}
	var lagging []struct {
		Group     string `json:"consumer_group"`
		Queue     string `json:"queue_name"`
		Partition string `json:"partition_name"`
		OffsetLag int    `json:"offset_lag"`
	}
	b.runJSON(t, &lagging, "groups", "--lagging")
	n := 0
	for _, e := range lagging {
		if e.Group == g && e.Queue == b.queue {
			n++
			if e.Partition != "Default" || e.OffsetLag != 5 {
				t.Fatalf("lagging entry: %+v", e)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d lagging entries of %s: %+v", n, g, lagging)
	}
	r = b.run(t, "", "groups", "--lagging", "--min-lag", "1h").want(t, 0)
	if strings.Contains(r.stdout, g) {
		t.Fatalf("--min-lag 1h lists a cursor 0 s behind:\n%s", r.stdout)
	}

	var sought struct {
		SeekToEnd         bool `json:"seekToEnd"`
		PartitionsUpdated int  `json:"partitionsUpdated"`
	}
	b.runJSON(t, &sought, "seek", g, b.queue, "--to-end")
	if !sought.SeekToEnd || sought.PartitionsUpdated != 1 {
		t.Fatalf("seek --to-end --json: %+v", sought)
	}
	if lag := b.groupLag(t, g); lag != 0 {
		t.Fatalf("lag after seeking to the end: %d", lag)
	}

	// One partition, to its end only.
	b.run(t, "", "seek", g, b.queue, "--to", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)).want(t, 0)
	if lag := b.groupLag(t, g); lag != 5 {
		t.Fatalf("lag after seeking back to an hour ago: %d, want 5", lag)
	}
	r = b.run(t, "", "seek", g, b.queue, "--partition", "Default", "--to-end").want(t, 0)
	if field(r.stdout, "updated") != "true" {
		t.Fatalf("partition seek output:\n%s", r.stdout)
	}
	if lag := b.groupLag(t, g); lag != 0 {
		t.Fatalf("lag after the partition seek: %d", lag)
	}
	b.run(t, "", "seek", g, b.queue, "--partition", "Default", "--to", "1h").want(t, 1)
	b.run(t, "", "seek", g, b.queue).want(t, 1)
	b.run(t, "", "seek", g, b.queue, "--to", "yesterday").want(t, 1)
	b.run(t, "", "seek", e2e.Unique(t, "nobody"), b.queue, "--to-end").want(t, 4)
}

type deadLetterJSON struct {
	ID            string `json:"id"`
	TransactionID string `json:"transactionId"`
	ErrorMessage  string `json:"errorMessage"`
}

// dlq lists a queue's dead letters; requeue pushes one back (a pop gets it
// again) and delete removes one; unknown ids are exit 4.
func TestD5_CLIDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := e2e.Unique(t, "g")
	pushed := b.s.PushN(t, b.queue, "", 2)
	p := b.s.PopOK(t, e2e.PopQueue(b.queue, "consumerGroup", g, "batch", "2"))
	b.s.AckBatchOK(t, g, e2e.AckItem(p.Messages[0], "dlq"), e2e.AckItem(p.Messages[1], "dlq"))

	var page struct {
		Messages []deadLetterJSON `json:"messages"`
		Total    int              `json:"total"`
	}
	b.runJSON(t, &page, "dlq", "--queue", b.queue, "--group", g)
	if page.Total != 2 || len(page.Messages) != 2 {
		t.Fatalf("dlq --json: %+v", page)
	}
	r := b.run(t, "", "dlq", "--queue", b.queue, "--from", "1h").want(t, 0)
	for _, d := range page.Messages {
		if row(r.stdout, d.ID) == "" {
			t.Fatalf("dead letter %s not in the table:\n%s", d.ID, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "2 of 2 dead letters") {
		t.Fatalf("dlq footer:\n%s", r.stdout)
	}

	byTx := map[string]string{}
	for _, d := range page.Messages {
		byTx[d.TransactionID] = d.ID
	}
	requeued := byTx[pushed.TxIDs()[0]]
	r = b.run(t, "", "dlq", "requeue", requeued).want(t, 0)
	if !strings.HasPrefix(r.stdout, "requeued "+requeued) {
		t.Fatalf("requeue output: %s", r.stdout)
	}
	again := b.s.PopOK(t, e2e.PopQueue(b.queue, "consumerGroup", g))
	want, _ := json.Marshal(pushed[0].Payload)
	if string(again.Messages[0].RawData) != string(want) {
		t.Fatalf("requeued payload %s, want %s", again.Messages[0].RawData, want)
	}
	var deleted []map[string]any
	b.runJSON(t, &deleted, "dlq", "delete", byTx[pushed.TxIDs()[1]])
	if len(deleted) != 1 || deleted[0]["deleted"] != true {
		t.Fatalf("delete --json: %v", deleted)
	}
	b.runJSON(t, &page, "dlq", "--queue", b.queue)
	if page.Total != 0 {
		t.Fatalf("dead letters left: %+v", page)
	}
	b.run(t, "", "dlq", "delete", byTx[pushed.TxIDs()[1]]).want(t, 4)
	b.run(t, "", "dlq", "--limit", strconv.Itoa(1001)).want(t, 1)
}
