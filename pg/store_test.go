package pg_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/pg"
	"github.com/queengo/queengo/pg/pgtest"
)

var testURL string

func TestMain(m *testing.M) {
	db, err := pgtest.Create("pg")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testURL = db.URL
	code := m.Run()
	if err := db.Drop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

func openStore(t *testing.T) *pg.Store {
	t.Helper()
	s, err := pg.Open(context.Background(), pg.Config{URL: testURL, PoolSize: 4, AcquireTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func frame(tx string) queengo.Frame {
	return queengo.Frame{ID: uuid.Must(uuid.NewV7()), TransactionID: tx, Payload: []byte(`{"tx":"` + tx + `"}`)}
}

// TestMigrateConcurrent: two processes starting together must not race.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pg.Open(context.Background(), pg.Config{URL: testURL, PoolSize: 2})
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
	s := openStore(t)
	q, err := s.EnsureQueue(ctx, "pgtest.append")
	if err != nil {
		t.Fatal(err)
	}
	if q.Namespace != "pgtest" || q.Task != "append" || q.Options.LeaseTime != 60 {
		t.Fatalf("implicit queue: %+v", q)
	}
	pid, err := s.EnsurePartition(ctx, q.ID, "p1")
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Append(ctx, []queengo.Segment{{Partition: pid, Frames: []queengo.Frame{frame("a"), frame("b")}}})
	if err != nil || d[0][0] != uuid.Nil || d[0][1] != uuid.Nil {
		t.Fatalf("append: %v %v", d, err)
	}
	d, err = s.Append(ctx, []queengo.Segment{{Partition: pid, Frames: []queengo.Frame{frame("b"), frame("c")}}})
	if err != nil || d[0][0] == uuid.Nil || d[0][1] != uuid.Nil {
		t.Fatalf("append dup: %v %v", d, err)
	}
	lease := uuid.Must(uuid.NewV7())
	res, err := s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: queengo.QueueModeGroup, Batch: 10, LeaseID: lease}})
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
	res, err = s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: queengo.QueueModeGroup, Batch: 10, LeaseID: lease}})
	if err != nil || len(res[0].Messages) != 0 {
		t.Fatalf("leased partition claimed twice: %+v %v", res, err)
	}
}
