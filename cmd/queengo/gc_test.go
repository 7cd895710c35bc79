package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestGCDefaults_OnlyWhereTheOperatorSetNone: the broker raises the
// collector's target and sets a soft memory limit unless GOGC or GOMEMLIMIT
// is set, which the runtime has already applied and must keep.
func TestGCDefaults_OnlyWhereTheOperatorSetNone(t *testing.T) {
	restore := func(percent int, limit int64) {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	}
	defer restore(debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64))

	gcDefaults(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != gcPercentDefault {
		t.Fatalf("GOGC unset: target %d, want %d", got, gcPercentDefault)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != memoryLimitDefault {
		t.Fatalf("GOMEMLIMIT unset: limit %d, want %d", got, memoryLimitDefault)
	}

	gcDefaults(func(k string) string { return map[string]string{"GOGC": "50", "GOMEMLIMIT": "2GiB"}[k] })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC set: target changed to %d", got)
	}
	if got := debug.SetMemoryLimit(math.MaxInt64); got != math.MaxInt64 {
		t.Fatalf("GOMEMLIMIT set: limit changed to %d", got)
	}
}
