package jobs

// The tests of the jobs share one vocabulary, the helpers of this file:
//
//   - fixtures: setup (a retention service on a fakeRetentionStore),
//     returning a bundle (s.r the service, s.f the store, s.clock its
//     clock), and setupFigures (a shared[int] whose
//     computations the test releases one by one);
//   - time: fakeClock, which moves only when the test advances it;
//   - waiting: eventually (a condition, polled).
//
// The collector's tests drive Collector.tick by hand on a clock of their
// own and need none of it.

import (
	"sync"
	"testing"
	"time"
)

// bundle is a retention service on a fake store and a fake clock.
type bundle struct {
	r     *Retention
	f     *fakeRetentionStore
	clock *fakeClock
}

// setup makes a retention service with cfg, not started.
func setup(t *testing.T, cfg RetentionConfig) *bundle {
	t.Helper()
	s := &bundle{f: newFakeRetentionStore(), clock: &fakeClock{now: time.Unix(1_700_000_000, 0)}}
	s.r = NewRetention(cfg, s.f.connect, nil)
	s.r.clock = s.clock.Now
	return s
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// Now is the clock's time.
func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// advance moves the clock by d.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// eventually calls cond every millisecond until it returns nil, and fails
// the test with its error when it still does not after 5 s
// (e2e.Eventually's shape).
func eventually(t *testing.T, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
}
