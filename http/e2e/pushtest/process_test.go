package pushtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// health GETs /health and decodes it.
func health(t testing.TB, s *e2e.Server) (int, map[string]any) {
	t.Helper()
	r := s.Get(t, "/health")
	var m map[string]any
	r.JSON(t, &m)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("/health Content-Type %q", ct)
	}
	return r.Status, m
}

// docs/api.md "GET /health": GET /health answers 200 healthy/connected while the
// database answers.
func TestHealth_Healthy(t *testing.T) {
	t.Parallel()
	s := shared(t)
	code, m := health(t, s)
	if code != 200 || m["status"] != "healthy" || m["database"] != "connected" {
		t.Fatalf("/health: %d %v", code, m)
	}
}

// docs/api.md "GET /health": /health answers 503 unhealthy/disconnected while the
// database cannot be reached, the broker keeps running, and it is healthy
// again once the database is back. The database is reached through a TCP
// proxy the test cuts.
func TestHealth_DatabaseUnreachable(t *testing.T) {
	t.Parallel()
	for _, pool := range []string{"6", "1"} {
		t.Run("DB_POOL_SIZE="+pool, func(t *testing.T) {
			t.Parallel()
			p, dbURL := e2e.StartDBProxy(t, e2e.DB.URL)
			s := e2e.Start(t, "DATABASE_URL="+dbURL, "DB_POOL_SIZE="+pool, "DB_POOL_ACQUIRE_TIMEOUT_MS=1000")
			// Healthy once the broker's start-up work (the first metrics
			// sample, the first maintenance read) has left the one pooled
			// connection of DB_POOL_SIZE=1 free.
			var code int
			var m map[string]any
			healthIs := func(want int) func() error {
				return func() error {
					if code, m = health(t, s); code != want {
						return fmt.Errorf("/health answered %d", code)
					}
					return nil
				}
			}
			_ = e2e.Eventually(10*time.Second, 100*time.Millisecond, healthIs(200))
			if code != 200 || m["status"] != "healthy" || m["database"] != "connected" {
				t.Fatalf("/health through the proxy: %d %v", code, m)
			}
			q := e2e.Unique(t, "health")
			// With DB_POOL_SIZE=1 the push may find the one connection held
			// by the broker's background work (a metrics sample of every
			// queue in this shared database) past the 1 s acquire timeout:
			// it answers 503 with nothing written, and the transaction id
			// makes a retry safe.
			if err := pushUntilStored(s, e2e.PushItem{Queue: q, Payload: 1, TransactionID: "before-cut"}); err != nil {
				t.Fatalf("push before the cut: %v", err)
			}

			p.Cut()
			_ = e2e.Eventually(10*time.Second, 100*time.Millisecond, healthIs(503))
			if code != 503 || m["status"] != "unhealthy" || m["database"] != "disconnected" {
				t.Fatalf("/health with the database cut: %d %v, want 503 unhealthy/disconnected", code, m)
			}
			// Still 503 on the next call, and the process is alive.
			if code, _ := health(t, s); code != 503 {
				t.Fatalf("/health answered %d on the next call", code)
			}
			if exited, c := s.Exited(); exited {
				t.Fatalf("broker exited with code %d when the database went away", c)
			}

			// The database comes back on the same address.
			p.Restore()
			_ = e2e.Eventually(10*time.Second, 100*time.Millisecond, healthIs(200))
			if code != 200 || m["status"] != "healthy" {
				t.Fatalf("/health after the database came back: %d %v", code, m)
			}
			// Pushes succeed again. The first ones may find every pooled
			// connection dead and wait to dial anew, past the 1 s acquire
			// timeout on a loaded box: each answers 503 with nothing
			// written, and the one transaction id makes a retry safe.
			if err := pushUntilStored(s, e2e.PushItem{Queue: q, Payload: 2, TransactionID: "after-recovery"}); err != nil {
				t.Fatalf("push after recovery: %v", err)
			}
		})
	}
}

// Issue 2, item 2: an invalid configuration value stops the process at
// start with a non-zero exit and a message naming the variable.
func TestConfig_InvalidValueStopsAtStart(t *testing.T) {
	t.Parallel()
	bin := e2e.MustBinary(t)
	for _, tc := range []struct{ env, name string }{
		{"PORT=abc", "PORT"},
		{"PORT=70000", "PORT"},
		{"PORT=0", "PORT"},
		{"DB_POOL_SIZE=0", "DB_POOL_SIZE"},
		{"DB_POOL_SIZE=many", "DB_POOL_SIZE"},
		{"DB_POOL_ACQUIRE_TIMEOUT_MS=soon", "DB_POOL_ACQUIRE_TIMEOUT_MS"},
		{"DB_POOL_ACQUIRE_TIMEOUT_MS=0", "DB_POOL_ACQUIRE_TIMEOUT_MS"},
		{"DB_STATEMENT_TIMEOUT_MS=-5", "DB_STATEMENT_TIMEOUT_MS"},
		{"DEFAULT_TIMEOUT=30s", "DEFAULT_TIMEOUT"},
		{"POP_DEFAULT_TIMEOUT_MS=x", "POP_DEFAULT_TIMEOUT_MS"},
		{"POP_WAIT_INITIAL_INTERVAL_MS=x", "POP_WAIT_INITIAL_INTERVAL_MS"},
		{"POP_WAIT_BACKOFF_THRESHOLD=x", "POP_WAIT_BACKOFF_THRESHOLD"},
		{"POP_WAIT_BACKOFF_MULTIPLIER=x", "POP_WAIT_BACKOFF_MULTIPLIER"},
		{"POP_WAIT_BACKOFF_MULTIPLIER=0.5", "POP_WAIT_BACKOFF_MULTIPLIER"},
		{"POP_WAIT_MAX_INTERVAL_MS=x", "POP_WAIT_MAX_INTERVAL_MS"},
		{"LOG_LEVEL=loud", "LOG_LEVEL"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Parallel()
			code, out := runBroker(t, bin, 15*time.Second, tc.env)
			if code == 0 {
				t.Fatalf("exit code 0 with %s; output:\n%s", tc.env, out)
			}
			if !strings.Contains(out, tc.name) {
				t.Fatalf("exit %d, output does not name %s:\n%s", code, tc.name, out)
			}
		})
	}
}

// docs/operations.md, "A small machine shared with PostgreSQL": a broker
// whose database is on this 2-CPU machine runs on one Go processor, unless
// GOMAXPROCS says otherwise (go_gomaxprocs in /metrics/prometheus).
func TestProcs_OneOnATwoCPUMachineSharedWithPostgreSQL(t *testing.T) {
	t.Parallel()
	if runtime.NumCPU() != 2 {
		t.Skipf("this machine has %d CPUs", runtime.NumCPU())
	}
	u, err := url.Parse(e2e.DB.URL)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		t.Skipf("the test database is on %s", u.Hostname())
	}
	for _, tc := range []struct {
		env  string
		want float64
	}{
		{"GOMAXPROCS=", 1},
		{"GOMAXPROCS=2", 2},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Parallel()
			s := e2e.StartWith(t, e2e.StartOpts{Env: []string{tc.env}, Process: true})
			r := s.Get(t, "/metrics/prometheus")
			if got, ok := e2e.PromValue(r.Body, "go_gomaxprocs", ""); !ok || got != tc.want {
				t.Fatalf("go_gomaxprocs %v (found: %v), want %v", got, ok, tc.want)
			}
		})
	}
}

// runBroker runs the broker binary with the package database, a free port
// and env; it returns the exit code and the output. A process still running
// after timeout is killed and fails the test.
func runBroker(t *testing.T, bin string, timeout time.Duration, env ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+e2e.DB.URL, "HOST=127.0.0.1",
		"PORT="+strconv.Itoa(e2e.FreePort(t)), "DB_POOL_SIZE=2", "LOG_LEVEL=warn", "FILE_BUFFER_DIR=off")
	cmd.Env = append(cmd.Env, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the broker was still running after %v with %v:\n%s", timeout, env, out.String())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, out.String()
}

// outcome is one push request of the shutdown test.
type outcome struct {
	afterSIGTERM bool
	status       int // 0: transport error
	body         string
	txids        []string
}

// Issue 2, item 8: on SIGTERM the broker stops accepting, finishes in-flight
// writes, closes the pool and exits 0. Every push answered 201 is in the
// database; a push that ends after SIGTERM is either a 201 or refused (a
// transport error or 503): never a 500 for a write that was in flight.
func TestShutdown_InFlightPushesAreKept(t *testing.T) {
	t.Parallel()
	s := e2e.StartWith(t, e2e.StartOpts{Process: true})
	q := e2e.Unique(t, "shutdown")
	const workers, itemsPerPush = 12, 20
	pad := strings.Repeat("p", 1024)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes []outcome
		stopping = make(chan struct{})
		pushed   = make(chan struct{}, 1<<16)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				// Requests of 20 items of 1 KiB over 4 partitions keep
				// writes in flight long enough for SIGTERM to meet some.
				var items []e2e.PushItem
				for k := range itemsPerPush {
					items = append(items, e2e.PushItem{Queue: q, Partition: fmt.Sprintf("p%d", (w+k)%4),
						TransactionID: fmt.Sprintf("w%d-%d-%d", w, i, k), Payload: map[string]any{"pad": pad}})
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				r, err := s.DoCtx(ctx, "POST", "/api/v1/push", map[string]any{"items": items})
				cancel()
				o := outcome{}
				for _, it := range items {
					o.txids = append(o.txids, it.TransactionID)
				}
				select {
				case <-stopping:
					o.afterSIGTERM = true
				default:
				}
				if err == nil {
					o.status, o.body = r.Status, string(r.Body)
				}
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				if err != nil {
					return
				}
				if !o.afterSIGTERM {
					pushed <- struct{}{}
				}
			}
		}()
	}
	// Let some pushes through, then SIGTERM while the workers keep pushing.
	deadline := time.After(30 * time.Second)
	for n := 0; n < 100; n++ {
		select {
		case <-pushed:
		case <-deadline:
			t.Fatal("100 pushes did not complete in 30s")
		}
	}
	close(stopping)
	s.Stop()
	wg.Wait()
	if exited, code := s.Exited(); !exited || code != 0 {
		t.Fatalf("after SIGTERM: exited %v, code %d; log:\n%s", exited, code, s.Logs())
	}

	var accepted, failed []string
	late := map[int]int{}
	var problems []string
	for _, o := range outcomes {
		if o.afterSIGTERM {
			late[o.status]++
		}
		switch {
		case o.status == 201:
			var res []e2e.PushResult
			if err := json.Unmarshal([]byte(o.body), &res); err != nil || len(res) != itemsPerPush {
				problems = append(problems, "201 without one result per item: "+o.body)
			}
			for _, r := range res {
				if r.Status != "queued" {
					problems = append(problems, fmt.Sprintf("201 with a %s item: %+v", r.Status, r))
					break
				}
			}
			accepted = append(accepted, o.txids...)
		case !o.afterSIGTERM:
			problems = append(problems, fmt.Sprintf("before SIGTERM: status %d %s", o.status, o.body))
		case o.status == 0, o.status == 503:
			if o.status == 503 {
				failed = append(failed, o.txids...)
			}
		default:
			failed = append(failed, o.txids...)
			problems = append(problems, fmt.Sprintf("in flight at SIGTERM: status %d %s", o.status, o.body))
		}
	}
	t.Logf("%d items accepted with 201; statuses of requests ending after SIGTERM (0: transport error): %v", len(accepted), late)
	stored := storedTxids(t, q, accepted)
	if stored != len(accepted) {
		t.Errorf("%d of %d items answered 201 are in queen.txids", stored, len(accepted))
	}
	// What the broker answered as not written must not be written either.
	if n := storedTxids(t, q, failed); n != 0 {
		t.Errorf("%d of %d items answered with a failure are in queen.txids anyway", n, len(failed))
	}
	for i, p := range problems {
		if i == 5 {
			t.Errorf("... %d problems in all", len(problems))
			break
		}
		t.Error(p)
	}
	// Heads agree with the txids: nothing half-written.
	var mismatched int64
	if err := e2e.DB.QueryRow(`SELECT count(*) FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
WHERE q.name = $1 AND p.head <> (SELECT count(*) FROM queen.txids x WHERE x.partition_id = p.id)`, []any{q}, &mismatched); err != nil {
		t.Fatal(err)
	}
	if mismatched != 0 {
		t.Fatalf("%d partitions whose head differs from their txids count", mismatched)
	}
}

func storedTxids(t testing.TB, q string, txids []string) int {
	t.Helper()
	var n int
	if err := e2e.DB.QueryRow(`SELECT count(*)::int FROM queen.txids x JOIN queen.partitions p ON p.id = x.partition_id
JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1 AND x.transaction_id = ANY($2::text[])`,
		[]any{q, txids}, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// pushUntilStored pushes it until the broker answers 201 with it stored, for
// up to 10 s: it carries a transaction id, so a retry is safe, and a retry of
// a push whose answer was lost may find it stored already (duplicate).
func pushUntilStored(s *e2e.Server, it e2e.PushItem) error {
	return e2e.Eventually(10*time.Second, 200*time.Millisecond, func() error {
		code, r, err := s.PushCtx(context.Background(), it)
		if err != nil || code != 201 || len(r) != 1 || (r[0].Status != "queued" && r[0].Status != "duplicate") {
			return fmt.Errorf("push answered %d %+v (%v)", code, r, err)
		}
		return nil
	})
}
