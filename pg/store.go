// Package pg is the broker's only door to PostgreSQL: the pool, the
// migrations runner, every statement, and the translation of driver errors
// into the sentinel errors of package queengo. Nothing else imports pgx.
package pg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// Config configures a Store.
type Config struct {
	// URL is a libpq connection string or URL.
	URL string
	// PoolSize caps open connections.
	PoolSize int
	// AcquireTimeout bounds the wait for a pooled connection; past it an
	// operation fails with queengo.ErrPool.
	AcquireTimeout time.Duration
	// StatementTimeout is set as statement_timeout on every connection; a
	// statement past it fails with queengo.ErrTimeout. Zero disables it.
	StatementTimeout time.Duration
	// Logger receives the store's own log lines.
	Logger *slog.Logger
}

// Store runs the broker's statements on a pgx pool.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
}

// Open connects a pool (lazily: no connection is made until one is needed)
// and returns the Store.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("error parsing database url: %w", err)
	}
	if cfg.PoolSize > 0 {
		pcfg.MaxConns = int32(cfg.PoolSize)
	}
	pcfg.MinConns = 0
	pcfg.MaxConnIdleTime = 5 * time.Minute
	if cfg.StatementTimeout > 0 {
		pcfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = "queengo"
	if !strings.Contains(cfg.URL, "sslmode") && isLoopback(pcfg.ConnConfig.Host) {
		// libpq's default sslmode=prefer would encrypt loopback traffic,
		// which protects nothing and costs both processes CPU on every
		// byte (it showed in the push profile). An explicit sslmode wins.
		pcfg.ConnConfig.TLSConfig = nil
		pcfg.ConnConfig.Fallbacks = nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("error creating pool: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Store{pool: pool, cfg: cfg, log: log}, nil
}

func isLoopback(host string) bool {
	if strings.HasPrefix(host, "/") || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Close closes every pooled connection, waiting for the ones in use.
func (s *Store) Close() { s.pool.Close() }

// Ping runs SELECT 1.
func (s *Store) Ping(ctx context.Context) error {
	return s.withConn(ctx, func(c *pgxpool.Conn) error {
		var one int
		return c.QueryRow(ctx, "SELECT 1").Scan(&one)
	})
}

// PoolStats reports (total, idle, acquired) connections.
func (s *Store) PoolStats() (total, idle, acquired int32) {
	st := s.pool.Stat()
	return st.TotalConns(), st.IdleConns(), st.AcquiredConns()
}

// withConn runs fn on a pooled connection acquired within AcquireTimeout.
func (s *Store) withConn(ctx context.Context, fn func(*pgxpool.Conn) error) error {
	return s.withConnWait(ctx, s.cfg.AcquireTimeout, fn)
}

// withConnWait runs fn on a pooled connection acquired within wait (0: as
// long as ctx allows).
func (s *Store) withConnWait(ctx context.Context, wait time.Duration, fn func(*pgxpool.Conn) error) error {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if wait > 0 {
		actx, cancel = context.WithTimeout(ctx, wait)
	}
	c, err := s.pool.Acquire(actx)
	cancel()
	if err != nil {
		if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || actx.Err() != nil) {
			return fmt.Errorf("%w: %v", queengo.ErrPool, err)
		}
		return translate(err)
	}
	defer c.Release()
	return translate(fn(c))
}

// withTx runs fn inside a transaction on a pooled connection.
func (s *Store) withTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.withConn(ctx, func(c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, fn)
	})
}

// SQLSTATEs the store translates; QG404 is raised by the broker's own functions.
const (
	codeNotFound      = "QG404"
	codeQueryCanceled = "57014"
	codeForeignKey    = "23503"
)

// translate maps driver errors onto queengo's sentinels, keeping the original
// in the chain for logs.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %v", queengo.ErrNotFound, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeQueryCanceled:
			return fmt.Errorf("%w: %v", queengo.ErrTimeout, err)
		case codeNotFound, codeForeignKey:
			return fmt.Errorf("%w: %v", queengo.ErrNotFound, err)
		}
	}
	return err
}

// pgUUIDs converts ids for pgx: uuid.UUID is a driver.Valuer, which pgx
// encodes through a failed binary attempt (an fmt.Errorf per element) before
// the text fallback; pgtype.UUID encodes directly.
func pgUUIDs(ids []uuid.UUID) []pgtype.UUID {
	out := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		out[i] = pgUUID(id)
	}
	return out
}

// pgUUID converts one id; uuid.Nil becomes NULL.
func pgUUID(id uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: id, Valid: id != uuid.Nil} }
