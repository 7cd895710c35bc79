package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo"
)

// TestPush_AnswersAtItsDeadlineWhileTheCommitHangs (issue 8, defect 4): a
// push whose commit does not come back answers queengo.ErrTimeout at its own
// request deadline, even when the store ignores its context (the commit is
// shared by other pushes). The commit may still land later; the push sent
// again with the same transaction id is then stored once, and the writer
// serves new pushes without help.
func TestPush_AnswersAtItsDeadlineWhileTheCommitHangs(t *testing.T) {
	t.Parallel()
	const rt = 150 * time.Millisecond
	f := newFakeStore()
	release := make(chan struct{})
	var hung atomic.Bool
	hung.Store(true)
	f.append = func(context.Context, []queengo.Segment) error {
		if hung.Load() {
			<-release // a frozen database, and a store that does not give up
		}
		return nil
	}
	b := setup(t, Config{Store: f, RequestTimeout: rt}).b

	start := time.Now()
	_, err := b.Push(context.Background(), []queengo.PushItem{pushItem("a")})
	if el := time.Since(start); !errors.Is(err, queengo.ErrTimeout) || el < rt || el > rt+time.Second {
		t.Fatalf("push with a hanging commit: %v after %v, want ErrTimeout after about %v", err, el, rt)
	}
	// A second push to the same partition queues behind the hung commit; it
	// too answers at its own deadline.
	start = time.Now()
	_, err = b.Push(context.Background(), []queengo.PushItem{pushItem("b")})
	if el := time.Since(start); !errors.Is(err, queengo.ErrTimeout) || el > rt+time.Second {
		t.Fatalf("push behind a hanging commit: %v after %v, want ErrTimeout after about %v", err, el, rt)
	}

	// The database comes back: the hung commit lands after all.
	hung.Store(false)
	close(release)
	var res []queengo.PushResult
	eventually(t, func() error {
		if res, err = b.Push(context.Background(), []queengo.PushItem{pushItem("a"), pushItem("b"), pushItem("c")}); err != nil {
			return fmt.Errorf("push after the database came back: %v", err)
		}
		return nil
	})
	for i, r := range res {
		if r.Status == queengo.PushFailed {
			t.Fatalf("item %d after recovery: %+v", i, r)
		}
	}
	if res[0].Status != queengo.PushDuplicate {
		t.Fatalf("re-sent push of a commit that landed late: %+v, want duplicate", res[0])
	}
	for _, tx := range []string{"a", "b", "c"} {
		if n := f.storedCount(tx); n != 1 {
			t.Fatalf("transaction %s stored %d times", tx, n)
		}
	}
}

// TestPush_DatabaseFailureIsTheRequestsError: a commit that fails because
// the database is unavailable or timed out fails the push with that typed
// error (the HTTP layer answers 503), not with per-item results; the next
// commit, once the database answers, succeeds.
func TestPush_DatabaseFailureIsTheRequestsError(t *testing.T) {
	t.Parallel()
	for _, cause := range []error{queengo.ErrTimeout, queengo.ErrPool, queengo.ErrUnavailable} {
		t.Run(cause.Error(), func(t *testing.T) {
			t.Parallel()
			f := newFakeStore()
			var down atomic.Bool
			down.Store(true)
			f.append = func(context.Context, []queengo.Segment) error {
				if down.Load() {
					return fmt.Errorf("error appending segments: %w: boom", cause)
				}
				return nil
			}
			b := setup(t, Config{Store: f, RequestTimeout: 5 * time.Second}).b
			res, err := b.Push(context.Background(), []queengo.PushItem{pushItem("x")})
			if !errors.Is(err, cause) || res != nil {
				t.Fatalf("push while the database is down: %+v %v, want %v", res, err, cause)
			}
			down.Store(false)
			res, err = b.Push(context.Background(), []queengo.PushItem{pushItem("x")})
			if err != nil || res[0].Status != queengo.PushQueued {
				t.Fatalf("push after recovery: %+v %v", res, err)
			}
		})
	}
}
