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
	"time"

	"github.com/jackc/pgx/v5"
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
	return &Database{URL: u.String(), Name: name, admin: admin}, nil
}

// Drop removes the database, closing any connection still open on it.
func (d *Database) Drop() error {
	return exec(d.admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.Name}.Sanitize()+" WITH (FORCE)")
}

// Exec runs one statement on the database.
func (d *Database) Exec(sql string, args ...any) error { return exec(d.URL, sql, args...) }

// QueryRow runs a query on the database and scans its single row into dest.
func (d *Database) QueryRow(sql string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, d.URL)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.QueryRow(ctx, sql, args...).Scan(dest...)
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
