package app

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestConfig_FileBuffer: FILE_BUFFER_DIR (empty: the default directory; off: none) and the
// FILE_BUFFER_* sizes and replay bounds, with their defaults; a value out of
// range is an error naming its variable.
func TestConfig_FileBuffer(t *testing.T) {
	t.Parallel()
	cfg, err := LoadConfig(nil, env(map[string]string{}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FileBufferDir != "" || cfg.FileBuffer.EventsPerFile != 10_000 || cfg.FileBuffer.FileBytes != 64<<20 ||
		cfg.FileBuffer.MaxBytes != 1<<30 || cfg.FileBufferMaxBatch != 2000 || cfg.FileBufferFlush != 50*time.Millisecond {
		t.Fatalf("defaults %q %+v %d %v", cfg.FileBufferDir, cfg.FileBuffer, cfg.FileBufferMaxBatch, cfg.FileBufferFlush)
	}
	off, err := LoadConfig(nil, env(map[string]string{"FILE_BUFFER_DIR": "off"}))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := openFileBuffer(off, slog.Default()); f != nil || err != nil {
		t.Fatalf("FILE_BUFFER_DIR=off: %v %v, want no buffer", f, err)
	}
	dir := t.TempDir()
	cfg, err = LoadConfig(nil, env(map[string]string{"FILE_BUFFER_DIR": dir, "FILE_BUFFER_EVENTS_PER_FILE": "5",
		"FILE_BUFFER_FILE_BYTES": "4096", "FILE_BUFFER_MAX_BYTES": "8192", "FILE_BUFFER_MAX_BATCH": "7",
		"FILE_BUFFER_FLUSH_MS": "20"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FileBufferDir != dir || cfg.FileBuffer.EventsPerFile != 5 || cfg.FileBuffer.FileBytes != 4096 ||
		cfg.FileBuffer.MaxBytes != 8192 || cfg.FileBufferMaxBatch != 7 || cfg.FileBufferFlush != 20*time.Millisecond {
		t.Fatalf("set %q %+v %d %v", cfg.FileBufferDir, cfg.FileBuffer, cfg.FileBufferMaxBatch, cfg.FileBufferFlush)
	}
	f, err := openFileBuffer(cfg, slog.Default())
	if err != nil || f == nil {
		t.Fatalf("opening FILE_BUFFER_DIR: %v", err)
	}
	f.Close()
	for name, val := range map[string]string{"FILE_BUFFER_EVENTS_PER_FILE": "0", "FILE_BUFFER_FILE_BYTES": "x",
		"FILE_BUFFER_MAX_BYTES": "10", "FILE_BUFFER_MAX_BATCH": "0", "FILE_BUFFER_FLUSH_MS": "0"} {
		_, err := LoadConfig(nil, env(map[string]string{name: val}))
		var ce *configError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: error %v, want one naming %s", name, val, err, name)
		}
	}
}
