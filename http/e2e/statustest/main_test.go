// Package statustest checks the status, analytics and metrics routes
// black-box (issue 12): the live figures of cursor and segment arithmetic,
// the metrics collector's samples and the series read from them, and
// Queen's Prometheus families, against brokers that sample every 200 ms.
package statustest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "statustest") }

// fastSamples makes the collector sample every 200 ms.
var fastSamples = []string{"METRICS_SAMPLE_INTERVAL_MS=200"}

// ownBroker starts a broker on a database of the test's own (a second
// collector on the package's database would share the shared broker's
// leadership), with a small pool and env.
func ownBroker(t *testing.T, prefix string, env ...string) *e2e.Server {
	t.Helper()
	db := e2e.CreateDB(t, prefix)
	return e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Env: append([]string{"DB_POOL_SIZE=3"}, env...)})
}

func shared(t *testing.T) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, fastSamples...)
}

// getJSON requires a 200 JSON answer of path and decodes it into v.
func getJSON(t *testing.T, s *e2e.Server, path string, v any) {
	t.Helper()
	r := s.Get(t, path)
	if r.Status != 200 {
		t.Fatalf("GET %s: status %d: %s", path, r.Status, r.Body)
	}
	r.JSON(t, v)
}

// waitFor polls cond every 100 ms for at most d; its last error fails the
// test.
func waitFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	if err := e2e.Eventually(d, 100*time.Millisecond, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantKeys fails unless the object m has every key.
func wantKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			b, _ := json.Marshal(m)
			t.Fatalf("%s has no %q: %s", what, k, b)
		}
	}
}

// num reads a number at a path of nested objects.
func num(t *testing.T, m map[string]any, path ...string) float64 {
	t.Helper()
	var v any = m
	for _, k := range path {
		o, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v: not an object at %q", path, k)
		}
		v = o[k]
	}
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("%v = %v, want a number", path, v)
	}
	return f
}

// seriesTotal sums a field over the points of a series.
func seriesTotal(points []map[string]any, key string) float64 {
	var sum float64
	for _, p := range points {
		f, _ := p[key].(float64)
		sum += f
	}
	return sum
}

// since is a from parameter d ago.
func since(d time.Duration) string { return time.Now().Add(-d).UTC().Format(time.RFC3339Nano) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
