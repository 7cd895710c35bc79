package http

import (
	"errors"
	"fmt"

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
	errTraceIDString    = apiError{fasthttp.StatusBadRequest, "TraceId must be a string"}
	errTraceIDUUID      = apiError{fasthttp.StatusBadRequest, "TraceId must be a UUID"}
	errQueueRequired    = apiError{fasthttp.StatusBadRequest, "queue is required"}
	errEnabledRequired  = apiError{fasthttp.StatusBadRequest, "enabled (boolean) is required"}
	errNamespaceString  = apiError{fasthttp.StatusBadRequest, "namespace must be a string or null"}
	errTaskString       = apiError{fasthttp.StatusBadRequest, "task must be a string or null"}
	errPool             = apiError{fasthttp.StatusInternalServerError, "pool"}
	errPopFailed        = apiError{fasthttp.StatusInternalServerError, "pop failed"}
	errShuttingDown     = apiError{fasthttp.StatusServiceUnavailable, "broker is shutting down"}
	errDatabase         = apiError{fasthttp.StatusInternalServerError, "database error"}
	errDatabaseNoConn   = apiError{fasthttp.StatusServiceUnavailable, "database unavailable"}
	errDatabaseTimedOut = apiError{fasthttp.StatusServiceUnavailable, "database timed out"}
	errRouteNotFound    = apiError{fasthttp.StatusNotFound, "route not found"}
	errMethodNotAllowed = apiError{fasthttp.StatusMethodNotAllowed, "method not allowed"}
	errInternal         = apiError{fasthttp.StatusInternalServerError, "internal error"}

	// The HTTP server's own errors, met before a request reaches a route.
	errHeaderTooLarge = apiError{fasthttp.StatusRequestHeaderFieldsTooLarge, "request header too large"}
	errRequestTimeout = apiError{fasthttp.StatusRequestTimeout, "request not received in time"}
	errMalformed      = apiError{fasthttp.StatusBadRequest, "malformed HTTP request"}
)

// errBodyTooLarge names the limit a body passed.
func errBodyTooLarge(limit int) apiError {
	return apiError{fasthttp.StatusRequestEntityTooLarge, fmt.Sprintf("request body too large (limit %d bytes)", limit)}
}

func errNotUTF8Field(field string) apiError { return badRequest(field + " must be valid UTF-8") }

func errNULField(field string) apiError {
	return badRequest(field + " must not contain NUL characters")
}

func errNameEmpty(what string) apiError { return badRequest(what + " name must not be empty") }

func errNameTooLong(what string) apiError {
	return badRequest(fmt.Sprintf("%s name must be at most %d bytes", what, queengo.MaxNameLen))
}

func errNameControl(what string) apiError {
	return badRequest(what + " name must not contain control characters")
}

func errPathEncoding(key string) apiError {
	return badRequest(key + " is not a valid percent-encoded path segment")
}

// errIntParam names a query parameter that is not an integer in [lo, hi].
func errIntParam(key string, lo, hi int) apiError {
	if lo == noLowerBound {
		return badRequest(fmt.Sprintf("%s must be an integer of at most %d", key, hi))
	}
	return badRequest(fmt.Sprintf("%s must be an integer between %d and %d", key, lo, hi))
}

// badRequest builds a 400 with a message of its own (names, option types).
func badRequest(msg string) apiError { return apiError{fasthttp.StatusBadRequest, msg} }

// storeError maps a store or broker failure onto the table.
func storeError(err error) apiError {
	switch {
	case errors.Is(err, queengo.ErrPool), errors.Is(err, queengo.ErrUnavailable):
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
