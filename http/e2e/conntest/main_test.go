// Package conntest holds the black-box tests of the broker's connection
// handling (docs/operations.md): it keeps running when it runs out of file
// descriptors, and it closes connections that are slow to send a request
// (HTTP_READ_TIMEOUT_MS) without cutting long polls or kept-alive
// connections. Every test is named after the rule it checks and starts a
// broker of its own, talking raw TCP to it on loopback where the connection
// matters.
package conntest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "conn") }

// readTimeout is the HTTP_READ_TIMEOUT_MS of the brokers of the read-timeout
// tests; margin is how much later than it a connection may close on a busy
// 2-core machine running a -race build.
const (
	readTimeout = time.Second
	margin      = 4 * time.Second
)

// startShortTimeout starts a broker with HTTP_READ_TIMEOUT_MS = d.
func startShortTimeout(t *testing.T, d time.Duration) *e2e.Server {
	t.Helper()
	return e2e.StartWith(t, e2e.StartOpts{Env: []string{"HTTP_READ_TIMEOUT_MS=" + strconv.FormatInt(d.Milliseconds(), 10)}})
}

// closed is how a connection ended, seen from the client.
type closed struct {
	got     []byte        // what the broker sent before closing
	elapsed time.Duration // from start to the end of the stream
	err     error         // nil: the broker closed it (EOF or reset); else why it did not within the wait
}

// awaitClose reads c until the broker closes it, for at most wait from start.
func awaitClose(c net.Conn, start time.Time, wait time.Duration) closed {
	_ = c.SetReadDeadline(start.Add(wait))
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err == nil {
			continue
		}
		r := closed{got: got, elapsed: time.Since(start)}
		if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
			r.err = fmt.Errorf("connection still open after %v (%v)", r.elapsed, err)
		}
		return r
	}
}

// checkClosedWithin fails the test unless the broker closed the connection
// no earlier than lo and no later than hi after start, answering at most an
// HTTP 408 before it did.
func checkClosedWithin(t *testing.T, r closed, lo, hi time.Duration) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%v; received %q", r.err, r.got)
	}
	t.Logf("closed by the broker after %v; received %q", r.elapsed, r.got)
	if r.elapsed < lo || r.elapsed > hi {
		t.Fatalf("closed after %v, want between %v and %v", r.elapsed, lo, hi)
	}
	if len(r.got) > 0 && !strings.HasPrefix(string(r.got), "HTTP/1.1 408 ") {
		t.Fatalf("the broker answered %q, want nothing or a 408", r.got)
	}
}

// exchange writes a raw request on c and reads one response.
func exchange(c net.Conn, br *bufio.Reader, request string, wait time.Duration) (*http.Response, []byte, error) {
	_ = c.SetDeadline(time.Now().Add(wait))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, request); err != nil {
		return nil, nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

// get is a raw GET request on a kept-alive connection.
func get(path string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
}

// parkedPops reads the queengo_parked_pops gauge of the broker.
func parkedPops(t testing.TB, s *e2e.Server) int {
	t.Helper()
	r := s.Get(t, "/metrics/prometheus")
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, "queengo_parked_pops "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("queengo_parked_pops %q", v)
			}
			return n
		}
	}
	t.Fatalf("no queengo_parked_pops in /metrics/prometheus: %d %q", r.Status, r.Body)
	return 0
}

// waitParked polls the parked pops until there are n, for at most d.
func waitParked(t testing.TB, s *e2e.Server, n int, d time.Duration) bool {
	t.Helper()
	return e2e.Eventually(d, 20*time.Millisecond, func() error {
		if got := parkedPops(t, s); got != n {
			return fmt.Errorf("%d parked pops", got)
		}
		return nil
	}) == nil
}

// waitUnparked polls the parked pops until none has been parked for hold,
// for at most d; it returns when the gauge went to 0 for good.
func waitUnparked(t testing.TB, s *e2e.Server, hold, d time.Duration) (time.Time, bool) {
	t.Helper()
	var since time.Time
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		n := parkedPops(t, s)
		now := time.Now()
		switch {
		case n != 0:
			since = time.Time{}
		case since.IsZero():
			since = now
		case now.Sub(since) >= hold:
			return since, true
		}
		if now.After(deadline) {
			return time.Time{}, false
		}
	}
}
