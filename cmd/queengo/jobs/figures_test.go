package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// figuresBundle is a shared[int] whose computations the test releases one
// by one: each returns the next number, with the error it was released with.
type figuresBundle struct {
	f       *shared[int]
	clock   *fakeClock
	started chan struct{} // one value per computation started
	release chan error    // lets one computation finish with that error
	n       atomic.Int64  // computations finished
}

// setupFigures makes a figuresBundle: fresh for 1 s, too old after 10 s.
func setupFigures(t *testing.T) *figuresBundle {
	t.Helper()
	r := &figuresBundle{clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}, started: make(chan struct{}, 16),
		release: make(chan error)}
	r.f = &shared[int]{clock: r.clock.Now, fresh: time.Second, maxAge: 10 * time.Second, timeout: time.Minute,
		compute: func(ctx context.Context) (int, error) {
			r.started <- struct{}{}
			err := <-r.release
			return int(r.n.Add(1)), err
		}}
	return r
}

// get reads the figures on its own goroutine; the result arrives on the
// channel.
func (r *figuresBundle) get() chan int {
	out := make(chan int, 1)
	go func() {
		v, _, err := r.f.get(context.Background())
		if err != nil {
			v = -1
		}
		out <- v
	}()
	return out
}

// waitStarted waits for a computation to start.
func (r *figuresBundle) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-r.started:
	case <-time.After(5 * time.Second):
		t.Fatal("no computation started")
	}
}

// noneStarted checks that no computation started since the last wait.
func (r *figuresBundle) noneStarted(t *testing.T) {
	t.Helper()
	select {
	case <-r.started:
		t.Fatal("a computation started")
	default:
	}
}

// wantFigure waits for a read's answer and checks it is v.
func wantFigure(t *testing.T, got chan int, v int) {
	t.Helper()
	select {
	case g := <-got:
		if g != v {
			t.Fatalf("got %d, want %d", g, v)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no answer, want %d", v)
	}
}

// Readers with no figures wait for one computation, which they share; a
// read within fresh gets the same figures without computing.
func TestFigures_FirstReadersShareOneComputation(t *testing.T) {
	r := setupFigures(t)
	a, b := r.get(), r.get()
	r.waitStarted(t)
	r.release <- nil
	wantFigure(t, a, 1)
	wantFigure(t, b, 1)
	r.clock.advance(999 * time.Millisecond)
	wantFigure(t, r.get(), 1)
	r.noneStarted(t)
}

// Past fresh a read answers the old figures at once and starts one
// computation in the background; the next read gets its result.
func TestFigures_StaleReadAnswersAtOnceAndRecomputesOnce(t *testing.T) {
	r := setupFigures(t)
	first := r.get()
	r.waitStarted(t)
	r.release <- nil
	wantFigure(t, first, 1)

	r.clock.advance(2 * time.Second)
	wantFigure(t, r.get(), 1)
	r.waitStarted(t)
	wantFigure(t, r.get(), 1) // the computation is still running: no second one
	r.noneStarted(t)
	r.release <- nil
	eventually(t, func() error {
		if v, _, _ := r.f.get(context.Background()); v != 2 {
			return fmt.Errorf("the background result never arrived (got %d)", v)
		}
		return nil
	})
}

// Past maxAge a read waits for new figures.
func TestFigures_TooOldMakesTheReaderWait(t *testing.T) {
	r := setupFigures(t)
	first := r.get()
	r.waitStarted(t)
	r.release <- nil
	wantFigure(t, first, 1)

	r.clock.advance(10 * time.Second)
	got := r.get()
	r.waitStarted(t)
	select {
	case v := <-got:
		t.Fatalf("answered %d before the computation ended", v)
	default:
	}
	r.release <- nil
	wantFigure(t, got, 2)
}

// After drop the next read computes anew, and a computation started before
// the drop is not kept.
func TestFigures_DropForgetsAndDiscardsTheRunningComputation(t *testing.T) {
	r := setupFigures(t)
	early := r.get()
	r.waitStarted(t)
	r.f.drop()
	late := r.get()
	r.waitStarted(t)
	r.release <- nil // one of the two computations
	r.release <- nil // the other
	a, b := <-early, <-late
	if a == b {
		t.Fatalf("the reader after the drop shared the computation started before it (%d)", a)
	}
	// Only the later computation's result is kept.
	v, _, err := r.f.get(context.Background())
	if err != nil || v != b {
		t.Fatalf("kept %d (%v), want the later reader's %d", v, err, b)
	}
}

// A failed computation is answered to its readers and not kept.
func TestFigures_ErrorIsNotKept(t *testing.T) {
	r := setupFigures(t)
	first := r.get()
	r.waitStarted(t)
	r.release <- errors.New("database down")
	wantFigure(t, first, -1)
	again := r.get()
	r.waitStarted(t)
	r.release <- nil
	wantFigure(t, again, 2)
}
