// Command queengo runs the broker: `queengo` serves the Queen MQ HTTP API,
// `queengo migrate` applies the schema migrations and exits. Configuration
// comes from the environment variables of the reference Queen server, and
// flags override them (`queengo -h` lists them). The operator's commands
// (`queengo queues`, `tail`, `push`, ...: package cli) talk to a running
// broker over HTTP.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only on PPROF_ADDR
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queengo/queengo/actors"
	"github.com/queengo/queengo/cmd/queengo/cli"
	qhttp "github.com/queengo/queengo/http"
	"github.com/queengo/queengo/pg"
)

// version is reported by /health.
const version = "0.1.0"

func main() {
	if len(os.Args) > 1 && cli.IsCommand(os.Args[1]) {
		os.Exit(cli.Main(os.Args[1:], cli.OSEnv()))
	}
	cfg, err := loadConfig(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "queengo:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	gcDefaults(os.Getenv)
	migrateOnly := len(os.Args) > 1 && os.Args[len(os.Args)-1] == "migrate"
	if err := run(cfg, log, migrateOnly); err != nil {
		log.Error("queengo stopped", "err", err)
		os.Exit(1)
	}
}

const (
	// gcPercentDefault is the collector's target when GOGC is not set. At
	// the default 100 the collector was 18% of the broker's CPU at consume
	// batch 100: most of what the broker allocates (request bodies, pop
	// answers, statement arguments) dies within the request. 400 took the
	// broker's CPU per message from 15 to 11-12 µs and its peak RSS from 43
	// to 69 MB (docs/benchmarks.md).
	gcPercentDefault = 400
	// memoryLimitDefault is the soft memory limit when GOMEMLIMIT is not
	// set: past it the collector runs as often as it must, so the higher
	// target cannot grow a large live heap (10,000 parked long polls, a big
	// replay) five-fold.
	memoryLimitDefault = 1 << 30
)

// gcDefaults sets the garbage collector's target and soft memory limit
// unless the operator set GOGC or GOMEMLIMIT, which the runtime has read.
func gcDefaults(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercentDefault)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimitDefault)
	}
}

// procsFor returns how many Go processors the broker runs on, where the
// runtime chose n: one when it shares a 2-CPU machine with its PostgreSQL
// server (local: the database URL names a Unix socket or a loopback
// address) and the operator did not set GOMAXPROCS, else n. With two, on
// such a machine, the scheduler's idle processor spun and woke on the
// broker's hand-offs between goroutines (a request, its actor, its claim
// round, and back) and took CPU that the database's backends, which the
// broker waits for, were short of: one processor consumed and pushed 10-53%
// more messages a second at batch 1 to 100 and cut the broker's CPU per
// message by a fifth to a half (docs/benchmarks.md, "2026-12-07, early").
// Nothing is known of larger machines, or of a database elsewhere, so they
// keep the runtime's choice.
func procsFor(getenv func(string) string, local bool, n int) int {
	if getenv("GOMAXPROCS") == "" && local && n == 2 {
		return 1
	}
	return n
}

func run(cfg *Config, log *slog.Logger, migrateOnly bool) error {
	ctx := context.Background()
	store, err := pg.Open(ctx, pg.Config{URL: cfg.DatabaseURL, PoolSize: cfg.PoolSize,
		AcquireTimeout: cfg.PoolAcquireTimeout, StatementTimeout: cfg.StatementTimeout, Logger: log,
		RequestTimeout: cfg.RequestTimeout, EncryptionKey: cfg.EncryptionKey, EncryptionReadKeys: cfg.EncryptionReadKeys})
	if err != nil {
		return err
	}
	defer store.Close()
	chosen := runtime.GOMAXPROCS(0)
	if n := procsFor(os.Getenv, store.Local(), chosen); n != chosen {
		runtime.GOMAXPROCS(n)
		log.Info("running on one Go processor: PostgreSQL shares this 2-CPU machine (GOMAXPROCS overrides)")
	}
	logEncryption(cfg, log)
	mctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	applied, err := store.Migrate(mctx)
	cancel()
	if err != nil {
		return err
	}
	log.Info("schema migrated", "applied", applied)
	if migrateOnly {
		return nil
	}
	if tz, err := store.TimeZone(ctx); err == nil && tz != "UTC" && tz != "Etc/UTC" {
		log.Warn("the database session time zone is not UTC: createdAt values carry a literal Z and will be wrong", "timezone", tz)
	}

	metrics.NewGauge(`queengo_db_pool_connections{state="total"}`, func() float64 { t, _, _ := store.PoolStats(); return float64(t) })
	metrics.NewGauge(`queengo_db_pool_connections{state="idle"}`, func() float64 { _, i, _ := store.PoolStats(); return float64(i) })
	metrics.NewGauge(`queengo_db_pool_connections{state="acquired"}`, func() float64 { _, _, a := store.PoolStats(); return float64(a) })

	var auth *qhttp.Auth
	if cfg.Auth != nil {
		if auth, err = qhttp.NewAuth(*cfg.Auth, log); err != nil {
			return err
		}
		defer auth.Close()
	}
	files, err := openFileBuffer(cfg, log)
	if err != nil {
		return err
	}
	broker := actors.New(actors.Config{Store: store, Notifier: store, Logger: log, Backoff: actors.Backoff{
		Initial: cfg.PopWaitInitial, Threshold: cfg.PopWaitThreshold,
		Multiplier: cfg.PopWaitMultiplier, Max: cfg.PopWaitMax,
	}, RequestTimeout: cfg.RequestTimeout, Buffer: actors.BufferConfig{Files: files, Switch: store,
		MaxBatch: cfg.FileBufferMaxBatch, FlushInterval: cfg.FileBufferFlush}})
	// Retention, eviction and partition cleanup (D9), on a connection of
	// their own outside the pool; stopped before the store closes.
	retention := actors.NewRetention(actors.RetentionConfig{Interval: cfg.RetentionInterval,
		EvictionInterval: cfg.EvictionInterval, BatchSize: cfg.RetentionBatchSize,
		PartitionIdle: time.Duration(cfg.PartitionCleanupDays) * 24 * time.Hour},
		func(ctx context.Context) (actors.RetentionConn, error) {
			c, err := store.ConnectRetention(ctx)
			if err != nil {
				return nil, err // not a nil *pg.RetentionConn in the interface
			}
			return c, nil
		}, log)
	retention.Start()
	defer retention.Stop()
	// The metrics collector (status and analytics history, Queen's
	// per-queue Prometheus families), on the pool, off the hot path;
	// stopped before the store closes.
	host, _ := os.Hostname()
	collector := actors.NewCollector(actors.CollectorConfig{Interval: cfg.MetricsSampleInterval,
		Retention: time.Duration(cfg.MetricsRetentionDays) * 24 * time.Hour,
		Instance:  net.JoinHostPort(host, strconv.Itoa(cfg.Port)), Hostname: host, Requests: qhttp.RequestCounts,
		Parked: broker.ParkedByQueue},
		store, log)
	collector.Start()
	defer collector.Stop()
	srv := qhttp.New(qhttp.Config{PopTimeout: cfg.PopTimeout, PopBatch: cfg.PopBatch, PopSubscriptionMode: cfg.PopSubscriptionMode,
		ReadTimeout: cfg.ReadTimeout, Version: version, Logger: log, Auth: auth},
		broker)
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("error listening: %w", err)
	}
	log.Info("queengo listening", "addr", ln.Addr().String(), "pool_size", cfg.PoolSize, "gomaxprocs", runtime.GOMAXPROCS(0))

	if cfg.PprofAddr != "" {
		go func() {
			// The default mux carries only the pprof handlers.
			log.Warn("pprof server stopped", "err", http.ListenAndServe(cfg.PprofAddr, nil))
		}()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-served:
		return err
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	}
	// Parked pops answer empty at once; in-flight pushes finish their
	// segment writes before the server lets go of their connections.
	broker.Close()
	sctx, cancel := context.WithTimeout(ctx, cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown incomplete", "err", err)
	}
	broker.Shutdown()
	log.Info("queengo stopped")
	return nil
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
