// Package pg is the broker's only door to PostgreSQL: the pool, the
// migrations runner, every statement, and the translation of driver errors
// into the sentinel errors of package queengo. Nothing else imports pgx.
package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/queengo/queengo"
)

// Config configures a Store.
type Config struct {
	// URL is a libpq connection string or URL. Every host of a multi-host
	// URL is tried in order; without target_session_attrs in it a
	// connection must be writable (read-write), so the Store follows the
	// primary through a failover.
	URL string
	// PoolSize caps open connections.
	PoolSize int
	// AcquireTimeout bounds the wait for a pooled connection; past it an
	// operation fails with queengo.ErrPool.
	AcquireTimeout time.Duration
	// StatementTimeout is set as statement_timeout on every connection; a
	// statement past it fails with queengo.ErrTimeout. Zero disables it.
	StatementTimeout time.Duration
	// RequestTimeout bounds the database work of every Store method
	// (except Migrate and Listen): the wait for a connection and every
	// statement. It is enforced on the client (a frozen or unreachable
	// server never fires statement_timeout): past it the method fails with
	// queengo.ErrTimeout. Zero means queengo.DefaultRequestTimeout. It is
	// also the connect timeout when the URL sets none.
	RequestTimeout time.Duration
	// Logger receives the store's own log lines.
	Logger *slog.Logger
	// EncryptionKey, 32 bytes, seals the payloads of queues with
	// encryptionEnabled (AES-256-GCM, pg/seal.go). Without it such a queue
	// is refused (queengo.ErrEncryptionUnavailable).
	EncryptionKey []byte
	// EncryptionReadKeys, 32 bytes each, only open payloads sealed before a
	// key rotation. A Store opens payloads with its EncryptionKey and these,
	// never with another Store's keys.
	EncryptionReadKeys [][]byte
	// Conn holds the settings of every connection (pg/dial.go).
	Conn ConnOptions
	// Citus is the Citus mode of the schema (docs/scaling.md): CitusAuto
	// (the default, "") applies it when the database has the citus
	// extension, CitusOn requires the extension, CitusOff never applies it.
	Citus string
}

// The values of Config.Citus.
const (
	CitusAuto = "auto"
	CitusOn   = "on"
	CitusOff  = "off"
)

// Store runs the broker's statements on a pgx pool.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
	seal *sealKey // nil: no encryption key
	keys keyring  // opens sealed payloads: seal's key and the read keys
	// local: the URL's (first) host is a Unix socket or a loopback address.
	local bool
	// gate backs off connection attempts while the database is away.
	gate *dialGate
	// pending: the schema is not known to be migrated (the database was
	// unreachable when the broker started); every operation fails with
	// queengo.ErrUnavailable until SetPending(false).
	pending atomic.Bool
	// citus: Migrate applied the Citus layout (sql/citus): a commit to one
	// partition calls the distributed queen.append_one, which runs on the
	// partition's node.
	citus atomic.Bool
}

// SetPending holds every operation of the Store (on, each fails with
// queengo.ErrUnavailable) or lets them run: a broker that started while its
// database was unreachable holds them until its migrations ran.
func (s *Store) SetPending(on bool) { s.pending.Store(on) }

// Open connects a pool (lazily: no connection is made until one is needed)
// and returns the Store.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("error parsing database url: %w", err)
	}
	seal, keys, err := loadKeys(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.PoolSize > 0 {
		pcfg.MaxConns = int32(cfg.PoolSize)
	}
	pcfg.MinConns = 0
	cfg.Conn.apply(pcfg)
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = queengo.DefaultRequestTimeout
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		// A server that accepts the TCP connection and then says nothing
		// (stopped, or behind a hung proxy) would otherwise hold the pool
		// slot of the connection being opened until it wakes up.
		pcfg.ConnConfig.ConnectTimeout = cfg.RequestTimeout
	}
	// When a statement's context ends, ask the server to cancel it (so a
	// live but slow server stops the work and the connection survives) and
	// give up on the connection cancelGrace later (a frozen server never
	// answers; pgx then closes the connection and the pool replaces it).
	pcfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelGrace}
	}
	pcfg.MaxConnIdleTime = 5 * time.Minute
	if cfg.StatementTimeout > 0 {
		pcfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	}
	pcfg.ConnConfig.RuntimeParams["application_name"] = "queengo"
	if _, set := pcfg.ConnConfig.RuntimeParams["jit"]; !set {
		// The broker's statements are small and run thousands of times a
		// second; JIT compiling one costs 100-200 ms. It starts when a
		// plan's cost passes jit_above_cost, which the cost that
		// enable_seqscan = off (set by most functions here) puts on a
		// sequential scan always does: an extension's lease scan took
		// 190 ms on an empty table, seconds under load.
		pcfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	local := isLoopback(pcfg.ConnConfig.Host)
	if !strings.Contains(cfg.URL, "sslmode") {
		plainLoopback(pcfg.ConnConfig)
	}
	if !strings.Contains(cfg.URL, "target_session_attrs") {
		// Without target_session_attrs in the URL, a connection must still
		// be writable: one that lands on a standby (or a primary being
		// demoted) is dropped and the URL's next host tried, so that a
		// multi-host URL follows the primary through a failover.
		pcfg.ConnConfig.ValidateConnect = pgconn.ValidateConnectTargetSessionAttrsReadWrite
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("error creating pool: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Store{pool: pool, cfg: cfg, log: log, seal: seal, keys: keys, local: local, gate: &dialGate{log: log}}, nil
}

// Local reports whether PostgreSQL runs on this machine as far as the URL
// tells: its host is a Unix socket directory or a loopback address.
func (s *Store) Local() bool { return s.local }

// cancelGrace is how long a statement whose context ended waits for the
// server to acknowledge its cancel request before the connection is dropped.
const cancelGrace = 250 * time.Millisecond

// plainLoopback drops TLS from the attempts on loopback hosts: libpq's
// default sslmode=prefer would encrypt loopback traffic, which protects
// nothing and costs both processes CPU on every byte (it showed in the push
// profile). Only the TLS attempts of those hosts go: every host of a
// multi-host URL stays in the list, in its order (the plain attempt that
// followed a dropped TLS one takes its place). Called only when the URL sets
// no sslmode; an explicit one wins.
func plainLoopback(c *pgx.ConnConfig) {
	first := c.Host
	if isLoopback(first) {
		c.TLSConfig = nil
	}
	kept := c.Fallbacks[:0]
	for _, f := range c.Fallbacks {
		switch {
		case !isLoopback(f.Host):
		case f.TLSConfig != nil:
			continue // its plain attempt follows in the list
		case f.Host == first && f.Port == c.Port && c.TLSConfig == nil:
			continue // the first attempt, plain already
		}
		kept = append(kept, f)
	}
	c.Fallbacks = kept
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
	return s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var one int
		return c.QueryRow(ctx, "SELECT 1").Scan(&one)
	})
}

// PoolStats reports (total, idle, acquired) connections.
func (s *Store) PoolStats() (total, idle, acquired int32) {
	st := s.pool.Stat()
	return st.TotalConns(), st.IdleConns(), st.AcquiredConns()
}

// withConn runs fn on a pooled connection acquired within AcquireTimeout,
// under the request deadline (see bound): fn must use the context it is
// given.
func (s *Store) withConn(ctx context.Context, fn func(context.Context, *pgxpool.Conn) error) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.withConnWait(ctx, s.cfg.AcquireTimeout, func(c *pgxpool.Conn) error { return fn(ctx, c) })
}

// bound returns the context an operation's database work runs under: it ends
// at the request deadline, RequestTimeout from now or ctx's own deadline when
// earlier, and carries nothing else of ctx, neither its values nor its
// cancellation. The pool keeps the context of an acquire that opens a new
// connection until that connection is open, past the call, and the handlers'
// context (fasthttp's RequestCtx) is recycled once its request is answered:
// reading its values then races with the next request. A caller's
// cancellation (a shutdown) lets the statements in flight finish, within the
// deadline: a push being committed hears its outcome.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	d := time.Now().Add(s.cfg.RequestTimeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return context.WithDeadline(context.Background(), d)
}

// withConnWait runs fn on a pooled connection acquired within wait (0: as
// long as ctx allows). A failure after ctx's deadline passed is
// queengo.ErrTimeout, whatever the driver made of it; a wait for a connection
// that ran out before ctx did is queengo.ErrPool.
func (s *Store) withConnWait(ctx context.Context, wait time.Duration, fn func(*pgxpool.Conn) error) error {
	if s.pending.Load() {
		return fmt.Errorf("%w: the schema is not migrated yet: the database has not answered since the broker started", queengo.ErrUnavailable)
	}
	probe, err := s.gate.admit()
	if err != nil {
		return err
	}
	actx, cancel := ctx, context.CancelFunc(func() {})
	if wait > 0 {
		actx, cancel = context.WithTimeout(ctx, wait)
	}
	c, err := s.pool.Acquire(actx)
	s.gate.done(probe, err)
	// Read before cancel, which would set it in any case.
	waitedOut := errors.Is(actx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil {
		if ctx.Err() == nil && waitedOut {
			return fmt.Errorf("%w: %v", queengo.ErrPool, err)
		}
		// The server refused or dropped a new connection (ErrUnavailable),
		// or the request deadline passed first (ErrTimeout).
		return translateCtx(ctx, err)
	}
	defer c.Release()
	err = fn(c)
	if readOnly(err) {
		// The server became a standby under the connection (a switch-over
		// demoted it): close it, so that the pool's next connection looks
		// for the primary among the URL's hosts.
		cctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
		_ = c.Conn().Close(cctx)
		cancel()
	}
	return translateCtx(ctx, err)
}

// readOnly reports whether err is a write refused by a read-only server
// (SQLSTATE 25006).
func readOnly(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeReadOnly
}

// withTx runs fn inside a transaction on a pooled connection, under the
// request deadline.
func (s *Store) withTx(ctx context.Context, fn func(context.Context, pgx.Tx) error) error {
	return s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

// translateCtx is translate for an operation that ran under ctx: once ctx
// ended, the failure is its deadline's (the driver reports it as a closed
// connection, an i/o timeout or a cancelled query, depending on timing).
func translateCtx(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	switch cerr := ctx.Err(); {
	case errors.Is(cerr, context.DeadlineExceeded):
		if errors.Is(err, queengo.ErrTimeout) {
			return err
		}
		return fmt.Errorf("%w: request deadline passed: %v", queengo.ErrTimeout, err)
	case cerr != nil:
		return fmt.Errorf("%w: %v", cerr, err)
	}
	return translate(err)
}

// SQLSTATEs the store translates; QG404 and QG412 are raised by the broker's
// own functions.
const (
	codeNotFound      = "QG404"
	codeQueueChanged  = "QG412"
	codeQueryCanceled = "57014"
	// lock_not_available: a statement waited DB_LOCK_TIMEOUT for a lock,
	// or a queue delete or clear gave up after its retries. Retryable, as a
	// statement timeout is.
	codeLockTimeout = "55P03"
	codeForeignKey  = "23503"
	// Class 08 (connection exception), and the server going away or not
	// yet accepting connections, or out of connection slots.
	classConnection     = "08"
	codeAdminShutdown   = "57P01"
	codeCrashShutdown   = "57P02"
	codeCannotConnect   = "57P03"
	codeTooManyConns    = "53300"
	codeTooManyConnsUsr = "53400"
	// A write on a standby, or on a primary being demoted.
	codeReadOnly = "25006"
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
		case codeQueryCanceled, codeLockTimeout:
			return fmt.Errorf("%w: %v", queengo.ErrTimeout, err)
		case codeNotFound, codeForeignKey:
			return fmt.Errorf("%w: %v", queengo.ErrNotFound, err)
		case codeQueueChanged:
			return fmt.Errorf("%w: %v", queengo.ErrQueueChanged, err)
		case codeAdminShutdown, codeCrashShutdown, codeCannotConnect, codeTooManyConns, codeTooManyConnsUsr, codeReadOnly:
			return fmt.Errorf("%w: %v", queengo.ErrUnavailable, err)
		}
		if strings.HasPrefix(pgErr.Code, classConnection) {
			return fmt.Errorf("%w: %v", queengo.ErrUnavailable, err)
		}
		return err
	}
	if connectionLost(err) {
		return fmt.Errorf("%w: %v", queengo.ErrUnavailable, err)
	}
	return err
}

// connectionLost reports whether err says the server could not be reached or
// the connection broke: a failed connect, a network error, an unexpected end
// of stream, or a connection pgx had already closed.
func connectionLost(err error) bool {
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connErr), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	}
	// Nothing reached the server: the connection was unusable (closed, or
	// broken by an earlier failure) before the statement was sent.
	return pgconn.SafeToRetry(err)
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
