package actors

import (
	"fmt"
	"runtime"
	"testing"
)

// waitIdle waits until exactly n of p's workers wait for work.
func waitIdle(t *testing.T, p *warmPool, n int32) {
	t.Helper()
	eventually(t, func() error {
		if k := p.idle.Load(); k != n {
			return fmt.Errorf("%d workers wait, want %d", k, n)
		}
		return nil
	})
}

func TestWarmPool_AFinishedWorkerRunsTheNextFunction(t *testing.T) {
	p := newWarmPool()
	defer p.close()
	done := make(chan int, 2)
	p.Go(func() { done <- 1 })
	<-done
	waitIdle(t, p, 1)
	p.Go(func() { done <- 2 })
	if got := <-done; got != 2 {
		t.Fatalf("ran %d, want 2", got)
	}
	if n := p.started.Load(); n != 1 {
		t.Fatalf("%d workers started for two functions in turn, want 1", n)
	}
}

func TestWarmPool_AFunctionNeverWaitsForABusyWorker(t *testing.T) {
	p := newWarmPool()
	defer p.close()
	release := make(chan struct{})
	running := make(chan struct{}, 2)
	for range 2 {
		p.Go(func() {
			running <- struct{}{}
			<-release
		})
	}
	<-running
	<-running // both run at once: the second got a worker of its own
	close(release)
	waitIdle(t, p, 2)
	if n := p.started.Load(); n != 2 {
		t.Fatalf("%d workers started, want 2", n)
	}
}

func TestWarmPool_KeepsAtMostWarmIdleMaxWorkers(t *testing.T) {
	p := newWarmPool()
	defer p.close()
	release := make(chan struct{})
	for range warmIdleMax + 10 {
		p.Go(func() { <-release })
	}
	close(release)
	waitIdle(t, p, warmIdleMax)
	for range 100 { // a worker past the cap gets time to (wrongly) wait too
		runtime.Gosched()
	}
	if n := p.idle.Load(); n != warmIdleMax {
		t.Fatalf("%d workers wait, want %d", n, warmIdleMax)
	}
}

func TestWarmPool_CloseLetsTheWaitingWorkersGoAndGoStillRuns(t *testing.T) {
	p := newWarmPool()
	done := make(chan struct{})
	p.Go(func() { done <- struct{}{} })
	<-done
	waitIdle(t, p, 1)
	p.close()
	waitIdle(t, p, 0)
	p.Go(func() { close(done) })
	<-done
	p.close() // twice is harmless
}
