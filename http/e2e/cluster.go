package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/queengo/queengo/pg/pgtest"
)

// Cluster is a private PostgreSQL cluster of a test: its own data directory
// and port, started as a process group the test can kill (SIGKILL: a
// machine that died) and promote. The fault tests that the shared server
// must not see (a primary killed, a standby promoted) run on these.
type Cluster struct {
	Dir  string
	Port int

	bin   string
	cred  *syscall.Credential // the user the server runs as when the test runs as root
	cmd   *exec.Cmd
	logs  *bytes.Buffer
	mu    sync.Mutex
	done  chan struct{}
	owner string // the directory holding Dir, removed at cleanup
}

// PGBinDir is the directory of initdb and the server's other programs:
// QUEENGO_PG_BIN, else the newest /usr/lib/postgresql/*/bin that has initdb,
// else pg_config --bindir; empty when none is found.
func PGBinDir() string {
	if d := os.Getenv("QUEENGO_PG_BIN"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		a, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		b, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return a > b
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

// NeedClusters skips the test when PostgreSQL's server programs are not
// installed (initdb cannot be found), and returns their directory.
func NeedClusters(t testing.TB) string {
	t.Helper()
	bin := PGBinDir()
	if bin == "" {
		t.Skip("no initdb (set QUEENGO_PG_BIN): private clusters cannot be built")
	}
	return bin
}

// serverCredential is the user the server programs run as: the test's own,
// or, when the test runs as root (which initdb refuses), the postgres user.
func serverCredential(t testing.TB) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("running as root with no postgres user: initdb refuses root")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// newClusterDir makes a directory for a cluster, owned by the server's user.
func newClusterDir(t testing.TB, name string, cred *syscall.Credential) (owner, dir string) {
	t.Helper()
	owner, err := os.MkdirTemp("", "queengo-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(owner, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		for _, d := range []string{owner, dir} {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return owner, dir
}

// run runs one of the server's programs as the server's user.
func (c *Cluster) run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, prog), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	cmd.Dir = filepath.Dir(c.Dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

// clusterSettings are every private cluster's postgresql.conf lines: small,
// local only, ready to stream to a standby. fsync stays on: a SIGKILL of
// the server keeps the page cache, but the test measures what a primary's
// crash loses, so the server's own durability should be the real one.
const clusterSettings = `
listen_addresses = '127.0.0.1'
max_connections = 60
shared_buffers = 32MB
wal_level = replica
max_wal_senders = 6
wal_keep_size = 256MB
hot_standby = on
log_min_messages = warning
`

// NewPrimary initialises and starts a cluster on a free port. extra lines
// go to its postgresql.conf (synchronous_standby_names, ...). The cluster
// is killed and removed when the test ends.
func NewPrimary(t testing.TB, extra string) *Cluster {
	t.Helper()
	bin := NeedClusters(t)
	cred := serverCredential(t)
	owner, dir := newClusterDir(t, "primary", cred)
	c := &Cluster{Dir: dir, Port: FreePort(t), bin: bin, cred: cred, owner: owner}
	t.Cleanup(c.remove)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.run(ctx, "initdb", "-D", dir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatal(err)
	}
	c.configure(t, clusterSettings+extra)
	c.Start(t)
	return c
}

// NewStandby makes a streaming standby of primary with pg_basebackup -R and
// starts it, named "standby" on the primary (synchronous_standby_names
// there may name it), with no synchronous standby of its own once promoted.
// extra lines go to its postgresql.conf.
func NewStandby(t testing.TB, primary *Cluster, extra string) *Cluster {
	t.Helper()
	owner, dir := newClusterDir(t, "standby", primary.cred)
	c := &Cluster{Dir: dir, Port: FreePort(t), bin: primary.bin, cred: primary.cred, owner: owner}
	t.Cleanup(c.remove)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.run(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres",
		"-D", dir, "-R", "-X", "stream", "-c", "fast"); err != nil {
		t.Fatal(err)
	}
	// The primary's synchronous_standby_names came with the base backup:
	// promoted, the standby would wait for a standby of its own forever.
	c.configure(t, "synchronous_standby_names = ''\n"+extra)
	// The standby's name on the primary (pg_stat_replication,
	// synchronous_standby_names), in postgresql.auto.conf, after the
	// primary_conninfo -R wrote there, which it overrides.
	f, err := os.OpenFile(filepath.Join(dir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(f, "\nprimary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=standby'\n", primary.Port)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c.Start(t)
	return c
}

// configure sets the cluster's port and appends lines to its
// postgresql.conf.
func (c *Cluster) configure(t testing.TB, lines string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(c.Dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "\nport = %d\nunix_socket_directories = '%s'\n%s\n", c.Port, filepath.Dir(c.Dir), lines); err != nil {
		t.Fatal(err)
	}
}

// Start starts the server as a process group of its own and waits until it
// accepts connections.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	c.logs = &bytes.Buffer{}
	c.cmd = exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.Dir)
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	c.cmd.Stdout, c.cmd.Stderr = lockedWriter{&c.mu, c.logs}, lockedWriter{&c.mu, c.logs}
	c.done = make(chan struct{})
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(done) }()
	if err := Eventually(60*time.Second, 50*time.Millisecond, func() error {
		select {
		case <-done:
			return fmt.Errorf("the server exited:\n%s", c.Logs())
		default:
		}
		return c.Exec("postgres", "SELECT 1")
	}); err != nil {
		t.Fatalf("cluster %s did not start: %v\n%s", c.Dir, err, c.Logs())
	}
}

// URL is a URL of the cluster's database db.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// HostPort is the cluster's address, for a multi-host URL.
func (c *Cluster) HostPort() string { return "127.0.0.1:" + strconv.Itoa(c.Port) }

// Kill sends SIGKILL to the server's whole process group (the postmaster
// and every backend at once: the machine died) and waits for the
// postmaster to exit.
func (c *Cluster) Kill() {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// Promote ends the standby's recovery (pg_ctl promote -w): it takes writes
// once this returns.
func (c *Cluster) Promote(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.run(ctx, "pg_ctl", "promote", "-w", "-t", "60", "-D", c.Dir); err != nil {
		t.Fatal(err)
	}
}

// Logs returns what the server logged so far.
func (c *Cluster) Logs() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.logs == nil {
		return ""
	}
	return c.logs.String()
}

// remove kills the server and removes its directory.
func (c *Cluster) remove() {
	c.Kill()
	_ = os.RemoveAll(c.owner)
}

// Exec runs sql on the cluster's database db, on a connection of its own.
func (c *Cluster) Exec(db, sql string, args ...any) error {
	return (&pgtest.Database{URL: c.URL(db)}).Exec(sql, args...)
}

// DB is the cluster's database db, for queries (QueryRow); its pool closes
// when the test ends.
func (c *Cluster) DB(t testing.TB, db string) *pgtest.Database {
	d := &pgtest.Database{URL: c.URL(db)}
	t.Cleanup(d.Close)
	return d
}
