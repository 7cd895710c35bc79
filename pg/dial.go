package pg

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ConnOptions are the settings of every connection the Store opens (the
// pool's, the listener's, the retention leader's and the migration's), the
// reference server's DB_* names that act on a session or its socket. A zero
// field leaves what the URL, PostgreSQL or Go decide; a parameter the URL
// itself sets wins over a field.
type ConnOptions struct {
	// ConnectTimeout bounds opening a connection when the URL sets no
	// connect_timeout; zero: the Store's RequestTimeout.
	ConnectTimeout time.Duration
	// LockTimeout is set as lock_timeout: a statement that waits this long
	// for a lock fails. Zero: the server's setting. The migration
	// connection, which waits for the migration lock, goes without it.
	LockTimeout time.Duration
	// IdleInTransactionTimeout is set as
	// idle_in_transaction_session_timeout: the server ends a session that
	// sits this long inside a transaction. Zero: the server's setting.
	IdleInTransactionTimeout time.Duration
	// KeepAlive tunes the TCP keepalive probes: Idle before the first,
	// Interval between them, Count unanswered before the kernel drops the
	// connection. Zero fields take Go's defaults (15 s, 15 s, 9), which a
	// connection has without these options too; Enable is ignored
	// (keepalives are always on).
	KeepAlive net.KeepAliveConfig
	// TCPUserTimeout is set as TCP_USER_TIMEOUT on the socket (Linux): data
	// sent and not acknowledged this long drops the connection. Zero: the
	// kernel's default.
	TCPUserTimeout time.Duration
}

// apply puts o into the pool configuration parsed from a URL.
func (o ConnOptions) apply(pcfg *pgxpool.Config) {
	cc := pcfg.ConnConfig
	if o.ConnectTimeout > 0 && cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = o.ConnectTimeout
	}
	param := func(name string, d time.Duration) {
		if _, set := cc.RuntimeParams[name]; !set && d > 0 {
			cc.RuntimeParams[name] = strconv.FormatInt(d.Milliseconds(), 10)
		}
	}
	param("lock_timeout", o.LockTimeout)
	param("idle_in_transaction_session_timeout", o.IdleInTransactionTimeout)
	ka := o.KeepAlive
	if ka.Idle == 0 && ka.Interval == 0 && ka.Count == 0 && o.TCPUserTimeout == 0 {
		return // pgx's dialer, with the same keepalives
	}
	ka.Enable = true
	d := &net.Dialer{KeepAliveConfig: ka}
	if o.TCPUserTimeout > 0 {
		d.Control = func(network, _ string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil
			}
			return setUserTimeout(c, o.TCPUserTimeout)
		}
	}
	cc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	}
}
