package grouptest

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// A push the group has not consumed shows as offset lag, time lag and a
// Dead state (nothing consumed); once older than 300 s it is Lagging; once
// consumed it is Stable with no lag.
func TestGroupList_LagAndStateAfterPush(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gl-lag"), e2e.Unique(t, "g")
	contact(t, s, q, g)
	e := listEntry(t, s, g, q)
	if e == nil || e.Partitions != 1 || e.TotalLag == nil || *e.TotalLag != 0 || e.State != "Dead" {
		t.Fatalf("after contact: %+v", e)
	}
	s.PushN(t, q, "", 3)
	e = listEntry(t, s, g, q)
	if e == nil || e.TotalLag == nil || *e.TotalLag != 3 || e.PartitionsWithLag != 1 || e.Members != 0 ||
		e.State != "Dead" || e.MaxTimeLag > 60 || !slices.Equal(e.Topics, []string{q}) {
		t.Fatalf("after push: %+v", e)
	}
	age(t, q, 10*time.Minute)
	e = listEntry(t, s, g, q)
	if e == nil || e.MaxTimeLag < 600 || e.MaxTimeLag > 700 || e.State != "Lagging" {
		t.Fatalf("after ageing: %+v", e)
	}
	if got := consume(t, s, q, g); len(got) != 3 {
		t.Fatalf("consumed %v", got)
	}
	e = listEntry(t, s, g, q)
	if e == nil || *e.TotalLag != 0 || e.PartitionsWithLag != 0 || e.MaxTimeLag != 0 || e.State != "Stable" ||
		e.LastActivity == nil {
		t.Fatalf("after consuming: %+v", e)
	}
}

// members counts the partitions some consumer of the group holds a live
// lease on.
func TestGroupList_MembersAreLiveLeases(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gl-members"), e2e.Unique(t, "g")
	s.PushN(t, q, "a", 1)
	s.PushN(t, q, "b", 1)
	s.PushN(t, q, "c", 1)
	s.PopOK(t, e2e.PopQueue(q, "consumerGroup", g))
	s.PopOK(t, e2e.PopQueue(q, "consumerGroup", g))
	e := listEntry(t, s, g, q)
	// The first pop met all three partitions: three cursors, two leased,
	// each behind its head until acked.
	if e == nil || e.Partitions != 3 || e.Members != 2 || *e.TotalLag != 3 || e.PartitionsWithLag != 3 {
		t.Fatalf("two leases out of three partitions: %+v", e)
	}
}

// Queue mode is a group of the list like any other, and the subscription
// record of a group that joined with subscriptionMode=new is reported.
func TestGroupList_QueueModeAndSubscription(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gl-qmode"), e2e.Unique(t, "g")
	s.PushN(t, q, "", 2)
	s.PopOK(t, e2e.PopQueue(q))
	s.PopEmpty(t, e2e.PopQueue(q, "consumerGroup", g, "subscriptionMode", "new"))
	qm := listEntry(t, s, e2e.QueueMode, q)
	if qm == nil || qm.Members != 1 || *qm.TotalLag != 2 || qm.SubscriptionMode != nil {
		t.Fatalf("queue mode: %+v", qm)
	}
	e := listEntry(t, s, g, q)
	if e == nil || e.SubscriptionMode == nil || *e.SubscriptionMode != "new" || e.SubscriptionTimestamp == nil ||
		e.SubscriptionCreatedAt == nil || *e.TotalLag != 0 {
		t.Fatalf("new-mode group: %+v", e)
	}
}

// The list is sorted by group then queue, in byte order, and pages with
// limit and offset; out-of-range bounds are 400.
func TestGroupList_SortedAndPaged(t *testing.T) {
	t.Parallel()
	s := shared(t)
	g := e2e.Unique(t, "gl-page")
	var queues []string
	for _, name := range []string{"b", "a", "c"} {
		q := e2e.Unique(t, "gl-page-"+name)
		queues = append(queues, q)
		contact(t, s, q, g)
	}
	sort.Strings(queues)
	s.RefreshStats(t)
	r := s.Get(t, "/api/v1/consumer-groups?limit=10000")
	var list []entry
	decode(t, r, &list)
	var mine []string
	for i, e := range list {
		if i > 0 {
			prev := list[i-1]
			if prev.Name > e.Name || prev.Name == e.Name && prev.QueueName >= e.QueueName {
				t.Fatalf("not sorted at %d: %s/%s then %s/%s", i, prev.Name, prev.QueueName, e.Name, e.QueueName)
			}
		}
		if e.Name == g {
			mine = append(mine, e.QueueName)
		}
	}
	if !slices.Equal(mine, queues) {
		t.Fatalf("group's queues %v, want %v", mine, queues)
	}
	var page []entry
	decode(t, s.Get(t, "/api/v1/consumer-groups?limit=2&offset=1"), &page)
	if len(page) != 2 {
		t.Fatalf("page limit=2 offset=1: %+v", page)
	}
	if r := s.Get(t, "/api/v1/consumer-groups?offset=2147483647"); r.Status != 200 || string(r.Body) != "[]" {
		t.Fatalf("past the end: %d %s", r.Status, r.Body)
	}
	for _, bad := range []string{"limit=0", "limit=10001", "limit=x", "offset=-1"} {
		e2e.WantError(t, s.Get(t, "/api/v1/consumer-groups?"+bad), 400, strings.SplitN(bad, "=", 2)[0])
	}
}

// lagRow is one element of GET /api/v1/consumer-groups/lagging.
type lagRow struct {
	Group     string  `json:"consumer_group"`
	Queue     string  `json:"queue_name"`
	Partition string  `json:"partition_name"`
	PID       string  `json:"partition_id"`
	Worker    *string `json:"worker_id"`
	OffsetLag int64   `json:"offset_lag"`
	TimeLag   int64   `json:"time_lag_seconds"`
	LagHours  float64 `json:"lag_hours"`
	Oldest    *string `json:"oldest_unconsumed_at"`
	Last      *string `json:"last_consumed_at"`
}

func lagging(t *testing.T, s *e2e.Server, query string) []lagRow {
	t.Helper()
	var rows []lagRow
	s.RefreshStats(t)
	decode(t, s.Get(t, "/api/v1/consumer-groups/lagging"+query), &rows)
	return rows
}

// The lagging list holds the cursors whose oldest unconsumed message waited
// at least minLagSeconds (3600 by default), the longest first, with the
// snake_case fields of the reference.
func TestGroupLagging_Threshold(t *testing.T) {
	t.Parallel()
	s := shared(t)
	g := e2e.Unique(t, "glag")
	old, older, fresh := e2e.Unique(t, "glag-old"), e2e.Unique(t, "glag-older"), e2e.Unique(t, "glag-fresh")
	for _, q := range []string{old, older, fresh} {
		contact(t, s, q, g)
		s.PushN(t, q, "", 2)
	}
	age(t, old, 2*time.Hour)
	age(t, older, 3*time.Hour)
	age(t, fresh, 10*time.Minute)
	mine := func(rows []lagRow) []lagRow {
		var out []lagRow
		for _, r := range rows {
			if r.Group == g {
				out = append(out, r)
			}
		}
		return out
	}
	rows := mine(lagging(t, s, "?limit=10000"))
	if len(rows) != 2 || rows[0].Queue != older || rows[1].Queue != old {
		t.Fatalf("default threshold (1 h): %+v", rows)
	}
	r := rows[0]
	if r.Partition != "Default" || !e2e.IsUUID(r.PID) || r.Worker != nil || r.OffsetLag != 2 ||
		r.TimeLag < 3*3600 || r.TimeLag > 3*3600+60 || r.LagHours < 3 || r.LagHours > 3.02 || r.Oldest == nil ||
		r.Last != nil {
		t.Fatalf("row: %+v", r)
	}
	if rows := mine(lagging(t, s, "?minLagSeconds=60&limit=10000")); len(rows) != 3 || rows[2].Queue != fresh {
		t.Fatalf("minLagSeconds=60: %+v", rows)
	}
	if rows := mine(lagging(t, s, "?minLagSeconds=36000&limit=10000")); len(rows) != 0 {
		t.Fatalf("minLagSeconds=36000: %+v", rows)
	}
	// A consumed partition has no lag, however old its messages.
	consume(t, s, older, g)
	if rows := mine(lagging(t, s, "?limit=10000")); len(rows) != 1 || rows[0].Queue != old {
		t.Fatalf("after consuming %s: %+v", older, rows)
	}
	for _, bad := range []string{"minLagSeconds=abc", "minLagSeconds=-1", "limit=0"} {
		e2e.WantError(t, s.Get(t, "/api/v1/consumer-groups/lagging?"+bad), 400, strings.SplitN(bad, "=", 2)[0])
	}
}

// One group is an object keyed by queue name, each with its partitions'
// cursors and lag; an unknown group is 404.
func TestGroupGet_KeyedByQueue(t *testing.T) {
	t.Parallel()
	s := shared(t)
	g := e2e.Unique(t, "gget")
	q1, q2 := e2e.Unique(t, "gget-a"), e2e.Unique(t, "gget-b")
	s.PushN(t, q1, "p1", 2)
	s.PushN(t, q1, "p2", 1)
	s.PushN(t, q2, "", 1)
	p := s.PopOK(t, e2e.PopQueue(q2, "consumerGroup", g))
	s.AckOK(t, p.Messages[0], "completed", g)
	s.PopOK(t, e2e.PopQueue(q1, "consumerGroup", g)) // leases one of q1's partitions
	s.PopOK(t, e2e.PopQueue(q1, "consumerGroup", g)) // and the other
	var got map[string]struct {
		Partitions []struct {
			Partition      string  `json:"partition"`
			WorkerID       *string `json:"workerId"`
			LastConsumedAt *string `json:"lastConsumedAt"`
			TotalConsumed  int64   `json:"totalConsumed"`
			OffsetLag      int64   `json:"offsetLag"`
			TimeLagSeconds int64   `json:"timeLagSeconds"`
			LeaseActive    bool    `json:"leaseActive"`
		} `json:"partitions"`
	}
	decode(t, s.Get(t, groupPath(g, "")), &got)
	if len(got) != 2 || len(got[q1].Partitions) != 2 || len(got[q2].Partitions) != 1 {
		t.Fatalf("queues: %+v", got)
	}
	a, b := got[q1].Partitions[0], got[q1].Partitions[1]
	if a.Partition != "p1" || b.Partition != "p2" || a.OffsetLag != 2 || b.OffsetLag != 1 || !a.LeaseActive ||
		a.WorkerID == nil || !e2e.IsUUID(*a.WorkerID) || a.TotalConsumed != 0 || a.TimeLagSeconds > 60 {
		t.Fatalf("%s: %+v", q1, got[q1])
	}
	c := got[q2].Partitions[0]
	if c.Partition != "Default" || c.OffsetLag != 0 || c.TotalConsumed != 1 || c.LastConsumedAt == nil ||
		c.LeaseActive || c.WorkerID != nil || c.TimeLagSeconds != 0 {
		t.Fatalf("%s: %+v", q2, got[q2])
	}
	// Paged by cursor: the first page holds q1's first partition only.
	var page map[string]json.RawMessage
	decode(t, s.Get(t, groupPath(g, "?limit=1")), &page)
	if len(page) != 1 || page[q1] == nil {
		t.Fatalf("limit=1: %v", page)
	}
	// Past the last page of a known group: {}.
	if r := s.Get(t, groupPath(g, "?offset=10")); r.Status != 200 || string(r.Body) != "{}" {
		t.Fatalf("offset past the end: %d %s", r.Status, r.Body)
	}
	e2e.WantErrorBody(t, s.Get(t, groupPath(e2e.Unique(t, "nobody"), "")), 404)
	e2e.WantError(t, s.Get(t, groupPath(e2e.Unique(t, "nobody"), "")), 404, "consumer group not found")
}

// "lagging" is the lagging route, not a group of that name.
func TestGroupGet_LaggingIsALiteral(t *testing.T) {
	t.Parallel()
	s := shared(t)
	r := s.Get(t, "/api/v1/consumer-groups/lagging?minLagSeconds=999999999")
	if r.Status != 200 || string(r.Body) != "[]" {
		t.Fatalf("lagging: %d %s", r.Status, r.Body)
	}
}

// A queue delete drops the shared figures, as the other operator writes do:
// the group list read right after it no longer shows the deleted queue's
// group (it was cached a moment before).
func TestGroupList_AQueueDeleteDropsTheFigures(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gdel"), e2e.Unique(t, "g")
	s.PushN(t, q, "", 1)
	consume(t, s, q, g)
	if listEntry(t, s, g, q) == nil {
		t.Fatal("the group is not listed before the delete")
	}
	if r := s.Delete(t, "/api/v1/resources/queues/"+q); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	r := s.Get(t, "/api/v1/consumer-groups?limit=10000")
	var list []entry
	r.JSON(t, &list)
	for _, e := range list {
		if e.Name == g {
			t.Fatalf("the group of the deleted queue is still listed: %+v", e)
		}
	}
}
