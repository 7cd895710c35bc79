package app

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// TestConfig_TimeoutPrecedence: DEFAULT_TIMEOUT, else POP_DEFAULT_TIMEOUT_MS,
// else 30000; DEFAULT_TIMEOUT wins when both are set (docs/pop-routes.md).
func TestConfig_TimeoutPrecedence(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want time.Duration
	}{
		{map[string]string{}, 30 * time.Second},
		{map[string]string{"POP_DEFAULT_TIMEOUT_MS": "700"}, 700 * time.Millisecond},
		{map[string]string{"DEFAULT_TIMEOUT": "300"}, 300 * time.Millisecond},
		{map[string]string{"DEFAULT_TIMEOUT": "300", "POP_DEFAULT_TIMEOUT_MS": "700"}, 300 * time.Millisecond},
	} {
		cfg, err := LoadConfig(nil, env(c.env))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.PopTimeout != c.want {
			t.Errorf("%v: timeout %v, want %v", c.env, cfg.PopTimeout, c.want)
		}
	}
}

// TestConfig_FlagsOverrideEnv: a flag wins over its environment variable.
func TestConfig_FlagsOverrideEnv(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig([]string{"-port", "7001", "-pool-size", "3"}, env(map[string]string{"PORT": "7000", "DB_POOL_SIZE": "9"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 7001 || cfg.PoolSize != 3 {
		t.Fatalf("port %d pool %d, want 7001 and 3", cfg.Port, cfg.PoolSize)
	}
}

// TestConfig_DatabaseURLFromParts: without DATABASE_URL the PG_* variables
// build one.
func TestConfig_DatabaseURLFromParts(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(nil, env(map[string]string{"PG_HOST": "db", "PG_PORT": "6543", "PG_USER": "u", "PG_PASSWORD": "p w", "PG_DB": "q"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DatabaseURL != "postgres://u:p%20w@db:6543/q" {
		t.Fatalf("url %q", cfg.DatabaseURL)
	}
}

// TestConfig_InvalidValueNamesVariable: an invalid value is an error naming
// the variable.
func TestConfig_InvalidValueNamesVariable(t *testing.T) {
	t.Parallel()
	for name, val := range map[string]string{"PORT": "abc", "DB_POOL_SIZE": "0", "POP_WAIT_BACKOFF_MULTIPLIER": "x",
		"LOG_LEVEL": "loud", "DEFAULT_TIMEOUT": "-1", "POP_WAIT_MAX_INTERVAL_MS": "10", "DEFAULT_BATCH_SIZE": "0",
		"DEFAULT_SUBSCRIPTION_MODE": "sometimes"} {
		_, err := LoadConfig(nil, env(map[string]string{name: val}))
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: error %v, want one naming %s", name, val, err, name)
		}
	}
}

// TestConfig_PopDefaults: DEFAULT_BATCH_SIZE and DEFAULT_SUBSCRIPTION_MODE
// (the reference server's names), overridden by -pop-batch and
// -pop-subscription-mode; 1 and "" (all) when unset.
func TestConfig_PopDefaults(t *testing.T) {
	t.Parallel()
	c, err := LoadConfig(nil, env(nil))
	if err != nil || c.PopBatch != 1 || c.PopSubscriptionMode != "" {
		t.Fatalf("unset: %d %q %v", c.PopBatch, c.PopSubscriptionMode, err)
	}
	e := env(map[string]string{"DEFAULT_BATCH_SIZE": "10", "DEFAULT_SUBSCRIPTION_MODE": "new"})
	if c, err = LoadConfig(nil, e); err != nil || c.PopBatch != 10 || c.PopSubscriptionMode != "new" {
		t.Fatalf("env: %d %q %v", c.PopBatch, c.PopSubscriptionMode, err)
	}
	if c, err = LoadConfig([]string{"-pop-batch", "5", "-pop-subscription-mode", "all"}, e); err != nil || c.PopBatch != 5 || c.PopSubscriptionMode != "all" {
		t.Fatalf("flags: %d %q %v", c.PopBatch, c.PopSubscriptionMode, err)
	}
}

// TestConfig_ReadTimeout: HTTP_READ_TIMEOUT_MS, overridden by -read-timeout,
// default 30 s; it must be more than 0.
func TestConfig_ReadTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{nil, map[string]string{}, 30 * time.Second},
		{nil, map[string]string{"HTTP_READ_TIMEOUT_MS": "1500"}, 1500 * time.Millisecond},
		{[]string{"-read-timeout", "2s"}, map[string]string{"HTTP_READ_TIMEOUT_MS": "1500"}, 2 * time.Second},
		{[]string{"-read-timeout", "250ms"}, map[string]string{}, 250 * time.Millisecond},
	} {
		cfg, err := LoadConfig(c.args, env(c.env))
		if err != nil {
			t.Fatalf("%v %v: %v", c.args, c.env, err)
		}
		if cfg.ReadTimeout != c.want {
			t.Errorf("%v %v: read timeout %v, want %v", c.args, c.env, cfg.ReadTimeout, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
	}{
		{nil, map[string]string{"HTTP_READ_TIMEOUT_MS": "0"}},
		{nil, map[string]string{"HTTP_READ_TIMEOUT_MS": "-5"}},
		{nil, map[string]string{"HTTP_READ_TIMEOUT_MS": "1s"}},
		{[]string{"-read-timeout", "0"}, map[string]string{}},
		{[]string{"-read-timeout", "-1s"}, map[string]string{}},
	} {
		_, err := LoadConfig(c.args, env(c.env))
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "HTTP_READ_TIMEOUT_MS") {
			t.Errorf("%v %v: error %v, want one naming HTTP_READ_TIMEOUT_MS", c.args, c.env, err)
		}
	}
}

// TestConfig_StatementTimeoutAlias: DB_STATEMENT_TIMEOUT, the reference
// server's name, is read too (milliseconds); DB_STATEMENT_TIMEOUT_MS wins when
// both are set, the flag over both; an invalid value of either is an error.
func TestConfig_StatementTimeoutAlias(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		env  map[string]string
		want time.Duration
	}{
		{nil, map[string]string{}, 30 * time.Second},
		{nil, map[string]string{"DB_STATEMENT_TIMEOUT": "1200"}, 1200 * time.Millisecond},
		{nil, map[string]string{"DB_STATEMENT_TIMEOUT_MS": "700"}, 700 * time.Millisecond},
		{nil, map[string]string{"DB_STATEMENT_TIMEOUT": "1200", "DB_STATEMENT_TIMEOUT_MS": "700"}, 700 * time.Millisecond},
		{nil, map[string]string{"DB_STATEMENT_TIMEOUT": "0"}, 0},
		{[]string{"-statement-timeout", "3s"}, map[string]string{"DB_STATEMENT_TIMEOUT": "1200", "DB_STATEMENT_TIMEOUT_MS": "700"}, 3 * time.Second},
	} {
		cfg, err := LoadConfig(c.args, env(c.env))
		if err != nil {
			t.Fatalf("%v %v: %v", c.args, c.env, err)
		}
		if cfg.StatementTimeout != c.want {
			t.Errorf("%v %v: statement timeout %v, want %v", c.args, c.env, cfg.StatementTimeout, c.want)
		}
	}
	for _, e := range []map[string]string{
		{"DB_STATEMENT_TIMEOUT": "30s"},
		{"DB_STATEMENT_TIMEOUT": "-1"},
		{"DB_STATEMENT_TIMEOUT": "abc", "DB_STATEMENT_TIMEOUT_MS": "700"},
	} {
		_, err := LoadConfig(nil, env(e))
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "DB_STATEMENT_TIMEOUT=") {
			t.Errorf("%v: error %v, want one naming DB_STATEMENT_TIMEOUT", e, err)
		}
	}
}

// TestConfig_LogLevelTrace: trace, the reference server's most verbose
// level, starts the broker at debug (variable and flag, any case); a level
// that is no level at all still stops it.
func TestConfig_LogLevelTrace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		env  map[string]string
		want slog.Level
	}{
		{nil, map[string]string{"LOG_LEVEL": "trace"}, slog.LevelDebug},
		{nil, map[string]string{"LOG_LEVEL": "TRACE"}, slog.LevelDebug},
		{nil, map[string]string{"LOG_LEVEL": "warn"}, slog.LevelWarn},
		{[]string{"-log-level", "trace"}, map[string]string{"LOG_LEVEL": "error"}, slog.LevelDebug},
		{[]string{"-log-level", "ERROR"}, map[string]string{"LOG_LEVEL": "trace"}, slog.LevelError},
		{nil, map[string]string{}, slog.LevelInfo},
	} {
		cfg, err := LoadConfig(c.args, env(c.env))
		if err != nil {
			t.Fatalf("%v %v: %v", c.args, c.env, err)
		}
		if cfg.LogLevel != c.want {
			t.Errorf("%v %v: level %v, want %v", c.args, c.env, cfg.LogLevel, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		env  map[string]string
		name string
	}{
		{nil, map[string]string{"LOG_LEVEL": "tracing"}, "LOG_LEVEL"},
		{nil, map[string]string{"LOG_LEVEL": "verbose"}, "LOG_LEVEL"},
		{[]string{"-log-level", "loud"}, map[string]string{}, "-log-level"},
	} {
		_, err := LoadConfig(c.args, env(c.env))
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), "trace") {
			t.Errorf("%v %v: error %v, want one naming %s and listing trace", c.args, c.env, err, c.name)
		}
	}
}

// TestConfig_EncryptionKeys: QUEEN_ENCRYPTION_KEY is 64 hexadecimal
// characters (32 bytes) and QUEEN_ENCRYPTION_KEY_PREVIOUS a comma-separated
// list of such keys; anything else stops the broker with an error naming the
// variable and never showing the key.
func TestConfig_EncryptionKeys(t *testing.T) {
	t.Parallel()
	cur := strings.Repeat("0123456789abcdef", 4)
	prev1, prev2 := strings.Repeat("ab", 32), strings.Repeat("CD", 32)
	cfg, err := LoadConfig(nil, env(map[string]string{}))
	if err != nil || cfg.EncryptionKey != nil || cfg.EncryptionReadKeys != nil {
		t.Fatalf("no key: %v %v %v", cfg.EncryptionKey, cfg.EncryptionReadKeys, err)
	}
	cfg, err = LoadConfig(nil, env(map[string]string{"QUEEN_ENCRYPTION_KEY": " " + cur + " ",
		"QUEEN_ENCRYPTION_KEY_PREVIOUS": prev1 + ", " + prev2}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.EncryptionKey) != 32 || cfg.EncryptionKey[0] != 0x01 || len(cfg.EncryptionReadKeys) != 2 ||
		cfg.EncryptionReadKeys[0][0] != 0xab || cfg.EncryptionReadKeys[1][31] != 0xcd {
		t.Fatalf("keys %x, read keys %x", cfg.EncryptionKey, cfg.EncryptionReadKeys)
	}
	secret := "secret" + cur[6:]
	for _, c := range []struct{ name, value string }{
		{"QUEEN_ENCRYPTION_KEY", cur[:62]},
		{"QUEEN_ENCRYPTION_KEY", cur + "00"},
		{"QUEEN_ENCRYPTION_KEY", secret},
		{"QUEEN_ENCRYPTION_KEY_PREVIOUS", prev1 + "," + secret},
		{"QUEEN_ENCRYPTION_KEY_PREVIOUS", prev1 + ","},
	} {
		_, err := LoadConfig(nil, env(map[string]string{c.name: c.value}))
		var ce *configError
		if !errors.As(err, &ce) || ce.name != c.name {
			t.Errorf("%s=%q: error %v, want one naming %s", c.name, c.value, err, c.name)
			continue
		}
		if strings.Contains(err.Error(), cur[6:20]) || strings.Contains(err.Error(), prev1[:16]) {
			t.Errorf("%s: the error shows the key: %v", c.name, err)
		}
	}
}

// TestConfig_MetricsCollector: METRICS_SAMPLE_INTERVAL_MS (30000 by
// default, 100 to 300000) and METRICS_RETENTION_DAYS (7, at least 1), and
// their flags; a value out of range is an error naming its variable.
func TestConfig_MetricsCollector(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(nil, env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsSampleInterval != 30*time.Second || cfg.MetricsRetentionDays != 7 {
		t.Fatalf("defaults %v %d", cfg.MetricsSampleInterval, cfg.MetricsRetentionDays)
	}
	cfg, err = LoadConfig(nil, env(map[string]string{"METRICS_SAMPLE_INTERVAL_MS": "250", "METRICS_RETENTION_DAYS": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsSampleInterval != 250*time.Millisecond || cfg.MetricsRetentionDays != 2 {
		t.Fatalf("env %v %d", cfg.MetricsSampleInterval, cfg.MetricsRetentionDays)
	}
	cfg, err = LoadConfig([]string{"-metrics-sample-interval", "45s", "-metrics-retention-days", "90"},
		env(map[string]string{"METRICS_SAMPLE_INTERVAL_MS": "250"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsSampleInterval != 45*time.Second || cfg.MetricsRetentionDays != 90 {
		t.Fatalf("flags %v %d", cfg.MetricsSampleInterval, cfg.MetricsRetentionDays)
	}
	for name, val := range map[string]string{"METRICS_SAMPLE_INTERVAL_MS": "50", "METRICS_RETENTION_DAYS": "0"} {
		_, err := LoadConfig(nil, env(map[string]string{name: val}))
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: error %v, want one naming %s", name, val, err, name)
		}
	}
	if _, err := LoadConfig(nil, env(map[string]string{"METRICS_SAMPLE_INTERVAL_MS": "300001"})); err == nil {
		t.Error("an interval over 5 minutes was accepted")
	}
}
