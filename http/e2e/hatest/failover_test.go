package hatest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// ha is one failover run: a primary, its streaming standby, a broker on
// both hosts, producers and consumers.
type ha struct {
	primary, standby *e2e.Cluster
	s                *e2e.Server
	queue            string

	mu        sync.Mutex
	accepted  map[string]string // txid -> the push item's status (queued, buffered, duplicate)
	delivered map[string]bool
	refused   int // pushes not accepted (503 without a buffer, transport errors)
	stop      chan struct{}
	wg        sync.WaitGroup
	popErrors atomic.Int64
}

// startHA builds the pair (synchronous replication when sync) and a broker
// on the URL form the HA guides give, with a push buffer.
func startHA(t *testing.T, sync bool) *ha {
	t.Helper()
	extra := ""
	if sync {
		extra = "synchronous_standby_names = 'standby'\nsynchronous_commit = on\n"
	}
	h := &ha{accepted: map[string]string{}, delivered: map[string]bool{}, stop: make(chan struct{})}
	h.primary = e2e.NewPrimary(t, extra)
	h.standby = e2e.NewStandby(t, h.primary, "")
	if sync {
		// Commits wait for the standby from here on: make sure it is the
		// synchronous one before the broker writes.
		db := h.primary.DB(t, "postgres")
		if err := e2e.Eventually(30*time.Second, 50*time.Millisecond, func() error {
			var state string
			err := db.QueryRow(`SELECT coalesce((SELECT sync_state FROM pg_stat_replication
 WHERE application_name = 'standby'), '')`, nil, &state)
			if err == nil && state != "sync" {
				err = fmt.Errorf("standby is %q", state)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// No sslmode (the loopback case that used to drop the second host).
	url := "postgres://postgres@" + h.primary.HostPort() + "," + h.standby.HostPort() +
		"/postgres?target_session_attrs=read-write"
	h.s = e2e.StartWith(t, e2e.StartOpts{DatabaseURL: url, Env: []string{
		"FILE_BUFFER_DIR=" + t.TempDir(), "DB_REQUEST_TIMEOUT_MS=2000", "DB_POOL_ACQUIRE_TIMEOUT_MS=2000",
		"METRICS_SAMPLE_INTERVAL_MS=500", "RETENTION_INTERVAL=1000", "EVICTION_INTERVAL=1000", "LOG_LEVEL=info"}})
	h.queue = e2e.Unique(t, "ha")
	// A short lease: a message whose ack the failover lost comes again.
	h.s.Configure(t, h.queue, map[string]any{"leaseTime": 3})
	return h
}

// produce pushes one message at a time, in a loop, until stop; each
// accepted push (201) is recorded with its item's status.
func (h *ha) produce(name string) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-h.stop:
				return
			default:
			}
			tx := fmt.Sprintf("%s-%d", name, i)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			st, res, err := h.s.PushCtx(ctx, e2e.PushItem{Queue: h.queue, Partition: name, TransactionID: tx, Payload: i})
			cancel()
			h.mu.Lock()
			if err == nil && st == 201 && len(res) == 1 && res[0].Status != "failed" {
				h.accepted[tx] = res[0].Status
			} else {
				h.refused++
			}
			h.mu.Unlock()
			if err != nil || st != 201 {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
}

// consume pops and acks in a loop until done closes, going on after any
// error, as a consumer that treats 503 as retryable does.
func (h *ha) consume(done <-chan struct{}) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := h.s.PopCtx(ctx, e2e.PopQueue(h.queue, "consumerGroup", "g", "batch", "50", "wait", "true", "timeout", "500"))
			cancel()
			if err != nil || (r.Status != 200 && r.Status != 204) {
				h.popErrors.Add(1)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			p, err := r.Delivered()
			if err != nil || p == nil {
				continue
			}
			items := make([]map[string]any, 0, len(p.Messages))
			h.mu.Lock()
			for _, m := range p.Messages {
				h.delivered[m.TransactionID] = true
				items = append(items, e2e.AckItem(m, "completed"))
			}
			h.mu.Unlock()
			ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
			_, _ = h.s.AckBatchCtx(ctx, "g", items) // a lost ack: the message comes again
			cancel()
		}
	}()
}

// missing is the accepted messages not delivered.
func (h *ha) missing() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for tx := range h.accepted {
		if !h.delivered[tx] {
			out = append(out, tx)
		}
	}
	return out
}

// failover runs producers and consumers, kills the primary with SIGKILL,
// promotes the standby after outage and goes on; it returns the time from
// the promotion to the first segment stored on the promoted server, and
// stops the producers (the consumers go on until done closes).
func (h *ha) failover(t *testing.T, outage time.Duration, done <-chan struct{}) time.Duration {
	t.Helper()
	for _, p := range []string{"p0", "p1", "p2"} {
		h.produce(p)
	}
	for range 2 {
		h.consume(done)
	}
	h.waitAccepted(t, 200)
	h.primary.Kill()
	killed := time.Now()
	time.Sleep(outage)
	h.standby.Promote(t)
	promoted := time.Now()
	t.Logf("primary killed; standby promoted %v later", promoted.Sub(killed).Round(time.Millisecond))
	db := h.standby.DB(t, "postgres")
	var firstStored time.Duration
	if err := e2e.Eventually(60*time.Second, 10*time.Millisecond, func() error {
		var n int64
		if err := db.QueryRow(`SELECT count(*) FROM queen.segments WHERE created_at >= $1`, []any{promoted}, &n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no segment stored since the promotion")
		}
		firstStored = time.Since(promoted)
		return nil
	}); err != nil {
		t.Fatalf("after the promotion: %v", err)
	}
	// Go on a while on the new primary, then stop producing.
	before := h.count()
	h.waitAccepted(t, before+200)
	close(h.stop)
	return firstStored
}

func (h *ha) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.accepted)
}

// waitAccepted waits until n pushes were accepted.
func (h *ha) waitAccepted(t *testing.T, n int) {
	t.Helper()
	if err := e2e.Eventually(60*time.Second, 20*time.Millisecond, func() error {
		if c := h.count(); c < n {
			return fmt.Errorf("%d pushes accepted, want %d", c, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// events is the broker's log lines about the database and the buffer.
func (h *ha) events() string {
	var out []string
	for _, l := range strings.Split(h.s.Logs(), "\n") {
		if strings.Contains(l, "database") || strings.Contains(l, "buffer") || strings.Contains(l, "listener") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// statuses counts the accepted pushes by their item status.
func (h *ha) statuses() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	by := map[string]int{}
	for _, st := range h.accepted {
		by[st]++
	}
	b, _ := json.Marshal(by)
	return fmt.Sprintf("%s, %d refused", b, h.refused)
}

// Issue 41: a broker on a primary and its synchronous streaming standby
// (DATABASE_URL with both hosts and target_session_attrs=read-write) rides
// out a SIGKILL of the primary and the promotion of the standby: pushes keep
// being accepted (buffered while no primary answers), the consumers go on by
// themselves, every accepted message is delivered, and the broker's LISTEN
// connection, leader connection and metrics collector follow the new
// primary. The time from the promotion to the first stored push is logged.
func TestFailover_SyncStandbyPromotedLosesNothing(t *testing.T) {
	h := startHA(t, true)
	done := make(chan struct{})
	defer func() {
		close(done)
		h.wg.Wait()
	}()
	firstStored := h.failover(t, time.Second, done)
	t.Logf("first push stored %v after the promotion", firstStored.Round(time.Millisecond))
	if err := e2e.Eventually(60*time.Second, 100*time.Millisecond, func() error {
		if m := h.missing(); len(m) > 0 {
			return fmt.Errorf("%d accepted messages not delivered, e.g. %v", len(m), m[:min(5, len(m))])
		}
		return nil
	}); err != nil {
		t.Fatalf("%v (accepted: %s)\nthe broker's log around the failover:\n%s", err, h.statuses(), h.events())
	}
	t.Logf("accepted %s; all delivered; %d pop errors during the failover", h.statuses(), h.popErrors.Load())

	db := h.standby.DB(t, "postgres")
	for _, app := range []string{"queengo-listener", "queengo-leader"} {
		if err := e2e.Eventually(30*time.Second, 100*time.Millisecond, func() error {
			var n int64
			if err := db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, []any{app}, &n); err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("no %s connection on the new primary", app)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	}
	since := time.Now()
	if err := e2e.Eventually(30*time.Second, 100*time.Millisecond, func() error {
		var n int64
		if err := db.QueryRow(`SELECT count(*) FROM queen.metrics_samples WHERE sampled_at >= $1`, []any{since}, &n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("no metrics sample on the new primary")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// Issue 41: the same failover with asynchronous replication. A commit the
// primary acknowledged may not have reached the standby when it died: the
// loss window is measured and logged (docs/operations.md "High
// availability"), not asserted.
func TestFailover_AsyncStandbyLossWindowIsMeasured(t *testing.T) {
	h := startHA(t, false)
	done := make(chan struct{})
	defer func() {
		close(done)
		h.wg.Wait()
	}()
	firstStored := h.failover(t, time.Second, done)
	t.Logf("first push stored %v after the promotion", firstStored.Round(time.Millisecond))
	// Delivered until nothing more comes for 5 s (the lease of a lost ack is 3 s).
	last, lastChange := -1, time.Now()
	for time.Since(lastChange) < 5*time.Second {
		if n := len(h.missing()); n != last {
			last, lastChange = n, time.Now()
		}
		if last == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("async failover: %d of %d accepted messages lost (%s)", last, h.count(), h.statuses())
}
