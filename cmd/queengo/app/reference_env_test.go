package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestConfig_PGUseSSLChoosesTheSSLMode: PG_USE_SSL and
// PG_SSL_REJECT_UNAUTHORIZED give a URL built from the PG_* parts the
// reference's sslmode; unset, the URL has none (queengo's default).
func TestConfig_PGUseSSLChoosesTheSSLMode(t *testing.T) {
	t.Parallel()
	parts := map[string]string{"PG_HOST": "db", "PG_USER": "u", "PG_DB": "q"}
	for _, c := range []struct {
		use, reject string
		want        string
	}{
		{"", "", "postgres://u@db:5432/q"},
		{"false", "", "postgres://u@db:5432/q?sslmode=disable"},
		{"true", "", "postgres://u@db:5432/q?sslmode=require"},
		{"TRUE", "true", "postgres://u@db:5432/q?sslmode=require"},
		{"true", "false", "postgres://u@db:5432/q?sslmode=prefer"},
		{"false", "false", "postgres://u@db:5432/q?sslmode=disable"},
	} {
		kv := map[string]string{"PG_USE_SSL": c.use, "PG_SSL_REJECT_UNAUTHORIZED": c.reject}
		for k, v := range parts {
			kv[k] = v
		}
		cfg := mustLoad(t, kv)
		if cfg.DatabaseURL != c.want {
			t.Errorf("PG_USE_SSL=%q PG_SSL_REJECT_UNAUTHORIZED=%q: url %q, want %q", c.use, c.reject, cfg.DatabaseURL, c.want)
		}
	}
	// The reference takes these as false; queengo refuses them rather
	// than read them otherwise.
	for _, name := range []string{"PG_USE_SSL", "PG_SSL_REJECT_UNAUTHORIZED"} {
		for _, v := range []string{"1", "yes", "on"} {
			var ce *configError
			if _, err := LoadConfig(nil, env(map[string]string{name: v})); !errors.As(err, &ce) || ce.name != name {
				t.Errorf("%s=%s: error %v, want one naming %s", name, v, err, name)
			}
		}
	}
	// DATABASE_URL wins over the parts, TLS settings included.
	cfg := mustLoad(t, map[string]string{"DATABASE_URL": "postgres://x@h/d", "PG_USE_SSL": "true"})
	if cfg.DatabaseURL != "postgres://x@h/d" {
		t.Errorf("url %q, want DATABASE_URL's", cfg.DatabaseURL)
	}
}

// TestConfig_ConnectionNames: DB_CONNECTION_TIMEOUT, DB_LOCK_TIMEOUT,
// DB_IDLE_TIMEOUT (milliseconds), DB_KEEPALIVES_IDLE and
// DB_KEEPALIVES_INTERVAL (seconds, as libpq's), DB_KEEPALIVES_COUNT and
// DB_TCP_USER_TIMEOUT_MS fill their fields; DB_CONNECTION_TIMEOUT unset or 0
// is the request timeout; a bad value names its variable.
func TestConfig_ConnectionNames(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, map[string]string{"DB_CONNECTION_TIMEOUT": "1500", "DB_LOCK_TIMEOUT": "10000",
		"DB_IDLE_TIMEOUT": "30000", "DB_KEEPALIVES_IDLE": "20", "DB_KEEPALIVES_INTERVAL": "5",
		"DB_KEEPALIVES_COUNT": "3", "DB_TCP_USER_TIMEOUT_MS": "12000"})
	got := []time.Duration{cfg.ConnectTimeout, cfg.LockTimeout, cfg.IdleInTransactionTimeout, cfg.KeepAliveIdle,
		cfg.KeepAliveInterval, time.Duration(cfg.KeepAliveCount), cfg.TCPUserTimeout}
	want := []time.Duration{1500 * time.Millisecond, 10 * time.Second, 30 * time.Second, 20 * time.Second,
		5 * time.Second, 3, 12 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d: %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}

	def := mustLoad(t, map[string]string{})
	if def.ConnectTimeout != RequestTimeoutDefault || def.LockTimeout != 0 || def.IdleInTransactionTimeout != 0 ||
		def.KeepAliveIdle != 0 || def.KeepAliveInterval != 0 || def.KeepAliveCount != 0 || def.TCPUserTimeout != 0 {
		t.Errorf("defaults %+v: want the request timeout to connect and nothing else set", def)
	}
	for _, kv := range []map[string]string{{"DB_REQUEST_TIMEOUT_MS": "4000"}, {"DB_REQUEST_TIMEOUT_MS": "4000", "DB_CONNECTION_TIMEOUT": "0"}} {
		if c := mustLoad(t, kv); c.ConnectTimeout != 4*time.Second {
			t.Errorf("%v: connect timeout %v, want DB_REQUEST_TIMEOUT_MS's 4s", kv, c.ConnectTimeout)
		}
	}
	for name, v := range map[string]string{"DB_CONNECTION_TIMEOUT": "2s", "DB_LOCK_TIMEOUT": "-1", "DB_IDLE_TIMEOUT": "x",
		"DB_KEEPALIVES_IDLE": "1.5", "DB_KEEPALIVES_INTERVAL": "-3", "DB_KEEPALIVES_COUNT": "-1", "DB_TCP_USER_TIMEOUT_MS": "soon"} {
		var ce *configError
		if _, err := LoadConfig(nil, env(map[string]string{name: v})); !errors.As(err, &ce) || ce.name != name {
			t.Errorf("%s=%s: error %v, want one naming %s", name, v, err, name)
		}
	}
}

// TestConfig_EvictionBatchSize: EVICTION_BATCH_SIZE sizes eviction, 1000
// as the reference's unless set, whatever RETENTION_BATCH_SIZE is.
func TestConfig_EvictionBatchSize(t *testing.T) {
	t.Parallel()
	if c := mustLoad(t, map[string]string{"RETENTION_BATCH_SIZE": "50000"}); c.EvictionBatchSize != 1000 {
		t.Errorf("eviction batch %d, want 1000", c.EvictionBatchSize)
	}
	if c := mustLoad(t, map[string]string{"EVICTION_BATCH_SIZE": "250"}); c.EvictionBatchSize != 250 || c.RetentionBatchSize != 1000 {
		t.Errorf("eviction batch %d, retention batch %d: want 250 and 1000", c.EvictionBatchSize, c.RetentionBatchSize)
	}
	var ce *configError
	if _, err := LoadConfig(nil, env(map[string]string{"EVICTION_BATCH_SIZE": "0"})); !errors.As(err, &ce) || ce.name != "EVICTION_BATCH_SIZE" {
		t.Errorf("EVICTION_BATCH_SIZE=0: error %v", err)
	}
}

// TestConfig_ReferenceNamesIgnoredAreLoggedOnce: each reference variable
// queengo does not read, when set, gives one warning with its name and a
// reason; variables it reads, and unknown ones, give none.
func TestConfig_ReferenceNamesIgnoredAreLoggedOnce(t *testing.T) {
	t.Parallel()
	ignored := []string{"NUM_WORKERS", "SIDECAR_POOL_SIZE", "SIDECAR_MICRO_BATCH_WAIT_MS", "RESPONSE_BATCH_SIZE",
		"QUEEN_UDP_PEERS", "QUEEN_SYNC_ENABLED", "QUEEN_VEGAS_ALPHA", "QUEEN_PUSH_MAX_CONCURRENT", "STATS_INTERVAL_MS",
		"STATS_HISTORY_RETENTION_DAYS", "METRICS_AGGREGATE_INTERVAL_S"}
	kv := map[string]string{"DB_LOCK_TIMEOUT": "100", "EVICTION_BATCH_SIZE": "10", "SOMETHING_ELSE": "1"}
	for _, n := range ignored {
		kv[n] = "7"
	}
	cfg := mustLoad(t, kv)
	var buf bytes.Buffer
	cfg.logIgnored(slog.New(slog.NewJSONHandler(&buf, nil)))
	count := map[string]int{}
	for line := range strings.Lines(buf.String()) {
		var rec struct{ Level, Var, Why string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Level != "WARN" || rec.Why == "" {
			t.Errorf("line %s: want a warning with a reason", line)
		}
		count[rec.Var]++
	}
	for _, n := range ignored {
		if count[n] != 1 {
			t.Errorf("%s logged %d times, want once", n, count[n])
		}
	}
	if len(count) != len(ignored) {
		t.Errorf("logged %v, want only %v", count, ignored)
	}
}

// TestConfig_IgnoredNamesAreNotRead: no name of the ignored table is a
// setting queengo reads.
func TestConfig_IgnoredNamesAreNotRead(t *testing.T) {
	t.Parallel()
	shown := map[string]bool{}
	for _, s := range mustLoad(t, jwtOn).Settings() {
		shown[s.Name] = true
	}
	for _, g := range referenceIgnored {
		for _, n := range g.names {
			if shown[n] {
				t.Errorf("%s is both read and listed as ignored", n)
			}
		}
	}
}

// TestConfig_PartsIgnoredBesideDatabaseURL: with DATABASE_URL set, the
// PG_* parts that are set are reported ignored; PG_SSL_REJECT_UNAUTHORIZED
// without PG_USE_SSL=true is too.
func TestConfig_PartsIgnoredBesideDatabaseURL(t *testing.T) {
	t.Parallel()
	names := func(c *Config) []string {
		var out []string
		for _, v := range c.ignored {
			out = append(out, v.name)
		}
		return out
	}
	c := mustLoad(t, map[string]string{"DATABASE_URL": "postgres://x@h/d", "PG_HOST": "db", "PG_USE_SSL": "true"})
	if got := strings.Join(names(c), ","); got != "PG_HOST,PG_USE_SSL" {
		t.Errorf("ignored %s, want PG_HOST,PG_USE_SSL", got)
	}
	c = mustLoad(t, map[string]string{"PG_SSL_REJECT_UNAUTHORIZED": "false"})
	if got := strings.Join(names(c), ","); got != "PG_SSL_REJECT_UNAUTHORIZED" {
		t.Errorf("ignored %s, want PG_SSL_REJECT_UNAUTHORIZED", got)
	}
	if c = mustLoad(t, map[string]string{"PG_USE_SSL": "true", "PG_SSL_REJECT_UNAUTHORIZED": "false"}); len(c.ignored) != 0 {
		t.Errorf("ignored %v, want none", names(c))
	}
}
