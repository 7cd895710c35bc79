package poptest

import (
	"testing"
	"time"

	"github.com/queengo/queengo/http/apitest"
)

// atOnce is how fast a pop that must not wait has to answer; far below every
// timeout the tests give, well above a slow round trip under -race.
const atOnce = 2 * time.Second

// Backoff settings of the broker the backoff tests use (pop-routes.md
// "Long polling"); the same broker carries the timeout precedence case
// "both set".
const (
	boInitial = 50 * time.Millisecond
	boMax     = 300 * time.Millisecond
)

// defaultsServer has no DEFAULT_TIMEOUT and no POP_DEFAULT_TIMEOUT_MS: it is
// the shared broker.
func defaultsServer(t *testing.T) *apitest.Server { return shared(t) }

// bothServer sets DEFAULT_TIMEOUT=300 and POP_DEFAULT_TIMEOUT_MS=3000, and
// the POP_WAIT_* backoff.
func bothServer(t *testing.T) *apitest.Server {
	t.Helper()
	return apitest.Shared(t, "DB_POOL_SIZE=2", "DEFAULT_TIMEOUT=300", "POP_DEFAULT_TIMEOUT_MS=3000",
		"POP_WAIT_INITIAL_INTERVAL_MS=50", "POP_WAIT_BACKOFF_THRESHOLD=2", "POP_WAIT_BACKOFF_MULTIPLIER=2",
		"POP_WAIT_MAX_INTERVAL_MS=300")
}

// popMsServer sets only POP_DEFAULT_TIMEOUT_MS=700.
func popMsServer(t *testing.T) *apitest.Server {
	t.Helper()
	return apitest.Shared(t, "DB_POOL_SIZE=2", "DEFAULT_TIMEOUT=", "POP_DEFAULT_TIMEOUT_MS=700")
}

// TestPop_TimeoutDefaultPrecedence: a wait=true pop without timeout waits
// DEFAULT_TIMEOUT, else POP_DEFAULT_TIMEOUT_MS, else 30000 ms; DEFAULT_TIMEOUT
// wins when both are set. A timeout the pop carries wins over the default.
func TestPop_TimeoutDefaultPrecedence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		server   func(*testing.T) *apitest.Server
		timeout  string
		min, max time.Duration
	}{
		{"both set: DEFAULT_TIMEOUT=300 wins over POP_DEFAULT_TIMEOUT_MS=3000", bothServer, "", 300 * time.Millisecond, 2 * time.Second},
		{"POP_DEFAULT_TIMEOUT_MS=700 alone", popMsServer, "", 700 * time.Millisecond, 2500 * time.Millisecond},
		{"neither: 30000", defaultsServer, "", 30 * time.Second, 33 * time.Second},
		{"explicit timeout=400 over the 30000 default", defaultsServer, "400", 400 * time.Millisecond, 2 * time.Second},
		{"explicit timeout=1200 over DEFAULT_TIMEOUT=300", bothServer, "1200", 1200 * time.Millisecond, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.server(t)
			q := apitest.Unique(t, "deftimeout")
			path := apitest.PopQueue(q, "wait", "true")
			if tc.timeout != "" {
				path = apitest.PopQueue(q, "wait", "true", "timeout", tc.timeout)
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
// with wait=true; wait=false (and no wait) answers at once.
func TestPop_TimeoutOnlyWithWait(t *testing.T) {
	t.Parallel()
	for _, srv := range []struct {
		name   string
		server func(*testing.T) *apitest.Server
	}{{"defaults", defaultsServer}, {"both", bothServer}, {"popms", popMsServer}} {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			s := srv.server(t)
			q := apitest.Unique(t, "nowait")
			for _, path := range []string{
				apitest.PopQueue(q),
				apitest.PopQueue(q, "wait", "false"),
				apitest.PopQueue(q, "wait", "false", "timeout", "10000"),
				apitest.PopQueue(q, "timeout", "10000"),
				apitest.PopPartition(q, "Default", "wait", "false", "timeout", "10000"),
			} {
				if r := s.PopEmpty(t, path); r.Elapsed >= atOnce {
					t.Fatalf("%s answered after %v, want at once", path, r.Elapsed)
				}
			}
		})
	}
}
