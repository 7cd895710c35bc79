package http

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeListener answers Accept from a script; past its end it answers with
// the last entry again (forever: set forever) or blocks until Close.
type fakeListener struct {
	mu      sync.Mutex
	script  []acceptResult
	forever bool
	calls   int
	closed  chan struct{}
	once    sync.Once
}

type acceptResult struct {
	c   net.Conn
	err error
}

func newFake(forever bool, script ...acceptResult) *fakeListener {
	return &fakeListener{script: script, forever: forever, closed: make(chan struct{})}
}

var fakeAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6632}

func closedErr() error {
	return &net.OpError{Op: "accept", Net: "tcp", Addr: fakeAddr, Err: net.ErrClosed}
}

func (f *fakeListener) Accept() (net.Conn, error) {
	f.mu.Lock()
	select {
	case <-f.closed:
		f.mu.Unlock()
		return nil, closedErr()
	default:
	}
	f.calls++
	if len(f.script) > 1 || len(f.script) == 1 && f.forever {
		r := f.script[0]
		if len(f.script) > 1 {
			f.script = f.script[1:]
		}
		f.mu.Unlock()
		return r.c, r.err
	}
	if len(f.script) == 1 {
		r := f.script[0]
		f.script = nil
		f.mu.Unlock()
		return r.c, r.err
	}
	f.mu.Unlock()
	<-f.closed
	return nil, closedErr()
}

func (f *fakeListener) Close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

func (f *fakeListener) Addr() net.Addr { return fakeAddr }

func (f *fakeListener) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// acceptErr is what net.TCPListener.Accept returns when accept4 fails with
// errno.
func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Addr: fakeAddr, Err: os.NewSyscallError("accept4", errno)}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testLogger() (*slog.Logger, *syncBuffer) {
	var buf syncBuffer
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// TestRetryAccept_RetriesTemporaryErrors: accept4 failing with EMFILE (and
// the other errors that pass) is retried with a growing backoff until a
// connection comes; one warning covers the streak and one line its end.
func TestRetryAccept_RetriesTemporaryErrors(t *testing.T) {
	t.Parallel()
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	f := newFake(false,
		acceptResult{err: acceptErr(syscall.EMFILE)},
		acceptResult{err: acceptErr(syscall.EMFILE)},
		acceptResult{err: acceptErr(syscall.ENFILE)},
		acceptResult{err: acceptErr(syscall.ECONNABORTED)},
		acceptResult{err: acceptErr(syscall.ENOBUFS)},
		acceptResult{c: c1})
	log, buf := testLogger()
	ln := retryAccept(f, log)
	start := time.Now()
	c, err := ln.Accept()
	elapsed := time.Since(start)
	if err != nil || c != c1 {
		t.Fatalf("Accept: %v, %v; want the scripted connection", c, err)
	}
	if n := f.Calls(); n != 6 {
		t.Fatalf("%d accept calls, want 6", n)
	}
	// 5 + 10 + 20 + 40 + 80 ms of backoff.
	if elapsed < 155*time.Millisecond || elapsed > 5*time.Second {
		t.Fatalf("Accept took %v, want about 155ms of backoff", elapsed)
	}
	logs := buf.String()
	if n := strings.Count(logs, "accepting a connection failed"); n != 1 {
		t.Fatalf("%d warnings for a 155ms streak, want 1:\n%s", n, logs)
	}
	if !strings.Contains(logs, "too many open files") || !strings.Contains(logs, "accepting connections again") ||
		!strings.Contains(logs, "retries_total=5") {
		t.Fatalf("log lacks the error, the recovery or the retry count:\n%s", logs)
	}
}

// TestRetryAccept_WarnsAboutOncePerSecond: a long streak logs a warning
// about once a second, each with the retries since the last one.
func TestRetryAccept_WarnsAboutOncePerSecond(t *testing.T) {
	t.Parallel()
	f := newFake(true, acceptResult{err: acceptErr(syscall.EMFILE)})
	log, buf := testLogger()
	ln := retryAccept(f, log)
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	// 5+10+...+640 ms is 1.275 s, then one retry a second: by 3.5 s there
	// have been 10 or 11 retries and 3 or 4 warnings.
	select {
	case err := <-done:
		t.Fatalf("Accept returned during the streak: %v", err)
	case <-time.After(3500 * time.Millisecond):
	}
	ln.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
	n := strings.Count(buf.String(), "accepting a connection failed")
	if calls := f.Calls(); calls < 8 || calls > 12 {
		t.Fatalf("%d accept calls in 3.5s, want about 10 (backoff 5ms doubling to 1s)", calls)
	}
	if n < 2 || n > 5 {
		t.Fatalf("%d warnings in 3.5s, want about one a second:\n%s", n, buf.String())
	}
}

// TestRetryAccept_BackoffDoublesToOneSecond: 5 ms, doubling, capped at 1 s.
func TestRetryAccept_BackoffDoublesToOneSecond(t *testing.T) {
	t.Parallel()
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	d := time.Duration(0)
	for i, w := range want {
		d = nextAcceptDelay(d)
		if d != w*time.Millisecond {
			t.Fatalf("retry %d waits %v, want %v", i+1, d, w*time.Millisecond)
		}
	}
}

// TestRetryAccept_ClosedPassesThrough: the error of a closed listener (and
// any other permanent one) is returned unchanged at once, so fasthttp's
// Serve returns on shutdown.
func TestRetryAccept_ClosedPassesThrough(t *testing.T) {
	t.Parallel()
	for _, want := range []error{closedErr(), acceptErr(syscall.EINVAL), errors.New("something else")} {
		f := newFake(false, acceptResult{err: want})
		log, buf := testLogger()
		c, err := retryAccept(f, log).Accept()
		if c != nil || err != want {
			t.Fatalf("Accept: %v, %v; want the listener's own error %v", c, err, want)
		}
		if f.Calls() != 1 || buf.String() != "" {
			t.Fatalf("%v: %d calls, log %q; want one call and no log", want, f.Calls(), buf.String())
		}
	}
}

// TestRetryAccept_CloseEndsBackoff: Close during a backoff wait makes the
// Accept in progress return net.ErrClosed at once.
func TestRetryAccept_CloseEndsBackoff(t *testing.T) {
	t.Parallel()
	f := newFake(true, acceptResult{err: acceptErr(syscall.EMFILE)})
	log, _ := testLogger()
	ln := retryAccept(f, log)
	done := make(chan error, 1)
	go func() { _, err := ln.Accept(); done <- err }()
	deadline := time.Now().Add(5 * time.Second)
	for f.Calls() < 9 { // the 9th retry waits 1 s
		if time.Now().After(deadline) {
			t.Fatalf("only %d accept calls in 5s", f.Calls())
		}
		time.Sleep(5 * time.Millisecond)
	}
	closedAt := time.Now()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept after Close: %v, want net.ErrClosed", err)
		}
		if d := time.Since(closedAt); d > 200*time.Millisecond {
			t.Fatalf("Accept returned %v after Close, want at once", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Accept did not return after Close")
	}
}
