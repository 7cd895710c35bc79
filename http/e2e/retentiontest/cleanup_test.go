package retentiontest

import (
	"fmt"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// PARTITION_CLEANUP_DAYS (30 by default): a partition without segments and
// without activity for that long goes, with its cursors; a recent empty
// partition and an old one that still holds messages stay. Ages are set in
// the database.
func TestPartitionCleanup_RemovesIdleEmptyPartitions(t *testing.T) {
	t.Parallel()
	s := shared(t)
	idle, recent, full := e2e.Unique(t, "idle"), e2e.Unique(t, "recent"), e2e.Unique(t, "full")
	s.Configure(t, idle, nil)
	s.Configure(t, recent, nil)
	s.PushN(t, full, "", 1)
	s.PopEmpty(t, e2e.PopQueue(idle, "consumerGroup", "g"))
	if err := e2e.DB.Exec(`UPDATE queen.partitions p SET created_at = now() - interval '40 days',
last_write_at = CASE WHEN last_write_at IS NULL THEN NULL ELSE now() - interval '40 days' END
FROM queen.queues q WHERE q.id = p.queue_id AND q.name IN ($1, $2)`, idle, full); err != nil {
		t.Fatal(err)
	}
	if err := e2e.DB.Exec(`UPDATE queen.cursors c SET created_at = now() - interval '40 days', last_consumed_at = NULL
FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE p.id = c.partition_id AND q.name = $1`, idle); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the idle partition removed", func() error {
		if c := e2e.QueueCounts(t, idle); c.Partitions != 0 || c.Cursors != 0 {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
	if c := e2e.QueueCounts(t, idle); c.Queues != 1 {
		t.Fatal("the queue of the removed partition went too")
	}
	for _, q := range []string{recent, full} {
		if c := e2e.QueueCounts(t, q); c.Partitions != 1 {
			t.Fatalf("%s lost its partition: %+v", q, c)
		}
	}
	// A push recreates it.
	if r := s.PushN(t, idle, "", 1); r[0].PartitionID == "" {
		t.Fatal("no partition after a push")
	}
}
