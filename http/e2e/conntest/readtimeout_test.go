package conntest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// TestConn_SilentConnectionClosedAfterReadTimeout: a connection that never
// sends a byte is closed once the read timeout has passed since it opened.
func TestConn_SilentConnectionClosedAfterReadTimeout(t *testing.T) {
	t.Parallel()
	s := startShortTimeout(t, readTimeout)
	start := time.Now()
	c := s.Dial(t)
	r := awaitClose(c, start, readTimeout+margin+5*time.Second)
	checkClosedWithin(t, r, readTimeout*9/10, readTimeout+margin)
}

// TestConn_SlowlorisClosedAfterReadTimeout: a client that trickles its
// headers, one line a second, is closed once the read timeout has passed
// since the connection opened, however steadily it keeps sending.
func TestConn_SlowlorisClosedAfterReadTimeout(t *testing.T) {
	t.Parallel()
	const timeout = 2 * readTimeout
	s := startShortTimeout(t, timeout)
	start := time.Now()
	c := s.Dial(t)
	stop := make(chan struct{})
	sent := make(chan int, 1)
	go func() {
		lines := 0
		defer func() { sent <- lines }()
		if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"); err != nil {
			return
		}
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for lines < 30 { // bounded: 30 s, far past the bound checked below
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := fmt.Fprintf(c, "X-Slow-%d: still here\r\n", lines); err != nil {
				return
			}
			lines++
		}
	}()
	r := awaitClose(c, start, timeout+margin+5*time.Second)
	close(stop)
	n := <-sent
	t.Logf("the client sent %d header lines after the request line", n)
	checkClosedWithin(t, r, timeout*9/10, timeout+margin)
	if n < 1 {
		t.Fatalf("the client sent only %d header lines: not a slowloris", n)
	}
}

// TestConn_ShortBodyClosedAfterReadTimeout: a request whose body is shorter
// than its Content-Length is closed once the read timeout has passed; the
// incomplete push is not applied and the push accepted before it is intact.
func TestConn_ShortBodyClosedAfterReadTimeout(t *testing.T) {
	t.Parallel()
	s := startShortTimeout(t, readTimeout)
	q := e2e.Unique(t, "short")
	if res := s.Push(t, e2e.PushItem{Queue: q, TransactionID: "whole", Payload: map[string]any{"n": 1}}); res[0].Status != "queued" {
		t.Fatalf("push: %+v", res[0])
	}
	body, _ := json.Marshal(map[string]any{"items": []e2e.PushItem{{Queue: q, TransactionID: "cut", Payload: map[string]any{"n": 2}}}})
	start := time.Now()
	c := s.Dial(t)
	req := fmt.Sprintf("POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		len(body)+100, body)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	r := awaitClose(c, start, readTimeout+margin+5*time.Second)
	checkClosedWithin(t, r, readTimeout*9/10, readTimeout+margin)

	p := s.Pop(t, e2e.PopQueue(q, "consumerGroup", "g", "batch", "10"))
	if p == nil || len(p.Messages) != 1 || p.Messages[0].TransactionID != "whole" {
		t.Fatalf("pop after the cut push: %+v, want exactly the message pushed whole", p)
	}
}

// TestConn_LongPollOutlivesReadTimeout: a long poll parked longer than the
// read timeout is answered normally, with 204 at its own timeout or with a
// message pushed while it waits; it has sent its request and the read
// timeout does not cut it. The connection then serves a further request.
func TestConn_LongPollOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	s := startShortTimeout(t, readTimeout)
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		q := e2e.Unique(t, "lp-empty")
		s.Configure(t, q, nil)
		c := s.Dial(t)
		br := bufio.NewReader(c)
		start := time.Now()
		// The first request of a new connection: the read deadline was set
		// when it opened.
		resp, body, err := exchange(c, br, get(e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "3000")), 20*time.Second)
		elapsed := time.Since(start)
		if err != nil {
			t.Fatalf("long poll cut after %v: %v", elapsed, err)
		}
		if resp.StatusCode != 204 || len(body) != 0 || elapsed < 3*time.Second {
			t.Fatalf("long poll: %d %q after %v, want a bare 204 after its 3s timeout", resp.StatusCode, body, elapsed)
		}
		resp, body, err = exchange(c, br, get("/health"), 10*time.Second)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("next request on the connection: %v %v %q", err, resp, body)
		}
	})
	t.Run("push", func(t *testing.T) {
		t.Parallel()
		q := e2e.Unique(t, "lp-push")
		s.Configure(t, q, nil)
		c := s.Dial(t)
		br := bufio.NewReader(c)
		start := time.Now()
		type answer struct {
			status int
			body   []byte
			err    error
			at     time.Time
		}
		ch := make(chan answer, 1)
		go func() {
			resp, body, err := exchange(c, br, get(e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "10000")), 30*time.Second)
			a := answer{body: body, err: err, at: time.Now()}
			if resp != nil {
				a.status = resp.StatusCode
			}
			ch <- a
		}()
		// Past the read timeout, well before the poll's own.
		select {
		case a := <-ch:
			t.Fatalf("long poll answered before the push, after %v: %d %q %v", a.at.Sub(start), a.status, a.body, a.err)
		case <-time.After(2 * readTimeout):
		}
		s.Push(t, e2e.PushItem{Queue: q, TransactionID: "late", Payload: map[string]any{"n": 1}})
		pushed := time.Now()
		var a answer
		select {
		case a = <-ch:
		case <-time.After(15 * time.Second):
			t.Fatal("long poll not answered within 15s of the push")
		}
		if a.err != nil {
			t.Fatalf("long poll cut after %v: %v", a.at.Sub(start), a.err)
		}
		var p e2e.PopResponse
		if a.status != 200 || json.Unmarshal(a.body, &p) != nil || len(p.Messages) != 1 || p.Messages[0].TransactionID != "late" {
			t.Fatalf("long poll: %d %q, want 200 with the pushed message", a.status, a.body)
		}
		t.Logf("answered %v after the push, %v after it parked", a.at.Sub(pushed), a.at.Sub(start))
	})
}

// TestConn_KeepAliveGapLongerThanReadTimeout: a kept-alive connection may
// stay quiet between two requests for longer than the read timeout (up to
// the idle timeout, 2 minutes): the read timeout counts from the first byte
// of each request.
func TestConn_KeepAliveGapLongerThanReadTimeout(t *testing.T) {
	t.Parallel()
	s := startShortTimeout(t, readTimeout)
	c := s.Dial(t)
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		if i > 0 {
			// The gap under test: longer than the read timeout.
			time.Sleep(readTimeout * 5 / 2)
		}
		resp, body, err := exchange(c, br, get("/health"), 10*time.Second)
		if err != nil {
			t.Fatalf("request %d on the connection: %v", i+1, err)
		}
		if resp.StatusCode != 200 || !strings.Contains(string(body), "{") {
			t.Fatalf("request %d: %d %q", i+1, resp.StatusCode, body)
		}
	}
}

// TestConn_LongPollHangUpDetectedAfterReadTimeout: a client that hangs up a
// long poll parked for longer than the read timeout is noticed, as before
// the read timeout passed: its pop leaves the park at once (not at its own
// timeout), and a message pushed afterwards goes to the next consumer, not
// to the client that left.
func TestConn_LongPollHangUpDetectedAfterReadTimeout(t *testing.T) {
	t.Parallel()
	s := startShortTimeout(t, readTimeout)
	q := e2e.Unique(t, "lp-gone")
	s.Configure(t, q, nil)
	start := time.Now()
	c := s.Dial(t)
	if _, err := io.WriteString(c, get(e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "30000"))); err != nil {
		t.Fatal(err)
	}
	if !waitParked(t, s, 1, 10*time.Second) {
		t.Fatalf("the pop did not park within 10s (queengo_parked_pops %d)", parkedPops(t, s))
	}
	// Hang up once the read timeout has passed since the connection opened.
	time.Sleep(time.Until(start.Add(2 * readTimeout)))
	c.Close()
	closedAt := time.Now()
	// A parked pop leaves the park for a moment at each re-check (at most a
	// second apart), so the hang-up is noticed when the gauge stays 0 for
	// longer than that.
	noticed, ok := waitUnparked(t, s, 1500*time.Millisecond, margin+1500*time.Millisecond)
	if !ok {
		t.Fatalf("the pop of the client that hung up is still parked %v later", time.Since(closedAt))
	}
	t.Logf("the hang-up was noticed within %v", noticed.Sub(closedAt))
	s.Push(t, e2e.PushItem{Queue: q, TransactionID: "after", Payload: map[string]any{"n": 1}})
	p := s.Pop(t, e2e.PopQueue(q, "consumerGroup", "g"))
	if p == nil || len(p.Messages) != 1 || p.Messages[0].TransactionID != "after" {
		t.Fatalf("pop after the hang-up: %+v, want the message pushed after it", p)
	}
}
