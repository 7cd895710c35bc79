package retentiontest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

const evictedReason = "Evicted: not consumed within maxWaitTimeSeconds"

// D9, the Queen JS SDK's retentionTestMaxTime with shorter times:
// maxWaitTimeSeconds 1, messages pushed and never consumed. Past the limit a
// pop finds none: they were dead-lettered for queue mode (nobody else
// consumes the queue) with a reason, not deleted; the segments stay.
func TestEviction_MaxWaitDeadLettersUnconsumedMessages(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "maxwait")
	s.Configure(t, q, map[string]any{"retentionEnabled": true, "maxWaitTimeSeconds": 1})
	pushEach(t, s, q, "", 20)
	waitFor(t, 15*time.Second, "messages evicted", func() error {
		if n := deadLetters(t, q, e2e.QueueMode, evictedReason); n != 20 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
	if p := s.Pop(t, e2e.PopQueue(q, "batch", "100", "wait", "false")); p != nil {
		t.Fatalf("pop after eviction delivered %d messages", len(p.Messages))
	}
	if c := e2e.QueueCounts(t, q); c.Segments != 20 {
		t.Fatalf("eviction deleted segments: %+v", c)
	}
	// The DLQ route shows them, payload and reason included.
	r := s.Get(t, "/api/v1/dlq"+e2e.Query("queue", q, "limit", "100"))
	var dlq struct {
		Messages []struct {
			ConsumerGroup string         `json:"consumerGroup"`
			ErrorMessage  string         `json:"errorMessage"`
			Data          map[string]any `json:"data"`
		} `json:"messages"`
	}
	r.JSON(t, &dlq)
	if r.Status != 200 || len(dlq.Messages) != 20 {
		t.Fatalf("dlq: %d with %d messages", r.Status, len(dlq.Messages))
	}
	if m := dlq.Messages[0]; !strings.HasPrefix(m.ErrorMessage, evictedReason) || m.Data["tx"] == nil {
		t.Fatalf("dead letter %+v", m)
	}
}

// D9: eviction is per group. A group that consumes promptly loses nothing;
// a group that stopped consuming has what waited too long dead-lettered and
// its cursor moved past it; a young message stays pending for both.
func TestEviction_IsPerGroup(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "maxwait-groups")
	// 4 s: the prompt group's pops, and both groups' pops of the young
	// message, each come a few requests after the push, which a loaded
	// machine may stretch past 2 s.
	s.Configure(t, q, map[string]any{"maxWaitTimeSeconds": 4})
	pushEach(t, s, q, "", 5)
	for _, g := range []string{"prompt", "stalled"} {
		p := s.PopOK(t, e2e.PopQueue(q, "batch", "1", "consumerGroup", g))
		s.AckOK(t, p.Messages[0], "completed", g)
	}
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "10", "consumerGroup", "prompt"))
	for _, m := range p.Messages {
		s.AckOK(t, m, "completed", "prompt")
	}
	waitFor(t, 15*time.Second, "the stalled group's messages evicted", func() error {
		if n := deadLetters(t, q, "stalled", evictedReason); n != 4 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
	young := s.PushN(t, q, "", 1)[0].Tx
	if n := deadLetters(t, q, "prompt", ""); n != 0 {
		t.Fatalf("the prompt group has %d dead letters", n)
	}
	pid := e2e.PartitionID(t, q, "Default")
	if c := e2e.ReadCursor(t, pid, "stalled"); c.Committed != 5 {
		t.Fatalf("stalled group's cursor at %d, want 5 (past the evicted messages)", c.Committed)
	}
	for _, g := range []string{"prompt", "stalled"} {
		p := s.PopOK(t, e2e.PopQueue(q, "batch", "10", "consumerGroup", g))
		if len(p.Messages) != 1 || p.Messages[0].TransactionID != young {
			t.Fatalf("group %s got %v, want only the young message", g, p.TxIDs())
		}
	}
}

// D9: maxWaitTimeSeconds bounds a message's age for every group, also one
// that first meets the partition after the queue-mode consumers had the
// messages evicted: its first pop (subscriptionMode=all, which starts at the
// oldest retained message) delivers none of them, and each goes to the
// dead-letter queue once for it, with the eviction's reason.
func TestD9_MaxWaitBoundsAgeForAGroupThatComesLater(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "maxwait-late")
	s.Configure(t, q, map[string]any{"maxWaitTimeSeconds": 1})
	pushEach(t, s, q, "", 20)
	waitFor(t, 15*time.Second, "messages evicted for queue mode", func() error {
		if n := deadLetters(t, q, e2e.QueueMode, evictedReason); n != 20 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
	if p := s.Pop(t, e2e.PopQueue(q, "batch", "100", "consumerGroup", "late", "subscriptionMode", "all")); p != nil {
		t.Fatalf("a group created later got %d messages older than maxWaitTimeSeconds", len(p.Messages))
	}
	if n := deadLetters(t, q, "late", evictedReason); n != 20 {
		t.Fatalf("the late group has %d dead letters, want the 20 messages once each", n)
	}
	// Its cursor is past them: what comes now is delivered.
	young := s.PushN(t, q, "", 1)[0].Tx
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "100", "consumerGroup", "late"))
	if len(p.Messages) != 1 || p.Messages[0].TransactionID != young {
		t.Fatalf("the late group got %v, want only the young message", p.TxIDs())
	}
	if n := deadLetters(t, q, "late", evictedReason); n != 20 {
		t.Fatalf("the late group's dead letters grew to %d", n)
	}
}

// D9 and D10: a deleted message is resolved, not waiting, so eviction never
// dead-letters it; segment retention drops its tombstone with its segment.
func TestEviction_SkipsDeletedMessages(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "maxwait-deleted")
	s.Configure(t, q, map[string]any{"retentionEnabled": true, "maxWaitTimeSeconds": 1})
	txs := pushEach(t, s, q, "", 3)
	pid := e2e.PartitionID(t, q, "Default")
	if r := s.Delete(t, "/api/v1/messages/"+pid+"/"+txs[1]); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	waitFor(t, 15*time.Second, "messages evicted", func() error {
		if n := deadLetters(t, q, e2e.QueueMode, evictedReason); n != 2 {
			return fmt.Errorf("%d dead letters", n)
		}
		return nil
	})
	s.Configure(t, q, map[string]any{"retentionEnabled": true, "retentionSeconds": 1})
	waitFor(t, 20*time.Second, "segments and the tombstone dropped", func() error {
		c := e2e.QueueCounts(t, q)
		tomb := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.tombstones WHERE partition_id = $1`, pid)
		if c.Segments != 0 || tomb != 0 {
			return fmt.Errorf("%d segments, %d tombstones", c.Segments, tomb)
		}
		return nil
	})
}
