package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// stdout is where scenarios print; a variable so tests can capture it.
var stdout = os.Stdout

// ticker prints one progress line per interval.
type ticker struct {
	done chan struct{}
	wg   sync.WaitGroup
}

// progress calls line every --interval with the time since start and since
// the previous line, and prints what it returns. Stop it with stop.
func (e *Env) progress(line func(elapsed, dt time.Duration) string) *ticker {
	t := &ticker{done: make(chan struct{})}
	start := time.Now()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		tk := time.NewTicker(e.C.Interval)
		defer tk.Stop()
		prev := start
		for {
			select {
			case <-t.done:
				return
			case now := <-tk.C:
				s := line(now.Sub(start), now.Sub(prev))
				prev = now
				e.logf("%s", s)
			}
		}
	}()
	return t
}

func (t *ticker) stop() {
	close(t.done)
	t.wg.Wait()
}

// rssNote is the broker-memory suffix of a progress line.
func rssNote(p *Probe) string {
	if rss := p.RSS(); rss > 0 {
		return fmt.Sprintf("  rss=%.0fMB", float64(rss)/(1<<20))
	}
	return ""
}

// cleanup deletes the run's queue unless --keep; cleanup must happen even
// after an interrupt, so it does not use the scenario's context.
func (e *Env) cleanup(t Target) {
	if e.C.Keep {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := t.Cleanup(ctx); err != nil {
		fmt.Fprintf(e.Out, "warning: cleaning up %s: %v\n", t.Name(), err)
	}
}

// joinErr joins two errors, either of which may be nil.
func joinErr(a, b error) error { return errors.Join(a, b) }
