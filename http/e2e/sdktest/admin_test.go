// Package sdktest calls the Queen SDKs' admin objects against a broker in
// the test process: every method once, with data in place, failing on what
// the SDK cannot take (an HTTP error, an answer it cannot decode, a field
// its dashboard reads missing). The SDKs are the kit's prepared copies
// (QUEEN_SDK_WORK, /tmp/queen-sdk by default: bash
// ../shared/queen-sdk/prepare.sh makes them); without them the tests skip.
// `make sdk-admin` runs them alone.
package sdktest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "sdktest") }

// kit returns the kit's prepared folder when it holds want, else skips.
func kit(t *testing.T, want string) string {
	t.Helper()
	dir := os.Getenv("QUEEN_SDK_WORK")
	if dir == "" {
		dir = "/tmp/queen-sdk"
	}
	if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
		t.Skipf("the Queen SDK kit is not prepared in %s (bash ../shared/queen-sdk/prepare.sh): %v", dir, err)
	}
	return dir
}

// call is one line a script printed: a method it called and how it went.
type call struct {
	Method string          `json:"method"`
	OK     bool            `json:"ok"`
	Error  string          `json:"error"`
	Answer json.RawMessage `json:"answer"`
}

// wantEveryCallOK runs cmd, which prints a call a line, and fails the test
// for each call that failed, and when it printed fewer than min calls.
func wantEveryCallOK(t *testing.T, cmd *exec.Cmd, min int) {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd.Args[0], err, stderr.String())
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var c call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil || c.Method == "" {
			continue // the SDK's own log lines
		}
		n++
		if !c.OK {
			t.Errorf("%s: %s %s", c.Method, c.Error, clip(c.Answer))
		}
	}
	if n < min {
		t.Fatalf("%d calls reported, want %d:\n%s\n%s", n, min, out, stderr.String())
	}
}

func clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// TestSDKAdmin_JSAdminAnswersAsTheSDKExpects: every method of the JS SDK's
// Admin (the dashboard's and the admin tools' client) answers, and what
// each answer holds is what the SDK's users read of it (admin.mjs).
func TestSDKAdmin_JSAdminAnswersAsTheSDKExpects(t *testing.T) {
	t.Parallel()
	dir := kit(t, "client-js/client-v2/index.js")
	if _, err := exec.LookPath("node"); err != nil {
		t.Skipf("no node: %v", err)
	}
	s := e2e.Shared(t)
	wantEveryCallOK(t, exec.Command("node", "admin.mjs", filepath.Join(dir, "client-js/client-v2/index.js"), s.URL), 34)
}

// TestSDKAdmin_PythonAdminAnswersAsTheSDKExpects: every method of the
// Python SDK's Admin answers, with the same data and checks as the JS
// one's (admin.py).
func TestSDKAdmin_PythonAdminAnswersAsTheSDKExpects(t *testing.T) {
	t.Parallel()
	dir := kit(t, "client-py/queen/admin/admin.py")
	python := os.Getenv("QUEEN_SDK_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
	}
	if _, err := exec.LookPath(python); err != nil {
		t.Skipf("no %s: %v", python, err)
	}
	s := e2e.Shared(t)
	wantEveryCallOK(t, exec.Command(python, "admin.py", filepath.Join(dir, "client-py"), s.URL), 34)
}

// TestSDKAdmin_GoAdminDecodesEveryAnswer: every method of the Go SDK's
// Admin decodes its answer into the value it declares (a JSON object for
// most), but RetryMessage, MoveMessageToDLQ and ClearQueue, which the SDK
// answers itself with an error (testdata/goadmin).
func TestSDKAdmin_GoAdminDecodesEveryAnswer(t *testing.T) {
	t.Parallel()
	dir := kit(t, "client-go/go.mod")
	s := e2e.Shared(t)
	q := e2e.Unique(t, "goadmin")
	s.Configure(t, q, nil)
	pushed := s.Push(t, e2e.PushItem{Queue: q, Partition: "p1", Payload: map[string]any{"n": 1}, TransactionID: e2e.TxID("ga")},
		e2e.PushItem{Queue: q, Partition: "p1", Payload: map[string]any{"n": 2}, TransactionID: e2e.TxID("ga")})
	p := s.PopOK(t, e2e.PopPartition(q, "p1", "consumerGroup", "g", "batch", "1"))
	s.AckOK(t, p.Messages[0], "completed", "g")
	trace := e2e.Unique(t, "trace")
	if r := s.Post(t, "/api/v1/traces", map[string]any{"transactionId": pushed[1].TransactionID,
		"partitionId": pushed[1].PartitionID, "traceName": trace, "eventType": "info", "data": map[string]any{}}); r.Status != 201 {
		t.Fatalf("trace: %d %s", r.Status, r.Body)
	}

	// A module of its own that uses the kit's SDK (its dependencies come
	// from the module proxy or the cache).
	mod := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "goadmin", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	gomod := "module goadmin\n\ngo 1.24\n\nrequire github.com/smartpricing/queen/clients/client-go v0.0.0\n\n" +
		"replace github.com/smartpricing/queen/clients/client-go => " + filepath.Join(dir, "client-go") + "\n"
	for name, b := range map[string][]byte{"main.go": src, "go.mod": []byte(gomod)} {
		if err := os.WriteFile(filepath.Join(mod, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tidy := exec.Command("go", "mod", "tidy")
	tidy.Dir = mod
	if out, err := tidy.CombinedOutput(); err != nil {
		t.Fatalf("go mod tidy: %v\n%s", err, out)
	}
	cmd := exec.Command("go", "run", ".", s.URL, q, pushed[1].PartitionID, pushed[1].TransactionID, trace)
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	wantEveryCallOK(t, cmd, 38)
}

// Issue 41: the JS SDK's multi-URL client (urls, affinity, failover)
// against three brokers on one database, one of them killed with SIGKILL
// under load and restarted on its port: the consumers go on and every
// accepted message is delivered (multibroker.mjs). The figures are in
// docs/performance.md.
func TestSDKMultiBroker_JSClientRidesOutABrokerKilled(t *testing.T) {
	t.Parallel()
	dir := kit(t, "client-js/client-v2/index.js")
	if _, err := exec.LookPath("node"); err != nil {
		t.Skipf("no node: %v", err)
	}
	db := e2e.CreateDB(t, "sdkmulti")
	var brokers []*e2e.Server
	var urls []string
	for range 3 {
		s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Process: true})
		brokers = append(brokers, s)
		urls = append(urls, s.URL)
	}
	q := e2e.Unique(t, "multi")
	brokers[0].Configure(t, q, map[string]any{"leaseTime": 5})
	const seconds = 20
	cmd := exec.Command("node", "multibroker.mjs", filepath.Join(dir, "client-js/client-v2/index.js"),
		strings.Join(urls, ","), q, strconv.Itoa(seconds))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	victim := brokers[1]
	victim.Kill()
	killed := time.Now()
	time.Sleep(5 * time.Second)
	restarted := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL, Process: true, Port: victim.Port})
	t.Logf("broker %s killed, restarted %v later", restarted.URL, time.Since(killed).Round(time.Millisecond))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("multibroker.mjs: %v\n%s", err, tail(stderr.String()))
	}
	var res struct {
		Accepted, Delivered, Lost, PushErrors, ConsumerEnds int
		LostSample                                          []string
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("multibroker.mjs printed %q: %v\n%s", lines[len(lines)-1], err, tail(stderr.String()))
	}
	t.Logf("%d s of load, 4 producers and 2 consumers on 3 brokers, one SIGKILLed at 5 s and restarted at 10 s: "+
		"%d accepted, %d delivered, %d lost, %d push errors, %d consume loops ended and restarted",
		seconds, res.Accepted, res.Delivered, res.Lost, res.PushErrors, res.ConsumerEnds)
	if res.Accepted == 0 || res.Lost != 0 {
		t.Fatalf("%d of %d accepted messages not delivered, e.g. %v", res.Lost, res.Accepted, res.LostSample)
	}
}

func tail(s string) string {
	if len(s) > 3000 {
		return "..." + s[len(s)-3000:]
	}
	return s
}
