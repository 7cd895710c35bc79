package pg_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/pg"
)

// TestCost measures what claims and acks cost PostgreSQL per message: the
// CPU time of the one backend of a store with a pool of one connection
// (/proc/<pid>/schedstat), so other load on the server does not count. It
// drains a pre-filled queue (segments of 100 messages, as the bench's
// pre-fill writes them) in rounds, as a queue actor does: one Claim for a
// round of pops, then the acks of what they got, one Ack per pop (an HTTP
// ack per pop, each its own statement and commit) or one Ack for the round
// (coalesced), each item with its lease and offset as the broker sends
// them. Set QUEENGO_COST=all to run it (or to the number of one
// scenario, from 1); it prints one line per scenario:
//
//	QUEENGO_COST=all go test -count=1 -run TestCost -v ./pg/
func TestCost(t *testing.T) {
	only := os.Getenv("QUEENGO_COST")
	if only == "" {
		t.Skip("set QUEENGO_COST=all to measure what claims and acks cost PostgreSQL")
	}
	for i, sc := range []costScenario{
		{parts: 10, pops: 10, batch: 1, messages: 3000},
		{parts: 10, pops: 10, batch: 1, messages: 3000, coalesce: true},
		{parts: 100, pops: 50, batch: 1, messages: 5000, coalesce: true},
		{parts: 10, pops: 10, batch: 10, messages: 20000, coalesce: true},
		{parts: 10, pops: 4, batch: 100, messages: 40000, coalesce: true},
	} {
		if only == "all" || only == strconv.Itoa(i+1) {
			runCost(t, sc)
		}
	}
}

type costScenario struct {
	parts, pops, batch, messages int
	coalesce                     bool
}

// runCost drains one scenario's queue and prints what it cost.
func runCost(t *testing.T, sc costScenario) {
	ctx := context.Background()
	b := setup(t, func(c *pg.Config) { c.PoolSize = 1 })
	defer b.s.Close() // before the next scenario's: backendPID wants one backend
	q, parts := b.countedQueue(t, make([]int, sc.parts)...)
	payload := []byte(`{"seq":1,"pad":"` + strings.Repeat("x", 80) + `"}`)
	for n := 0; n < sc.messages; {
		var segs []queengo.Segment
		for _, p := range parts {
			k := min(100, sc.messages-n)
			if k == 0 {
				break
			}
			seg := queengo.Segment{Partition: p}
			for range k {
				seg.Frames = append(seg.Frames, queengo.Frame{ID: uuid.Must(uuid.NewV7()), TransactionID: strconv.Itoa(n), Payload: payload})
				n++
			}
			segs = append(segs, seg)
		}
		if _, err := b.s.Append(ctx, segs); err != nil {
			t.Fatal(err)
		}
	}
	pid := b.backendPID(t)

	// The first round is not measured: it plans the statements of the
	// connection's functions.
	var claimNS, ackNS, ackCalls, rounds, got, measured int64
	start := time.Now()
	for got < int64(sc.messages) {
		claims := make([]queengo.ClaimParams, sc.pops)
		for i := range claims {
			claims[i] = queengo.ClaimParams{QueueIDs: []uuid.UUID{q.ID}, Group: queengo.QueueModeGroup, Batch: sc.batch,
				MaxParts: 1, LeaseID: uuid.Must(uuid.NewV7()), Candidates: parts}
		}
		warm := rounds > 0
		c0 := schedNS(t, pid)
		res, err := b.s.Claim(ctx, claims)
		if warm {
			claimNS += schedNS(t, pid) - c0
		}
		rounds++
		if err != nil {
			t.Fatal(err)
		}
		var all []queengo.AckItem
		var perPop [][]queengo.AckItem
		for i, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			var items []queengo.AckItem
			for _, m := range r.Messages {
				items = append(items, queengo.AckItem{PartitionID: m.PartitionID, TransactionID: m.TransactionID,
					Status: "completed", Group: queengo.QueueModeGroup, LeaseID: claims[i].LeaseID, Offset: m.Offset})
			}
			got += int64(len(items))
			if warm {
				measured += int64(len(items))
			}
			all = append(all, items...)
			if len(items) > 0 {
				perPop = append(perPop, items)
			}
		}
		if len(all) == 0 {
			t.Fatalf("round %d claimed nothing with %d of %d messages delivered", rounds, got, sc.messages)
		}
		if sc.coalesce {
			perPop = [][]queengo.AckItem{all}
		}
		for _, items := range perPop {
			c0 := schedNS(t, pid)
			ar, err := b.s.Ack(ctx, items)
			if warm {
				ackNS += schedNS(t, pid) - c0
				ackCalls++
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range ar {
				if !r.Success {
					t.Fatalf("ack %d: %+v", i, r)
				}
			}
		}
	}
	mode := "an Ack per pop"
	if sc.coalesce {
		mode = "an Ack per round"
	}
	t.Logf("%d partitions, %d pops per round, batch %d, %s: %d messages in %d rounds (%.1f per round), %v; "+
		"claim %.1f µs/msg (%.0f µs per round), ack %.1f µs/msg (%.0f µs per call); PostgreSQL CPU %.0f s per million messages",
		sc.parts, sc.pops, sc.batch, mode, got, rounds, float64(got)/float64(rounds), time.Since(start).Round(time.Millisecond),
		float64(claimNS)/1e3/float64(measured), float64(claimNS)/1e3/float64(rounds-1),
		float64(ackNS)/1e3/float64(measured), float64(ackNS)/1e3/float64(ackCalls), float64(claimNS+ackNS)/1e3/float64(measured))
}

// backendPID returns the pid of the store's one backend (application_name
// queengo on the test database).
func (b *bundle) backendPID(t *testing.T) int {
	t.Helper()
	rows, err := b.conn(t).Query(context.Background(), `SELECT pid FROM pg_stat_activity
 WHERE datname = current_database() AND application_name = 'queengo' AND pid <> pg_backend_pid()`)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(pids) != 1 {
		t.Fatalf("want one queengo backend, got %v (%v): run TestCost alone", pids, err)
	}
	return int(pids[0])
}

// schedNS reads how long (ns) a process has run, from /proc/<pid>/schedstat.
func schedNS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.Fields(string(b))[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}
