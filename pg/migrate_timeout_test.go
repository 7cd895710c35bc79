package pg

import (
	"context"
	"testing"
	"time"

	"github.com/queengo/queengo/pg/pgtest"
)

// TestMigrate_NotCutByTheStatementTimeout: the statement timeout bounds the
// statements that serve requests, not the start-up: Migrate applies the
// migrations and the function files (far slower than 1 ms) under it, and the
// connection keeps its timeout for the requests after.
func TestMigrate_NotCutByTheStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := pgtest.Create("pgmigratetimeout")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Drop() })
	s, err := Open(ctx, Config{URL: db.URL, PoolSize: 1, StatementTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate under a 1 ms statement timeout: %v", err)
	}
	var timeout string
	if err := s.pool.QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout); err != nil || timeout != "1ms" {
		t.Fatalf("statement_timeout after Migrate: %q %v, want 1ms", timeout, err)
	}
}
