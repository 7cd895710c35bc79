package pg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/pg"
)

// TestMigrate_FunctionsReappliedAtEveryStart: the files of sql/functions
// are applied after the migrations every time Migrate runs, so a database
// whose migrations are all recorded still gets the functions of this build
// (here: a function replaced behind the broker's back is restored).
func TestMigrate_FunctionsReappliedAtEveryStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupFresh(t, "pgmigrate", pg.Config{PoolSize: 2})
	migs, err := pg.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	applied, err := b.s.Migrate(ctx)
	if err != nil || len(applied) != len(migs) {
		t.Fatalf("first migrate: applied %v of %d: %v", applied, len(migs), err)
	}
	// Only the first migration creates a function, the one its trigger
	// needs; every later body is a diff of a function file.
	for _, m := range migs[1:] {
		if sql := strings.ToUpper(m.SQL); strings.Contains(sql, "CREATE FUNCTION") || strings.Contains(sql, "CREATE OR REPLACE FUNCTION") {
			t.Errorf("migration %d (%s) holds a function: functions live in sql/functions", m.Version, m.Name)
		}
	}
	funcs, err := pg.Functions()
	if err != nil || len(funcs) == 0 {
		t.Fatalf("function files: %v %v", funcs, err)
	}
	for _, f := range funcs {
		if strings.Contains(f.SQL, "CREATE FUNCTION") || strings.Contains(f.SQL, "CREATE TABLE") {
			t.Errorf("%s: function files hold CREATE OR REPLACE FUNCTION only", f.Name)
		}
	}

	if err := b.db.Exec(`CREATE OR REPLACE FUNCTION queen.append_segments(p_parts uuid[], p_seg integer[], p_txids text[],
    p_msgids uuid[], p_frames bytea[]) RETURNS uuid[] LANGUAGE sql AS $$ SELECT NULL::uuid[] $$`); err != nil {
		t.Fatal(err)
	}
	applied, err = b.s.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second migrate: applied %v: %v", applied, err)
	}
	var src string
	if err := b.db.QueryRow(`SELECT prosrc FROM pg_proc WHERE oid = 'queen.append_segments(uuid[], integer[], text[], uuid[], bytea[])'::regprocedure`,
		nil, &src); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src, "partition not found") {
		t.Fatalf("append_segments not restored by the second migrate:\n%s", src)
	}
}

// TestMigrate_NotCutByTheStatementTimeout: the statement timeout bounds the
// statements that serve requests, not the start-up: Migrate applies the
// migrations and the function files (far slower than 1 ms) under it.
func TestMigrate_NotCutByTheStatementTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupFresh(t, "pgmigratetimeout", pg.Config{PoolSize: 1, StatementTimeout: time.Millisecond})
	if _, err := b.s.Migrate(ctx); err != nil {
		t.Fatalf("migrate under a 1 ms statement timeout: %v", err)
	}
}
