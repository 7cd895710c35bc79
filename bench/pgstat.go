package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// PG reads PostgreSQL statistics by running psql. The harness deliberately
// does not link a PostgreSQL driver: only the broker's pg/ package imports
// pgx, and psql is on every machine that runs PostgreSQL.
type PG struct {
	// URL is a libpq connection URL of the broker's database.
	URL string
	// Schema is the schema whose tables count as the broker's storage.
	Schema string
}

// psqlTimeout bounds one statistics query; they are all catalogue reads.
const psqlTimeout = 15 * time.Second

// Query runs one statement and returns psql's unaligned, tuples-only output
// with surrounding whitespace removed. Fields are separated by '|'.
func (p *PG) Query(ctx context.Context, sql string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, psqlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "psql", "-X", "-A", "-t", "-q",
		"-v", "ON_ERROR_STOP=1", "-d", p.URL, "-c", sql)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("error running psql: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// RunFile runs a SQL script with psql -f, failing on the first error. It
// returns how long psql took.
func (p *PG) RunFile(ctx context.Context, path string) (time.Duration, error) {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
		"-d", p.URL, "-o", "/dev/null", "-f", path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("error running psql -f %s: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	return time.Since(start), nil
}

// WALLSN returns the current write-ahead-log position as a byte offset.
func (p *PG) WALLSN(ctx context.Context) (uint64, error) {
	s, err := p.Query(ctx, "SELECT pg_current_wal_lsn()")
	if err != nil {
		return 0, err
	}
	return parseLSN(s)
}

// parseLSN converts PostgreSQL's "XXXXXXXX/YYYYYYYY" notation to a byte
// offset.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, fmt.Errorf("error parsing LSN %q", s)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("error parsing LSN %q", s)
	}
	return h<<32 | l, nil
}

// TableBytes returns the total size (heap, TOAST and indexes) of all tables
// and materialized views in the schema.
func (p *PG) TableBytes(ctx context.Context) (int64, error) {
	s, err := p.Query(ctx, fmt.Sprintf(`SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind IN ('r', 'm', 'p')`, quoteLiteral(p.Schema)))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// Connections counts the client connections to the broker's database other
// than psql's own, and how many of them are busy (in a statement or a
// transaction) right now.
func (p *PG) Connections(ctx context.Context) (total, busy int, err error) {
	s, err := p.Query(ctx, `SELECT count(*), count(*) FILTER (WHERE state <> 'idle')
FROM pg_stat_activity
WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND datname = current_database()`)
	if err != nil {
		return 0, 0, err
	}
	a, b, _ := strings.Cut(s, "|")
	total, _ = strconv.Atoi(a)
	busy, _ = strconv.Atoi(b)
	return total, busy, nil
}

// pgSettingNames are the settings a benchmark report records, because they
// decide what a commit costs.
var pgSettingNames = []string{
	"server_version", "synchronous_commit", "fsync", "wal_level", "full_page_writes",
	"wal_compression", "shared_buffers", "max_wal_size", "checkpoint_timeout",
	"max_connections", "default_toast_compression", "commit_delay",
}

// Settings returns the values of pgSettingNames.
func (p *PG) Settings(ctx context.Context) (map[string]string, error) {
	names := make([]string, len(pgSettingNames))
	for i, n := range pgSettingNames {
		names[i] = quoteLiteral(n)
	}
	s, err := p.Query(ctx, "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ("+
		strings.Join(names, ",")+") ORDER BY name")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "|"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// quoteIdent quotes s as an SQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// psqlSession is one long-lived psql process fed on standard input, so a
// measurement can read the CPU of its PostgreSQL backend from /proc while
// the backend is alive, unaffected by whatever else the server is doing.
type psqlSession struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
	// PID is the backend's process id (pg_backend_pid()).
	PID int
}

// psqlDone marks the end of one command's output.
const psqlDone = "__bench_done__"

// openPSQL starts psql on url and asks for its backend's PID.
func openPSQL(ctx context.Context, url string) (*psqlSession, error) {
	cmd := exec.CommandContext(ctx, "psql", "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", url)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("error starting psql: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("error starting psql: %w", err)
	}
	s := &psqlSession{cmd: cmd, in: in, out: bufio.NewReader(out), stderr: &bytes.Buffer{}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("error starting psql: %w", err)
	}
	lines, _, err := s.Run("SELECT pg_backend_pid();")
	if err == nil && len(lines) == 1 {
		s.PID, err = strconv.Atoi(lines[0])
	}
	if err != nil || s.PID == 0 {
		s.Close()
		return nil, fmt.Errorf("error reading the backend pid: %v %s", err, s.stderr.String())
	}
	return s, nil
}

// Run sends one psql command (SQL ending in ';' or a backslash command) and
// waits until it has finished, returning its output lines and how long it
// took.
func (s *psqlSession) Run(command string) ([]string, time.Duration, error) {
	start := time.Now()
	if _, err := fmt.Fprintf(s.in, "%s\n\\echo %s\n", command, psqlDone); err != nil {
		return nil, 0, fmt.Errorf("error writing to psql: %w: %s", err, s.stderr.String())
	}
	var lines []string
	for {
		line, err := s.out.ReadString('\n')
		if err != nil {
			return nil, 0, fmt.Errorf("error running %q in psql: %w: %s", firstLine(command), err,
				strings.TrimSpace(s.stderr.String()))
		}
		line = strings.TrimRight(line, "\n")
		if line == psqlDone {
			return lines, time.Since(start), nil
		}
		if line != "" {
			lines = append(lines, line)
		}
	}
}

// BackendCPU returns the CPU seconds the session's backend has used.
func (s *psqlSession) BackendCPU() (float64, error) { return processCPUSeconds(s.PID) }

// Close ends psql.
func (s *psqlSession) Close() {
	_ = s.in.Close()
	_ = s.cmd.Wait()
}
