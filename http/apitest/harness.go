// Package apitest starts the real broker binary on a free port against a
// database of its own and talks HTTP to it: the harness of the black-box API
// tests. Each test package calls Main from its TestMain, which builds
// ./cmd/queengo once (with -race when the tests run with it), creates the
// package's database and drops it at the end.
//
// It is also the one vocabulary the test packages share, so that a test
// reads the same in every package:
//
//   - brokers: Shared, Start, StartWith, CreateDB;
//   - requests: Server.Do, Get, Post, Raw, Dial, WithTimeout, Query;
//   - errors: WantError, CheckError, WantErrorBody;
//   - queues and pushes: Server.Configure, Push, PushN, PushQueued, PushCtx;
//   - pops: PopQueue, PopPartition, PopDiscovery for the paths, then
//     Server.Pop, PopOK, PopEmpty, PopUntil, TryPop, PopCtx, WantTxIDs;
//   - acks: AckItem, AckBody, Server.Ack, AckOK, AckBatch, AckBatchOK,
//     WantAckFailure;
//   - the database: ReadCursor, QueueCounts, ReadQueue, PartitionID,
//     QueryInt;
//   - waiting: Eventually.
package apitest

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queengo/queengo/pg/pgtest"
)

var (
	binary string
	// DB is the test package's database.
	DB *pgtest.Database
)

// Main builds the broker, creates the package's database, runs the tests and
// cleans up. Use it as `func TestMain(m *testing.M) { apitest.Main(m, "name") }`.
func Main(m *testing.M, name string) {
	code, err := mainErr(m, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apitest:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func mainErr(m *testing.M, name string) (int, error) {
	dir, err := os.MkdirTemp("", "queengo-apitest-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "queengo")
	root, err := moduleRoot()
	if err != nil {
		return 0, err
	}
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/queengo")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("building the broker: %v\n%s", err, out)
	}
	if DB, err = pgtest.Create(name); err != nil {
		return 0, err
	}
	code := m.Run()
	stopAll()
	if err := DB.Drop(); err != nil {
		fmt.Fprintln(os.Stderr, "apitest: dropping database:", err)
	}
	return code, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// Server is one running broker process, and how a test talks to it:
// WithTimeout and WithClient return the same process with other request
// settings.
type Server struct {
	URL  string
	Port int
	cmd  *exec.Cmd
	logs *bytes.Buffer
	mu   *sync.Mutex
	done chan struct{}

	client  *http.Client  // nil: Client
	timeout time.Duration // bound of every request; 0: the client's
}

var (
	serversMu sync.Mutex
	servers   []*Server
)

// Start runs a broker against the package's database. env adds or
// overrides environment variables (KEY=value); the defaults are a small pool
// and warn-level logs. The server stops at the end of the test.
func Start(t testing.TB, env ...string) *Server {
	t.Helper()
	return StartWith(t, StartOpts{Env: env})
}

// StartOpts are the rarer options of StartWith.
type StartOpts struct {
	// DatabaseURL is the database to run against; empty: the package's.
	DatabaseURL string
	// Env adds or overrides environment variables (KEY=value), as in Start.
	Env []string
	// NoFile, when more than 0, runs the broker with this limit on open
	// file descriptors (RLIMIT_NOFILE, soft and hard, so that the Go
	// runtime cannot raise it), set by /bin/sh's ulimit before it execs
	// the broker.
	NoFile int
	// Attempts is how many brokers to start before giving up when one exits
	// at start (a broker whose acquire timeout is shorter than its first
	// dial on a loaded machine); 0 is 1.
	Attempts int
}

// StartWith is Start with options; the server stops at the end of the test.
func StartWith(t testing.TB, o StartOpts) *Server {
	t.Helper()
	if o.DatabaseURL == "" {
		o.DatabaseURL = DB.URL
	}
	var s *Server
	var err error
	for attempt := 1; ; attempt++ {
		if s, err = start(o); err == nil {
			break
		}
		if attempt >= o.Attempts {
			t.Fatal(err)
		}
		t.Logf("the broker did not start at attempt %d: %v", attempt, err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("broker log (%s):\n%s", s.URL, s.Logs())
		}
	})
	return s
}

// CreateDB creates a database of the test's own, named after prefix, and
// drops it when the test ends (after the brokers started on it have
// stopped, when they were started after it).
func CreateDB(t testing.TB, prefix string) *pgtest.Database {
	t.Helper()
	db, err := pgtest.Create(prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Drop(); err != nil {
			t.Logf("dropping %s: %v", db.Name, err)
		}
	})
	return db
}

// Binary is the path of the broker binary Main built.
func Binary() string { return binary }

// StartURL runs a broker against the given database URL and waits until its
// port answers.
func StartURL(dbURL string, env ...string) (*Server, error) {
	return start(StartOpts{DatabaseURL: dbURL, Env: env})
}

func start(o StartOpts) (*Server, error) {
	dbURL, env := o.DatabaseURL, o.Env
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary)
	if o.NoFile > 0 {
		// sh execs the broker, so the process (and its pid) is the broker's.
		cmd = exec.Command("/bin/sh", "-c", `ulimit -n "$1" && shift && exec "$0" "$@"`, binary, strconv.Itoa(o.NoFile))
	}
	// FILE_BUFFER_DIR=off: the brokers of one run would otherwise contend
	// for the default directory; a test of the buffer gives its own.
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "PORT="+strconv.Itoa(port), "HOST=127.0.0.1",
		"DB_POOL_SIZE=6", "LOG_LEVEL=warn", "FILE_BUFFER_DIR=off")
	cmd.Env = append(cmd.Env, env...)
	s := &Server{URL: "http://127.0.0.1:" + strconv.Itoa(port), Port: port, cmd: cmd, logs: &bytes.Buffer{},
		mu: &sync.Mutex{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = lockedWriter{s.mu, s.logs}, lockedWriter{s.mu, s.logs}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); close(s.done) }()
	serversMu.Lock()
	servers = append(servers, s)
	serversMu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return nil, fmt.Errorf("broker exited at start:\n%s", s.Logs())
		default:
		}
		if s.answers() {
			return s, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("broker did not listen within 60s:\n%s", s.Logs())
}

// Stop sends SIGTERM and waits for the process to exit (SIGKILL after 20s).
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Kill sends SIGKILL (a crash: nothing is flushed or closed) and waits for
// the process to exit.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Exited reports whether the process has exited, and its exit code.
func (s *Server) Exited() (bool, int) {
	select {
	case <-s.done:
		return true, s.cmd.ProcessState.ExitCode()
	default:
		return false, 0
	}
}

// Logs returns what the broker wrote so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

func stopAll() {
	serversMu.Lock()
	defer serversMu.Unlock()
	for _, s := range servers {
		s.Stop()
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// FreePort returns a port nothing listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// answers reports whether the broker's HTTP server answers /health (200, or
// 503 while the database is away). A bare TCP connect is not enough: until
// the broker listens, its port may be held by another test's listener (a
// proxy, or freePort's own), and a start that took that for the broker
// failed its first request with "connection refused".
func (s *Server) answers() bool {
	r, err := readyClient.Get(s.URL + "/health")
	if err != nil {
		return false
	}
	defer r.Body.Close()
	_, _ = io.Copy(io.Discard, r.Body)
	return r.StatusCode == http.StatusOK || r.StatusCode == http.StatusServiceUnavailable
}

// readyClient asks a starting broker whether it answers; no keep-alive, so
// no connection outlives the check. Its timeout outlasts /health's own 2 s
// database check, so a broker started without its database answers 503.
var readyClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

var (
	portsMu sync.Mutex
	// portsGiven are the ports freePort handed out in this test process:
	// one is never handed out twice, so two brokers started at once never
	// race for the same port.
	portsGiven = map[int]bool{}
)

// freePort returns a port no listener held a moment ago and that this
// process has not handed out before.
func freePort() (int, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		portsMu.Lock()
		given := portsGiven[port]
		portsGiven[port] = true
		portsMu.Unlock()
		if !given {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port in 100 tries")
}

var (
	sharedMu      sync.Mutex
	sharedServers = map[string]*Server{}
)

// Shared returns a broker on the package database, started on first use with
// env and shared by every test that asks for the same env; Main stops it at
// the end (no test's cleanup does). When the test fails, the tail of the
// broker's log is attached to it.
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
			t.Logf("shared broker log (tail):\n%s", tail(s.Logs(), 4000))
		}
	})
	return s
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
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
