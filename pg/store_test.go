package pg_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/pg"
)

// TestMigrateConcurrent: two processes starting together must not race.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pg.Open(context.Background(), pg.Config{URL: testDB.URL, PoolSize: 2})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			_, err = s.Migrate(context.Background())
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestAppendAndClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, err := b.s.EnsureQueue(ctx, "pgtest.append")
	if err != nil {
		t.Fatal(err)
	}
	if q.Namespace != "pgtest" || q.Task != "append" || q.Options.LeaseTime != 60 {
		t.Fatalf("implicit queue: %+v", q)
	}
	pid, err := b.s.EnsurePartition(ctx, q.ID, "p1")
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.s.Append(ctx, []queengo.Segment{{Partition: pid, Frames: []queengo.Frame{frame("a"), frame("b")}}})
	if err != nil || d[0][0] != uuid.Nil || d[0][1] != uuid.Nil {
		t.Fatalf("append: %v %v", d, err)
	}
	d, err = b.s.Append(ctx, []queengo.Segment{{Partition: pid, Frames: []queengo.Frame{frame("b"), frame("c")}}})
	if err != nil || d[0][0] == uuid.Nil || d[0][1] != uuid.Nil {
		t.Fatalf("append dup: %v %v", d, err)
	}
	lease := uuid.Must(uuid.NewV7())
	res, err := b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: queengo.QueueModeGroup, Batch: 10, LeaseID: lease}})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if len(r.Messages) != 3 || r.Messages[0].TransactionID != "a" || r.Messages[2].TransactionID != "c" || r.Taken != 3 {
		t.Fatalf("claim: %+v", r)
	}
	if string(r.Messages[1].Payload) != `{"tx":"b"}` || r.Messages[0].CreatedAt == "" {
		t.Fatalf("claim payload: %q %q", r.Messages[1].Payload, r.Messages[0].CreatedAt)
	}
	res, err = b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: queengo.QueueModeGroup, Batch: 10, LeaseID: lease}})
	if err != nil || len(res[0].Messages) != 0 {
		t.Fatalf("leased partition claimed twice: %+v %v", res, err)
	}
}

// TestAppend_OneCommitOverSeveralPartitionsKeepsEachSegmentApart: one call
// writes a segment to each of several partitions, of different sizes and one
// of them holding a duplicate; each partition's offsets continue its own
// head, in item order, and every frame comes back whole from its own segment.
func TestAppend_OneCommitOverSeveralPartitionsKeepsEachSegmentApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	q, err := b.s.EnsureQueue(ctx, "pgtest.append-many")
	if err != nil {
		t.Fatal(err)
	}
	var pids []uuid.UUID
	for _, name := range []string{"p1", "p2", "p3"} {
		pids = append(pids, b.partition(t, q, name))
	}
	if _, err := b.s.Append(ctx, []queengo.Segment{{Partition: pids[1], Frames: []queengo.Frame{frame("b0")}}}); err != nil {
		t.Fatal(err)
	}
	d, err := b.s.Append(ctx, []queengo.Segment{
		{Partition: pids[0], Frames: []queengo.Frame{frame("a1"), frame("a2"), frame("a3")}},
		{Partition: pids[1], Frames: []queengo.Frame{frame("b0"), frame("b1"), frame("b2-longer-payload")}},
		{Partition: pids[2], Frames: []queengo.Frame{frame("c1")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d[1][0] == uuid.Nil || d[0][0] != uuid.Nil || d[1][1] != uuid.Nil || d[2][0] != uuid.Nil {
		t.Fatalf("duplicates: %v", d)
	}
	want := map[uuid.UUID][]string{pids[0]: {"a1", "a2", "a3"}, pids[1]: {"b0", "b1", "b2-longer-payload"}, pids[2]: {"c1"}}
	for _, pid := range pids {
		res, err := b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Partition: pid, Group: queengo.QueueModeGroup,
			Batch: 10, LeaseID: uuid.Must(uuid.NewV7())}})
		if err != nil {
			t.Fatal(err)
		}
		msgs := res[0].Messages
		if len(msgs) != len(want[pid]) {
			t.Fatalf("partition %v: %d messages, want %v", pid, len(msgs), want[pid])
		}
		for i, m := range msgs {
			if m.TransactionID != want[pid][i] || m.Offset != int64(i+1) || string(m.Payload) != `{"tx":"`+want[pid][i]+`"}` {
				t.Fatalf("partition %v message %d: %q at %d, %s", pid, i, m.TransactionID, m.Offset, m.Payload)
			}
		}
	}
}

// TestClaim_OneFailingClaimLeavesTheRoundServed (issue 8, defect 3): the
// claims of one round share one pipelined implicit transaction, which a
// failing claim rolls back as a whole. Only the failing claim reports an
// error; the others are served exactly what they would have been served
// alone: nothing is claimed twice (a rolled-back claim re-run finds its
// partition free), nothing is lost.
func TestClaim_OneFailingClaimLeavesTheRoundServed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	for _, tc := range []struct {
		name string
		bad  func(p *queengo.ClaimParams)
	}{
		// Caught by the driver before anything is sent.
		{"encode", func(p *queengo.ClaimParams) { p.LeaseSeconds = 1 << 31 }},
		// Rejected by PostgreSQL in the middle of the pipeline.
		{"server", func(p *queengo.ClaimParams) { p.Group = "bad\x00group" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := b.s.EnsureQueue(ctx, "pgtest.round-"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			b.append(t, segOf(b.partition(t, q, "p1"), "a-"+tc.name, "b-"+tc.name))
			claim := func(group string) queengo.ClaimParams {
				return queengo.ClaimParams{QueueIDs: []uuid.UUID{q.ID}, Group: group, Batch: 10, LeaseID: uuid.Must(uuid.NewV7())}
			}
			round := []queengo.ClaimParams{claim("g1"), claim("g2"), claim("g3"), claim("g4")}
			tc.bad(&round[2])
			res, err := b.s.Claim(ctx, round)
			if err != nil {
				t.Fatalf("the round failed as a whole: %v", err)
			}
			for i, r := range res {
				if i == 2 {
					if r.Err == nil {
						t.Fatalf("the failing claim reported no error: %+v", r)
					}
					continue
				}
				if r.Err != nil || len(r.Messages) != 2 || r.Taken != 2 {
					t.Fatalf("claim %d of the round: %d messages, err %v; want both messages", i, len(r.Messages), r.Err)
				}
			}
			// Each good group holds exactly one lease, its own: a second
			// claim of the group finds nothing.
			for _, g := range []string{"g1", "g2", "g4"} {
				again, err := b.s.Claim(ctx, []queengo.ClaimParams{claim(g)})
				if err != nil || again[0].Err != nil || len(again[0].Messages) != 0 {
					t.Fatalf("group %s claimed again: %+v %v", g, again, err)
				}
			}
		})
	}
}

// TestRequestTimeout_BoundsAStatement (issue 8, defect 4): a statement that
// cannot finish (here: it waits for a row lock another session holds) fails
// with queengo.ErrTimeout at the request deadline, and the store serves the
// next statement.
func TestRequestTimeout_BoundsAStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const rt = 300 * time.Millisecond
	b := setup(t, func(c *pg.Config) { c.PoolSize, c.RequestTimeout = 2, rt })
	if _, err := b.s.EnsureQueue(ctx, "pgtest.locked"); err != nil {
		t.Fatal(err)
	}
	tx, err := b.conn(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM queen.queues WHERE name = 'pgtest.locked' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = b.s.DeleteQueue(ctx, "pgtest.locked")
	if el := time.Since(start); !errors.Is(err, queengo.ErrTimeout) || el > rt+2*time.Second {
		t.Fatalf("delete of a locked queue: %v after %v, want ErrTimeout after about %v", err, el, rt)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if existed, err := b.s.DeleteQueue(ctx, "pgtest.locked"); err != nil || !existed {
		t.Fatalf("delete after the lock was released: %v %v", existed, err)
	}
	if err := b.s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
