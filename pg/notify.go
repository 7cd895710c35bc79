package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NotifyChannel carries wake-ups between broker processes on one database:
// a payload names a committed (queue, partition) and the process that wrote
// it (D12).
const NotifyChannel = "queengo_push"

// listenerApp is the application_name of listener connections, so a process
// can tell whether anyone else listens before it spends a commit on NOTIFY.
const listenerApp = "queengo-listener"

// Listen holds a dedicated connection that LISTENs on NotifyChannel and
// calls fn with every payload until ctx ends, reconnecting after failures.
// ready is called each time the LISTEN is in place. Connecting and the LISTEN
// are bounded by the request timeout; waiting for notifications is not (a
// frozen server delays them, and the connection carries on when it thaws).
func (s *Store) Listen(ctx context.Context, ready func(), fn func(payload string)) {
	var backoff time.Duration
	for ctx.Err() == nil {
		listened, err := s.listenOnce(ctx, ready, fn)
		if ctx.Err() != nil {
			return
		}
		backoff = nextListenBackoff(backoff, listened)
		s.log.Warn("listener connection lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// The listener reconnects after listenBackoffMin, doubling up to
// listenBackoffMax while connecting or LISTEN keeps failing.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// nextListenBackoff is the wait before the next reconnect, after the last
// one waited last: the least after a connection that had its LISTEN in
// place (each loss is a new incident), else twice last, within the bounds.
func nextListenBackoff(last time.Duration, listened bool) time.Duration {
	if listened || last == 0 {
		return listenBackoffMin
	}
	return min(last*2, listenBackoffMax)
}

// listenOnce listens until the connection fails; listened reports whether
// its LISTEN was in place.
func (s *Store) listenOnce(ctx context.Context, ready func(), fn func(string)) (listened bool, err error) {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = listenerApp
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	lctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	_, err = conn.Exec(lctx, "LISTEN "+NotifyChannel)
	cancel()
	if err != nil {
		return false, err
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		fn(n.Payload)
	}
}

// Notify sends the payloads on NotifyChannel in one statement.
func (s *Store) Notify(ctx context.Context, payloads []string) error {
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		_, err := c.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, NotifyChannel, payloads)
		return err
	})
	if err != nil {
		return fmt.Errorf("error notifying: %w", err)
	}
	return nil
}

// Listeners counts the broker listener connections on the database,
// this process's own included.
func (s *Store) Listeners(ctx context.Context) (int, error) {
	var n int
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`,
			listenerApp).Scan(&n)
	})
	return n, err
}
