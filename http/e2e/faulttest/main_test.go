// Package faulttest holds the black-box fault tests of the broker (issue 8,
// defect 4): PostgreSQL is reached through an e2e.Proxy the tests freeze
// (a server stopped with SIGSTOP: connections stay open, nothing answers),
// thaw, cut and restore. The rule they check: every request's database work
// has a deadline (the request timeout, env DB_REQUEST_TIMEOUT_MS), past which
// it answers a 5xx with a JSON error rather than waiting for the database;
// and the broker recovers by itself when the database answers again.
//
// The tests run one at a time: their assertions are about elapsed time, and
// each starts brokers of its own.
package faulttest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
	"github.com/queengo/queengo/pg/pgtest"
)

func TestMain(m *testing.M) { e2e.Main(m, "faulttest") }

const (
	// requestTimeout is the broker's DB_REQUEST_TIMEOUT_MS in these tests.
	requestTimeout = 1500 * time.Millisecond
	// slack is what an answer may take beyond its deadline: the cancel
	// request's grace, scheduling on a loaded two-core box under -race.
	slack = 2500 * time.Millisecond
	// healthTimeout is the bound of /health's database check.
	healthTimeout = 2 * time.Second
)

// startProxied starts a broker that reaches db (nil: the package database)
// through a proxy of its own, with the test request timeout, and returns both.
func startProxied(t *testing.T, db *pgtest.Database, env ...string) (*e2e.Server, *e2e.Proxy) {
	t.Helper()
	url := e2e.DB.URL
	if db != nil {
		url = db.URL
	}
	p, proxied := e2e.StartDBProxy(t, url)
	env = append([]string{fmt.Sprintf("DB_REQUEST_TIMEOUT_MS=%d", requestTimeout.Milliseconds())}, env...)
	s, err := e2e.StartURL(proxied, env...)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: the proxy thaws (Close) after the
	// broker stopped, and the broker's log is attached on failure.
	t.Cleanup(func() {
		p.Thaw()
		s.Stop()
		noRace(t, s)
		if t.Failed() {
			logs := s.Logs()
			if len(logs) > 6000 {
				logs = "..." + logs[len(logs)-6000:]
			}
			t.Logf("broker log (tail):\n%s", logs)
		}
	})
	return s, p
}

// noRace fails the test when the broker (built with -race under go test
// -race) reported a data race: the fault paths run code the other tests
// rarely reach.
func noRace(t *testing.T, s *e2e.Server) {
	t.Helper()
	if logs := s.Logs(); strings.Contains(logs, "WARNING: DATA RACE") {
		i := strings.Index(logs, "WARNING: DATA RACE")
		t.Errorf("the broker reported a data race:\n%s", logs[i:min(len(logs), i+6000)])
	}
}

// call is one request sent while the database is frozen, and its outcome.
type call struct {
	name, method, path string
	body               any
	bound              time.Duration // the answer must come within this

	resp    *e2e.Response
	err     error
	elapsed time.Duration
}

// runAll sends the calls at once and waits for every answer, each bounded by
// its own client timeout (its bound plus a margin, so that a broker that
// waits for the database makes the test fail, not hang).
func runAll(s *e2e.Server, calls []*call) {
	done := make(chan struct{}, len(calls))
	for _, c := range calls {
		go func() {
			defer func() { done <- struct{}{} }()
			ctx, cancel := context.WithTimeout(context.Background(), c.bound+5*time.Second)
			defer cancel()
			start := time.Now()
			c.resp, c.err = s.DoCtx(ctx, c.method, c.path, c.body)
			c.elapsed = time.Since(start)
		}()
	}
	for range calls {
		<-done
	}
}

// checkJSONError reports what is wrong with an answer that must be a 5xx
// with a JSON body {"error": "<text>"}.
func checkJSONError(r *e2e.Response) error {
	if r.Status < 500 {
		return fmt.Errorf("status %d, want a 5xx: %s", r.Status, r.Body)
	}
	_, err := e2e.CheckError(r, r.Status, "")
	return err
}
