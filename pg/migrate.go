package pg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	qsql "github.com/queengo/queengo/sql"
)

// migrateLockKey is the advisory lock that serialises migrations, so two
// broker processes starting together cannot race (any constant works; this
// one spells "queengo" in hex-ish).
const migrateLockKey = 0x717565656e676f

// Migration is one embedded migration file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations lists the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	files, err := fs.Glob(qsql.Migrations, "migrations/*.up.sql")
	if err != nil {
		return nil, fmt.Errorf("error listing migrations: %w", err)
	}
	var out []Migration
	for _, f := range files {
		base := strings.TrimSuffix(strings.TrimPrefix(f, "migrations/"), ".up.sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration file %q is not named NNN_name.up.sql", f)
		}
		body, err := fs.ReadFile(qsql.Migrations, f)
		if err != nil {
			return nil, fmt.Errorf("error reading migration %q: %w", f, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := range out {
		if out[i].Version != i+1 {
			return nil, fmt.Errorf("migrations are not numbered 1..n: found %d at position %d", out[i].Version, i+1)
		}
	}
	return out, nil
}

// Function is one embedded file of functions (sql/functions/*.sql).
type Function struct {
	Name string // the file name, e.g. "append.sql"
	SQL  string
}

// Functions lists the embedded function files in the order they apply
// (file-name order).
func Functions() ([]Function, error) {
	files, err := fs.Glob(qsql.Functions, "functions/*.sql")
	if err != nil {
		return nil, fmt.Errorf("error listing function files: %w", err)
	}
	sort.Strings(files)
	out := make([]Function, 0, len(files))
	for _, f := range files {
		body, err := fs.ReadFile(qsql.Functions, f)
		if err != nil {
			return nil, fmt.Errorf("error reading function file %q: %w", f, err)
		}
		out = append(out, Function{Name: strings.TrimPrefix(f, "functions/"), SQL: string(body)})
	}
	return out, nil
}

// Migrate applies every embedded migration not yet applied, each in its own
// transaction, and then every function file, all in one transaction (they
// are idempotent and replace what an earlier version installed), under a
// session advisory lock. It returns the migration versions applied. It runs
// on a connection of its own, without the statement timeout
// (Config.StatementTimeout), which is for serving requests: a migration, the
// function files or the wait for another process's migration may take
// longer, bounded by ctx only.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	migs, err := Migrations()
	if err != nil {
		return nil, err
	}
	funcs, err := Functions()
	if err != nil {
		return nil, err
	}
	var applied []int
	cfg := s.pool.Config().ConnConfig.Copy()
	delete(cfg.RuntimeParams, "statement_timeout")
	delete(cfg.RuntimeParams, "lock_timeout") // it waits for the migration lock
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, translateCtx(ctx, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	err = translateCtx(ctx, func() error {
		if _, err := c.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(migrateLockKey)); err != nil {
			return fmt.Errorf("error taking migration lock: %w", err)
		}
		defer func() {
			_, _ = c.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(migrateLockKey))
		}()
		if _, err := c.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS queen;
CREATE TABLE IF NOT EXISTS queen.schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return fmt.Errorf("error creating schema_migrations: %w", err)
		}
		done := map[int]bool{}
		rows, err := c.Query(ctx, "SELECT version FROM queen.schema_migrations")
		if err != nil {
			return fmt.Errorf("error reading schema_migrations: %w", err)
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return fmt.Errorf("error reading schema_migrations: %w", err)
		}
		for _, v := range versions {
			done[int(v)] = true
		}
		for _, m := range migs {
			if done[m.Version] {
				continue
			}
			err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, m.SQL); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, "INSERT INTO queen.schema_migrations (version, name) VALUES ($1, $2)", m.Version, m.Name)
				return err
			})
			if err != nil {
				return fmt.Errorf("error applying migration %03d_%s: %w", m.Version, m.Name, err)
			}
			applied = append(applied, m.Version)
		}
		// After the migrations, which create the tables the functions
		// name. One transaction: a process calling a function never sees
		// a file half applied or a dropped signature not yet re-created.
		// In the Citus mode the Citus forms of the functions (sql/citus)
		// replace the single-node ones in the same transaction, so another
		// broker process running meanwhile never calls a single-node form
		// on sharded tables. On the first start in that mode the tables are
		// distributed after the function files (the layout's check needs
		// queen.partition_key), and the files are applied once more.
		citus, err := s.citusMode(ctx, c)
		if err != nil {
			return err
		}
		distributed := false
		if citus {
			if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_dist_partition
 WHERE logicalrelid = to_regclass('queen.partitions'))`).Scan(&distributed); err != nil {
				return fmt.Errorf("error reading the Citus layout: %w", err)
			}
		}
		if err := applyFunctions(ctx, c, funcs, distributed); err != nil {
			return err
		}
		if !citus {
			return nil
		}
		if err := citusFile(ctx, c, "citus/layout.sql"); err != nil {
			return err
		}
		if err := distributeTables(ctx, c); err != nil {
			return err
		}
		if !distributed {
			if err := applyFunctions(ctx, c, funcs, true); err != nil {
				return err
			}
		}
		s.citus.Store(true)
		return nil
	}())
	return applied, err
}

// applyFunctions applies the function files and, with citus, the Citus
// forms of the functions and their distribution (sql/citus/functions.sql,
// distribute.sql), in one transaction.
func applyFunctions(ctx context.Context, c *pgx.Conn, funcs []Function, citus bool) error {
	return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		for _, f := range funcs {
			if _, err := tx.Exec(ctx, f.SQL); err != nil {
				return fmt.Errorf("error applying function file %s: %w", f.Name, err)
			}
		}
		if !citus {
			return nil
		}
		for _, f := range []string{"citus/functions.sql", "citus/distribute.sql"} {
			if err := citusFile(ctx, tx, f); err != nil {
				return err
			}
		}
		return nil
	})
}

// citusMode reports whether the Config's Citus mode applies sql/citus: on a
// database with the citus extension (CitusAuto) or always (CitusOn, which
// fails without the extension).
func (s *Store) citusMode(ctx context.Context, c *pgx.Conn) (bool, error) {
	if s.cfg.Citus == CitusOff {
		return false, nil
	}
	var has bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&has); err != nil {
		return false, fmt.Errorf("error looking for the citus extension: %w", err)
	}
	if !has && s.cfg.Citus == CitusOn {
		return false, fmt.Errorf("QUEENGO_CITUS=on but the database has no citus extension (CREATE EXTENSION citus; docs/scaling.md)")
	}
	return has, nil
}

// citusFile runs one file of sql/citus.
func citusFile(ctx context.Context, c interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, name string) error {
	body, err := fs.ReadFile(qsql.Citus, name)
	if err != nil {
		return fmt.Errorf("error reading the Citus layout: %w", err)
	}
	if _, err := c.Exec(ctx, string(body)); err != nil {
		return fmt.Errorf("error applying the Citus layout (sql/%s): %w", name, err)
	}
	return nil
}

// distributeTables makes each table of queen.citus_layout the kind it names,
// one statement (and transaction) each, in ord order: Citus copies a
// table's rows to its shards over connections of its own, and converts the
// tables linked to a new reference table by foreign keys into local tables
// on the way, so each step reads the catalogue anew.
func distributeTables(ctx context.Context, c *pgx.Conn) error {
	// Citus cannot distribute a table another one references by a foreign
	// key unless both are distributed, and turns the tables linked to a new
	// reference table into local ones: the foreign keys among the layout's
	// tables are set aside while their tables are not all distributed, and
	// made again after.
	rows, err := c.Query(ctx, `SELECT format('%s', k.conrelid::regclass), quote_ident(k.conname), pg_get_constraintdef(k.oid)
  FROM pg_constraint k
 WHERE k.contype = 'f' AND k.conrelid IN (SELECT to_regclass(l.tbl) FROM queen.citus_layout l)
   AND EXISTS (SELECT 1 FROM queen.citus_layout l
                WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition d WHERE d.logicalrelid = to_regclass(l.tbl)))`)
	if err != nil {
		return fmt.Errorf("error reading the foreign keys of the Citus layout: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([3]string, error) {
		var k [3]string
		err := r.Scan(&k[0], &k[1], &k[2])
		return k, err
	})
	if err != nil {
		return fmt.Errorf("error reading the foreign keys of the Citus layout: %w", err)
	}
	for _, k := range keys {
		if _, err := c.Exec(ctx, "ALTER TABLE "+k[0]+" DROP CONSTRAINT "+k[1]); err != nil {
			return fmt.Errorf("error setting aside foreign key %s of %s: %w", k[1], k[0], err)
		}
	}
	if err := distributeEach(ctx, c); err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := c.Exec(ctx, "ALTER TABLE "+k[0]+" ADD CONSTRAINT "+k[1]+" "+k[2]); err != nil {
			return fmt.Errorf("error making foreign key %s of %s again: %w", k[1], k[0], err)
		}
	}
	return nil
}

// distributeEach makes each table of queen.citus_layout the kind it names.
func distributeEach(ctx context.Context, c *pgx.Conn) error {
	for {
		var tbl, kind string
		var col *string
		err := c.QueryRow(ctx, `SELECT l.tbl, l.kind, l.dist_col FROM queen.citus_layout l
 WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition d WHERE d.logicalrelid = l.tbl::regclass
                     AND CASE l.kind WHEN 'reference' THEN d.partmethod = 'n' AND d.repmodel = 't'
                                     WHEN 'local' THEN d.partmethod = 'n' AND d.repmodel = 's'
                                     ELSE d.partmethod = 'h' END)
 ORDER BY l.ord LIMIT 1`).Scan(&tbl, &kind, &col)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("error reading queen.citus_layout: %w", err)
		}
		var stmt string
		var args []any
		switch kind {
		case "reference":
			stmt, args = "SELECT create_reference_table($1::regclass)", []any{tbl}
		case "local":
			stmt, args = "SELECT citus_add_local_table_to_metadata($1::regclass)", []any{tbl}
		default:
			with := "queen.partitions"
			if tbl == with {
				with = "none"
			}
			stmt, args = "SELECT create_distributed_table($1::regclass, $2, colocate_with => $3)", []any{tbl, *col, with}
		}
		if _, err := c.Exec(ctx, stmt, args...); err != nil {
			return fmt.Errorf("error distributing %s as %s table: %w", tbl, kind, err)
		}
	}
}
