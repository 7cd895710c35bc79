// Package buffertest holds the black-box tests of the push buffer (issue 13,
// D11): push maintenance, PostgreSQL unreachable for pushes (an
// e2e.Proxy the tests cut), a broker killed with SIGKILL while
// buffering, a torn record. Each test has a database of its own (the push
// maintenance switch is database-wide) and a buffer directory of its own.
package buffertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
	"github.com/queengo/queengo/pg/pgtest"
)

func TestMain(m *testing.M) { e2e.Main(m, "buffertest") }

// bundle is one test's database, proxy, buffer directory and broker.
type bundle struct {
	db    *pgtest.Database
	proxy *e2e.Proxy
	url   string // the database through the proxy
	dir   string
	s     *e2e.Server
	// process: the brokers run as processes of their own.
	process bool
}

// setup starts a broker with a file buffer, on a database of the test's
// own reached through a proxy the test controls; with process, the broker
// runs as a process of its own (a test that kills it).
func setup(t *testing.T, process bool) *bundle {
	t.Helper()
	b := &bundle{db: e2e.CreateDB(t, "buffer"), dir: t.TempDir(), process: process}
	b.proxy, b.url = e2e.StartDBProxy(t, b.db.URL)
	b.s = b.start(t)
	return b
}

// start runs a broker on the bundle's proxy and buffer directory; it is
// stopped (and its log attached on failure) when the test ends.
func (b *bundle) start(t *testing.T) *e2e.Server {
	t.Helper()
	s, err := e2e.Launch(e2e.StartOpts{DatabaseURL: b.url, Process: b.process, Env: []string{
		"FILE_BUFFER_DIR=" + b.dir, "FILE_BUFFER_EVENTS_PER_FILE=200",
		"DB_REQUEST_TIMEOUT_MS=1500", "DB_POOL_ACQUIRE_TIMEOUT_MS=1000", "LOG_LEVEL=warn"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.proxy.Restore()
		s.Stop()
		if t.Failed() {
			logs := s.Logs()
			if len(logs) > 6000 {
				logs = "..." + logs[len(logs)-6000:]
			}
			t.Logf("broker log (tail):\n%s", logs)
		}
	})
	return s
}

// maintenanceState is GET /api/v1/system/maintenance.
type maintenanceState struct {
	MaintenanceMode    bool  `json:"maintenanceMode"`
	PopMaintenanceMode bool  `json:"popMaintenanceMode"`
	BufferedMessages   int64 `json:"bufferedMessages"`
	BufferHealthy      bool  `json:"bufferHealthy"`
	BufferStats        struct {
		PendingCount int64 `json:"pendingCount"`
		FailedCount  int64 `json:"failedCount"`
		DBHealthy    bool  `json:"dbHealthy"`
		Active       bool  `json:"active"`
		FailedFiles  struct {
			FailoverCount int64 `json:"failoverCount"`
		} `json:"failedFiles"`
	} `json:"bufferStats"`
}

func state(t *testing.T, s *e2e.Server) maintenanceState {
	t.Helper()
	r := s.Get(t, "/api/v1/system/maintenance")
	if r.Status != 200 {
		t.Fatalf("GET /api/v1/system/maintenance: %d %s", r.Status, r.Body)
	}
	var st maintenanceState
	r.JSON(t, &st)
	return st
}

// setMaintenance switches push maintenance and checks the answer.
func setMaintenance(t *testing.T, s *e2e.Server, on bool) {
	t.Helper()
	r := s.Post(t, "/api/v1/system/maintenance", map[string]any{"enabled": on})
	var body map[string]any
	if r.Status != 200 {
		t.Fatalf("POST /api/v1/system/maintenance %v: %d %s", on, r.Status, r.Body)
	}
	r.JSON(t, &body)
	if body["maintenanceMode"] != on || body["message"] == "" || body["bufferHealthy"] != true {
		t.Fatalf("POST /api/v1/system/maintenance %v: %s", on, r.Body)
	}
	if _, ok := body["bufferedMessages"].(float64); !ok {
		t.Fatalf("POST /api/v1/system/maintenance: no bufferedMessages: %s", r.Body)
	}
}

// drained waits until the broker's buffer is empty and pushes go to
// PostgreSQL again.
func drained(t *testing.T, s *e2e.Server, d time.Duration) {
	t.Helper()
	err := e2e.Eventually(d, 100*time.Millisecond, func() error {
		r, err := s.DoCtx(context.Background(), "GET", "/api/v1/status/buffers", nil)
		if err != nil {
			return err
		}
		var st struct {
			Pending      int64 `json:"pending"`
			Failed       int64 `json:"failed"`
			BufferActive bool  `json:"bufferActive"`
		}
		if err := json.Unmarshal(r.Body, &st); err != nil {
			return fmt.Errorf("%d %s", r.Status, r.Body)
		}
		if st.Failed != 0 {
			t.Fatalf("records failed replay: %s", r.Body)
		}
		if st.Pending != 0 || st.BufferActive {
			return fmt.Errorf("not drained: %s", r.Body)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("buffer not drained within %v: %v", d, err)
	}
}

// popAll pops a partition to the end in queue mode with autoAck and
// returns the transaction ids in delivery order.
func popAll(t *testing.T, s *e2e.Server, queue, partition string) []string {
	t.Helper()
	var out []string
	for {
		p := s.Pop(t, e2e.PopPartition(queue, partition, "batch", "500", "autoAck", "true"))
		if p == nil {
			return out
		}
		out = append(out, p.TxIDs()...)
	}
}

// wantOnceInOrder requires got (delivered, in order) to hold each of want
// exactly once, in want's order, and unsure (pushes that got no answer) at
// most once, anywhere.
func wantOnceInOrder(t *testing.T, what string, got, want, unsure []string) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("%s: %s delivered %d times", what, id, n)
		}
	}
	var missing []string
	for _, id := range want {
		if seen[id] != 1 {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s: %d answered pushes not delivered, e.g. %v", what, len(missing), missing[:min(5, len(missing))])
	}
	answered := map[string]bool{}
	for _, id := range want {
		answered[id] = true
	}
	var order []string
	for _, id := range got {
		switch {
		case answered[id]:
			order = append(order, id)
		case !slices.Contains(unsure, id):
			t.Errorf("%s: %s delivered but never pushed", what, id)
		}
	}
	if !slices.Equal(order, want) {
		t.Fatalf("%s: delivered out of push order:\n got %v\nwant %v", what, clip(order), clip(want))
	}
}

func clip(ids []string) []string {
	if len(ids) > 20 {
		return append(slices.Clone(ids[:20]), "...")
	}
	return ids
}

// bufferFiles lists the buffer directory's record files, oldest first.
func bufferFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.qbuf"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return names
}

// appendBytes writes b at the end of file p.
func appendBytes(t *testing.T, p string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// queueRows counts the transaction ids stored for queue.
func queueRows(t *testing.T, db *pgtest.Database, queue string) int64 {
	t.Helper()
	return e2e.QueryInt(t, db, `SELECT count(*) FROM queen.txids x JOIN queen.partitions p ON p.id = x.partition_id
JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1`, queue)
}

// hasLog reports whether the broker's log holds text.
func hasLog(s *e2e.Server, text string) bool { return strings.Contains(s.Logs(), text) }
