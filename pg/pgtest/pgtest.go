// Package pgtest gives each test package a database of its own on the test
// PostgreSQL server, so packages run in parallel and never see each other's
// rows. The server is QUEENGO_TEST_DATABASE_URL, else DATABASE_URL, else the
// local trust-auth default; `make test` sets the first.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AdminURLDefault is used when neither QUEENGO_TEST_DATABASE_URL nor
// DATABASE_URL is set.
const AdminURLDefault = "postgres://postgres@127.0.0.1:5432/postgres"

// AdminURL returns the URL of the server tests create their databases on.
func AdminURL() string {
	for _, k := range []string{"QUEENGO_TEST_DATABASE_URL", "DATABASE_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return AdminURLDefault
}

// Database is a scratch database; Drop removes it.
type Database struct {
	URL   string
	Name  string
	admin string
	// workers are the admin URLs of the Citus workers that hold a copy of
	// the database (joinCitus); none on a plain PostgreSQL.
	workers []string

	mu   sync.Mutex
	pool *pgxpool.Pool // QueryRow's connections, made at its first call
}

// Create makes an empty database named after prefix plus a random suffix.
func Create(prefix string) (*Database, error) {
	admin := AdminURL()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := fmt.Sprintf("qgtest_%s_%s", strings.ToLower(prefix), hex.EncodeToString(b[:]))
	if err := exec(admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("error creating test database: %w", err)
	}
	u, err := url.Parse(admin)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("test database url %q must be a URL", admin)
	}
	u.Path = "/" + name
	d := &Database{URL: u.String(), Name: name, admin: admin}
	if err := d.joinCitus(); err != nil {
		_ = d.Drop()
		return nil, fmt.Errorf("error making test database %s a Citus database: %w", name, err)
	}
	return d, nil
}

// joinCitus makes the database a Citus database like the admin database,
// when that is a Citus coordinator with workers (docs/scaling.md): Citus
// keeps its nodes per database, so the database is created on every worker
// too, with the extension, and the coordinator's copy gets the same nodes.
// The broker's migrations then find the extension and apply the Citus
// layout. Nothing happens on a plain PostgreSQL.
func (d *Database) joinCitus() error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, d.admin)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	var citus bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus')").Scan(&citus); err != nil || !citus {
		return err
	}
	rows, err := c.Query(ctx, "SELECT nodename, nodeport, groupid = 0 FROM pg_dist_node WHERE noderole = 'primary' ORDER BY groupid")
	if err != nil {
		return err
	}
	type node struct {
		host        string
		port        int32
		coordinator bool
	}
	nodes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (node, error) {
		var n node
		err := r.Scan(&n.host, &n.port, &n.coordinator)
		return n, err
	})
	if err != nil {
		return err
	}
	d.workers = nil
	stmts := []string{"CREATE EXTENSION IF NOT EXISTS citus"}
	for _, n := range nodes {
		if n.coordinator {
			stmts = append(stmts, fmt.Sprintf("SELECT citus_set_coordinator_host(%s, %d)", quote(n.host), n.port))
			continue
		}
		w, err := nodeURL(d.admin, n.host, n.port, "")
		if err != nil {
			return err
		}
		if err := exec(w, "CREATE DATABASE "+pgx.Identifier{d.Name}.Sanitize()); err != nil {
			return err
		}
		d.workers = append(d.workers, w)
		wd, _ := nodeURL(d.admin, n.host, n.port, d.Name)
		if err := exec(wd, "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			return err
		}
		stmts = append(stmts, fmt.Sprintf("SELECT citus_add_node(%s, %d)", quote(n.host), n.port))
	}
	for _, s := range stmts {
		if err := exec(d.URL, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

// nodeURL is admin with another host, port and (unless "") database.
func nodeURL(admin, host string, port int32, db string) (string, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", err
	}
	u.Host = fmt.Sprintf("%s:%d", host, port)
	if db != "" {
		u.Path = "/" + db
	}
	return u.String(), nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Drop removes the database, closing any connection still open on it.
func (d *Database) Drop() error {
	d.mu.Lock()
	if d.pool != nil {
		d.pool.Close()
		d.pool = nil
	}
	d.mu.Unlock()
	drop := "DROP DATABASE IF EXISTS " + pgx.Identifier{d.Name}.Sanitize() + " WITH (FORCE)"
	err := exec(d.admin, drop)
	for _, w := range d.workers {
		if werr := exec(w, drop); err == nil {
			err = werr
		}
	}
	return err
}

// Close closes the connections of QueryRow, leaving the database as it is.
func (d *Database) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pool != nil {
		d.pool.Close()
		d.pool = nil
	}
}

// Exec runs one statement on the database.
func (d *Database) Exec(sql string, args ...any) error { return exec(d.URL, sql, args...) }

// QueryRow runs a query on the database and scans its single row into dest.
func (d *Database) QueryRow(sql string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := d.queries(ctx)
	if err != nil {
		return err
	}
	return p.QueryRow(ctx, sql, args...).Scan(dest...)
}

// queries returns the pool QueryRow runs on, made at first use: a fresh
// connection per query took over a second under the packages' parallel
// tests, longer than some windows the tests measure. Queries are short, so
// a few connections serve every test of a package; Exec keeps a connection
// of its own per call, for statements that hold locks while others query.
// Each query is described anew, as on a fresh connection: no statement
// cache outlives a change of the tables it reads.
func (d *Database) queries(ctx context.Context) (*pgxpool.Pool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pool != nil {
		return d.pool, nil
	}
	cfg, err := pgxpool.ParseConfig(d.URL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 4
	cfg.MaxConnIdleTime = 10 * time.Second
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	if d.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	return d.pool, nil
}

func exec(dsn, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql, args...)
	return err
}

// Hold runs sql in a transaction on a connection of its own and keeps the
// transaction open, with the locks it took, until release is called (which
// commits and closes the connection): for a test that makes the broker meet
// a lock.
func (d *Database) Hold(sql string, args ...any) (release func() error, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		return nil, err
	}
	tx, err := c.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, sql, args...)
	}
	if err != nil {
		_ = c.Close(ctx)
		return nil, err
	}
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		defer c.Close(ctx)
		return tx.Commit(ctx)
	}, nil
}
