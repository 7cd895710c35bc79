package admin

import (
	"context"
	"os"
	"strconv"
	"sync"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TraceStore is what the trace routes (docs/api.md "Traces") need of the store.
type TraceStore interface {
	RecordTrace(ctx context.Context, t queengo.NewTrace) (uuid.UUID, error)
	MessageTraces(ctx context.Context, partition uuid.UUID, txid string, limit, offset int) ([]queengo.Trace, error)
	TracesByName(ctx context.Context, name string, limit, offset int) ([]queengo.Trace, int64, error)
	TraceNames(ctx context.Context, limit, offset int) ([]queengo.TraceName, int64, error)
}

// workerID names this broker process in the traces it records: host and
// pid, so the brokers sharing a database tell their traces apart (the
// reference server records its worker thread's index instead).
var workerID = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "queengo"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
})

// RecordTrace records a trace event for a stored message, stamped with this
// process's worker id, and returns its id; a message that is not stored
// fails with an error wrapping queengo.ErrNotFound. It touches no actor:
// a trace is not on the data path.
func (a *Admin) RecordTrace(ctx context.Context, t queengo.NewTrace) (uuid.UUID, error) {
	t.WorkerID = workerID()
	return a.store.RecordTrace(ctx, t)
}

// MessageTraces returns one page of a message's traces, oldest first; a
// message without traces, or unknown, has none.
func (a *Admin) MessageTraces(ctx context.Context, partition uuid.UUID, txid string, limit, offset int) ([]queengo.Trace, error) {
	return a.store.MessageTraces(ctx, partition, txid, limit, offset)
}

// TracesByName returns one page of the traces carrying name, newest first,
// with their messages' payloads while retained, and the name's trace count.
func (a *Admin) TracesByName(ctx context.Context, name string, limit, offset int) ([]queengo.Trace, int64, error) {
	return a.store.TracesByName(ctx, name, limit, offset)
}

// TraceNames returns one page of the trace names, most recently seen first,
// and how many there are.
func (a *Admin) TraceNames(ctx context.Context, limit, offset int) ([]queengo.TraceName, int64, error) {
	return a.store.TraceNames(ctx, limit, offset)
}
