package grouptest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

type sought struct {
	Success           bool    `json:"success"`
	ConsumerGroup     string  `json:"consumerGroup"`
	QueueName         string  `json:"queueName"`
	SeekToEnd         bool    `json:"seekToEnd"`
	TargetTimestamp   *string `json:"targetTimestamp"`
	PartitionsUpdated int     `json:"partitionsUpdated"`
}

// segmentTime is when the segment holding transaction id tx of queue's
// Default partition was written, as ISO-8601 with microseconds.
func segmentTime(t *testing.T, queue, tx string) string {
	t.Helper()
	var ts string
	err := e2e.DB.QueryRow(`SELECT to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
  FROM queen.queues q JOIN queen.partitions p ON p.queue_id = q.id
  JOIN queen.txids x ON x.partition_id = p.id AND x.transaction_id = $2
  JOIN queen.segments s ON s.partition_id = p.id AND x."offset" BETWEEN s.first_offset AND s.last_offset
 WHERE q.name = $1`, []any{queue, tx}, &ts)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// A seek back replays what the group dead-lettered past its new place too:
// the dead letter stays listed, but no longer hides the message from the
// group, as with the reference server.
func TestGroupSeek_BackReplaysDeadLettered(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gseek-dlq"), e2e.Unique(t, "g")
	start := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	all := s.PushN(t, q, "", 3).TxIDs()
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", g, "batch", "3"))
	e2e.WantTxIDs(t, "first pass", p, all)
	s.AckBatchOK(t, g, e2e.AckItem(p.Messages[0], "completed"), e2e.AckItem(p.Messages[1], "dlq"),
		e2e.AckItem(p.Messages[2], "completed"))
	if got := consume(t, s, q, g); len(got) != 0 {
		t.Fatalf("after the first pass: %v", got)
	}
	var r sought
	decode(t, s.Post(t, seekPath(g, q), map[string]any{"timestamp": start}), &r)
	if !r.Success || r.PartitionsUpdated != 1 {
		t.Fatalf("seek: %+v", r)
	}
	if got := consume(t, s, q, g); !slices.Equal(got, all) {
		t.Fatalf("after the seek back: %v, want %v", got, all)
	}
	pid := e2e.PartitionID(t, q, "Default")
	if dl := e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM queen.dead_letters WHERE partition_id = $1 AND consumer_group = $2`,
		pid, g); dl != 1 {
		t.Fatalf("dead letters after the replay: %d", dl)
	}
}

// Replay: a group that consumed and acked everything, sought back to a
// time before the messages, receives them again in order; sought to the
// time of the first write, it receives the later writes only (segment
// granularity: a segment written at or before the time counts as
// consumed).
func TestGroupSeek_ToTimestampReplays(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gseek-replay"), e2e.Unique(t, "g")
	start := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	first := s.PushN(t, q, "", 3).TxIDs()
	second := s.PushN(t, q, "", 2).TxIDs()
	all := append(slices.Clone(first), second...)
	if got := consume(t, s, q, g); !slices.Equal(got, all) {
		t.Fatalf("first pass: %v", got)
	}
	var r sought
	decode(t, s.Post(t, seekPath(g, q), map[string]any{"timestamp": start}), &r)
	if !r.Success || r.ConsumerGroup != g || r.QueueName != q || r.SeekToEnd || r.TargetTimestamp == nil ||
		r.PartitionsUpdated != 1 {
		t.Fatalf("seek: %+v", r)
	}
	if got := consume(t, s, q, g); !slices.Equal(got, all) {
		t.Fatalf("replay from %s: %v, want %v", start, got, all)
	}
	decode(t, s.Post(t, seekPath(g, q), map[string]any{"timestamp": segmentTime(t, q, first[0])}), &r)
	if got := consume(t, s, q, g); !slices.Equal(got, second) {
		t.Fatalf("replay from the first write: %v, want %v", got, second)
	}
	// A time after everything leaves nothing to consume.
	decode(t, s.Post(t, seekPath(g, q), map[string]any{"timestamp": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}), &r)
	s.PopEmpty(t, e2e.PopQueue(q, "consumerGroup", g))
}

// Seek to the end: the next pop finds nothing, later pushes arrive.
func TestGroupSeek_ToEnd(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gseek-end"), e2e.Unique(t, "g")
	contact(t, s, q, g)
	s.PushN(t, q, "", 4)
	var r sought
	decode(t, s.Post(t, seekPath(g, q), map[string]any{"toEnd": true}), &r)
	if !r.SeekToEnd || r.TargetTimestamp != nil || r.PartitionsUpdated != 1 {
		t.Fatalf("seek: %+v", r)
	}
	s.PopEmpty(t, e2e.PopQueue(q, "consumerGroup", g))
	later := s.PushN(t, q, "", 1).TxIDs()
	if got := consume(t, s, q, g); !slices.Equal(got, later) {
		t.Fatalf("after seek to end: %v, want %v", got, later)
	}
	if e := listEntry(t, s, g, q); e == nil || *e.TotalLag != 0 {
		t.Fatalf("list after: %+v", e)
	}
}

// A seek releases the group's live lease: acks under it fail, and a seek
// back makes the leased messages claimable at once.
func TestGroupSeek_ReleasesLease(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gseek-lease"), e2e.Unique(t, "g")
	want := s.PushN(t, q, "", 3).TxIDs()
	p := s.PopOK(t, e2e.PopQueue(q, "consumerGroup", g, "batch", "3", "leaseSeconds", "300"))
	s.AckOK(t, p.Messages[0], "completed", g)
	pid := e2e.PartitionID(t, q, "Default")
	if c := e2e.ReadCursor(t, pid, g); !c.Live || len(c.Acked) != 0 || c.Committed != 1 {
		t.Fatalf("before seek: %+v", c)
	}
	var r sought
	decode(t, s.Post(t, seekPath(g, q), map[string]any{"timestamp": "2000-01-01T00:00:00Z"}), &r)
	c := e2e.ReadCursor(t, pid, g)
	if c.Live || c.LeaseID != "" || c.LeaseEnd != nil || c.Expires != nil || len(c.Acked) != 0 || c.Committed != 0 {
		t.Fatalf("after seek: %+v", c)
	}
	e2e.WantAckFailure(t, s.AckMessage(t, p.Messages[1], "completed", g), "Invalid or expired lease")
	if got := consume(t, s, q, g); !slices.Equal(got, want) {
		t.Fatalf("after seek: %v, want %v", got, want)
	}
}

// A seek back wakes the group's parked long poll: it delivers the
// replayed messages well before its timeout.
func TestGroupSeek_WakesParkedPop(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gseek-wake"), e2e.Unique(t, "g")
	want := s.PushN(t, q, "", 2).TxIDs()
	consume(t, s, q, g)
	done := make(chan *e2e.PopResult, 1)
	go func() {
		r, err := s.PopCtx(context.Background(), e2e.PopQueue(q, "consumerGroup", g, "batch", "10", "wait", "true",
			"timeout", "20000"))
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	// Wait until a pop is parked (another test's may count too; if the
	// seek comes first, the pop finds the messages at its first claim).
	err := e2e.Eventually(5*time.Second, 20*time.Millisecond, func() error {
		r := s.Get(t, "/metrics/prometheus")
		for line := range strings.Lines(string(r.Body)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "queengo_parked_pops "); ok && v != "0" {
				return nil
			}
		}
		return errors.New("no parked pop")
	})
	if err != nil {
		t.Fatal(err)
	}
	var r sought
	decode(t, s.Post(t, seekPath(g, q), map[string]any{"timestamp": "2000-01-01T00:00:00Z"}), &r)
	select {
	case res := <-done:
		if res == nil || res.Pop == nil || !slices.Equal(res.Pop.TxIDs(), want) {
			t.Fatalf("parked pop: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked pop was not woken by the seek")
	}
}

// Bodies that ask for nothing, or for something malformed, are 400;
// unknown queue or group is 404.
func TestGroupSeek_Refusals(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gseek-bad"), e2e.Unique(t, "g")
	contact(t, s, q, g)
	for _, c := range []struct {
		body any
		want string
	}{
		{nil, "Empty request body"},
		{"", "Empty request body"},
		{"{}", "Must specify either 'toEnd': true or 'timestamp'"},
		{`{"toEnd":false}`, "Must specify either 'toEnd': true or 'timestamp'"},
		{`{"toEnd":null,"timestamp":null}`, "Must specify either 'toEnd': true or 'timestamp'"},
		{`{"toEnd":"yes"}`, "toEnd must be a boolean"},
		{`{"toEnd":1}`, "toEnd must be a boolean"},
		{`{"timestamp":"yesterday"}`, "timestamp"},
		{`{"timestamp":12}`, "timestamp"},
		{`[1]`, "Invalid JSON"},
		{`{"toEnd":`, "Invalid JSON"},
	} {
		r := s.Post(t, seekPath(g, q), c.body)
		if msg := e2e.WantErrorBody(t, r, 400); msg == "" {
			t.Fatalf("%v: empty error", c.body)
		}
		e2e.WantError(t, r, 400, c.want)
	}
	e2e.WantError(t, s.Post(t, seekPath(g, e2e.Unique(t, "noqueue")), `{"toEnd":true}`), 404, "queue not found")
	e2e.WantError(t, s.Post(t, seekPath(e2e.Unique(t, "nobody"), q), `{"toEnd":true}`), 404,
		"consumer group not found")
}

// headTime is when the newest segment of queue/partition was written, as
// the broker reports it (milliseconds).
func headTime(t *testing.T, queue, partition string) string {
	t.Helper()
	var ts string
	err := e2e.DB.QueryRow(`SELECT to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  FROM queen.queues q JOIN queen.partitions p ON p.queue_id = q.id JOIN queen.segments s ON s.partition_id = p.id
 WHERE q.name = $1 AND p.name = $2 ORDER BY s.first_offset DESC LIMIT 1`, []any{queue, partition}, &ts)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

type partitionSought struct {
	Success       bool    `json:"success"`
	ConsumerGroup string  `json:"consumerGroup"`
	QueueName     string  `json:"queueName"`
	PartitionName string  `json:"partitionName"`
	Updated       bool    `json:"updated"`
	CursorMovedTo *string `json:"cursorMovedTo"`
}

func partitionSeekPath(group, queue, partition string) string {
	return groupPath(group, "/queues/"+url.PathEscape(queue)+"/partitions/"+url.PathEscape(partition)+"/seek")
}

// The partition seek moves one partition's cursor to its end, reads no
// body, and reports the time of the partition's newest write; the other
// partitions keep their messages.
func TestGroupSeek_OnePartition(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gseek-part"), e2e.Unique(t, "g")
	s.PushN(t, q, "p1", 2)
	s.PushN(t, q, "p2", 2)
	p := s.PopOK(t, e2e.PopPartition(q, "p1", "consumerGroup", g))
	s.PopOK(t, e2e.PopPartition(q, "p2", "consumerGroup", g)) // a lease on p2, to expire
	var r partitionSought
	decode(t, s.Post(t, partitionSeekPath(g, q, "p1"), nil), &r)
	if !r.Success || r.ConsumerGroup != g || r.QueueName != q || r.PartitionName != "p1" || !r.Updated ||
		r.CursorMovedTo == nil || *r.CursorMovedTo != headTime(t, q, "p1") {
		t.Fatalf("seek: %+v", r)
	}
	e2e.WantAckFailure(t, s.AckMessage(t, p.Messages[0], "completed", g), "Invalid or expired lease")
	s.PopEmpty(t, e2e.PopPartition(q, "p1", "consumerGroup", g))
	if c := e2e.ReadCursor(t, e2e.PartitionID(t, q, "p2"), g); !c.Live || c.Committed != 0 {
		t.Fatalf("p2 cursor: %+v", c)
	}
	// A partition the group never contacted: not updated.
	s.PushN(t, q, "p3", 1)
	decode(t, s.Post(t, partitionSeekPath(g, q, "p3"), `{}`), &r)
	if !r.Success || r.Updated || r.CursorMovedTo != nil {
		t.Fatalf("untouched partition: %+v", r)
	}
	e2e.WantError(t, s.Post(t, partitionSeekPath(g, q, "nope"), nil), 404, "Partition not found")
	e2e.WantError(t, s.Post(t, partitionSeekPath(g, e2e.Unique(t, "noqueue"), "p1"), nil), 404, "queue not found")
	e2e.WantError(t, s.Post(t, partitionSeekPath(e2e.Unique(t, "nobody"), q, "p1"), nil), 404,
		"consumer group not found")
}

// Seeks and deletes racing the group's own pops and acks on every
// partition never fail a request (no deadlock, no 500): they lock cursors
// in the order acks do.
func TestGroupSeek_RacingConsumers(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, g := e2e.Unique(t, "gseek-race"), e2e.Unique(t, "g")
	for _, part := range []string{"a", "b", "c", "d"} {
		s.PushN(t, q, part, 50)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r, err := s.PopCtx(ctx, e2e.PopQueue(q, "consumerGroup", g, "batch", "10"))
				if err != nil || r.Pop == nil {
					if err == nil && r.Status != 204 {
						errs <- fmt.Errorf("pop: %d %s", r.Status, r.Body)
						return
					}
					continue
				}
				items := make([]map[string]any, len(r.Pop.Messages))
				for i, m := range r.Pop.Messages {
					items[i] = e2e.AckItem(m, "completed")
				}
				if _, err := s.AckBatchCtx(ctx, g, items); err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	bodies := []string{`{"timestamp":"2000-01-01T00:00:00Z"}`, `{"toEnd":true}`}
	for i := 0; ctx.Err() == nil; i++ {
		var r *e2e.Response
		var err error
		if i%5 == 4 {
			r, err = s.DoCtx(ctx, "DELETE", groupPath(g, "/queues/"+url.PathEscape(q)), nil)
		} else {
			r, err = s.DoCtx(ctx, "POST", seekPath(g, q), bodies[i%2])
		}
		if err != nil {
			break
		}
		// A delete may find the group gone (404) until its next pop.
		if r.Status != 200 && r.Status != 404 {
			t.Fatalf("admin call %d: %d %s", i, r.Status, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
