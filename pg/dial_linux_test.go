package pg

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/pg/pgtest"
)

// TestConnOptions_ReachTheSocketAndTheSession: a Store opened with
// ConnOptions over TCP has a pooled connection whose socket carries the
// keepalive settings and TCP_USER_TIMEOUT (read back with getsockopt), and
// whose session has lock_timeout and idle_in_transaction_session_timeout.
func TestConnOptions_ReachTheSocketAndTheSession(t *testing.T) {
	url := pgtest.AdminURL()
	if pcfg, err := pgxpool.ParseConfig(url); err != nil || strings.HasPrefix(pcfg.ConnConfig.Host, "/") {
		t.Skipf("the test server is not reached over TCP (%v)", err)
	}
	ctx := context.Background()
	s, err := Open(ctx, Config{URL: url, PoolSize: 1, AcquireTimeout: 5 * time.Second, Conn: ConnOptions{
		ConnectTimeout: 3 * time.Second, LockTimeout: 1234 * time.Millisecond, IdleInTransactionTimeout: 4321 * time.Millisecond,
		KeepAlive:      net.KeepAliveConfig{Idle: 11 * time.Second, Interval: 3 * time.Second, Count: 4},
		TCPUserTimeout: 7 * time.Second,
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.pool.Config().ConnConfig.ConnectTimeout; got != 3*time.Second {
		t.Errorf("connect timeout %v, want 3s", got)
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()

	var lock, idle string
	if err := c.QueryRow(ctx, "SELECT current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout')").Scan(&lock, &idle); err != nil {
		t.Fatal(err)
	}
	if lock != "1234ms" || idle != "4321ms" {
		t.Errorf("lock_timeout %q, idle_in_transaction_session_timeout %q, want 1234ms and 4321ms", lock, idle)
	}

	sc, ok := c.Conn().PgConn().Conn().(syscall.Conn)
	if !ok {
		t.Fatalf("the connection is a %T, not a socket", c.Conn().PgConn().Conn())
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, o := range []struct {
		name       string
		level, opt int
	}{
		{"SO_KEEPALIVE", unix.SOL_SOCKET, unix.SO_KEEPALIVE},
		{"TCP_KEEPIDLE", unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
		{"TCP_KEEPINTVL", unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
		{"TCP_KEEPCNT", unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
		{"TCP_USER_TIMEOUT", unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT},
	} {
		var v int
		var gerr error
		if err := raw.Control(func(fd uintptr) { v, gerr = unix.GetsockoptInt(int(fd), o.level, o.opt) }); err != nil {
			t.Fatal(err)
		}
		if gerr != nil {
			t.Fatalf("getsockopt %s: %v", o.name, gerr)
		}
		got[o.name] = v
	}
	want := map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 11, "TCP_KEEPINTVL": 3, "TCP_KEEPCNT": 4, "TCP_USER_TIMEOUT": 7000}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %d, want %d", k, got[k], w)
		}
	}
}

// TestLockTimeout_IsARetryableTimeout: a statement that waits
// DB_LOCK_TIMEOUT for a lock another session holds fails as ErrTimeout
// (503, retryable), not as an untranslated database error (500).
func TestLockTimeout_IsARetryableTimeout(t *testing.T) {
	url := pgtest.AdminURL()
	ctx := context.Background()
	s, err := Open(ctx, Config{URL: url, PoolSize: 1, AcquireTimeout: 5 * time.Second,
		Conn: ConnOptions{LockTimeout: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	const key = 4143517
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		t.Fatal(err)
	}
	_, err = s.pool.Exec(ctx, "SELECT pg_advisory_lock($1)", key)
	if err == nil {
		t.Fatal("the lock was taken while another session held it")
	}
	if err := translate(err); !errors.Is(err, queengo.ErrTimeout) {
		t.Fatalf("translate(%v) is not ErrTimeout", err)
	}
}
