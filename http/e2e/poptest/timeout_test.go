package poptest

import (
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// atOnce is how fast a pop that must not wait has to answer: far below every
// timeout or hold it could wrongly wait for in the tests that use it (8 s
// and more), well above a slow round trip under -race on a loaded box (2 s
// and more were seen).
const atOnce = 4 * time.Second

// Backoff settings of the broker the backoff tests use (docs/pop-routes.md
// "Long polling"); the same broker carries the timeout precedence case
// "both set".
const (
	boInitial = 50 * time.Millisecond
	boMax     = 300 * time.Millisecond
)

// defaultsServer has no DEFAULT_TIMEOUT and no POP_DEFAULT_TIMEOUT_MS: it is
// the shared broker.
func defaultsServer(t *testing.T) *e2e.Server { return shared(t) }

// bothServer sets DEFAULT_TIMEOUT=8000 and POP_DEFAULT_TIMEOUT_MS=25000, and
// the POP_WAIT_* backoff. The defaults are seconds apart, and apart from the
// 30 s default, so that a loaded box cannot blur which one a pop waited for.
func bothServer(t *testing.T) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "DB_POOL_SIZE=2", "DEFAULT_TIMEOUT=8000", "POP_DEFAULT_TIMEOUT_MS=25000",
		"POP_WAIT_INITIAL_INTERVAL_MS=50", "POP_WAIT_BACKOFF_THRESHOLD=2", "POP_WAIT_BACKOFF_MULTIPLIER=2",
		"POP_WAIT_MAX_INTERVAL_MS=300")
}

// popMsServer sets only POP_DEFAULT_TIMEOUT_MS=8000.
func popMsServer(t *testing.T) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "DB_POOL_SIZE=2", "DEFAULT_TIMEOUT=", "POP_DEFAULT_TIMEOUT_MS=8000")
}

// TestPop_TimeoutDefaultPrecedence: a wait=true pop without timeout waits
// DEFAULT_TIMEOUT, else POP_DEFAULT_TIMEOUT_MS, else 30000 ms; DEFAULT_TIMEOUT
// wins when both are set. A timeout the pop carries wins over the default.
func TestPop_TimeoutDefaultPrecedence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		server   func(*testing.T) *e2e.Server
		timeout  string
		min, max time.Duration
	}{
		// Each upper bound lies between the timeout the rule gives and
		// the one its violation would (the next default in precedence
		// order, or no timeout at all), with seconds of slack for a loaded
		// box: a latency bound proper is bench/'s business.
		{"both set: DEFAULT_TIMEOUT=8000 wins over POP_DEFAULT_TIMEOUT_MS=25000", bothServer, "", 8 * time.Second, 18 * time.Second},
		{"POP_DEFAULT_TIMEOUT_MS=8000 alone", popMsServer, "", 8 * time.Second, 20 * time.Second},
		{"neither: 30000", defaultsServer, "", 30 * time.Second, 45 * time.Second},
		{"explicit timeout=400 over the 30000 default", defaultsServer, "400", 400 * time.Millisecond, 10 * time.Second},
		{"explicit timeout=1200 over DEFAULT_TIMEOUT=8000", bothServer, "1200", 1200 * time.Millisecond, 6 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.server(t)
			q := e2e.Unique(t, "deftimeout")
			path := e2e.PopQueue(q, "wait", "true")
			if tc.timeout != "" {
				path = e2e.PopQueue(q, "wait", "true", "timeout", tc.timeout)
			}
			r := s.PopEmpty(t, path)
			t.Logf("empty wait=true pop answered after %v", r.Elapsed)
			if r.Elapsed < tc.min || r.Elapsed >= tc.max {
				t.Fatalf("empty wait=true pop answered after %v, want [%v, %v)", r.Elapsed, tc.min, tc.max)
			}
		})
	}
}

// TestPop_TimeoutOnlyWithWait: timeout, given or defaulted, only has an effect
// with wait=true; wait=false (and no wait) answers at once, not at the
// timeout it was given or the server's default (8 s at the least here).
func TestPop_TimeoutOnlyWithWait(t *testing.T) {
	t.Parallel()
	for _, srv := range []struct {
		name   string
		server func(*testing.T) *e2e.Server
	}{{"defaults", defaultsServer}, {"both", bothServer}, {"popms", popMsServer}} {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			s := srv.server(t)
			q := e2e.Unique(t, "nowait")
			for _, path := range []string{
				e2e.PopQueue(q),
				e2e.PopQueue(q, "wait", "false"),
				e2e.PopQueue(q, "wait", "false", "timeout", "10000"),
				e2e.PopQueue(q, "timeout", "10000"),
				e2e.PopPartition(q, "Default", "wait", "false", "timeout", "10000"),
			} {
				if r := s.PopEmpty(t, path); r.Elapsed >= atOnce {
					t.Fatalf("%s answered after %v, want at once (well within %v)", path, r.Elapsed, atOnce)
				}
			}
		})
	}
}
