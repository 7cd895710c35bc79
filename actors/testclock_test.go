package actors

import (
	"slices"
	"sync"
	"time"
)

// testClock is the actors' clock (deps.clock) in tests: it moves only when
// the test advances it.
type testClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*testTimer
	armed  chan struct{} // a timer was armed
}

type testTimer struct {
	c     *testClock
	at    time.Time
	f     func()
	armed bool
}

func newTestClock() *testClock { return &testClock{now: t0, armed: make(chan struct{}, 1024)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) AfterFunc(d time.Duration, f func()) timer {
	t := &testTimer{c: c, f: f}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	t.Reset(d)
	return t
}

func (t *testTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	was := t.armed
	t.at, t.armed = t.c.now.Add(d), true
	t.c.mu.Unlock()
	select {
	case t.c.armed <- struct{}{}:
	default:
	}
	return was
}

func (t *testTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

// Advance moves the clock by d and runs, in time order, every timer due by
// then.
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*testTimer
	for _, t := range c.timers {
		if t.armed && !t.at.After(c.now) {
			t.armed = false
			due = append(due, t)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(due, func(a, b *testTimer) int { return a.at.Compare(b.at) })
	for _, t := range due {
		t.f()
	}
}
