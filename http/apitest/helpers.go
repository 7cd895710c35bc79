package apitest

import (
	"flag"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

var uniq atomic.Int64

// PushItem is one item of a push request body.
type PushItem struct {
	Queue         string `json:"queue"`
	Partition     string `json:"partition,omitempty"`
	Payload       any    `json:"payload"`
	TransactionID string `json:"transactionId,omitempty"`
	TraceID       string `json:"traceId,omitempty"`
}

// PushResult is one element of a push answer.
type PushResult struct {
	Index         int     `json:"index"`
	TransactionID string  `json:"transaction_id"`
	Status        string  `json:"status"`
	MessageID     string  `json:"message_id"`
	PartitionID   string  `json:"partition_id"`
	TraceID       *string `json:"trace_id"`
	QueueName     string  `json:"queueName"`
	Error         string  `json:"error"`
}

// Push posts the items and requires a 201; it returns the per-item results.
func (s *Server) Push(t testing.TB, items ...PushItem) []PushResult {
	t.Helper()
	r := s.Post(t, "/api/v1/push", map[string]any{"items": items})
	if r.Status != 201 {
		t.Fatalf("push: status %d: %s", r.Status, r.Body)
	}
	var out []PushResult
	r.JSON(t, &out)
	if len(out) != len(items) {
		t.Fatalf("push: %d results for %d items", len(out), len(items))
	}
	return out
}

// Message is one popped message.
type Message struct {
	ID            string         `json:"id"`
	TransactionID string         `json:"transactionId"`
	TraceID       *string        `json:"traceId"`
	Data          any            `json:"data"`
	ProducerSub   *string        `json:"producerSub"`
	CreatedAt     string         `json:"createdAt"`
	PartitionID   string         `json:"partitionId"`
	Partition     string         `json:"partition"`
	LeaseID       string         `json:"leaseId"`
	ConsumerGroup string         `json:"consumerGroup"`
	Extra         map[string]any `json:"-"`
}

// PopResponse is a 200 pop answer.
type PopResponse struct {
	Success           bool      `json:"success"`
	Queue             string    `json:"queue"`
	Partition         string    `json:"partition"`
	PartitionID       string    `json:"partitionId"`
	LeaseID           string    `json:"leaseId"`
	ConsumerGroup     string    `json:"consumerGroup"`
	Messages          []Message `json:"messages"`
	PartitionsClaimed int       `json:"partitionsClaimed"`
}

// Pop GETs a pop path (with its query string). It returns nil for a 204 and
// fails the test for anything but 200 or 204.
func (s *Server) Pop(t testing.TB, pathAndQuery string) *PopResponse {
	t.Helper()
	r := s.Get(t, pathAndQuery)
	switch r.Status {
	case 204:
		if len(r.Body) != 0 {
			t.Fatalf("204 with a body: %q", r.Body)
		}
		return nil
	case 200:
		var p PopResponse
		r.JSON(t, &p)
		return &p
	}
	t.Fatalf("pop %s: status %d: %s", pathAndQuery, r.Status, r.Body)
	return nil
}

var (
	sharedMu      sync.Mutex
	sharedServers = map[string]*Server{}
)

// Shared returns a broker on the package database, started on first use with
// env and shared by every test that asks for the same env; apitest.Main stops
// it at the end (no test's cleanup does). When the test fails, the tail of
// the broker's log is attached to it.
func Shared(t testing.TB, env ...string) *Server {
	t.Helper()
	key := strings.Join(env, "\x00")
	sharedMu.Lock()
	s := sharedServers[key]
	if s == nil {
		var err error
		if s, err = StartURL(DB.URL, env...); err != nil {
			sharedMu.Unlock()
			t.Fatalf("starting a shared broker (%v): %v", env, err)
		}
		sharedServers[key] = s
	}
	sharedMu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			logs := s.Logs()
			if len(logs) > 4000 {
				logs = "..." + logs[len(logs)-4000:]
			}
			t.Logf("shared broker log (tail):\n%s", logs)
		}
	})
	return s
}

func init() {
	// The black-box tests spend their time waiting on the broker (long
	// polls, lease expiries, retry delays), not on the CPU: run them all at
	// once rather than GOMAXPROCS at a time, unless the caller chose
	// -parallel.
	testing.Init()
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(strings.TrimLeft(a, "-"), "test.parallel") {
			return
		}
	}
	_ = flag.Set("test.parallel", "64")
}

// Query builds "?k1=v1&k2=v2" from key/value pairs, escaped; no pairs is "".
func Query(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(pairs[i]))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(pairs[i+1]))
	}
	return b.String()
}

// PopQueue is the path of GET /api/v1/pop/queue/:queue with a query.
func PopQueue(queue string, pairs ...string) string {
	return "/api/v1/pop/queue/" + url.PathEscape(queue) + Query(pairs...)
}

// PopPartition is the path of GET /api/v1/pop/queue/:queue/partition/:partition.
func PopPartition(queue, partition string, pairs ...string) string {
	return "/api/v1/pop/queue/" + url.PathEscape(queue) + "/partition/" + url.PathEscape(partition) + Query(pairs...)
}
