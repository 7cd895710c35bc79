package http

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"
)

// Accept backoff: the first retry of a failing Accept waits acceptDelayMin,
// each further one twice as long, up to acceptDelayMax (net/http's values).
// A successful Accept starts over at acceptDelayMin.
const (
	acceptDelayMin = 5 * time.Millisecond
	acceptDelayMax = time.Second
	// acceptLogEvery spaces the warnings of a streak of failing accepts.
	acceptLogEvery = time.Second
)

// retryAccept wraps ln so that its Accept never fails for a reason that
// passes: out of file descriptors (EMFILE, ENFILE), out of socket buffers or
// memory (ENOBUFS, ENOMEM), a connection reset or aborted before it was
// accepted (ECONNABORTED, ECONNRESET) and timeouts. Accept retries those
// itself with a backoff of 5 ms doubling to 1 s, while the pending
// connections wait in the kernel's backlog, and logs a warning at most about
// once a second while the streak lasts, with the number of retries. Any
// other error, net.ErrClosed after Close in particular, is returned as it
// is. fasthttp's Serve would otherwise return on the first of them (it
// retries only timeouts), and the broker would exit.
//
// Close closes ln and ends a backoff wait at once; the Accept in progress
// then returns an error wrapping net.ErrClosed.
func retryAccept(ln net.Listener, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.Default()
	}
	return &retryListener{Listener: ln, log: log, closed: make(chan struct{})}
}

type retryListener struct {
	net.Listener
	log       *slog.Logger
	closed    chan struct{}
	closeOnce sync.Once

	mu      sync.Mutex
	failing bool      // a streak of failed accepts is going on
	since   time.Time // when the streak began
	total   int       // retries in the streak
	unseen  int       // retries not yet reported in a warning
	lastLog time.Time // when the last warning of the streak was logged
}

// Accept returns the next connection, retrying temporary errors; see
// retryAccept.
func (l *retryListener) Accept() (net.Conn, error) {
	delay := time.Duration(0)
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			if delay > 0 {
				l.recovered()
			}
			return c, nil
		}
		if !temporaryAcceptError(err) {
			return nil, err
		}
		delay = nextAcceptDelay(delay)
		l.failed(err, delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-l.closed:
			t.Stop()
			return nil, &net.OpError{Op: "accept", Net: l.Addr().Network(), Addr: l.Addr(), Err: net.ErrClosed}
		}
	}
}

// nextAcceptDelay is the wait before the next retry when the last one waited
// d (0: none yet).
func nextAcceptDelay(d time.Duration) time.Duration {
	if d == 0 {
		return acceptDelayMin
	}
	return min(2*d, acceptDelayMax)
}

// Close closes the listener and wakes an Accept waiting to retry.
func (l *retryListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// failed counts a retry and logs a warning for the first one of a streak,
// then at most once per acceptLogEvery.
func (l *retryListener) failed(err error, delay time.Duration) {
	l.mu.Lock()
	now := time.Now()
	if !l.failing {
		l.failing, l.since, l.total, l.unseen, l.lastLog = true, now, 0, 0, time.Time{}
	}
	l.total++
	l.unseen++
	if !l.lastLog.IsZero() && now.Sub(l.lastLog) < acceptLogEvery {
		l.mu.Unlock()
		return
	}
	retries, total, since := l.unseen, l.total, now.Sub(l.since)
	l.unseen, l.lastLog = 0, now
	l.mu.Unlock()
	l.log.Warn("accepting a connection failed; retrying (raise the file-descriptor limit if it says too many open files)",
		"err", err.Error(), "retries", retries, "retries_total", total, "failing_for", since.String(), "next_in", delay.String())
}

// recovered ends a streak of failed accepts.
func (l *retryListener) recovered() {
	l.mu.Lock()
	if !l.failing {
		l.mu.Unlock()
		return
	}
	total, since := l.total, time.Since(l.since)
	l.failing = false
	l.mu.Unlock()
	l.log.Warn("accepting connections again", "retries_total", total, "failed_for", since.String())
}

// temporaryAcceptError reports whether a failed Accept is worth retrying:
// the process or the system ran out of something that frees up, the peer
// went away before the accept, or a timeout.
func temporaryAcceptError(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.ECONNABORTED, syscall.ECONNRESET} {
		if errors.Is(err, errno) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
