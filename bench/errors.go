package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/queengo/queengo/http/client"
	"github.com/valyala/fasthttp"
)

// maxErrorSamples bounds how many full error texts a run keeps for its
// report; the counts per kind are kept for all of them.
const maxErrorSamples = 5

// OpError attaches the operation name to a transport or protocol error so
// that errors are counted per operation.
type OpError struct {
	Op  string
	Err error
}

func (e *OpError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *OpError) Unwrap() error { return e.Err }

// opErr wraps err with op, or returns nil.
func opErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return &OpError{Op: op, Err: err}
}

// errorKind classifies an error into a short, stable key such as
// "push: http 500" (an answer with a status the scenario did not expect, a
// *client.APIError) or "pop: timeout".
func errorKind(err error) string {
	op := ""
	var oe *OpError
	if errors.As(err, &oe) {
		op = oe.Op + ": "
		err = oe.Err
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		return fmt.Sprintf("%shttp %d", op, ae.Status)
	}
	var ue *client.UnreachableError
	if errors.As(err, &ue) {
		err = ue.Err // the cause, not the request every error of op shares
	}
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return op + "timeout"
	case errors.Is(err, fasthttp.ErrNoFreeConns):
		return op + "no free connections"
	case errors.Is(err, fasthttp.ErrConnectionClosed):
		return op + "connection closed"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return op + s
}

// Errors counts failures by kind. It is safe for concurrent use.
type Errors struct {
	n       atomic.Int64
	mu      sync.Mutex
	kinds   map[string]int64
	samples []string
}

// Add counts err; a nil error is ignored.
func (e *Errors) Add(err error) {
	if err == nil {
		return
	}
	e.n.Add(1)
	k := errorKind(err)
	e.mu.Lock()
	if e.kinds == nil {
		e.kinds = map[string]int64{}
	}
	e.kinds[k]++
	if len(e.samples) < maxErrorSamples {
		s := err.Error()
		if len(s) > 300 {
			s = s[:300]
		}
		e.samples = append(e.samples, s)
	}
	e.mu.Unlock()
}

// Count returns the number of errors added so far.
func (e *Errors) Count() int64 { return e.n.Load() }

// Kinds returns a copy of the counts per error kind.
func (e *Errors) Kinds() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int64, len(e.kinds))
	for k, v := range e.kinds {
		out[k] = v
	}
	return out
}

// Samples returns up to five full error texts, in the order they occurred.
func (e *Errors) Samples() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.samples...)
}

// String renders the kinds as "kind=n, kind=n", most frequent first.
func (e *Errors) String() string {
	kinds := e.Kinds()
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if kinds[keys[i]] != kinds[keys[j]] {
			return kinds[keys[i]] > kinds[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, kinds[k])
	}
	return strings.Join(parts, ", ")
}
