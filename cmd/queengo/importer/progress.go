package importer

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress follows a run: Phase starts a phase of total items (-1: not
// known in advance), Add counts items done, Done ends the phase. Add may
// be called from another goroutine than Phase and Done.
type Progress interface {
	Phase(name string, total int64)
	Add(n int64)
	Done()
}

// silent is no progress at all.
type silent struct{}

func (silent) Phase(string, int64) {}
func (silent) Add(int64)           {}
func (silent) Done()               {}

// NewBar is a progress bar per phase on w, a terminal: items done, rate and
// time left (github.com/schollz/progressbar/v3, which the CLI's push uses
// too).
func NewBar(w io.Writer) Progress { return &bar{w: w} }

type bar struct {
	w   io.Writer
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

func (b *bar) Phase(name string, total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(b.w), progressbar.OptionSetDescription(name),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true), progressbar.OptionFullWidth(),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }))
}

func (b *bar) Add(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		_ = b.bar.Add64(n)
	}
}

func (b *bar) Done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		_ = b.bar.Finish()
		b.bar = nil
	}
}

// LinesIntervalDefault is how often NewLines reports a phase in progress.
const LinesIntervalDefault = 10 * time.Second

// NewLines is plain progress lines on w, for a log rather than a
// terminal: one when a phase starts, one every interval while it runs
// (done, total, rate, time left) and one when it ends.
func NewLines(w io.Writer, interval time.Duration) Progress {
	return &lines{w: w, every: interval, now: time.Now}
}

type lines struct {
	w     io.Writer
	every time.Duration
	now   func() time.Time

	mu          sync.Mutex
	name        string
	total, done int64
	start, last time.Time
}

func (l *lines) Phase(name string, total int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.name, l.total, l.done = name, total, 0
	l.start = l.now()
	l.last = l.start
	if total >= 0 {
		fmt.Fprintf(l.w, "import: %s: %d to do\n", name, total)
	} else {
		fmt.Fprintf(l.w, "import: %s\n", name)
	}
}

func (l *lines) Add(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done += n
	now := l.now()
	if now.Sub(l.last) < l.every {
		return
	}
	l.last = now
	elapsed := now.Sub(l.start).Seconds()
	rate := float64(l.done) / max(elapsed, 1e-9)
	if l.total > 0 {
		left := time.Duration(float64(l.total-l.done) / max(rate, 1e-9) * float64(time.Second))
		fmt.Fprintf(l.w, "import: %s: %d/%d (%.1f%%), %.0f/s, %s left\n", l.name, l.done, l.total,
			100*float64(l.done)/float64(l.total), rate, left.Round(time.Second))
		return
	}
	fmt.Fprintf(l.w, "import: %s: %d, %.0f/s\n", l.name, l.done, rate)
}

func (l *lines) Done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	elapsed := l.now().Sub(l.start)
	fmt.Fprintf(l.w, "import: %s: done, %d in %s (%.0f/s)\n", l.name, l.done, elapsed.Round(time.Millisecond),
		float64(l.done)/max(elapsed.Seconds(), 1e-9))
}
