package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// TestConfig_TimeoutPrecedence: DEFAULT_TIMEOUT, else POP_DEFAULT_TIMEOUT_MS,
// else 30000; DEFAULT_TIMEOUT wins when both are set (pop-routes.md).
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
		cfg, err := loadConfig(nil, env(c.env))
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
	cfg, err := loadConfig([]string{"-port", "7001", "-pool-size", "3"}, env(map[string]string{"PORT": "7000", "DB_POOL_SIZE": "9"}))
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
	cfg, err := loadConfig(nil, env(map[string]string{"PG_HOST": "db", "PG_PORT": "6543", "PG_USER": "u", "PG_PASSWORD": "p w", "PG_DB": "q"}))
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
		"LOG_LEVEL": "loud", "DEFAULT_TIMEOUT": "-1", "POP_WAIT_MAX_INTERVAL_MS": "10"} {
		_, err := loadConfig(nil, env(map[string]string{name: val}))
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: error %v, want one naming %s", name, val, err, name)
		}
	}
}
