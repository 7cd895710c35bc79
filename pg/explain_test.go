package pg_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// explainConn is a connection on which auto_explain sends the client the
// plan (with actual rows, without timing) of every statement, those run
// inside functions included: EXPLAIN shows a PL/pgSQL or SQL function's
// call, not the statements in it.
type explainConn struct {
	*pgx.Conn
	mu    sync.Mutex
	plans []string
}

// openExplain connects to the database at url, closing the connection when
// the test ends.
func openExplain(t *testing.T, url string) *explainConn {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	e := &explainConn{}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if strings.HasPrefix(n.Message, "duration:") {
			e.mu.Lock()
			e.plans = append(e.plans, n.Message)
			e.mu.Unlock()
		}
	}
	if e.Conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	for _, set := range []string{
		`LOAD 'auto_explain'`,
		`SET auto_explain.log_min_duration = 0`,
		`SET auto_explain.log_nested_statements = on`,
		`SET auto_explain.log_analyze = on`,
		`SET auto_explain.log_timing = off`,
		`SET client_min_messages = log`,
	} {
		if _, err := e.Exec(ctx, set); err != nil {
			t.Fatalf("%s: %v", set, err)
		}
	}
	return e
}

// take returns the plans sent since the last take.
func (e *explainConn) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.plans
	e.plans = nil
	return p
}
