package edgetest

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// Contract E: a queue, partition or consumer-group name is any valid UTF-8
// without NUL or control characters (C0, DEL, C1), 1 to 255 bytes. Paths
// carry names percent-encoded ("/" as %2F).

// oddPartitions are partition names of the contract.
var oddPartitions = []string{"cust@x.com", "orders/eu", "a b", "ümlaut"}

// roundTrip pushes two messages to each odd partition of queue (the first
// with a transactionId holding "/" and a space) and takes them through every
// route that names the queue, a partition or a group: the partition route,
// the queue route, single and batch ack, the message route, the DLQ filter,
// and finally DELETE of the queue. It returns the first transaction id of
// each partition.
func roundTrip(t *testing.T, s *e2e.Server, q string) map[string]string {
	t.Helper()
	g1, g2 := e2e.Unique(t, "ops team@x.com"), e2e.Unique(t, "g/2 ü")
	first := map[string]string{}
	pids := map[string]string{}
	for _, part := range oddPartitions {
		tx := e2e.TxID("tx/a b")
		res := s.PushQueued(t,
			e2e.PushItem{Queue: q, Partition: part, TransactionID: tx, Payload: map[string]any{"p": part}},
			e2e.PushItem{Queue: q, Partition: part, TransactionID: e2e.TxID("t2"), Payload: 2})
		first[part], pids[part] = tx, res[0].PartitionID
	}

	// The partition route, names in the path.
	for _, part := range oddPartitions {
		path := e2e.PopPartition(q, part, "consumerGroup", g1)
		p := s.PopOK(t, path)
		m := p.Messages[0]
		if p.Queue != q || p.Partition != part || m.Partition != part || m.TransactionID != first[part] ||
			m.PartitionID != pids[part] || p.ConsumerGroup != g1 || m.ConsumerGroup != g1 {
			t.Fatalf("GET %s: queue %q partition %q group %q, message %+v; want %q %q %q tx %q", path, p.Queue,
				p.Partition, p.ConsumerGroup, m, q, part, g1, first[part])
		}
		s.AckOK(t, m, "completed", g1)
	}

	// The queue route, every partition at once; batch ack in group g2.
	path := e2e.PopQueue(q, "consumerGroup", g2, "batch", "100", "partitions", "0")
	p := s.PopOK(t, path)
	if p.Queue != q || len(p.Messages) != 2*len(oddPartitions) {
		t.Fatalf("GET %s: queue %q, %d messages, want %q and %d", path, p.Queue, len(p.Messages), q, 2*len(oddPartitions))
	}
	var got []string
	seen := map[string]bool{}
	items := make([]map[string]any, len(p.Messages))
	for i, m := range p.Messages {
		if !seen[m.Partition] {
			seen[m.Partition] = true
			got = append(got, m.Partition)
		}
		if m.PartitionID != pids[m.Partition] {
			t.Fatalf("message %+v: partitionId of %q is %q", m, m.Partition, pids[m.Partition])
		}
		items[i] = e2e.AckItem(m, "completed")
	}
	want := append([]string(nil), oddPartitions...)
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the queue route delivered partitions %q, want %q", got, want)
	}
	s.AckBatchOK(t, g2, items...)

	// The message route, a transaction id with "/" and a space in the path.
	for _, part := range oddPartitions {
		path := "/api/v1/messages/" + pids[part] + "/" + url.PathEscape(first[part])
		r := s.Get(t, path)
		if r.Status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
		}
		var m struct {
			TransactionID  string `json:"transactionId"`
			Queue          string `json:"queue"`
			Partition      string `json:"partition"`
			ConsumerGroups []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"consumerGroups"`
		}
		r.JSON(t, &m)
		if m.TransactionID != first[part] || m.Queue != q || m.Partition != part {
			t.Fatalf("GET %s: %s", path, r.Body)
		}
		status := map[string]string{}
		for _, g := range m.ConsumerGroups {
			status[g.Name] = g.Status
		}
		if status[g1] != "completed" || status[g2] != "completed" {
			t.Fatalf("GET %s: groups %v, want %q and %q completed", path, status, g1, g2)
		}
	}

	// The DLQ filters take the names as query values.
	r := s.Get(t, "/api/v1/dlq"+e2e.Query("queue", q, "partition", oddPartitions[0], "consumerGroup", g1))
	if r.Status != 200 {
		t.Fatalf("GET /api/v1/dlq: %d %s", r.Status, r.Body)
	}
	return first
}

// deleteQueue deletes q through its percent-encoded path and checks it is
// gone.
func deleteQueue(t *testing.T, s *e2e.Server, q string) {
	t.Helper()
	path := "/api/v1/resources/queues/" + url.PathEscape(q)
	r := s.Do(t, "DELETE", path, nil)
	if r.Status != 200 {
		t.Fatalf("DELETE %s: %d %s", path, r.Status, r.Body)
	}
	var out struct {
		Deleted bool   `json:"deleted"`
		Queue   string `json:"queue"`
		Existed bool   `json:"existed"`
	}
	r.JSON(t, &out)
	if !out.Deleted || !out.Existed || out.Queue != q {
		t.Fatalf("DELETE %s: %s", path, r.Body)
	}
	if n := e2e.QueueCounts(t, q).Queues; n != 0 {
		t.Fatalf("DELETE %s left the queue", path)
	}
}

func TestQueueNameWithSpaceRoundTrips(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "my queue")
	roundTrip(t, s, q)
	deleteQueue(t, s, q)
}

func TestQueueNameWithSlashRoundTrips(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "orders/eu")
	roundTrip(t, s, q)
	deleteQueue(t, s, q)
	// A later push recreates it.
	s.PushN(t, q, "orders/eu", 1)
	p := s.PopOK(t, e2e.PopPartition(q, "orders/eu"))
	if p.Queue != q || p.Messages[0].Partition != "orders/eu" {
		t.Fatalf("after re-creation: %+v", p)
	}
	deleteQueue(t, s, q)
}

func TestQueueNameWithEmojiRoundTrips(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "emoji😀q")
	roundTrip(t, s, q)
	deleteQueue(t, s, q)
}

// A dotted non-ASCII queue name: besides the round trip, a push derives
// namespace "café-…" and task "orders" from it (docs/api.md, push), and the
// discovery route finds it by them.
func TestQueueNameWithAccentRoundTripsAndDiscovers(t *testing.T) {
	t.Parallel()
	s := shared(t)
	ns := e2e.Unique(t, "café")
	q := ns + ".orders"
	roundTrip(t, s, q)
	var gotNS, gotTask string
	if err := e2e.DB.QueryRow(`SELECT namespace, task FROM queen.queues WHERE name = $1`, []any{q}, &gotNS, &gotTask); err != nil {
		t.Fatal(err)
	}
	if gotNS != ns || gotTask != "orders" {
		t.Fatalf("queue %q has namespace %q task %q, want %q %q", q, gotNS, gotTask, ns, "orders")
	}
	for i, scope := range [][]string{{"namespace", ns}, {"namespace", ns, "task", "orders"}} {
		group := fmt.Sprintf("disc %d@ü", i)
		path := e2e.PopDiscovery(append(scope, "consumerGroup", group, "batch", "100", "partitions", "0")...)
		p := s.PopOK(t, path)
		if len(p.Messages) != 2*len(oddPartitions) {
			t.Fatalf("GET %s: %d messages, want %d", path, len(p.Messages), 2*len(oddPartitions))
		}
		for _, m := range p.Messages {
			found := false
			for _, part := range oddPartitions {
				found = found || m.Partition == part
			}
			if !found || m.ConsumerGroup != group {
				t.Fatalf("GET %s: message %+v", path, m)
			}
		}
	}
	deleteQueue(t, s, q)
}

// A consumer group with a space and "@" in the subscription route's path.
func TestConsumerGroupWithSpaceAndAtSubscribes(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-sub")
	group := e2e.Unique(t, "billing team@x.com")
	s.PushN(t, q, "", 1)
	s.PopOK(t, e2e.PopQueue(q, "consumerGroup", group))
	for _, path := range []string{
		"/api/v1/consumer-groups/" + url.PathEscape(group) + "/subscription",
		"/api/v1/consumer-groups/" + strings.ReplaceAll(url.PathEscape(group), "@", "%40") + "/subscription",
	} {
		r := s.Post(t, path, map[string]any{"subscriptionTimestamp": "2026-01-01T00:00:00Z"})
		if r.Status != 200 {
			t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
		}
		var out struct {
			Success       bool   `json:"success"`
			ConsumerGroup string `json:"consumerGroup"`
			RowsUpdated   int    `json:"rowsUpdated"`
		}
		r.JSON(t, &out)
		if !out.Success || out.ConsumerGroup != group || out.RowsUpdated != 1 {
			t.Fatalf("POST %s: %s, want group %q and rowsUpdated 1", path, r.Body, group)
		}
	}
}

// ---------------------------------------------------------------- bad names

// badNames are names every route must refuse with a 400 naming the field.
var badNames = map[string]string{
	"tab":            "a\tb",
	"newline":        "a\nb",
	"NUL":            "a\x00b",
	"C0 0x1f":        "\x1f",
	"DEL":            "a\x7fb",
	"C1 U+0085":      "a\u0085b",
	"C1 U+009F":      "a\u009fb",
	"256 bytes":      strings.Repeat("n", 256),
	"256 bytes of é": strings.Repeat("é", 128),
}

// nameSites are the places a name arrives, each sending name and returning
// the answer; field is what the error must name.
type nameSite struct {
	field string
	send  func(t *testing.T, s *e2e.Server, name string) *e2e.Response
}

func nameSites(q string) map[string]nameSite {
	return map[string]nameSite{
		"push queue": {"queue", func(t *testing.T, s *e2e.Server, name string) *e2e.Response {
			return s.Post(t, "/api/v1/push", map[string]any{"items": []e2e.PushItem{{Queue: name, Payload: 1}}})
		}},
		"push partition": {"partition", func(t *testing.T, s *e2e.Server, name string) *e2e.Response {
			return s.Post(t, "/api/v1/push", map[string]any{"items": []e2e.PushItem{{Queue: q, Partition: name, Payload: 1}}})
		}},
		"configure queue": {"queue", func(t *testing.T, s *e2e.Server, name string) *e2e.Response {
			return s.Post(t, "/api/v1/configure", map[string]any{"queue": name})
		}},
		"pop queue path": {"queue", func(t *testing.T, s *e2e.Server, name string) *e2e.Response {
			return s.Get(t, e2e.PopQueue(name))
		}},
		"pop partition path": {"partition", func(t *testing.T, s *e2e.Server, name string) *e2e.Response {
			return s.Get(t, e2e.PopPartition(q, name))
		}},
		"pop consumerGroup": {"consumerGroup", func(t *testing.T, s *e2e.Server, name string) *e2e.Response {
			return s.Get(t, e2e.PopQueue(q, "consumerGroup", name))
		}},
		"subscription group path": {"group", func(t *testing.T, s *e2e.Server, name string) *e2e.Response {
			return s.Post(t, "/api/v1/consumer-groups/"+url.PathEscape(name)+"/subscription",
				map[string]any{"subscriptionTimestamp": "2026-01-01T00:00:00Z"})
		}},
		"delete queue path": {"queue", func(t *testing.T, s *e2e.Server, name string) *e2e.Response {
			return s.Do(t, "DELETE", "/api/v1/resources/queues/"+url.PathEscape(name), nil)
		}},
	}
}

// Contract E: a control character (C0, DEL, C1), a NUL or more than 255
// bytes in a name is a 400 naming the field, wherever the name arrives, and
// creates nothing.
func TestNameWithControlCharOrNULOrOver255BytesIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-badname")
	for site, ns := range nameSites(q) {
		for what, name := range badNames {
			t.Run(site+"/"+what, func(t *testing.T) {
				if _, err := e2e.CheckError(ns.send(t, s, name), 400, ns.field); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	if n := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.queues WHERE name = ANY($1::text[]) OR name = $2`,
		storable(badNames), q); n != 0 {
		t.Fatalf("rejected requests created %d queues", n)
	}
}

// Contract E: a percent-encoded path segment that decodes to invalid UTF-8
// is a 400 naming the field.
func TestNameWithInvalidUTF8InPathIs400(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "edge-pathutf8")
	for _, bad := range []string{"%FF", "a%C3", "%ED%A0%80", "%C0%AF"} {
		for _, c := range []struct{ method, path, field string }{
			{"GET", "/api/v1/pop/queue/" + bad, "queue"},
			{"GET", "/api/v1/pop/queue/" + url.PathEscape(q) + "/partition/" + bad, "partition"},
			{"GET", "/api/v1/pop/queue/" + bad + "/partition/Default", "queue"},
			{"DELETE", "/api/v1/resources/queues/" + bad, "queue"},
			{"POST", "/api/v1/consumer-groups/" + bad + "/subscription", "group"},
		} {
			var body any
			if c.method == "POST" {
				body = map[string]any{"subscriptionTimestamp": "2026-01-01T00:00:00Z"}
			}
			if _, err := e2e.CheckError(s.Do(t, c.method, c.path, body), 400, c.field); err != nil {
				t.Errorf("%s %s: %v", c.method, c.path, err)
			}
		}
	}
}

// Contract E: exactly 255 bytes is a valid name, counted in bytes (a
// multi-byte name of 255 bytes too), for a queue, a partition and a group.
func TestNameOf255BytesIsAccepted(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, fill := range []string{"x", "é"} {
		q := pad(e2e.Unique(t, "edge-255"), fill, 255)
		part := pad("part-", fill, 255)
		group := pad("group-", fill, 255)
		if len(q) != 255 || len(part) != 255 || len(group) != 255 {
			t.Fatalf("lengths %d %d %d", len(q), len(part), len(group))
		}
		s.PushN(t, q, part, 1)
		p := s.PopOK(t, e2e.PopPartition(q, part, "consumerGroup", group))
		if p.Queue != q || p.Messages[0].Partition != part || p.ConsumerGroup != group {
			t.Fatalf("pop of a 255-byte queue/partition/group: %+v", p)
		}
		s.AckOK(t, p.Messages[0], "completed", group)
		deleteQueue(t, s, q)
		// One byte more is refused.
		e2e.WantError(t, s.Post(t, "/api/v1/push", map[string]any{"items": []e2e.PushItem{{Queue: q + "x", Payload: 1}}}),
			400, "queue")
		e2e.WantError(t, s.Get(t, e2e.PopPartition(q, part+"x")), 400, "partition")
		e2e.WantError(t, s.Get(t, e2e.PopQueue(q, "consumerGroup", group+"x")), 400, "consumerGroup")
	}
}

// pad extends prefix with fill to exactly n bytes (ASCII "x" at the end when
// a multi-byte fill does not fit).
func pad(prefix, fill string, n int) string {
	var b strings.Builder
	b.WriteString(prefix)
	for b.Len()+len(fill) <= n {
		b.WriteString(fill)
	}
	for b.Len() < n {
		b.WriteByte('x')
	}
	return b.String()
}

// storable lists the values of m that PostgreSQL can take as text (no NUL),
// to look them up.
func storable(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		if !strings.Contains(v, "\x00") {
			out = append(out, v)
		}
	}
	return out
}
