// Package apitest starts the real broker binary on a free port against a
// database of its own and talks HTTP to it: the harness of the black-box API
// tests. Each test package calls Main from its TestMain, which builds
// ./cmd/queengo once (with -race when the tests run with it), creates the
// package's database and drops it at the end.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
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

// Server is one running broker process.
type Server struct {
	URL  string
	Port int
	cmd  *exec.Cmd
	logs *bytes.Buffer
	mu   *sync.Mutex
	done chan struct{}
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
	s, err := StartURL(DB.URL, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("broker log:\n%s", s.Logs())
		}
	})
	return s
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
}

// StartWith is Start with options; the server stops at the end of the test.
func StartWith(t testing.TB, o StartOpts) *Server {
	t.Helper()
	if o.DatabaseURL == "" {
		o.DatabaseURL = DB.URL
	}
	s, err := start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("broker log:\n%s", s.Logs())
		}
	})
	return s
}

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
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "PORT="+strconv.Itoa(port), "HOST=127.0.0.1",
		"DB_POOL_SIZE=6", "LOG_LEVEL=warn")
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
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
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

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Client is shared by the tests; long polls set their own deadlines.
var Client = &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0}}

// Response is a finished HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test when it is not JSON.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("response %d is not JSON (%v): %q", r.Status, err, r.Body)
	}
}

// Do sends a request; body is marshalled unless it is a string or []byte.
func (s *Server) Do(t testing.TB, method, path string, body any) *Response {
	t.Helper()
	r, err := s.DoCtx(context.Background(), method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// DoCtx is Do without a test, for goroutines; it returns the error.
func (s *Server) DoCtx(ctx context.Context, method, path string, body any) (*Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// Get, Post and Delete are shorthands of Do.
func (s *Server) Get(t testing.TB, path string) *Response {
	t.Helper()
	return s.Do(t, "GET", path, nil)
}

// Post sends a JSON body.
func (s *Server) Post(t testing.TB, path string, body any) *Response {
	t.Helper()
	return s.Do(t, "POST", path, body)
}

// Delete sends a DELETE.
func (s *Server) Delete(t testing.TB, path string) *Response {
	t.Helper()
	return s.Do(t, "DELETE", path, nil)
}

// Unique returns a queue-safe name unique within the test run.
func Unique(t testing.TB, prefix string) string {
	t.Helper()
	n := uniq.Add(1)
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), n)
}
