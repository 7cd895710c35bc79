package grouptest

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

type deleted struct {
	Success           bool    `json:"success"`
	ConsumerGroup     string  `json:"consumerGroup"`
	QueueName         *string `json:"queueName"`
	DeletedPartitions int     `json:"deletedPartitions"`
	MetadataDeleted   bool    `json:"metadataDeleted"`
}

// subscriptions counts the group's subscription records.
func subscriptions(t *testing.T, group string) int64 {
	t.Helper()
	return e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.subscriptions WHERE consumer_group = $1`, group)
}

// After a delete the group's next pop is a first contact: with no
// subscription record it starts at the oldest retained message, so it
// consumes everything again, in order, what it dead-lettered included (as
// with the reference server). Its attempt counts go with its cursors; its
// dead letters stay listed, and one it dead-letters again resolves its
// offset again.
func TestGroupDelete_ThenReconsume(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q1, q2, g := e2e.Unique(t, "gdel-a"), e2e.Unique(t, "gdel-b"), e2e.Unique(t, "g")
	want1 := s.PushN(t, q1, "", 3).TxIDs()
	want2 := s.PushN(t, q2, "p", 2).TxIDs()
	// One failed delivery (an attempt) and one dead letter on q1 first.
	p := s.PopOK(t, e2e.PopQueue(q1, "consumerGroup", g))
	s.AckOK(t, p.Messages[0], "failed", g)
	// The failed message comes back after the queue's retryDelay (1 s).
	p = s.PopUntil(t, e2e.PopQueue(q1, "consumerGroup", g, "batch", "3"), 5*time.Second, 100*time.Millisecond)
	s.AckOK(t, p.Messages[2], "dlq", g)
	s.AckBatchOK(t, g, e2e.AckItem(p.Messages[0], "completed"), e2e.AckItem(p.Messages[1], "completed"))
	if got := consume(t, s, q2, g); !slices.Equal(got, want2) {
		t.Fatalf("first pass on %s: %v", q2, got)
	}
	pid := e2e.PartitionID(t, q1, "Default")
	if c := e2e.ReadCursor(t, pid, g); c.Failures != 1 {
		t.Fatalf("before delete: %+v", c)
	}
	var d deleted
	decode(t, s.Delete(t, groupPath(g, "?deleteMetadata=true")), &d)
	if !d.Success || d.ConsumerGroup != g || d.DeletedPartitions != 2 || !d.MetadataDeleted || d.QueueName != nil {
		t.Fatalf("delete: %+v", d)
	}
	if c := e2e.ReadCursor(t, pid, g); c.Found || c.Failures != 0 {
		t.Fatalf("cursor after delete: %+v", c)
	}
	dl := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.dead_letters WHERE partition_id = $1 AND consumer_group = $2`, pid, g)
	if dl != 1 {
		t.Fatalf("dead letters after delete: %d", dl)
	}
	e2e.WantError(t, s.Get(t, groupPath(g, "")), 404, "consumer group not found")
	if got := consume(t, s, q1, g); !slices.Equal(got, want1) {
		t.Fatalf("reconsumed %s: %v, want %v", q1, got, want1)
	}
	if got := consume(t, s, q2, g); !slices.Equal(got, want2) {
		t.Fatalf("reconsumed %s: %v, want %v", q2, got, want2)
	}
	// Once more, and this time the group dead-letters the message again:
	// still one dead letter, and the group does not meet it a third time.
	s.Delete(t, groupPath(g, ""))
	p = s.PopOK(t, e2e.PopQueue(q1, "consumerGroup", g, "batch", "3"))
	e2e.WantTxIDs(t, "after the second delete", p, want1)
	s.AckBatchOK(t, g, e2e.AckItem(p.Messages[0], "completed"), e2e.AckItem(p.Messages[1], "completed"),
		e2e.AckItem(p.Messages[2], "dlq"))
	if dl := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.dead_letters
 WHERE partition_id = $1 AND consumer_group = $2 AND resolves`, pid, g); dl != 1 {
		t.Fatalf("dead letters resolving after the second pass: %d", dl)
	}
	if got := consume(t, s, q1, g); len(got) != 0 {
		t.Fatalf("after the second pass %s: %v, want nothing", q1, got)
	}
	// A second delete of a group with nothing left is 404.
	s.Delete(t, groupPath(g, ""))
	e2e.WantError(t, s.Delete(t, groupPath(g, "")), 404, "consumer group not found")
}

// deleteMetadata=false keeps the subscription record, so the group starts
// again where its subscription says; with the record deleted it starts
// from the beginning.
func TestGroupDelete_Metadata(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gdel-meta"), e2e.Unique(t, "g")
	before := s.PushN(t, q, "", 1).TxIDs()
	s.PopEmpty(t, e2e.PopQueue(q, "consumerGroup", g, "subscriptionMode", "new"))
	after := s.PushN(t, q, "", 2).TxIDs()
	if got := consume(t, s, q, g); !slices.Equal(got, after) {
		t.Fatalf("first pass: %v, want %v", got, after)
	}
	var d deleted
	decode(t, s.Delete(t, groupPath(g, "/queues/"+url.PathEscape(q)+"?deleteMetadata=false")), &d)
	if !d.Success || d.DeletedPartitions != 1 || d.MetadataDeleted || d.QueueName == nil || *d.QueueName != q {
		t.Fatalf("delete keeping metadata: %+v", d)
	}
	if n := subscriptions(t, g); n != 1 {
		t.Fatalf("subscription records after deleteMetadata=false: %d", n)
	}
	if e := listEntry(t, s, g, q); e == nil || e.SubscriptionMode == nil || *e.SubscriptionMode != "new" || e.Partitions != 0 {
		t.Fatalf("list keeps the record: %+v", e)
	}
	if got := consume(t, s, q, g); !slices.Equal(got, after) {
		t.Fatalf("after delete keeping the record: %v, want %v", got, after)
	}
	decode(t, s.Delete(t, groupPath(g, "/queues/"+url.PathEscape(q)+"?deleteMetadata=1")), &d)
	if !d.MetadataDeleted || subscriptions(t, g) != 0 {
		t.Fatalf("delete with metadata: %+v, %d records", d, subscriptions(t, g))
	}
	if got := consume(t, s, q, g); !slices.Equal(got, append(before, after...)) {
		t.Fatalf("after delete with the record: %v, want %v", got, append(before, after...))
	}
}

// The per-queue delete leaves the group's cursors on other queues alone.
func TestGroupDelete_OneQueue(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q1, q2, g := e2e.Unique(t, "gdel-one-a"), e2e.Unique(t, "gdel-one-b"), e2e.Unique(t, "g")
	s.PushN(t, q1, "", 1)
	s.PushN(t, q2, "", 1)
	consume(t, s, q1, g)
	consume(t, s, q2, g)
	var d deleted
	decode(t, s.Delete(t, groupPath(g, "/queues/"+url.PathEscape(q1))), &d)
	if d.DeletedPartitions != 1 || !d.MetadataDeleted {
		t.Fatalf("delete: %+v", d)
	}
	if c := e2e.ReadCursor(t, e2e.PartitionID(t, q1, "Default"), g); c.Found {
		t.Fatalf("%s cursor still there", q1)
	}
	if c := e2e.ReadCursor(t, e2e.PartitionID(t, q2, "Default"), g); !c.Found || c.Committed != 1 {
		t.Fatalf("%s cursor: %+v", q2, c)
	}
}

// Unknown group or queue is 404; a deleteMetadata that is no boolean is
// 400, and nothing is deleted.
func TestGroupDelete_Refusals(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gdel-bad"), e2e.Unique(t, "g")
	s.PushN(t, q, "", 1)
	consume(t, s, q, g)
	e2e.WantErrorBody(t, s.Delete(t, groupPath(e2e.Unique(t, "nobody"), "")), 404)
	e2e.WantError(t, s.Delete(t, groupPath(e2e.Unique(t, "nobody"), "/queues/"+url.PathEscape(q))), 404,
		"consumer group not found")
	e2e.WantError(t, s.Delete(t, groupPath(g, "/queues/"+e2e.Unique(t, "noqueue"))), 404, "queue not found")
	for _, v := range []string{"yes", "TRUE", "2"} {
		e2e.WantError(t, s.Delete(t, groupPath(g, "?deleteMetadata="+v)), 400, "deleteMetadata")
	}
	e2e.WantError(t, s.Delete(t, "/api/v1/consumer-groups/bad%00name"), 400, "group")
	if c := e2e.ReadCursor(t, e2e.PartitionID(t, q, "Default"), g); !c.Found {
		t.Fatal("a refused delete deleted the cursor")
	}
}
