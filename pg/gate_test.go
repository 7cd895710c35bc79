package pg

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queengo/queengo"
)

// TestDialGate_BacksOffAfterAFailedConnectAndLetsOneProbeThrough: after a
// failed connection attempt requests are refused at once
// (queengo.ErrUnavailable) until the backoff's wait passed, then one probe
// goes; a connection had ends the streak. A server out of connection slots
// holds nothing back.
func TestDialGate_BacksOffAfterAFailedConnectAndLetsOneProbeThrough(t *testing.T) {
	t.Parallel()
	g := &dialGate{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	refused := &pgconn.ConnectError{}
	if probe, err := g.admit(); probe || err != nil {
		t.Fatalf("up: probe %v err %v", probe, err)
	}
	g.done(false, refused)
	if _, err := g.admit(); !errors.Is(err, queengo.ErrUnavailable) {
		t.Fatalf("right after a failed connect: %v, want ErrUnavailable", err)
	}
	g.mu.Lock()
	g.next = g.next.Add(-dialDelayMax) // the wait passed
	g.mu.Unlock()
	probe, err := g.admit()
	if !probe || err != nil {
		t.Fatalf("after the wait: probe %v err %v, want the probe", probe, err)
	}
	if _, err := g.admit(); err == nil {
		t.Fatal("a second request went while the probe was in flight")
	}
	g.done(true, nil)
	if probe, err := g.admit(); probe || err != nil {
		t.Fatalf("after a connection: probe %v err %v", probe, err)
	}
	if connectFailed(&pgconn.PgError{Code: codeTooManyConns}) {
		t.Fatal("a full server counted as away")
	}
}
