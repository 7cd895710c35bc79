package streamtest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// Issue 42 "kill -9": a worker runs cycles (a running sum and count per
// source partition in the state, one sink message per source message, the
// ack of the batch) while the broker is killed with SIGKILL and a new one
// starts on the same database; after the stream has drained, every source
// message is reflected exactly once in the sink and in the state.
func TestCycle_ExactlyOnceAcrossKill9(t *testing.T) {
	t.Parallel()
	const parts, perPart, batch = 4, 50, 7
	db := e2e.CreateDB(t, "streamkill")
	opts := e2e.StartOpts{DatabaseURL: db.URL, Process: true}
	first := e2e.StartWith(t, opts)
	src, sink := e2e.Unique(t, "kill-src"), e2e.Unique(t, "kill-sink")
	first.Configure(t, src, map[string]any{"leaseTime": 2})
	for p := range parts {
		first.PushN(t, src, fmt.Sprintf("p%d", p), perPart)
	}
	q := register(t, first, e2e.Unique(t, "kill-q"), src, sink)
	group := "streams-kill"

	var current atomic.Pointer[e2e.Server]
	current.Store(first)
	var committedCycles atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	pop := e2e.PopQueue(src, "consumerGroup", group, "batch", fmt.Sprint(batch), "wait", "false")
	go func() {
		// The worker does what the SDKs' runner does; any failure (the
		// broker gone, a refused cycle) means: pop again.
		for ctx.Err() == nil {
			s := current.Load().WithTimeout(5 * time.Second)
			res, err := s.PopCtx(ctx, pop)
			if err != nil || res.Status != 200 {
				if err == nil && res.Status == 204 {
					// Drained when the group committed every offset (a cycle
					// may have committed with its answer lost in the kill).
					var n int64
					if db.QueryRow(`SELECT coalesce(sum(c.committed), 0) FROM queen.cursors c
  JOIN queen.partitions p ON p.id = c.partition_id JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 AND c.consumer_group = $2`, []any{src, group}, &n) == nil && n == parts*perPart {
						done <- nil
						return
					}
				}
				time.Sleep(50 * time.Millisecond)
				continue
			}
			p := res.Pop
			pid := p.Messages[0].PartitionID
			r, err := s.DoCtx(ctx, "POST", "/streams/v1/state/get", map[string]any{"query_id": q, "partition_id": pid, "keys": []string{"acc"}})
			if err != nil || r.Status != 200 {
				continue
			}
			var st struct {
				Rows []struct {
					Value struct{ Sum, Count float64 } `json:"value"`
				} `json:"rows"`
			}
			if json.Unmarshal(r.Body, &st) != nil {
				continue
			}
			var sum, count float64
			if len(st.Rows) == 1 {
				sum, count = st.Rows[0].Value.Sum, st.Rows[0].Value.Count
			}
			for _, m := range p.Messages {
				sum += m.Data.(map[string]any)["n"].(float64)
				count++
			}
			body := cycleBody(q, p, group, sink, []map[string]any{{"type": "upsert", "key": "acc", "value": map[string]any{"sum": sum, "count": count}}})
			r, err = s.DoCtx(ctx, "POST", "/streams/v1/cycle", body)
			if err == nil && r.Status == 200 {
				committedCycles.Add(1)
			}
		}
	}()

	// Kill the broker mid-stream, then start another on the database.
	if err := e2e.Eventually(60*time.Second, 5*time.Millisecond, func() error {
		if committedCycles.Load() < 8 {
			return fmt.Errorf("%d cycles committed", committedCycles.Load())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	first.Kill()
	current.Store(e2e.StartWith(t, opts))
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatalf("the stream did not drain; %d cycles committed", committedCycles.Load())
	}
	s := current.Load()

	// The sink: every source message exactly once.
	seen := map[string]int{}
	for {
		p := s.Pop(t, e2e.PopQueue(sink, "consumerGroup", "verify", "batch", "1000", "wait", "false", "autoAck", "true"))
		if p == nil {
			break
		}
		for _, m := range p.Messages {
			seen[m.Data.(map[string]any)["src"].(string)]++
		}
	}
	if len(seen) != parts*perPart {
		t.Fatalf("the sink reflects %d distinct source messages, want %d", len(seen), parts*perPart)
	}
	for tx, n := range seen {
		if n != 1 {
			t.Fatalf("source message %s is in the sink %d times", tx, n)
		}
	}
	// The state: each partition's sum and count once over its messages.
	want := float64(perPart * (perPart - 1) / 2)
	for p := range parts {
		var pid string
		if err := db.QueryRow(`SELECT p.id::text FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
 WHERE q.name = $1 AND p.name = $2`, []any{src, fmt.Sprintf("p%d", p)}, &pid); err != nil {
			t.Fatal(err)
		}
		var acc struct{ Sum, Count float64 }
		if err := json.Unmarshal(state(t, s, q, pid)["acc"], &acc); err != nil {
			t.Fatalf("partition p%d: %v", p, err)
		}
		if acc.Sum != want || acc.Count != perPart {
			t.Fatalf("partition p%d: state sum %v count %v, want %v and %d", p, acc.Sum, acc.Count, want, perPart)
		}
	}
}
