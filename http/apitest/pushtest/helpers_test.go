package pushtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/queengo/queengo/http/apitest"
)

// The shared broker serves every test that needs no process of its own. It is
// started with StartURL (not Start) so that the first test's cleanup does not
// stop it; apitest.Main stops it at the end of the run.
// shared returns the package's shared broker (apitest.Shared).
func shared(t testing.TB) *apitest.Server {
	t.Helper()
	return apitest.Shared(t)
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func isUUID(s string) bool { return uuidRE.MatchString(s) }

// pushRaw posts a raw body to the push route.
func pushRaw(t testing.TB, s *apitest.Server, body string) *apitest.Response {
	t.Helper()
	return s.Post(t, "/api/v1/push", body)
}

// pushItems posts {"items": items} where items are arbitrary JSON values and
// requires a 201 with one result per item.
func pushItems(t testing.TB, s *apitest.Server, items ...map[string]any) []map[string]any {
	t.Helper()
	if items == nil {
		items = []map[string]any{}
	}
	r := s.Post(t, "/api/v1/push", map[string]any{"items": items})
	if r.Status != 201 {
		t.Fatalf("push: status %d: %s", r.Status, r.Body)
	}
	var out []map[string]any
	r.JSON(t, &out)
	if len(out) != len(items) {
		t.Fatalf("push: %d results for %d items: %s", len(out), len(items), r.Body)
	}
	return out
}

// popMsg is a popped message with its data kept raw, so payloads are
// compared byte for byte (after compaction).
type popMsg struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	TraceID       *string         `json:"traceId"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     string          `json:"createdAt"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	LeaseID       string          `json:"leaseId"`
	ConsumerGroup string          `json:"consumerGroup"`
}

type popResp struct {
	Success  bool     `json:"success"`
	Queue    string   `json:"queue"`
	LeaseID  string   `json:"leaseId"`
	Messages []popMsg `json:"messages"`
}

// pop GETs a pop path; nil for a 204.
func pop(t testing.TB, s *apitest.Server, pathAndQuery string) *popResp {
	t.Helper()
	r := s.Get(t, pathAndQuery)
	switch r.Status {
	case 204:
		return nil
	case 200:
		var p popResp
		r.JSON(t, &p)
		return &p
	}
	t.Fatalf("pop %s: status %d: %s", pathAndQuery, r.Status, r.Body)
	return nil
}

// popAll pops the queue in queue mode with autoAck until it answers 204;
// queue may end in /partition/<name> for the single-partition route.
func popAll(t testing.TB, s *apitest.Server, queue string, batch int) []popMsg {
	t.Helper()
	var out []popMsg
	for range 100 {
		p := pop(t, s, fmt.Sprintf("/api/v1/pop/queue/%s?batch=%d&autoAck=true", queue, batch))
		if p == nil {
			return out
		}
		if len(p.Messages) == 0 {
			t.Fatalf("pop answered 200 without messages")
		}
		out = append(out, p.Messages...)
	}
	t.Fatalf("queue %s did not drain in 100 pops", queue)
	return nil
}

// compact removes insignificant whitespace, failing on anything not JSON.
func compact(t testing.TB, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("not JSON: %q: %v", raw, err)
	}
	return b.String()
}

// wantErrorBody requires a 400 whose body is exactly {"error": "<text>"};
// when msg is not empty the text must be msg, or start with it when prefix.
func wantErrorBody(t testing.TB, r *apitest.Response, status int, msg string, prefix bool) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("error body is not JSON: %q", r.Body)
	}
	e, ok := body["error"].(string)
	if !ok || e == "" || len(body) != 1 {
		t.Fatalf(`body %s, want exactly {"error":"..."}`, r.Body)
	}
	switch {
	case msg == "":
	case prefix && !strings.HasPrefix(e, msg):
		t.Fatalf("error %q, want it to start with %q", e, msg)
	case !prefix && e != msg:
		t.Fatalf("error %q, want %q", e, msg)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q", ct)
	}
}

// dbCounts is what the database holds for a set of queue names.
type dbCounts struct {
	Queues, Partitions, Segments, Txids, Cursors int64
	Heads                                        int64
}

func counts(t testing.TB, names ...string) dbCounts {
	t.Helper()
	var c dbCounts
	err := apitest.DB.QueryRow(`WITH q AS (SELECT id FROM queen.queues WHERE name = ANY($1::text[])),
p AS (SELECT id, head FROM queen.partitions WHERE queue_id IN (SELECT id FROM q))
SELECT (SELECT count(*) FROM q), (SELECT count(*) FROM p),
       (SELECT count(*) FROM queen.segments WHERE partition_id IN (SELECT id FROM p)),
       (SELECT count(*) FROM queen.txids WHERE partition_id IN (SELECT id FROM p)),
       (SELECT count(*) FROM queen.cursors WHERE partition_id IN (SELECT id FROM p)),
       (SELECT coalesce(sum(head), 0)::bigint FROM p)`, []any{names},
		&c.Queues, &c.Partitions, &c.Segments, &c.Txids, &c.Cursors, &c.Heads)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// queueRow is a row of queen.queues.
type queueRow struct {
	ID, Namespace, Task                                        string
	LeaseTime, RetryLimit, RetryDelay, Priority, MaxQueueSize  int
	TTL, DelayedProcessing, WindowBuffer, RetentionSeconds     int
	CompletedRetentionSeconds, MaxWaitTimeSeconds, MinPopWait  int
	DeadLetterQueue, DLQAfterMaxRetries, RetentionEnabled, Enc bool
}

func readQueue(t testing.TB, name string) queueRow {
	t.Helper()
	var r queueRow
	err := apitest.DB.QueryRow(`SELECT id::text, namespace, task, lease_time, retry_limit, retry_delay, priority,
max_queue_size, ttl, delayed_processing, window_buffer, retention_seconds, completed_retention_seconds,
max_wait_time_seconds, min_pop_wait_time, dead_letter_queue, dlq_after_max_retries, retention_enabled,
encryption_enabled FROM queen.queues WHERE name = $1`, []any{name},
		&r.ID, &r.Namespace, &r.Task, &r.LeaseTime, &r.RetryLimit, &r.RetryDelay, &r.Priority, &r.MaxQueueSize,
		&r.TTL, &r.DelayedProcessing, &r.WindowBuffer, &r.RetentionSeconds, &r.CompletedRetentionSeconds,
		&r.MaxWaitTimeSeconds, &r.MinPopWait, &r.DeadLetterQueue, &r.DLQAfterMaxRetries, &r.RetentionEnabled,
		&r.Enc)
	if err != nil {
		t.Fatalf("reading queen.queues row of %q: %v", name, err)
	}
	return r
}

// brokerBinary finds the broker binary apitest built: the executable of a
// child process of this test binary named queengo (the shared broker is
// one). It returns "" when it cannot tell (no /proc).
func brokerBinary(t testing.TB) string {
	t.Helper()
	shared(t)
	me := os.Getpid()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != me {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
		if err == nil && filepath.Base(exe) == "queengo" {
			return exe
		}
	}
	return ""
}

// freePort returns a port nothing listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// pushCtx pushes items without a test (for goroutines).
func pushCtx(ctx context.Context, s *apitest.Server, items ...apitest.PushItem) (int, []apitest.PushResult, error) {
	r, err := s.DoCtx(ctx, "POST", "/api/v1/push", map[string]any{"items": items})
	if err != nil {
		return 0, nil, err
	}
	var out []apitest.PushResult
	if r.Status == 201 {
		if err := json.Unmarshal(r.Body, &out); err != nil {
			return r.Status, nil, fmt.Errorf("201 body is not a result array: %q", r.Body)
		}
		if len(out) != len(items) {
			return r.Status, nil, fmt.Errorf("%d results for %d items: %s", len(out), len(items), r.Body)
		}
	}
	return r.Status, out, nil
}
