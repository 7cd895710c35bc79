package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/actors"
	"github.com/queengo/queengo/cmd/queengo/admin"
	"github.com/queengo/queengo/cmd/queengo/jobs"
	"github.com/queengo/queengo/cmd/queengo/pushbuffer"
	qhttp "github.com/queengo/queengo/http"
	"github.com/queengo/queengo/pg"
)

// Version is reported by /health.
const Version = "0.1.0"

// migrateTimeout bounds the schema migration at start; several brokers
// starting together wait for each other's advisory lock.
const migrateTimeout = 2 * time.Minute

// App is one broker process's parts. Open connects and migrates; Start
// serves; Shutdown stops everything Start started and closes the store.
type App struct {
	cfg   *Config
	log   *slog.Logger
	store *pg.Store
	// metrics is the process's set: every part registers its figures in
	// it, and /metrics/prometheus serves it.
	metrics *metrics.Set

	// Set by Start.
	auth      *qhttp.Auth
	files     *pushbuffer.Files
	broker    *actors.Broker
	buffer    *pushbuffer.Buffer
	retention *jobs.Retention
	collector *jobs.Collector
	srv       *qhttp.Server
	ln        net.Listener
	served    chan error

	// pending: the database was unreachable at Open; migrateLater
	// migrates once it answers, until stopMigrate closes, and closes
	// migrated when it is done (at once when there was nothing to wait for).
	pending     bool
	stopMigrate chan struct{}
	migrated    chan struct{}
}

// Open connects to the database of cfg and applies the schema migrations.
// A database that cannot be reached (refused, timing out) is no error:
// the App starts Pending, serving without it, and Start migrates once it
// answers. Any other failure (a wrong password, a failed migration) is.
func Open(ctx context.Context, cfg *Config, log *slog.Logger) (*App, error) {
	store, err := pg.Open(ctx, pg.Config{URL: cfg.DatabaseURL, PoolSize: cfg.PoolSize,
		AcquireTimeout: cfg.PoolAcquireTimeout, StatementTimeout: cfg.StatementTimeout, Logger: log,
		RequestTimeout: cfg.RequestTimeout, EncryptionKey: cfg.EncryptionKey, EncryptionReadKeys: cfg.EncryptionReadKeys,
		Conn: pg.ConnOptions{ConnectTimeout: cfg.ConnectTimeout, LockTimeout: cfg.LockTimeout,
			IdleInTransactionTimeout: cfg.IdleInTransactionTimeout, TCPUserTimeout: cfg.TCPUserTimeout,
			KeepAlive: net.KeepAliveConfig{Idle: cfg.KeepAliveIdle, Interval: cfg.KeepAliveInterval, Count: cfg.KeepAliveCount}},
		Citus: cfg.Citus})
	if err != nil {
		return nil, err
	}
	cfg.logIgnored(log)
	logEncryption(cfg, log)
	a := &App{cfg: cfg, log: log, store: store, metrics: metrics.NewSet()}
	mctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	err = a.migrate(mctx)
	cancel()
	switch {
	case err == nil:
	case queengo.DatabaseDown(err):
		// Serve anyway: pushes go to the push buffer, the rest answers a
		// retryable 503, and Start migrates once the database answers.
		log.Warn("database unreachable at start; serving without it and migrating once it answers", "err", err)
		store.SetPending(true)
		a.pending = true
	default:
		store.Close()
		return nil, err
	}
	return a, nil
}

// Pending reports whether the schema waits to be migrated: the database was
// unreachable at Open.
func (a *App) Pending() bool { return a.pending }

// migrate applies the schema migrations and then checks the session's time
// zone.
func (a *App) migrate(ctx context.Context) error {
	applied, err := a.store.Migrate(ctx)
	if err != nil {
		return err
	}
	a.log.Info("schema migrated", "applied", applied)
	return nil
}

// Migration retries at start: the first after migrateRetryMin, each further
// one twice as late, up to migrateRetryMax.
const (
	migrateRetryMin = 100 * time.Millisecond
	migrateRetryMax = 2 * time.Second
)

// migrateLater migrates once the database answers, retrying with a backoff
// until it did or stop is closed, and then lets the store's operations run
// (the push buffer then replays what it took meanwhile).
func (a *App) migrateLater(stop <-chan struct{}) {
	defer close(a.migrated)
	wait := migrateRetryMin
	var lastLog time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
		err := a.migrate(ctx)
		cancel()
		if err == nil {
			a.store.SetPending(false)
			a.checkTimeZone()
			return
		}
		if time.Since(lastLog) >= time.Second {
			lastLog = time.Now()
			a.log.Warn("database still unreachable; migrating once it answers", "err", err, "next_in", wait.String())
		}
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, migrateRetryMax)
	}
}

// checkTimeZone warns when the session time zone is not UTC.
func (a *App) checkTimeZone() {
	if tz, err := a.store.TimeZone(context.Background()); err == nil && tz != "UTC" && tz != "Etc/UTC" {
		a.log.Warn("the database session time zone is not UTC: createdAt values carry a literal Z and will be wrong", "timezone", tz)
	}
}

// Local reports whether PostgreSQL runs on this machine as far as the
// database URL tells (pg.Store.Local).
func (a *App) Local() bool { return a.store.Local() }

// Start builds the broker's parts on the open store and serves the API on
// ln (nil: a listener on the configured host and port). Serving errors
// arrive on Served. When it fails nothing of it runs; the store stays open
// for Shutdown to close.
func (a *App) Start(ln net.Listener) error {
	cfg, log, store := a.cfg, a.log, a.store
	if !a.pending {
		a.checkTimeZone()
	}
	a.metrics.NewGauge(`queengo_db_pool_connections{state="total"}`, func() float64 { t, _, _ := store.PoolStats(); return float64(t) })
	a.metrics.NewGauge(`queengo_db_pool_connections{state="idle"}`, func() float64 { _, i, _ := store.PoolStats(); return float64(i) })
	a.metrics.NewGauge(`queengo_db_pool_connections{state="acquired"}`, func() float64 { _, _, q := store.PoolStats(); return float64(q) })

	var err error
	if ln == nil {
		if ln, err = net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))); err != nil {
			return fmt.Errorf("error listening: %w", err)
		}
	}
	if cfg.Auth != nil {
		if a.auth, err = qhttp.NewAuth(*cfg.Auth, log); err != nil {
			ln.Close()
			return err
		}
	}
	if a.files, err = openFileBuffer(cfg, log); err != nil {
		ln.Close()
		if a.auth != nil {
			a.auth.Close()
		}
		return err
	}
	a.broker = actors.New(actors.Config{Store: store, Notifier: store, Logger: log, Backoff: actors.Backoff{
		Initial: cfg.PopWaitInitial, Threshold: cfg.PopWaitThreshold,
		Multiplier: cfg.PopWaitMultiplier, Max: cfg.PopWaitMax,
	}, RequestTimeout: cfg.RequestTimeout, Metrics: a.metrics,
		SegmentMaxBytes: cfg.SegmentMaxBytes, SegmentMaxItems: cfg.SegmentMaxItems})
	a.buffer = pushbuffer.New(pushbuffer.Config{Files: a.files, Switch: store, Push: a.broker.Push, Ping: store.Ping,
		MaxBatch: cfg.FileBufferMaxBatch, FlushInterval: cfg.FileBufferFlush, Timeout: cfg.RequestTimeout,
		Logger: log, Metrics: a.metrics})
	// Retention, eviction and partition cleanup (D9), on a connection of
	// their own outside the pool; stopped before the store closes.
	a.retention = jobs.NewRetention(jobs.RetentionConfig{Interval: cfg.RetentionInterval,
		EvictionInterval: cfg.EvictionInterval, BatchSize: cfg.RetentionBatchSize, EvictionBatchSize: cfg.EvictionBatchSize,
		PartitionIdle: time.Duration(cfg.PartitionCleanupDays) * 24 * time.Hour, Metrics: a.metrics},
		func(ctx context.Context) (jobs.RetentionConn, error) {
			c, err := store.ConnectRetention(ctx)
			if err != nil {
				return nil, err // not a nil *pg.RetentionConn in the interface
			}
			return c, nil
		}, log)
	a.retention.Start()
	d := &door{Broker: a.broker, Admin: admin.New(store, a.broker, jobs.NewFigures(store, cfg.RequestTimeout)),
		buffer: a.buffer}
	a.srv = qhttp.New(qhttp.Config{PopTimeout: cfg.PopTimeout, PopBatch: cfg.PopBatch,
		PopSubscriptionMode: cfg.PopSubscriptionMode, ReadTimeout: cfg.ReadTimeout, Version: Version, Logger: log,
		Auth: a.auth, Metrics: a.metrics}, d)
	a.ln = ln
	// The metrics collector (status and analytics history, Queen's
	// per-queue Prometheus families), on the pool, off the hot path;
	// stopped before the store closes.
	host, _ := os.Hostname()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	a.collector = jobs.NewCollector(jobs.CollectorConfig{Interval: cfg.MetricsSampleInterval,
		Retention: time.Duration(cfg.MetricsRetentionDays) * 24 * time.Hour,
		Instance:  net.JoinHostPort(host, port), Hostname: host, Requests: a.srv.RequestCounts,
		Parked: a.broker.ParkedByQueue, ParkedTotal: a.broker.ParkedTotal, Lifecycle: a.retention,
		Metrics: a.metrics, Backoff: a.broker.BackoffStats},
		store, log)
	d.collector = a.collector
	d.cfg = cfg
	a.collector.Start()
	a.stopMigrate, a.migrated = make(chan struct{}), make(chan struct{})
	if a.pending {
		go a.migrateLater(a.stopMigrate)
	} else {
		close(a.migrated)
	}
	a.served = make(chan error, 1)
	go func() { a.served <- a.srv.Serve(ln) }()
	return nil
}

// Addr is the address the API is served on.
func (a *App) Addr() net.Addr { return a.ln.Addr() }

// Served delivers the error that ended serving (Shutdown ends it without
// one).
func (a *App) Served() <-chan error { return a.served }

// Shutdown stops the broker gracefully: /health/ready answers 503 and
// pushes are refused (503), parked pops answer empty at once,
// pushes in flight finish their segment writes, then the server lets go of
// its connections (within cfg.ShutdownTimeout or ctx, whichever ends first),
// the background jobs stop and the store closes. It closes the store also
// after an Open that Start did not follow.
func (a *App) Shutdown(ctx context.Context) {
	defer a.store.Close()
	if a.srv == nil {
		return
	}
	// Not ready any more, no new pushes; then parked pops answer 204 at
	// once (broker.Close) and the requests in flight finish.
	a.srv.Drain()
	close(a.stopMigrate)
	<-a.migrated
	a.buffer.Close()
	a.broker.Close()
	sctx, cancel := context.WithTimeout(ctx, a.cfg.ShutdownTimeout)
	defer cancel()
	if err := a.srv.Shutdown(sctx); err != nil {
		a.log.Warn("shutdown incomplete", "err", err)
	}
	a.broker.Shutdown()
	a.collector.Stop()
	a.retention.Stop()
	if a.files != nil {
		a.files.Close()
	}
	if a.auth != nil {
		a.auth.Close()
	}
}

// logEncryption reports the ids of the encryption keys (pg.KeyID), which
// the key-rotation procedure of docs/operations.md uses.
func logEncryption(cfg *Config, log *slog.Logger) {
	read := make([]string, len(cfg.EncryptionReadKeys))
	for i, k := range cfg.EncryptionReadKeys {
		read[i] = pg.KeyID(k)
	}
	switch {
	case cfg.EncryptionKey != nil:
		log.Info("payload encryption available", "key_id", pg.KeyID(cfg.EncryptionKey), "read_key_ids", read)
	case len(read) > 0:
		log.Warn("no QUEEN_ENCRYPTION_KEY: queues with encryptionEnabled are refused; previous keys only open", "read_key_ids", read)
	}
}
