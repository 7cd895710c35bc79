package http

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// apiError is one entry of the API error table: the status and the stable
// message a client sees in {"error": "..."}.
type apiError struct {
	Status  int
	Message string
}

// The API error table. Messages follow the reference server where an SDK or
// a user may match on them.
var (
	errEmptyBody        = apiError{fasthttp.StatusBadRequest, "Empty request body"}
	errItemsRequired    = apiError{fasthttp.StatusBadRequest, "items array is required"}
	errItemObject       = apiError{fasthttp.StatusBadRequest, "Each item must be an object"}
	errQueueString      = apiError{fasthttp.StatusBadRequest, "Queue must be a string"}
	errPartitionString  = apiError{fasthttp.StatusBadRequest, "Partition must be a string"}
	errTxIDString       = apiError{fasthttp.StatusBadRequest, "TransactionId must be a string"}
	errTxIDTooLong      = apiError{fasthttp.StatusBadRequest, "TransactionId must be at most 1024 bytes"}
	errTxIDNUL          = apiError{fasthttp.StatusBadRequest, "TransactionId must not contain NUL characters"}
	errTraceIDString    = apiError{fasthttp.StatusBadRequest, "TraceId must be a string"}
	errTraceIDUUID      = apiError{fasthttp.StatusBadRequest, "TraceId must be a UUID"}
	errQueueRequired    = apiError{fasthttp.StatusBadRequest, "queue is required"}
	errEnabledRequired  = apiError{fasthttp.StatusBadRequest, "enabled (boolean) is required"}
	errPool             = apiError{fasthttp.StatusInternalServerError, "pool"}
	errPopFailed        = apiError{fasthttp.StatusInternalServerError, "pop failed"}
	errShuttingDown     = apiError{fasthttp.StatusServiceUnavailable, "broker is shutting down"}
	errDatabase         = apiError{fasthttp.StatusInternalServerError, "database error"}
	errDatabaseNoConn   = apiError{fasthttp.StatusInternalServerError, "database unavailable: no connection"}
	errDatabaseTimedOut = apiError{fasthttp.StatusInternalServerError, "database statement timed out"}
)

// badRequest builds a 400 with a message of its own (names, option types).
func badRequest(msg string) apiError { return apiError{fasthttp.StatusBadRequest, msg} }

// storeError maps a store or broker failure onto the table.
func storeError(err error) apiError {
	switch {
	case errors.Is(err, queengo.ErrPool):
		return errDatabaseNoConn
	case errors.Is(err, queengo.ErrTimeout):
		return errDatabaseTimedOut
	case errors.Is(err, queengo.ErrClosed):
		return errShuttingDown
	}
	return errDatabase
}

func writeError(ctx *fasthttp.RequestCtx, e apiError) {
	buf := append(make([]byte, 0, 64), `{"error":`...)
	buf = appendString(buf, e.Message)
	buf = append(buf, '}')
	writeJSON(ctx, e.Status, buf)
}
