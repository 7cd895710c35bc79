package pg

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queengo/queengo"
)

// Connection backoff: after a failed connection attempt the pool's next one
// waits dialDelayMin, each further failure doubles the wait up to
// dialDelayMax; each wait is jittered down by up to half, so that brokers
// that lost the same server do not come back in step. A connection that
// opens ends the streak.
const (
	dialDelayMin = 50 * time.Millisecond
	// dialDelayMax bounds how late after the database is back (a restart,
	// a standby promoted) the broker finds it.
	dialDelayMax = time.Second
	// dialLogEvery spaces the warnings of a streak of failed attempts.
	dialLogEvery = time.Second
)

// dialGate keeps a pool from dialing a server that does not answer on every
// request: once a connection attempt failed, requests that need a new
// connection fail at once with queengo.ErrUnavailable, except one (the
// probe) per backoff wait, so that at most one attempt is in flight and the
// attempts back off exponentially. Requests served by a pooled connection
// are not held back: the gate only stands before Acquire while the last
// attempt failed, and a pooled connection of a server that went away fails
// its statement anyway. Its warnings come at most once a second with the
// count of failed attempts and refused requests.
type dialGate struct {
	log *slog.Logger

	mu      sync.Mutex
	down    bool          // the last connection attempt failed
	probing bool          // the probe of the current wait is in flight
	delay   time.Duration // the current backoff step
	next    time.Time     // the probe may go from then on
	since   time.Time     // when the streak began
	lastErr error
	failed  int       // failed attempts not yet reported
	refused int       // requests refused not yet reported
	lastLog time.Time // the streak's last warning
}

// admit is called before an Acquire: it reports whether this request is the
// probe (it must call done), or refuses it while the database is known down.
func (g *dialGate) admit() (probe bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.down {
		return false, nil
	}
	now := time.Now()
	if g.probing || now.Before(g.next) {
		g.refused++
		g.report(now)
		return false, fmt.Errorf("%w: the last connection attempt failed (%v); the next one within %v",
			queengo.ErrUnavailable, g.lastErr, max(g.next.Sub(now), 0).Round(time.Millisecond))
	}
	g.probing = true
	return true, nil
}

// done records the outcome of an Acquire: err nil is a connection had (the
// database answers), a connect failure starts or extends the streak, and
// any other error (a pool wait or a deadline) says nothing of the server.
func (g *dialGate) done(probe bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if probe {
		g.probing = false
	}
	now := time.Now()
	switch {
	case err == nil:
		if g.down {
			g.log.Info("database reachable again", "down_for", now.Sub(g.since).Round(time.Millisecond).String(),
				"failed_attempts", g.failed, "refused_requests", g.refused)
		}
		g.down, g.delay, g.next, g.lastErr, g.failed, g.refused, g.lastLog = false, 0, time.Time{}, nil, 0, 0, time.Time{}
	case !connectFailed(err):
	case !g.down || probe:
		if !g.down {
			g.down, g.since, g.delay = true, now, dialDelayMin
		} else {
			g.delay = min(2*g.delay, dialDelayMax)
		}
		g.lastErr = err
		g.failed++
		// Jitter: wait between half the step and the whole of it.
		g.next = now.Add(g.delay/2 + rand.N(g.delay/2+1))
		g.report(now)
	default:
		// An attempt that was in flight when the streak began.
		g.failed++
		g.report(now)
	}
}

// report logs the streak's first failure, then at most once per
// dialLogEvery with the counts since the last warning.
func (g *dialGate) report(now time.Time) {
	if !g.lastLog.IsZero() && now.Sub(g.lastLog) < dialLogEvery {
		return
	}
	g.log.Warn("database unreachable; connection attempts back off", "err", g.lastErr,
		"failed_attempts", g.failed, "refused_requests", g.refused,
		"down_for", now.Sub(g.since).Round(time.Millisecond).String(), "next_attempt_in", max(g.next.Sub(now), 0).String())
	g.failed, g.refused, g.lastLog = 0, 0, now
}

// connectFailed reports whether err is a failed attempt to open a
// connection to a server that is away: it refused the connection, did not
// answer, or was read-only. A server out of connection slots (53300,
// 53400) is up, and a slot may free at any moment: such an attempt is no
// reason to hold the next requests back.
func connectFailed(err error) bool {
	var connErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == codeTooManyConns || pgErr.Code == codeTooManyConnsUsr) {
		return false
	}
	return errors.As(err, &connErr)
}
