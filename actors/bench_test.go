package actors

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// BenchmarkPush measures the actor side of a one-item push (the Broker, the
// queue actor, the partition writer, the commit pacing) against a store that
// commits at once: what the tree costs per push, without PostgreSQL.
func BenchmarkPush(b *testing.B) {
	for _, parts := range []int{1, 10} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			br := New(Config{Store: newFakeStore(), RequestTimeout: 5 * time.Second})
			defer br.Shutdown()
			defer br.Close()
			var seq atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					item := queengo.PushItem{Queue: "q", Partition: fmt.Sprintf("p%d", n%int64(parts)),
						Frame: queengo.Frame{ID: uuid.New(), TransactionID: fmt.Sprint(n), Payload: []byte("1")}}
					if _, err := br.Push(context.Background(), []queengo.PushItem{item}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkPop measures the actor side of a pop that gets one message: the
// Broker, the queue actor, a claim round against a store that answers at
// once, the ready set.
func BenchmarkPop(b *testing.B) {
	f := newFakeStore()
	f.claim = func(_ context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error) {
		return deliverOwn(claims), nil
	}
	br := New(Config{Store: f, RequestTimeout: 5 * time.Second})
	defer br.Shutdown()
	defer br.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := br.Pop(context.Background(), &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1})
			if err != nil || len(res.Messages) != 1 {
				b.Errorf("pop: %+v %v", res, err)
				return
			}
		}
	})
}

// BenchmarkParkingLot_StaggeredDeadlines measures one long poll's expiry
// and re-park in a lot holding 10,000 parked pops of one key whose deadlines
// are a millisecond apart (clients that connected over ten seconds).
func BenchmarkParkingLot_StaggeredDeadlines(b *testing.B) {
	const n = 10_000
	l := newParkingLot(Backoff{Initial: time.Hour, Threshold: 3, Multiplier: 2, Max: time.Hour}, n)
	for i := range n {
		l.park(longPoll("g", "", time.Duration(i+1)*time.Millisecond), t0)
	}
	now := t0
	var exp []*waiter
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Millisecond)
		_, exp = l.due(now, nil, exp[:0])
		for _, w := range exp {
			w.deadline = now.Add(n * time.Millisecond)
			l.park(w, now)
		}
	}
}

// BenchmarkParkingLot_CancelAll measures taking 10,000 parked pops of one
// key out of the lot as their clients go away, newest first.
func BenchmarkParkingLot_CancelAll(b *testing.B) {
	const n = 10_000
	ws := make([]*waiter, n)
	for i := range ws {
		ws[i] = longPoll("g", "", time.Minute)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l := newParkingLot(testBackoff, n)
		for _, w := range ws {
			l.park(w, t0)
		}
		for j := n - 1; j >= 0; j-- {
			l.remove(ws[j])
		}
	}
}

// BenchmarkParkingLot_PinnedKeys measures what the actor asks of the lot per
// event with 10,000 consumers pinned to 10,000 partitions, one parked pop
// each: a wake of one partition (an ack), the due re-check, the pop parked
// again (its claim found nothing), and the timer's next event.
func BenchmarkParkingLot_PinnedKeys(b *testing.B) {
	const n = 10_000
	l := newParkingLot(Backoff{Initial: time.Hour, Threshold: 3, Multiplier: 2, Max: time.Hour}, n)
	freed := make([][]freedPartition, n)
	for i := range n {
		w := longPoll("g", fmt.Sprintf("p%d", i), 24*time.Hour)
		w.pid = uuid.New()
		freed[i] = []freedPartition{{group: "g", pid: w.pid}}
		l.park(w, t0)
	}
	now := t0
	var re []*waiter
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now = now.Add(time.Microsecond)
		l.wake(now, freed[i%n], nil)
		re, _ = l.due(now, re[:0], nil)
		for _, w := range re {
			l.park(w, now)
		}
		l.next()
	}
}
