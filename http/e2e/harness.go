// Package e2e starts brokers against a database of their own and talks
// HTTP to them: the harness of the black-box API tests. A broker runs in
// the test process (package app, the wiring the queengo command runs, on
// 127.0.0.1:0), so breakpoints and coverage cross from a test into the
// broker; what needs a process of its own (signals, kill -9, an exit code,
// a file descriptor limit) starts the queengo binary instead
// (StartOpts.Process), built once per test package at its first use. Each
// test package calls Main from its TestMain, which creates the package's
// database and drops it at the end.
//
// It is also the one vocabulary the test packages share, so that a test
// reads the same in every package:
//
//   - brokers: Shared, Start, StartWith, Launch, CreateDB;
//   - requests: Server.Do, Get, Post, Raw, Dial, WithTimeout, Query, and
//     Server.API, the project's Go client (package client), for a call a
//     test makes but does not check. The checked requests go through
//     net/http, a client independent of the broker's code as the SDKs'
//     are, and byte for byte where a test says so (Raw, Dial);
//   - errors: WantError, CheckError, WantErrorBody;
//   - queues and pushes: Server.Configure, Push, PushN, PushQueued, PushCtx;
//   - pops: PopQueue, PopPartition, PopDiscovery for the paths, then
//     Server.Pop, PopOK, PopEmpty, PopUntil, TryPop, PopCtx, WantTxIDs;
//   - acks: AckItem, AckBody, Server.Ack, AckOK, AckBatch, AckBatchOK,
//     WantAckFailure;
//   - the database: ReadCursor, QueueCounts, ReadQueue, PartitionID,
//     QueryInt;
//   - waiting: Eventually.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/queengo/queengo/cmd/queengo/app"
	"github.com/queengo/queengo/http/client"
	"github.com/queengo/queengo/pg/pgtest"
)

// DB is the test package's database.
var DB *pgtest.Database

// Main creates the package's database, runs the tests and cleans up. Use it
// as `func TestMain(m *testing.M) { e2e.Main(m, "name") }`.
func Main(m *testing.M, name string) {
	code, err := mainErr(m, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func mainErr(m *testing.M, name string) (int, error) {
	var err error
	if DB, err = pgtest.Create(name); err != nil {
		return 0, err
	}
	code := m.Run()
	stopAll()
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
	if err := DB.Drop(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: dropping database:", err)
	}
	return code, nil
}

var (
	buildOnce sync.Once
	binary    string // the queengo binary, once built
	binaryDir string // its temporary directory
	buildErr  error
)

// Binary is the path of the queengo binary, built (with -race when the
// tests run with it) at the first call in the test process.
func Binary() (string, error) {
	buildOnce.Do(func() {
		if binaryDir, buildErr = os.MkdirTemp("", "queengo-e2e-"); buildErr != nil {
			return
		}
		binary = filepath.Join(binaryDir, "queengo")
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		args := []string{"build", "-o", binary}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/queengo")...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building the broker: %v\n%s", err, out)
		}
	})
	return binary, buildErr
}

// MustBinary is Binary for a test: a failed build fails it.
func MustBinary(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// Server is one running broker, in the test process or in a process of its
// own, and how a test talks to it: WithTimeout and WithClient return the
// same broker with other request settings.
type Server struct {
	URL  string
	Port int
	*running

	client  *http.Client  // nil: Client
	timeout time.Duration // bound of every request; 0: the client's
}

// running is the broker behind a Server: an App in the test process, or a
// process (cmd).
type running struct {
	app  *app.App
	cmd  *exec.Cmd
	logs *bytes.Buffer
	mu   *sync.Mutex
	done chan struct{} // closed when the broker stopped or exited
	// api is the broker's Go client, made at the first Server.API.
	api     *client.Client
	apiOnce sync.Once
	// exit is the App's end: nil when Stop ended it; read once done is
	// closed.
	exit error
	stop sync.Once
}

var (
	serversMu sync.Mutex
	servers   []*Server
)

// Start runs a broker in the test process against the package's database.
// env adds or overrides environment variables (KEY=value); the defaults are
// a small pool and warn-level logs. The broker stops at the end of the
// test.
func Start(t testing.TB, env ...string) *Server {
	t.Helper()
	return StartWith(t, StartOpts{Env: env})
}

// StartOpts are the rarer options of StartWith and Launch.
type StartOpts struct {
	// DatabaseURL is the database to run against; empty: the package's.
	DatabaseURL string
	// Env adds or overrides environment variables (KEY=value), as in Start.
	Env []string
	// Process runs the queengo binary as a process of its own instead of a
	// broker in the test process: for a test of what only a process has
	// (signals, Kill, Exited's exit code).
	Process bool
	// NoFile, when more than 0, runs the broker as a process (Process) with
	// this limit on open file descriptors (RLIMIT_NOFILE, soft and hard, so
	// that the Go runtime cannot raise it), set by /bin/sh's ulimit before
	// it execs the broker.
	NoFile int
	// Port, with Process, is the port to serve on (0: a free one): a
	// broker restarted where its clients know it.
	Port int
	// Attempts is how many brokers to start before giving up when one
	// fails at start (a broker whose acquire timeout is shorter than its
	// first dial on a loaded machine); 0 is 1.
	Attempts int
}

// StartWith is Start with options; the broker stops at the end of the test,
// and its log is attached when the test failed.
func StartWith(t testing.TB, o StartOpts) *Server {
	t.Helper()
	var s *Server
	var err error
	for attempt := 1; ; attempt++ {
		if s, err = Launch(o); err == nil {
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

// StartURL runs a broker in the test process against the given database
// URL; the caller stops it. An invalid setting in env is the error
// LoadConfig returns, naming the variable.
func StartURL(dbURL string, env ...string) (*Server, error) {
	return Launch(StartOpts{DatabaseURL: dbURL, Env: env})
}

// Launch starts a broker as o says and returns once it serves; the caller
// stops it (Main stops any left at the end). It first waits for the
// broker's share of the connection budget (connBudget).
func Launch(o StartOpts) (*Server, error) {
	if o.DatabaseURL == "" {
		o.DatabaseURL = DB.URL
	}
	release := reserveConns(o.Env)
	var s *Server
	var err error
	if o.Process || o.NoFile > 0 {
		s, err = startProcess(o)
	} else {
		s, err = startInProcess(o)
	}
	if err != nil {
		release()
		return nil, err
	}
	go func() { <-s.done; release() }()
	serversMu.Lock()
	servers = append(servers, s)
	serversMu.Unlock()
	return s, nil
}

// environment is what a broker of the harness starts with: the defaults
// (a small pool, warn-level logs, no file buffer: the brokers of one run
// would otherwise contend for the default directory; a test of the buffer
// gives its own), then env.
func environment(dbURL string, port int, env []string) []string {
	return append([]string{"DATABASE_URL=" + dbURL, "PORT=" + strconv.Itoa(port), "HOST=127.0.0.1",
		"DB_POOL_SIZE=6", "LOG_LEVEL=warn", "FILE_BUFFER_DIR=off"}, env...)
}

// startInProcess runs the broker's App in the test process on a listener
// of its own: its configuration comes from the same variables a process
// reads (the test process's environment, then the harness's).
func startInProcess(o StartOpts) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	set := map[string]string{}
	for _, kv := range environment(o.DatabaseURL, port, o.Env) {
		k, v, _ := strings.Cut(kv, "=")
		set[k] = v
	}
	getenv := func(k string) string {
		if v, ok := set[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	cfg, err := app.LoadConfig(nil, getenv)
	if err != nil {
		ln.Close()
		return nil, err
	}
	r := &running{logs: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	log := slog.New(slog.NewJSONHandler(lockedWriter{r.mu, r.logs}, &slog.HandlerOptions{Level: cfg.LogLevel}))
	a, err := app.Open(context.Background(), cfg, log)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("broker did not start: %w\n%s", err, r.Logs())
	}
	if err := a.Start(ln); err != nil {
		a.Shutdown(context.Background())
		return nil, fmt.Errorf("broker did not start: %w\n%s", err, r.Logs())
	}
	r.app = a
	go func() {
		if err := <-a.Served(); err != nil {
			r.mu.Lock()
			r.exit = err
			r.mu.Unlock()
			r.Stop()
		}
	}()
	return &Server{URL: "http://" + ln.Addr().String(), Port: port, running: r}, nil
}

// startProcess runs the queengo binary on a free port and waits until it
// answers.
func startProcess(o StartOpts) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	port := o.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command(bin)
	if o.NoFile > 0 {
		// sh execs the broker, so the process (and its pid) is the broker's.
		cmd = exec.Command("/bin/sh", "-c", `ulimit -n "$1" && shift && exec "$0" "$@"`, bin, strconv.Itoa(o.NoFile))
	}
	cmd.Env = append(os.Environ(), environment(o.DatabaseURL, port, o.Env)...)
	r := &running{cmd: cmd, logs: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	s := &Server{URL: "http://127.0.0.1:" + strconv.Itoa(port), Port: port, running: r}
	cmd.Stdout, cmd.Stderr = lockedWriter{r.mu, r.logs}, lockedWriter{r.mu, r.logs}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-r.done:
			return nil, fmt.Errorf("broker exited at start:\n%s", r.Logs())
		default:
		}
		if s.answers() {
			return s, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("broker did not listen within 60s:\n%s", r.Logs())
}

// Stop shuts the broker down gracefully: an App in the test process
// returns when it has, a process gets SIGTERM and is waited for (SIGKILL
// after 20 s).
func (r *running) Stop() {
	if r.app != nil {
		r.stop.Do(func() {
			r.app.Shutdown(context.Background())
			close(r.done)
		})
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// Kill sends SIGKILL to a broker process (a crash: nothing is flushed or
// closed) and waits for it to exit. A broker in the test process cannot be
// killed: start it with StartOpts{Process: true}.
func (r *running) Kill() {
	if r.cmd == nil {
		panic("e2e: Kill needs a broker process (StartOpts.Process)")
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}

// Exited reports whether the broker has stopped, and its exit code: a
// process's own, or for a broker in the test process 0 after Stop and 1
// when its server failed.
func (r *running) Exited() (bool, int) {
	select {
	case <-r.done:
	default:
		return false, 0
	}
	if r.cmd != nil {
		return true, r.cmd.ProcessState.ExitCode()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exit != nil && !errors.Is(r.exit, net.ErrClosed) {
		return true, 1
	}
	return true, 0
}

// Logs returns what the broker logged so far.
func (r *running) Logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logs.String()
}

func stopAll() {
	serversMu.Lock()
	defer serversMu.Unlock()
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Stop()
		}()
	}
	wg.Wait()
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
// failed its first request with "connection refused". The check's timeout
// outlasts /health's own 2 s database check, so a broker started without
// its database answers 503.
func (s *Server) answers() bool {
	err := s.API().WithTimeout(5 * time.Second).Health(context.Background())
	var refused *client.APIError
	return err == nil || errors.As(err, &refused) && refused.Status == http.StatusServiceUnavailable
}

// API is the project's Go client of the broker (package client), for the
// calls a test makes to set up or wait, not to check.
func (s *Server) API() *client.Client {
	s.apiOnce.Do(func() {
		c, err := client.New(s.URL, client.Timeout(120*time.Second))
		if err != nil {
			panic(fmt.Sprintf("e2e: a client of %s: %v", s.URL, err)) // the harness made the URL
		}
		s.api = c
	})
	return s.api
}

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

// Shared returns a broker in the test process on the package database,
// started on first use with env and shared by every test that asks for the
// same env; Main stops it at the end (no test's cleanup does). When the
// test fails, the tail of the broker's log is attached to it.
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
