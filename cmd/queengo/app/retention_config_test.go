package app

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestConfig_Retention: RETENTION_INTERVAL and EVICTION_INTERVAL (ms),
// RETENTION_BATCH_SIZE and PARTITION_CLEANUP_DAYS, with the reference
// server's defaults; a value out of range is an error naming its variable.
func TestConfig_Retention(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(nil, env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RetentionInterval != 5*time.Minute || cfg.EvictionInterval != time.Minute ||
		cfg.RetentionBatchSize != 1000 || cfg.PartitionCleanupDays != 30 {
		t.Fatalf("defaults %v %v %d %d", cfg.RetentionInterval, cfg.EvictionInterval, cfg.RetentionBatchSize, cfg.PartitionCleanupDays)
	}
	cfg, err = LoadConfig(nil, env(map[string]string{"RETENTION_INTERVAL": "200", "EVICTION_INTERVAL": "150",
		"RETENTION_BATCH_SIZE": "10", "PARTITION_CLEANUP_DAYS": "7"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RetentionInterval != 200*time.Millisecond || cfg.EvictionInterval != 150*time.Millisecond ||
		cfg.RetentionBatchSize != 10 || cfg.PartitionCleanupDays != 7 {
		t.Fatalf("set %v %v %d %d", cfg.RetentionInterval, cfg.EvictionInterval, cfg.RetentionBatchSize, cfg.PartitionCleanupDays)
	}
	for name, val := range map[string]string{"RETENTION_INTERVAL": "0", "EVICTION_INTERVAL": "1m",
		"RETENTION_BATCH_SIZE": "0", "PARTITION_CLEANUP_DAYS": "0"} {
		_, err := LoadConfig(nil, env(map[string]string{name: val}))
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: error %v, want one naming %s", name, val, err, name)
		}
	}
}
