package actors

import (
	"context"
	"os"
	"strconv"
	"sync"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TraceStore is what the trace routes (shared/spec/api.md §4.7) need of the store.
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
func (b *Broker) RecordTrace(ctx context.Context, t queengo.NewTrace) (uuid.UUID, error) {
	t.WorkerID = workerID()
	return b.cfg.Store.RecordTrace(ctx, t)
}

// MessageTraces returns one page of a message's traces, oldest first; a
// message without traces, or unknown, has none.
func (b *Broker) MessageTraces(ctx context.Context, partition uuid.UUID, txid string, limit, offset int) ([]queengo.Trace, error) {
	return b.cfg.Store.MessageTraces(ctx, partition, txid, limit, offset)
}

// TracesByName returns one page of the traces carrying name, newest first,
// with their messages' payloads while retained, and the name's trace count.
func (b *Broker) TracesByName(ctx context.Context, name string, limit, offset int) ([]queengo.Trace, int64, error) {
	return b.cfg.Store.TracesByName(ctx, name, limit, offset)
}

// TraceNames returns one page of the trace names, most recently seen first,
// and how many there are.
func (b *Broker) TraceNames(ctx context.Context, limit, offset int) ([]queengo.TraceName, int64, error) {
	return b.cfg.Store.TraceNames(ctx, limit, offset)
}
