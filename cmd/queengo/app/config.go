// Package app is one broker process: its configuration (the reference
// server's environment variables, then flags) and the wiring of its parts:
// the store (package pg), the data path (package actors), the push buffer,
// the operator's door (package admin), the background jobs, and the HTTP
// server that sees them as one Broker. The queengo command runs one App;
// the black-box tests start Apps in their own process.
package app

import (
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/actors"
	"github.com/queengo/queengo/cmd/queengo/cli"
	"github.com/queengo/queengo/cmd/queengo/jobs"
	"github.com/queengo/queengo/cmd/queengo/pushbuffer"
	"github.com/queengo/queengo/cmd/queengo/pushbuffer/filebuffer"
	qhttp "github.com/queengo/queengo/http"
	"github.com/queengo/queengo/pg"
)

// Defaults, named after the environment variables that override them.
const (
	// PortDefault is the Queen protocol's port.
	PortDefault = 6632
	// HostDefault listens on every interface, as the reference server does.
	HostDefault = "0.0.0.0"
	// PoolSizeDefault: on a 2-core machine about 20 connections keep
	// PostgreSQL busy; more only add contention (docs/performance.md "The dated record").
	PoolSizeDefault = 20
	// PopTimeoutDefault is the long-poll deadline when neither
	// DEFAULT_TIMEOUT nor POP_DEFAULT_TIMEOUT_MS is set (docs/pop-routes.md).
	PopTimeoutDefault = 30 * time.Second
	// PopBatchDefault is the batch of a pop that sends none (docs/pop-routes.md).
	PopBatchDefault = 1
	// PopWaitInitialDefault, PopWaitThresholdDefault, PopWaitMultiplierDefault
	// and PopWaitMaxDefault are the long-poll re-check backoff of
	// docs/pop-routes.md.
	PopWaitInitialDefault    = 100 * time.Millisecond
	PopWaitThresholdDefault  = 3
	PopWaitMultiplierDefault = 2.0
	PopWaitMaxDefault        = time.Second
	// PoolAcquireTimeoutDefault bounds the wait for a connection; past it a
	// pop answers 503 {"error":"pool"}.
	PoolAcquireTimeoutDefault = 5 * time.Second
	// StatementTimeoutDefault cancels a statement running this long; a pop
	// then answers 503 {"error":"pop failed"}.
	StatementTimeoutDefault = 30 * time.Second
	// ShutdownTimeoutDefault bounds graceful shutdown.
	ShutdownTimeoutDefault = 30 * time.Second
	// RequestTimeoutDefault bounds the database work of one request: well
	// under a client's patience, well over a healthy statement's time.
	RequestTimeoutDefault = queengo.DefaultRequestTimeout
	// ReadTimeoutDefault bounds reading one request, headers and body, and
	// the wait for the first byte of a new connection (docs/operations.md).
	ReadTimeoutDefault = 30 * time.Second
	// RetentionIntervalDefault, EvictionIntervalDefault,
	// RetentionBatchSizeDefault, EvictionBatchSizeDefault and
	// PartitionCleanupDaysDefault are the reference server's (docs/rules.md
	//
	RetentionIntervalDefault    = jobs.RetentionIntervalDefault
	EvictionIntervalDefault     = jobs.EvictionIntervalDefault
	RetentionBatchSizeDefault   = jobs.RetentionBatchSizeDefault
	EvictionBatchSizeDefault    = jobs.RetentionBatchSizeDefault
	PartitionCleanupDaysDefault = 30
	// MetricsSampleIntervalDefault and MetricsRetentionDaysDefault: the
	// metrics collector samples every 30 s (jobs.SampleIntervalDefault
	// says why) and keeps 7 days of samples.
	MetricsSampleIntervalDefault = jobs.SampleIntervalDefault
	MetricsRetentionDaysDefault  = 7
	// FileBufferEventsPerFileDefault, FileBufferFileBytesDefault,
	// FileBufferMaxBytesDefault, FileBufferMaxBatchDefault and
	// FileBufferFlushDefault: the push buffer's (packages pushbuffer and
	// filebuffer say why).
	FileBufferEventsPerFileDefault = filebuffer.EventsPerFileDefault
	FileBufferFileBytesDefault     = filebuffer.FileBytesDefault
	FileBufferMaxBytesDefault      = filebuffer.MaxBytesDefault
	FileBufferMaxBatchDefault      = pushbuffer.MaxBatchDefault
	FileBufferFlushDefault         = pushbuffer.FlushIntervalDefault
	// FileBufferDirDefault is the push buffer's directory when
	// FILE_BUFFER_DIR is not given: the reference's /var/lib/queen/buffers
	// under queengo's name, so that a broker keeps accepting pushes through
	// a database outage as the server it replaces does. FileBufferOff as
	// FILE_BUFFER_DIR runs without a buffer.
	FileBufferDirDefault = "/var/lib/queengo/buffers"
	FileBufferOff        = "off"
)

// Config is everything the broker process is started with.
type Config struct {
	Host               string
	Port               int
	DatabaseURL        string
	PoolSize           int
	PoolAcquireTimeout time.Duration
	StatementTimeout   time.Duration
	PopTimeout         time.Duration
	// PopBatch and PopSubscriptionMode are what a pop that sends no batch,
	// or no subscriptionMode, gets: 1 and "" (all) unless set, as with the
	// reference server's DEFAULT_BATCH_SIZE and DEFAULT_SUBSCRIPTION_MODE.
	PopBatch            int
	PopSubscriptionMode string
	PopWaitInitial      time.Duration
	PopWaitThreshold    int
	PopWaitMultiplier   float64
	PopWaitMax          time.Duration
	ShutdownTimeout     time.Duration
	// RequestTimeout bounds the database work of one request (connection
	// wait and statements), enforced by the client: a frozen server never
	// fires statement_timeout. A long poll's wait is not bounded by it.
	RequestTimeout time.Duration
	// ReadTimeout bounds reading a request (headers and body) and a new
	// connection's silence; a parked long poll is not affected.
	ReadTimeout time.Duration
	LogLevel    slog.Level
	// PprofAddr, when set, serves net/http/pprof there (for benchmarks).
	PprofAddr string
	// RetentionInterval and EvictionInterval are how often the retention
	// service drops segments (and idle partitions) and evicts messages past
	// maxWaitTimeSeconds; RetentionBatchSize caps the messages of one of
	// its transactions; a partition without segments and idle for
	// PartitionCleanupDays days is removed (docs/retention.md
	// "Retention and eviction").
	RetentionInterval    time.Duration
	EvictionInterval     time.Duration
	RetentionBatchSize   int
	PartitionCleanupDays int
	// MetricsSampleInterval is how often the metrics collector samples
	// the queues and this process into queen.metrics_samples;
	// MetricsRetentionDays how many days of samples it keeps.
	MetricsSampleInterval time.Duration
	MetricsRetentionDays  int
	// Auth is the JWT authentication (JWT_* variables, auth.go);
	// nil unless JWT_ENABLED is true.
	Auth *qhttp.AuthConfig
	// EncryptionKey (QUEEN_ENCRYPTION_KEY, 64 hex characters) seals the
	// payloads of queues with encryptionEnabled; nil refuses such queues.
	// EncryptionReadKeys (QUEEN_ENCRYPTION_KEY_PREVIOUS, comma-separated)
	// only open payloads sealed before a key rotation.
	EncryptionKey      []byte
	EncryptionReadKeys [][]byte
	// FileBufferDir (FILE_BUFFER_DIR) is the push buffer's directory;
	// empty: FileBufferDirDefault, or no buffer when that cannot be used;
	// FileBufferOff: no buffer, pushes fail while PostgreSQL is unreachable
	// and answer 503 under push maintenance. FileBuffer sizes its files
	// (FILE_BUFFER_EVENTS_PER_FILE, FILE_BUFFER_FILE_BYTES) and caps it
	// (FILE_BUFFER_MAX_BYTES); FileBufferMaxBatch and FileBufferFlush bound
	// the replay (FILE_BUFFER_MAX_BATCH records per FILE_BUFFER_FLUSH_MS).
	FileBufferDir      string
	FileBuffer         filebuffer.Options
	FileBufferMaxBatch int
	FileBufferFlush    time.Duration
	// EvictionBatchSize (EVICTION_BATCH_SIZE) caps the messages one
	// eviction transaction moves past maxWaitTimeSeconds.
	EvictionBatchSize int
	// PGUseSSL ("", "true" or "false") and PGSSLRejectUnauthorized
	// (PG_USE_SSL, PG_SSL_REJECT_UNAUTHORIZED) choose the sslmode of a
	// DatabaseURL built from the PG_* parts, as the reference server does:
	// true asks for TLS (sslmode=require, which verifies the server's
	// certificate when a root certificate is configured, as libpq's),
	// true without rejecting unauthorized certificates takes TLS when the
	// server offers it and accepts any certificate (sslmode=prefer), false
	// never uses TLS (sslmode=disable); unset keeps pgx's default, prefer,
	// with no TLS to a loopback server (pg.Open).
	PGUseSSL                string
	PGSSLRejectUnauthorized bool
	// ConnectTimeout (DB_CONNECTION_TIMEOUT, 0: RequestTimeout) bounds
	// opening a database connection when the URL sets no connect_timeout.
	// LockTimeout (DB_LOCK_TIMEOUT) and IdleInTransactionTimeout
	// (DB_IDLE_TIMEOUT, which the reference sets as
	// idle_in_transaction_session_timeout) are set on every session; 0
	// leaves the server's. KeepAliveIdle, KeepAliveInterval (seconds) and
	// KeepAliveCount (DB_KEEPALIVES_IDLE, _INTERVAL, _COUNT) tune the
	// sockets' TCP keepalives, 0: Go's 15 s, 15 s, 9; TCPUserTimeout
	// (DB_TCP_USER_TIMEOUT_MS) sets TCP_USER_TIMEOUT, 0: the kernel's
	// (pg.ConnOptions).
	ConnectTimeout           time.Duration
	LockTimeout              time.Duration
	IdleInTransactionTimeout time.Duration
	KeepAliveIdle            time.Duration
	KeepAliveInterval        time.Duration
	KeepAliveCount           int
	TCPUserTimeout           time.Duration
	// ignored are the reference server's variables set in the environment
	// that queengo does not read, logged once at start (ignored.go).
	ignored []ignoredVar
	// SegmentMaxBytes (SEGMENT_MAX_BYTES) and SegmentMaxItems
	// (SEGMENT_MAX_ITEMS) cap the payload bytes and items the pushes to one
	// partition coalesce into one segment (actors.Config); a push over
	// either is a segment of its own.
	SegmentMaxBytes int
	SegmentMaxItems int
	// Citus (QUEENGO_CITUS: auto, on, off; default auto) is the Citus mode
	// of the schema (docs/scaling.md): auto applies it on a database with
	// the citus extension, on refuses a database without it, off never
	// applies it.
	Citus string
}

// configError names the variable (or flag) whose value is invalid.
type configError struct{ name, value, why string }

func (e *configError) Error() string {
	return fmt.Sprintf("invalid %s=%q: %s", e.name, e.value, e.why)
}

// LoadConfig fills a Config from the environment (the reference server's
// variable names), then from flags, which win.
func LoadConfig(args []string, getenv func(string) string) (*Config, error) {
	c := &Config{
		Host: HostDefault, Port: PortDefault, PoolSize: PoolSizeDefault,
		PoolAcquireTimeout: PoolAcquireTimeoutDefault, StatementTimeout: StatementTimeoutDefault,
		PopTimeout: PopTimeoutDefault, PopBatch: PopBatchDefault, PopWaitInitial: PopWaitInitialDefault,
		PopWaitThreshold: PopWaitThresholdDefault, PopWaitMultiplier: PopWaitMultiplierDefault,
		PopWaitMax: PopWaitMaxDefault, ShutdownTimeout: ShutdownTimeoutDefault, ReadTimeout: ReadTimeoutDefault,
		RequestTimeout:    RequestTimeoutDefault,
		LogLevel:          slog.LevelInfo,
		RetentionInterval: RetentionIntervalDefault, EvictionInterval: EvictionIntervalDefault,
		RetentionBatchSize: RetentionBatchSizeDefault, PartitionCleanupDays: PartitionCleanupDaysDefault,
		MetricsSampleInterval: MetricsSampleIntervalDefault, MetricsRetentionDays: MetricsRetentionDaysDefault,
		FileBuffer: filebuffer.Options{EventsPerFile: FileBufferEventsPerFileDefault, FileBytes: FileBufferFileBytesDefault,
			MaxBytes: FileBufferMaxBytesDefault},
		FileBufferMaxBatch: FileBufferMaxBatchDefault, FileBufferFlush: FileBufferFlushDefault,
		EvictionBatchSize: EvictionBatchSizeDefault, PGSSLRejectUnauthorized: true,
		SegmentMaxBytes: actors.SegmentMaxBytesDefault, SegmentMaxItems: actors.SegmentMaxItemsDefault,
	}
	e := envReader{get: getenv}
	if v := getenv("HOST"); v != "" {
		c.Host = v
	}
	e.int("PORT", &c.Port)
	e.referenceBool("PG_SSL_REJECT_UNAUTHORIZED", &c.PGSSLRejectUnauthorized)
	if v := strings.TrimSpace(getenv("PG_USE_SSL")); v != "" {
		var on bool
		e.referenceBool("PG_USE_SSL", &on)
		c.PGUseSSL = strconv.FormatBool(on)
	}
	c.DatabaseURL = getenv("DATABASE_URL")
	if c.DatabaseURL == "" {
		c.DatabaseURL = urlFromParts(getenv, sslMode(c.PGUseSSL, c.PGSSLRejectUnauthorized))
	}
	e.millis("DB_CONNECTION_TIMEOUT", &c.ConnectTimeout)
	e.millis("DB_LOCK_TIMEOUT", &c.LockTimeout)
	e.millis("DB_IDLE_TIMEOUT", &c.IdleInTransactionTimeout)
	e.seconds("DB_KEEPALIVES_IDLE", &c.KeepAliveIdle)
	e.seconds("DB_KEEPALIVES_INTERVAL", &c.KeepAliveInterval)
	e.int("DB_KEEPALIVES_COUNT", &c.KeepAliveCount)
	e.millis("DB_TCP_USER_TIMEOUT_MS", &c.TCPUserTimeout)
	e.int("DB_POOL_SIZE", &c.PoolSize)
	e.millis("DB_POOL_ACQUIRE_TIMEOUT_MS", &c.PoolAcquireTimeout)
	// DB_STATEMENT_TIMEOUT is the reference server's name, in milliseconds
	// too; DB_STATEMENT_TIMEOUT_MS, the more specific, wins when both are
	// set. Both are validated.
	e.millis("DB_STATEMENT_TIMEOUT", &c.StatementTimeout)
	e.millis("DB_STATEMENT_TIMEOUT_MS", &c.StatementTimeout)
	// DEFAULT_TIMEOUT wins over POP_DEFAULT_TIMEOUT_MS when both are set.
	if getenv("DEFAULT_TIMEOUT") != "" {
		e.millis("DEFAULT_TIMEOUT", &c.PopTimeout)
	} else {
		e.millis("POP_DEFAULT_TIMEOUT_MS", &c.PopTimeout)
	}
	e.int("DEFAULT_BATCH_SIZE", &c.PopBatch)
	if v := getenv("DEFAULT_SUBSCRIPTION_MODE"); v != "" {
		c.PopSubscriptionMode = v
	}
	e.millis("POP_WAIT_INITIAL_INTERVAL_MS", &c.PopWaitInitial)
	e.int("POP_WAIT_BACKOFF_THRESHOLD", &c.PopWaitThreshold)
	e.float("POP_WAIT_BACKOFF_MULTIPLIER", &c.PopWaitMultiplier)
	e.millis("POP_WAIT_MAX_INTERVAL_MS", &c.PopWaitMax)
	e.millis("SHUTDOWN_TIMEOUT_MS", &c.ShutdownTimeout)
	e.millis("HTTP_READ_TIMEOUT_MS", &c.ReadTimeout)
	e.millis("DB_REQUEST_TIMEOUT_MS", &c.RequestTimeout)
	c.PprofAddr = getenv("PPROF_ADDR")
	e.millis("RETENTION_INTERVAL", &c.RetentionInterval)
	e.millis("EVICTION_INTERVAL", &c.EvictionInterval)
	e.int("RETENTION_BATCH_SIZE", &c.RetentionBatchSize)
	e.int("EVICTION_BATCH_SIZE", &c.EvictionBatchSize)
	e.int("PARTITION_CLEANUP_DAYS", &c.PartitionCleanupDays)
	e.millis("METRICS_SAMPLE_INTERVAL_MS", &c.MetricsSampleInterval)
	e.int("METRICS_RETENTION_DAYS", &c.MetricsRetentionDays)
	c.FileBufferDir = strings.TrimSpace(getenv("FILE_BUFFER_DIR"))
	if v := strings.TrimSpace(getenv("QUEENGO_CITUS")); v != "" {
		c.Citus = strings.ToLower(v)
	}
	e.int("FILE_BUFFER_EVENTS_PER_FILE", &c.FileBuffer.EventsPerFile)
	e.int64("FILE_BUFFER_FILE_BYTES", &c.FileBuffer.FileBytes)
	e.int64("FILE_BUFFER_MAX_BYTES", &c.FileBuffer.MaxBytes)
	e.int("FILE_BUFFER_MAX_BATCH", &c.FileBufferMaxBatch)
	e.millis("FILE_BUFFER_FLUSH_MS", &c.FileBufferFlush)
	e.int("SEGMENT_MAX_BYTES", &c.SegmentMaxBytes)
	e.int("SEGMENT_MAX_ITEMS", &c.SegmentMaxItems)
	loadEncryption(&e, c)
	loadAuth(&e, c)
	if v := getenv("LOG_LEVEL"); v != "" {
		if l, err := parseLevel(v); err != nil {
			e.fail("LOG_LEVEL", v, logLevelWant)
		} else {
			c.LogLevel = l
		}
	}
	if e.err != nil {
		return nil, e.err
	}
	c.ignored = ignoredIn(getenv)

	fs := flag.NewFlagSet("queengo", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: queengo [flags] [migrate]\n"+
			"  serves the Queen MQ HTTP API (migrate: applies the schema and exits).\n"+
			"  Operator commands against a running broker: queengo help (%s).\n\nFlags:\n",
			strings.Join(slices.DeleteFunc(slices.Clone(cli.Commands), func(c string) bool { return c == "help" }), ", "))
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Host, "host", c.Host, "address to listen on (env HOST)")
	fs.IntVar(&c.Port, "port", c.Port, "port to listen on (env PORT)")
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL URL (env DATABASE_URL, else PG_HOST, PG_PORT, PG_USER, PG_PASSWORD, PG_DB, PG_USE_SSL)")
	fs.IntVar(&c.PoolSize, "pool-size", c.PoolSize, "maximum PostgreSQL connections (env DB_POOL_SIZE)")
	fs.DurationVar(&c.PoolAcquireTimeout, "pool-acquire-timeout", c.PoolAcquireTimeout, "wait for a pooled connection (env DB_POOL_ACQUIRE_TIMEOUT_MS)")
	fs.DurationVar(&c.StatementTimeout, "statement-timeout", c.StatementTimeout, "PostgreSQL statement_timeout, 0 disables (env DB_STATEMENT_TIMEOUT_MS, else DB_STATEMENT_TIMEOUT)")
	fs.DurationVar(&c.PopTimeout, "pop-timeout", c.PopTimeout, "default long-poll timeout (env DEFAULT_TIMEOUT, else POP_DEFAULT_TIMEOUT_MS)")
	fs.IntVar(&c.PopBatch, "pop-batch", c.PopBatch, "batch of a pop that sends none (env DEFAULT_BATCH_SIZE)")
	fs.StringVar(&c.PopSubscriptionMode, "pop-subscription-mode", c.PopSubscriptionMode, "subscriptionMode of a pop that sends none: all or new (env DEFAULT_SUBSCRIPTION_MODE)")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "graceful shutdown bound (env SHUTDOWN_TIMEOUT_MS)")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", c.RequestTimeout, "bound of one request's database work (env DB_REQUEST_TIMEOUT_MS)")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "bound of reading a request's headers and body, and of a new connection's silence (env HTTP_READ_TIMEOUT_MS)")
	fs.DurationVar(&c.MetricsSampleInterval, "metrics-sample-interval", c.MetricsSampleInterval, "how often the metrics collector samples (env METRICS_SAMPLE_INTERVAL_MS)")
	fs.IntVar(&c.MetricsRetentionDays, "metrics-retention-days", c.MetricsRetentionDays, "days of metrics samples kept (env METRICS_RETENTION_DAYS)")
	fs.StringVar(&c.FileBufferDir, "file-buffer-dir", c.FileBufferDir, "push buffer directory; empty: "+FileBufferDirDefault+" when usable; off: no buffer (env FILE_BUFFER_DIR)")
	fs.StringVar(&c.PprofAddr, "pprof-addr", c.PprofAddr, "serve net/http/pprof on this address, e.g. 127.0.0.1:6060 (env PPROF_ADDR)")
	level := fs.String("log-level", strings.ToLower(c.LogLevel.String()), "trace (same as debug), debug, info, warn or error (env LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	l, err := parseLevel(*level)
	if err != nil {
		return nil, &configError{"-log-level", *level, logLevelWant}
	}
	c.LogLevel = l
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = c.RequestTimeout
	}
	if fs.NArg() > 0 && fs.Arg(0) != "migrate" {
		return nil, fmt.Errorf("unknown command %q (want no command, migrate, or one of the operator commands: queengo help)", fs.Arg(0))
	}
	return c, c.validate()
}

// validate checks ranges and cross-field rules.
func (c *Config) validate() error {
	switch {
	case c.Citus != "" && c.Citus != pg.CitusAuto && c.Citus != pg.CitusOn && c.Citus != pg.CitusOff:
		return &configError{"QUEENGO_CITUS", c.Citus, "want auto, on or off"}
	case c.Port < 1 || c.Port > 65535:
		return &configError{"PORT", strconv.Itoa(c.Port), "want 1..65535"}
	case c.PoolSize < 1:
		return &configError{"DB_POOL_SIZE", strconv.Itoa(c.PoolSize), "want at least 1"}
	case c.PoolAcquireTimeout <= 0:
		return &configError{"DB_POOL_ACQUIRE_TIMEOUT_MS", c.PoolAcquireTimeout.String(), "want more than 0"}
	case c.StatementTimeout < 0:
		return &configError{"DB_STATEMENT_TIMEOUT_MS", c.StatementTimeout.String(), "want 0 (off) or more"}
	case c.RequestTimeout <= 0:
		return &configError{"DB_REQUEST_TIMEOUT_MS", c.RequestTimeout.String(), "want more than 0"}
	case c.ReadTimeout <= 0:
		return &configError{"HTTP_READ_TIMEOUT_MS", c.ReadTimeout.String(), "want more than 0"}
	case c.PopTimeout < 0:
		return &configError{"DEFAULT_TIMEOUT", c.PopTimeout.String(), "want 0 or more"}
	case c.PopBatch < 1 || c.PopBatch > 10000:
		return &configError{"DEFAULT_BATCH_SIZE", strconv.Itoa(c.PopBatch), "want 1 to 10000, a pop's batch range"}
	case !slices.Contains([]string{"", "all", "new", "new-only"}, c.PopSubscriptionMode):
		return &configError{"DEFAULT_SUBSCRIPTION_MODE", c.PopSubscriptionMode, `want all or new ("new-only" is new)`}
	case c.PopWaitInitial <= 0:
		return &configError{"POP_WAIT_INITIAL_INTERVAL_MS", c.PopWaitInitial.String(), "want more than 0"}
	case c.PopWaitThreshold < 0:
		return &configError{"POP_WAIT_BACKOFF_THRESHOLD", strconv.Itoa(c.PopWaitThreshold), "want 0 or more"}
	case c.PopWaitMultiplier < 1:
		return &configError{"POP_WAIT_BACKOFF_MULTIPLIER", strconv.FormatFloat(c.PopWaitMultiplier, 'g', -1, 64), "want 1 or more"}
	case c.PopWaitMax < c.PopWaitInitial:
		return &configError{"POP_WAIT_MAX_INTERVAL_MS", c.PopWaitMax.String(), "must not be shorter than POP_WAIT_INITIAL_INTERVAL_MS"}
	case c.RetentionInterval <= 0:
		return &configError{"RETENTION_INTERVAL", c.RetentionInterval.String(), "want more than 0 (milliseconds)"}
	case c.EvictionInterval <= 0:
		return &configError{"EVICTION_INTERVAL", c.EvictionInterval.String(), "want more than 0 (milliseconds)"}
	case c.RetentionBatchSize < 1:
		return &configError{"RETENTION_BATCH_SIZE", strconv.Itoa(c.RetentionBatchSize), "want at least 1"}
	case c.EvictionBatchSize < 1:
		return &configError{"EVICTION_BATCH_SIZE", strconv.Itoa(c.EvictionBatchSize), "want at least 1"}
	case c.KeepAliveCount < 0:
		return &configError{"DB_KEEPALIVES_COUNT", strconv.Itoa(c.KeepAliveCount), "want 0 or more"}
	case c.TCPUserTimeout > 0 && runtime.GOOS != "linux":
		return &configError{"DB_TCP_USER_TIMEOUT_MS", strconv.FormatInt(c.TCPUserTimeout.Milliseconds(), 10), "TCP_USER_TIMEOUT is Linux's: want 0 here"}
	case c.PartitionCleanupDays < 1:
		return &configError{"PARTITION_CLEANUP_DAYS", strconv.Itoa(c.PartitionCleanupDays), "want at least 1"}
	case c.MetricsSampleInterval < jobs.SampleIntervalMin || c.MetricsSampleInterval > jobs.SampleIntervalMax:
		return &configError{"METRICS_SAMPLE_INTERVAL_MS", c.MetricsSampleInterval.String(), "want 100 to 300000 (milliseconds)"}
	case c.MetricsRetentionDays < 1:
		return &configError{"METRICS_RETENTION_DAYS", strconv.Itoa(c.MetricsRetentionDays), "want at least 1"}
	case c.FileBuffer.EventsPerFile < 1:
		return &configError{"FILE_BUFFER_EVENTS_PER_FILE", strconv.Itoa(c.FileBuffer.EventsPerFile), "want at least 1"}
	case c.FileBuffer.FileBytes < 1:
		return &configError{"FILE_BUFFER_FILE_BYTES", strconv.FormatInt(c.FileBuffer.FileBytes, 10), "want at least 1"}
	case c.FileBuffer.MaxBytes < c.FileBuffer.FileBytes:
		return &configError{"FILE_BUFFER_MAX_BYTES", strconv.FormatInt(c.FileBuffer.MaxBytes, 10), "must not be less than FILE_BUFFER_FILE_BYTES"}
	case c.FileBufferMaxBatch < 1:
		return &configError{"FILE_BUFFER_MAX_BATCH", strconv.Itoa(c.FileBufferMaxBatch), "want at least 1"}
	case c.FileBufferFlush <= 0:
		return &configError{"FILE_BUFFER_FLUSH_MS", c.FileBufferFlush.String(), "want more than 0 (milliseconds)"}
	case c.SegmentMaxBytes < 1:
		return &configError{"SEGMENT_MAX_BYTES", strconv.Itoa(c.SegmentMaxBytes), "want at least 1"}
	case c.SegmentMaxItems < 1:
		return &configError{"SEGMENT_MAX_ITEMS", strconv.Itoa(c.SegmentMaxItems), "want at least 1"}
	case c.DatabaseURL == "":
		return &configError{"DATABASE_URL", "", "required"}
	}
	return nil
}

const logLevelWant = "want trace, debug, info, warn or error"

// parseLevel reads a log level: slog's names (any case), and trace, the
// reference server's most verbose level, which is debug here.
func parseLevel(v string) (slog.Level, error) {
	v = strings.TrimSpace(v)
	if strings.EqualFold(v, "trace") {
		return slog.LevelDebug, nil
	}
	var l slog.Level
	err := l.UnmarshalText([]byte(v))
	return l, err
}

// sslMode is the sslmode of PG_USE_SSL and PG_SSL_REJECT_UNAUTHORIZED, as
// the reference server chooses it (Config.PGUseSSL); "" when PG_USE_SSL is
// not set.
func sslMode(useSSL string, rejectUnauthorized bool) string {
	switch {
	case useSSL == "false":
		return "disable"
	case useSSL == "true" && rejectUnauthorized:
		return "require"
	case useSSL == "true":
		return "prefer"
	}
	return ""
}

// urlFromParts builds a URL from PG_HOST, PG_PORT, PG_USER, PG_PASSWORD and
// PG_DB, with the reference server's defaults, and sslmode unless it is "".
func urlFromParts(getenv func(string) string, sslmode string) string {
	or := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	u := url.URL{Scheme: "postgres", Host: or("PG_HOST", "localhost") + ":" + or("PG_PORT", "5432"), Path: "/" + or("PG_DB", "postgres")}
	if p := getenv("PG_PASSWORD"); p != "" {
		u.User = url.UserPassword(or("PG_USER", "postgres"), p)
	} else {
		u.User = url.User(or("PG_USER", "postgres"))
	}
	if sslmode != "" {
		u.RawQuery = url.Values{"sslmode": {sslmode}}.Encode()
	}
	return u.String()
}

// loadEncryption reads the encryption keys: QUEEN_ENCRYPTION_KEY, the
// reference server's, and QUEEN_ENCRYPTION_KEY_PREVIOUS, the keys of before a
// rotation (docs/operations.md). A key is 64 hexadecimal characters (32
// bytes); an error never shows one.
func loadEncryption(e *envReader, c *Config) {
	if v := strings.TrimSpace(e.get("QUEEN_ENCRYPTION_KEY")); v != "" {
		if c.EncryptionKey = parseKey(v); c.EncryptionKey == nil {
			e.fail("QUEEN_ENCRYPTION_KEY", hiddenKey(v), keyWant)
		}
	}
	v := strings.TrimSpace(e.get("QUEEN_ENCRYPTION_KEY_PREVIOUS"))
	if v == "" {
		return
	}
	for i, s := range strings.Split(v, ",") {
		k := parseKey(strings.TrimSpace(s))
		if k == nil {
			e.fail("QUEEN_ENCRYPTION_KEY_PREVIOUS", fmt.Sprintf("key %d: %s", i+1, hiddenKey(s)), keyWant)
			return
		}
		c.EncryptionReadKeys = append(c.EncryptionReadKeys, k)
	}
}

const keyWant = "want 64 hexadecimal characters (a 32-byte AES-256 key)"

// parseKey decodes a 64-hex-character key; nil when v is not one.
func parseKey(v string) []byte {
	k, err := hex.DecodeString(v)
	if err != nil || len(k) != 32 {
		return nil
	}
	return k
}

// hiddenKey stands for an invalid key in an error: its length only.
func hiddenKey(v string) string {
	return fmt.Sprintf("(hidden, %d characters)", len(strings.TrimSpace(v)))
}

// envReader parses typed environment variables, keeping the first error.
type envReader struct {
	get func(string) string
	err error
}

func (e *envReader) fail(name, value, why string) {
	if e.err == nil {
		e.err = &configError{name, value, why}
	}
}

func (e *envReader) int(name string, dst *int) {
	v := strings.TrimSpace(e.get(name))
	if v == "" {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.fail(name, v, "not an integer")
		return
	}
	*dst = n
}

func (e *envReader) int64(name string, dst *int64) {
	v := strings.TrimSpace(e.get(name))
	if v == "" {
		return
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		e.fail(name, v, "not an integer")
		return
	}
	*dst = n
}

func (e *envReader) millis(name string, dst *time.Duration) {
	v := strings.TrimSpace(e.get(name))
	if v == "" {
		return
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		e.fail(name, v, "want a whole number of milliseconds")
		return
	}
	*dst = time.Duration(n) * time.Millisecond
}

// referenceBool reads true or false, in any case, and refuses anything
// else: the reference server takes every value but "true" as false, so a 1
// or a yes that it read as false must not silently turn TLS on here.
func (e *envReader) referenceBool(name string, dst *bool) {
	switch v := strings.TrimSpace(e.get(name)); {
	case v == "":
	case strings.EqualFold(v, "true"):
		*dst = true
	case strings.EqualFold(v, "false"):
		*dst = false
	default:
		e.fail(name, v, `want true or false (the reference server takes anything but "true" as false)`)
	}
}

func (e *envReader) float(name string, dst *float64) {
	v := strings.TrimSpace(e.get(name))
	if v == "" {
		return
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		e.fail(name, v, "not a number")
		return
	}
	*dst = f
}

// openFileBuffer opens the push buffer directory, or returns nil when
// FILE_BUFFER_DIR is off. Without FILE_BUFFER_DIR it opens
// FileBufferDirDefault, and when that cannot be used (no permission, or
// another broker process on this machine holds it) it says so in the log
// and returns nil: a directory the operator named must open. Its files are
// closed with the process: every record it acknowledged is already fsynced.
func openFileBuffer(c *Config, log *slog.Logger) (*pushbuffer.Files, error) {
	switch c.FileBufferDir {
	case FileBufferOff:
		return nil, nil
	case "":
		f, err := pushbuffer.OpenFiles(FileBufferDirDefault, c.FileBuffer)
		if err != nil {
			log.Warn("push buffer off: the default FILE_BUFFER_DIR cannot be used; set FILE_BUFFER_DIR to a directory of this process's own, or to off",
				"dir", FileBufferDirDefault, "err", err)
			return nil, nil
		}
		return f, nil
	}
	f, err := pushbuffer.OpenFiles(c.FileBufferDir, c.FileBuffer)
	if err != nil {
		return nil, fmt.Errorf("error opening FILE_BUFFER_DIR: %w", err)
	}
	return f, nil
}
