package http

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/queengo/queengo"
)

// apiError is one entry of the API error table: the status, a stable
// snake_case code that names the entry in logs and in the counter
// queengo_http_errors_total{code="..."}, and the message a client sees in
// {"error": "..."}. A code never changes once released; several entries may
// share a message and tell their causes apart by code only. Messages follow
// the reference server where an SDK or a user may match on them.
//
// This file is the table: every answer that is an error is made here, from
// the request's own mistakes and from the typed errors of the other layers
// (see failure), which carry no wire text of their own.
type apiError struct {
	Status  int
	Code    string
	Message string
}

// The request's own mistakes: 400, nothing done.
var (
	errEmptyBody         = apiError{fasthttp.StatusBadRequest, "empty_body", "Empty request body"}
	errItemsRequired     = apiError{fasthttp.StatusBadRequest, "items_required", "items array is required"}
	errItemObject        = apiError{fasthttp.StatusBadRequest, "item_not_object", "Each item must be an object"}
	errQueueString       = apiError{fasthttp.StatusBadRequest, "queue_not_string", "Queue must be a string"}
	errPartitionString   = apiError{fasthttp.StatusBadRequest, "partition_not_string", "Partition must be a string"}
	errTxIDString        = apiError{fasthttp.StatusBadRequest, "transaction_id_not_string", "TransactionId must be a string"}
	errTxIDTooLong       = apiError{fasthttp.StatusBadRequest, "transaction_id_too_long", "TransactionId must be at most 1024 bytes"}
	errTraceIDString     = apiError{fasthttp.StatusBadRequest, "trace_id_not_string", "TraceId must be a string"}
	errTraceIDUUID       = apiError{fasthttp.StatusBadRequest, "trace_id_not_uuid", "TraceId must be a UUID"}
	errQueueRequired     = apiError{fasthttp.StatusBadRequest, "queue_required", "queue is required"}
	errEnabledRequired   = apiError{fasthttp.StatusBadRequest, "enabled_required", "enabled (boolean) is required"}
	errNamespaceString   = apiError{fasthttp.StatusBadRequest, "namespace_not_string", "namespace must be a string or null"}
	errTaskString        = apiError{fasthttp.StatusBadRequest, "task_not_string", "task must be a string or null"}
	errScopeRequired     = apiError{fasthttp.StatusBadRequest, "scope_required", "namespace or task is required"}
	errTxIDRequired      = apiError{fasthttp.StatusBadRequest, "transaction_id_required", "transactionId is required"}
	errPartitionRequired = apiError{fasthttp.StatusBadRequest, "partition_id_required", "partitionId is required to ensure message uniqueness"}
	// errEmptyClearPartition: a queue clear's ?partition= given empty.
	errEmptyClearPartition = apiError{fasthttp.StatusBadRequest, "clear_partition_empty", "partition must not be empty (leave it out to clear the whole queue)"}
	errPartitionUUID       = apiError{fasthttp.StatusBadRequest, "partition_id_not_uuid", "partitionId must be a UUID"}
	errAcksRequired        = apiError{fasthttp.StatusBadRequest, "acknowledgments_required", "acknowledgments array is required"}
	errBatchTxID           = apiError{fasthttp.StatusBadRequest, "batch_transaction_id_invalid", "Each acknowledgment must have a valid transactionId string"}
	errBatchPartition      = apiError{fasthttp.StatusBadRequest, "batch_partition_id_invalid", "Each acknowledgment must have a valid partitionId string to ensure message uniqueness"}
	errStatusString        = apiError{fasthttp.StatusBadRequest, "status_not_string", "status must be a string"}
	errLeaseString         = apiError{fasthttp.StatusBadRequest, "lease_id_not_string", "leaseId must be a string or null"}
	errErrorString         = apiError{fasthttp.StatusBadRequest, "error_not_string", "error must be a string or null"}
	errGroupString         = apiError{fasthttp.StatusBadRequest, "consumer_group_not_string", "consumerGroup must be a string or null"}
	errSeconds             = apiError{fasthttp.StatusBadRequest, "seconds_invalid", "seconds must be a positive integer"}
	errOpsRequired         = apiError{fasthttp.StatusBadRequest, "operations_required", "operations array required"}
	errOpsEmpty            = apiError{fasthttp.StatusBadRequest, "operations_empty", "operations array cannot be empty"}
	errSubscriptionTSNull  = apiError{fasthttp.StatusBadRequest, "subscription_timestamp_required", "Missing subscriptionTimestamp in request body"}
)

// The request's own mistakes whose message names a field, a parameter or a
// value: 400, nothing done.

// invalidJSON is a body that is not JSON, or has a string with no valid
// UTF-8 form.
func invalidJSON(err error) *apiError {
	return &apiError{fasthttp.StatusBadRequest, "invalid_json", "Invalid JSON: " + err.Error()}
}

func errNotUTF8Field(field string) apiError {
	return apiError{fasthttp.StatusBadRequest, "text_not_utf8", field + " must be valid UTF-8"}
}

func errNULField(field string) apiError {
	return apiError{fasthttp.StatusBadRequest, "text_has_nul", field + " must not contain NUL characters"}
}

func errNameEmpty(what string) apiError {
	return apiError{fasthttp.StatusBadRequest, "name_empty", what + " name must not be empty"}
}

func errNameTooLong(what string) apiError {
	return apiError{fasthttp.StatusBadRequest, "name_too_long", fmt.Sprintf("%s name must be at most %d bytes", what, queengo.MaxNameLen)}
}

func errNameControl(what string) apiError {
	return apiError{fasthttp.StatusBadRequest, "name_has_control", what + " name must not contain control characters"}
}

func errPathEncoding(key string) apiError {
	return apiError{fasthttp.StatusBadRequest, "path_not_encoded", key + " is not a valid percent-encoded path segment"}
}

func errPathUUID(key string) apiError {
	return apiError{fasthttp.StatusBadRequest, "path_not_uuid", key + " must be a UUID"}
}

// errIntParam names a query parameter that is not an integer in [lo, hi].
func errIntParam(key string, lo, hi int) apiError {
	msg := fmt.Sprintf("%s must be an integer between %d and %d", key, lo, hi)
	if lo == noLowerBound {
		msg = fmt.Sprintf("%s must be an integer of at most %d", key, hi)
	}
	return apiError{fasthttp.StatusBadRequest, "integer_param_invalid", msg}
}

// errBoolParam names a query parameter that is not true, false, 1 or 0.
func errBoolParam(key string) apiError {
	return apiError{fasthttp.StatusBadRequest, "boolean_param_invalid", key + " must be true, false, 1 or 0"}
}

func errTimeParam(key string) apiError {
	return apiError{fasthttp.StatusBadRequest, "time_invalid", key + " must be an ISO-8601 time"}
}

func errOptionInt(key string) apiError {
	return apiError{fasthttp.StatusBadRequest, "option_not_integer", "options." + key + " must be a non-negative integer"}
}

func errOptionBool(key string) apiError {
	return apiError{fasthttp.StatusBadRequest, "option_not_boolean", "options." + key + " must be a boolean"}
}

func errOpObject(i int) apiError {
	return apiError{fasthttp.StatusBadRequest, "operation_not_object", "operation " + strconv.Itoa(i) + " must be an object"}
}

func errOpType(typ string) apiError {
	return apiError{fasthttp.StatusBadRequest, "operation_type_unknown", "Unknown operation type: " + typ}
}

func errOpStatus(status string) apiError {
	return apiError{fasthttp.StatusBadRequest, "operation_status_unknown", "ACK operation failed: unknown status " + strconv.Quote(status)}
}

// ackFailureText is the wire text of each per-item failure of an ack or a
// lease extension (queengo.AckFailure: the codes queen.ack and
// queen.extend_leases return, and the ones http decides itself: a leaseId
// that is not a UUID is AckLeaseInvalid, a lease path that is not one
// LeaseNotFound). The texts are the reference server's, which the Queen SDKs
// and clients match on. Every AckFailure has a row
// (TestAckFailureTextCoversEveryCode).
var ackFailureText = map[queengo.AckFailure]string{
	queengo.AckMessageNotFound: "Message not found",
	queengo.AckLeaseInvalid:    "Invalid or expired lease",
	queengo.LeaseExpired:       "Lease already expired",
	queengo.LeaseNotFound:      "Lease not found",
}

// failureText is the wire text of f; empty (null on the wire) for none.
func failureText(f queengo.AckFailure) string {
	return ackFailureText[f]
}

// Resources a route addresses that do not exist.
var (
	errDeadLetterNotFound = apiError{fasthttp.StatusNotFound, "dead_letter_not_found", "dead letter not found"}
	errMessageNotFound    = apiError{fasthttp.StatusNotFound, "message_not_found", "Message not found"}
	errQueueNotFound      = apiError{fasthttp.StatusNotFound, "queue_not_found", "queue not found"}
	errPartitionNotFound  = apiError{fasthttp.StatusNotFound, "partition_not_found", "partition not found"}
	errGroupNotFound      = apiError{fasthttp.StatusNotFound, "consumer_group_not_found", "consumer group not found"}
	// A MissingError naming none of the above: a bug in the layer that made it.
	errNotFound = apiError{fasthttp.StatusNotFound, "not_found", "not found"}
)

// missingEntry is the 404 of a *queengo.MissingError: the entry of the
// thing it names.
func missingEntry(m *queengo.MissingError) apiError {
	switch m.What {
	case queengo.MissingQueue:
		return errQueueNotFound
	case queengo.MissingPartition:
		return errPartitionNotFound
	case queengo.MissingGroup:
		return errGroupNotFound
	case queengo.MissingQuery:
		return errStreamQueryNotFound
	}
	return errNotFound
}

// errTxConflict is a transaction whose ack did not hold (409, nothing
// applied); f is the ack's per-item failure, empty for a status queen.ack
// does not apply.
func errTxConflict(f queengo.AckFailure) apiError {
	reason := failureText(f)
	if reason == "" {
		reason = "Unknown error"
	}
	return apiError{fasthttp.StatusConflict, "transaction_conflict", "ACK operation failed: " + reason}
}

// Streams (http/streams.go). The field errors name the field as the SDKs
// send it (snake_case, an element by its index: state_ops[2].value).
var (
	errStreamBodyObject    = apiError{fasthttp.StatusBadRequest, "stream_body_not_object", "the body must be a JSON object"}
	errStreamQueryNotFound = apiError{fasthttp.StatusNotFound, "stream_query_not_found", "query_id is not a registered query"}
	errStreamNotFound      = apiError{fasthttp.StatusNotFound, "stream_not_found", "stream query not found"}
	// A flush cycle (no ack) that deletes a state row another cycle deleted
	// after the flush read it: that cycle emitted the window already.
	errCycleStateGone = apiError{fasthttp.StatusConflict, "stream_cycle_state_gone",
		"cycle refused, nothing applied: a state row it deletes is gone (another cycle closed it first)"}
	// The SDKs look for the 409 and tell the user about reset.
	errStreamHashMismatch = apiError{fasthttp.StatusConflict, "stream_config_hash_mismatch",
		"config_hash mismatch: the query's operator chain changed. Pass reset:true to wipe its state, or use a new query name."}
)

func errStreamField(field, msg string) apiError {
	return apiError{fasthttp.StatusBadRequest, "stream_field_invalid", field + " " + msg}
}

func errStreamOpType(field, got string) apiError {
	return apiError{fasthttp.StatusBadRequest, "stream_op_type_unknown", field + " must be upsert or delete, got " + got}
}

func errStateValueTooLarge(field string) apiError {
	return apiError{fasthttp.StatusRequestEntityTooLarge, "stream_state_value_too_large",
		fmt.Sprintf("%s must be at most %d bytes of JSON", field, queengo.MaxStateValueLen)}
}

// errCycleRefused is a cycle whose ack did not hold (409, nothing applied):
// the lease ended or another worker holds it now, or the message is gone.
// The SDK pops again and recomputes.
func errCycleRefused(f queengo.AckFailure) apiError {
	reason := failureText(f)
	if reason == "" {
		reason = "Unknown error"
	}
	return apiError{fasthttp.StatusConflict, "stream_cycle_refused", "cycle refused, nothing applied: ack failed: " + reason}
}

// The admin routes' own refusals, by area.

// Consumer-group admin (http/groups.go).
var (
	errSeekTarget    = apiError{fasthttp.StatusBadRequest, "seek_target_required", "Must specify either 'toEnd': true or 'timestamp'"}
	errSeekToEndBool = apiError{fasthttp.StatusBadRequest, "seek_to_end_not_boolean", "toEnd must be a boolean"}
)

// Resources and messages (http/resources.go, http/messages.go).
var (
	errMessageStatus = apiError{fasthttp.StatusBadRequest, "message_status_invalid", "status must be pending, processing, completed or dead_letter"}
	errMessageWindow = apiError{fasthttp.StatusBadRequest, "message_window_order", "from must not be after to"}
	// A retry of a message that neither failed nor was dead-lettered, or a
	// move to the dead-letter queue of one every group resolved already:
	// the message's state, not the request, refuses it.
	errNotRetryable    = apiError{fasthttp.StatusConflict, "message_not_retryable", "message is not failed or dead-lettered"}
	errMessageResolved = apiError{fasthttp.StatusConflict, "message_resolved", "message is already resolved for every consumer group"}
)

// Status, analytics and metrics (http/status.go, http/metrics.go).
var (
	errWindowOrder   = apiError{fasthttp.StatusBadRequest, "window_order", "from must be before to"}
	errWindowTooLong = apiError{fasthttp.StatusBadRequest, "window_too_long", "the window from..to must be at most 31 days"}
	errTooManyPoints = apiError{fasthttp.StatusBadRequest, "too_many_points", "the window holds more than 1500 buckets: narrow it or widen the bucket"}
	errIntervalParam = apiError{fasthttp.StatusBadRequest, "interval_invalid", "interval must be minute, hour or day"}
	errFormatParam   = apiError{fasthttp.StatusBadRequest, "format_invalid", "format must be queengo, or absent for the reference's shape"}
)

// Traces (http/traces.go).
var (
	errTraceMessageRequired = apiError{fasthttp.StatusBadRequest, "trace_message_required", "transactionId and partitionId are required"}
	errTraceDataRequired    = apiError{fasthttp.StatusBadRequest, "trace_data_required", "data is required"}
	errTraceDataTooLarge    = apiError{fasthttp.StatusBadRequest, "trace_data_too_large", fmt.Sprintf("data must be at most %d bytes of compact JSON", maxTraceData)}
	errEventTypeString      = apiError{fasthttp.StatusBadRequest, "event_type_not_string", "eventType must be a string or null"}
	errEventTypeTooLong     = apiError{fasthttp.StatusBadRequest, "event_type_too_long", fmt.Sprintf("eventType must be at most %d bytes", maxEventTypeLen)}
	errTraceNamesShape      = apiError{fasthttp.StatusBadRequest, "trace_names_invalid", "traceNames must be a string, an array of strings or null"}
	errTraceNamesTooMany    = apiError{fasthttp.StatusBadRequest, "trace_names_too_many", fmt.Sprintf("traceNames must hold at most %d names", maxTraceNames)}
)

// The broker's failures, see failure and popFailure.
var (
	// A pop's database failures that pass (no connection within the acquire
	// timeout, the database unreachable or timing out) are retryable 503s
	// with Retry-After, as on the other routes; their texts stay the
	// reference's 500s' ("pool", "pop failed"), which clients match on.
	errPopNoConn           = apiError{fasthttp.StatusServiceUnavailable, "pop_no_connection", "pool"}
	errPopUnavailable      = apiError{fasthttp.StatusServiceUnavailable, "pop_database_unavailable", "pop failed"}
	errPopTimedOut         = apiError{fasthttp.StatusServiceUnavailable, "pop_database_timeout", "pop failed"}
	errPopFailed           = apiError{fasthttp.StatusInternalServerError, "pop_failed", "pop failed"}
	errClientGone          = apiError{fasthttp.StatusInternalServerError, "client_gone", "pop failed"}
	errShuttingDown        = apiError{fasthttp.StatusServiceUnavailable, "shutting_down", "broker is shutting down"}
	errDatabase            = apiError{fasthttp.StatusInternalServerError, "database_error", "database error"}
	errRowMissing          = apiError{fasthttp.StatusInternalServerError, "row_missing", "database error"}
	errDatabaseNoConn      = apiError{fasthttp.StatusServiceUnavailable, "database_no_connection", "database unavailable"}
	errDatabaseUnavailable = apiError{fasthttp.StatusServiceUnavailable, "database_unavailable", "database unavailable"}
	errDatabaseTimedOut    = apiError{fasthttp.StatusServiceUnavailable, "database_timeout", "database timed out"}
	// A push item's answer, or a transaction's or requeue's when one of its
	// writes has no room (nothing of it applied): the state of the queue,
	// not the request, refuses it until its consumers catch up.
	errQueueFull = apiError{fasthttp.StatusConflict, "queue_full", "queue is full: it holds maxSize unconsumed messages"}
	// A configure with encryptionEnabled, or a write to such a queue, on a
	// broker started without QUEEN_ENCRYPTION_KEY: nothing is stored in
	// plaintext instead.
	errEncryptionUnavailable = apiError{fasthttp.StatusBadRequest, "encryption_unavailable", "encryptionEnabled needs QUEEN_ENCRYPTION_KEY on the broker"}
	// A stored payload sealed with a key the broker was not given
	// (QUEEN_ENCRYPTION_KEY_PREVIOUS lacks it): the operator's to fix.
	errEncryptionKeyUnknown    = apiError{fasthttp.StatusInternalServerError, "encryption_key_unknown", "payload is sealed with a key the broker does not have"}
	errPopEncryptionKeyUnknown = apiError{fasthttp.StatusInternalServerError, "pop_encryption_key_unknown", "pop failed"}
	// A write whose queue turned encryptionEnabled on under it, twice in a
	// row: sending it again applies the new settings.
	errQueueChanged = apiError{fasthttp.StatusConflict, "queue_changed", "queue settings changed during the write: send it again"}
	// The file buffer (issue 13): full (FILE_BUFFER_MAX_BYTES), a failed
	// write (the reference server's text), or push maintenance on a broker
	// without FILE_BUFFER_DIR. Nothing of the push was acknowledged.
	errBufferFull  = apiError{fasthttp.StatusServiceUnavailable, "file_buffer_full", "file buffer is full"}
	errBufferWrite = apiError{fasthttp.StatusInternalServerError, "file_buffer_write_failed", "File buffer write failed"}
	errNoBuffer    = apiError{fasthttp.StatusServiceUnavailable, "file_buffer_missing", "push maintenance is on and this broker has no file buffer (FILE_BUFFER_DIR)"}
	// A broker actor failed while it held the request (logged with its
	// stack) and was replaced: a bug, not the database's fault.
	errActorFailed    = apiError{fasthttp.StatusInternalServerError, "actor_failed", "internal error"}
	errPopActorFailed = apiError{fasthttp.StatusInternalServerError, "pop_actor_failed", "pop failed"}
	// A long poll past the parked pops its queue or scope may keep.
	errTooManyParked = apiError{fasthttp.StatusServiceUnavailable, "too_many_parked", "too many parked pops: try again later"}
)

// Authentication (http/auth.go): the answers of a refused request, the
// reference server's messages.
var (
	errAuthRequired     = apiError{fasthttp.StatusUnauthorized, "auth_required", "Authentication required"}
	errForbidden        = apiError{fasthttp.StatusForbidden, "forbidden", "Insufficient permissions"}
	errTokenExpired     = apiError{fasthttp.StatusUnauthorized, "token_expired", "Token has expired"}
	errTokenNotYetValid = apiError{fasthttp.StatusUnauthorized, "token_not_yet_valid", "Token is not yet valid"}
	// A token without exp (JWT_ALLOW_NO_EXP lets it in), or past the
	// maximum token age (JWT_MAX_TOKEN_AGE), or without the iat that age
	// is read from: queengo's own refusals, the reference accepts these.
	errTokenNoExp      = apiError{fasthttp.StatusUnauthorized, "token_no_expiry", "Token has no expiration time (exp)"}
	errTokenTooOld     = apiError{fasthttp.StatusUnauthorized, "token_too_old", "Token is older than the maximum token age"}
	errTokenNoIssuedAt = apiError{fasthttp.StatusUnauthorized, "token_no_issued_at", "Token has no issue time (iat), which the maximum token age needs"}
	errTokenSignature  = apiError{fasthttp.StatusUnauthorized, "token_signature_invalid", "Invalid token signature"}
	errTokenIssuer     = apiError{fasthttp.StatusUnauthorized, "token_issuer_invalid", "Invalid token issuer"}
	errTokenAudience   = apiError{fasthttp.StatusUnauthorized, "token_audience_invalid", "Invalid token audience"}
	errJWKSFetch       = apiError{fasthttp.StatusInternalServerError, "jwks_fetch_failed", "Failed to fetch JWKS"}
)

func errUnknownKID(kid string) apiError {
	return apiError{fasthttp.StatusUnauthorized, "token_key_unknown", "Unknown key ID: " + kid}
}

// errKIDNotYetLooked is an unknown kid the JWKS was not fetched again for,
// as it was moments ago (jwksUnknownKIDEvery): retryable, since a key just
// published (a rotation) is found by the next fetch. A 401 would end the
// SDKs' consume loops.
func errKIDNotYetLooked(kid string) apiError {
	return apiError{fasthttp.StatusServiceUnavailable, "token_key_refresh_pending",
		"Unknown key ID: " + kid + " (the key set is fetched again within seconds; retry)"}
}

func errTokenDecode(err error) apiError {
	return apiError{fasthttp.StatusUnauthorized, "token_malformed", "Token decode error: " + err.Error()}
}

func errTokenInvalid(err error) apiError {
	return apiError{fasthttp.StatusUnauthorized, "token_invalid", "Token verification failed: " + err.Error()}
}

func errAlgorithmUnsupported(alg string) apiError {
	return apiError{fasthttp.StatusUnauthorized, "token_algorithm_unsupported", "Unsupported algorithm: " + alg}
}

func errAlgorithmMismatch(alg, want string) apiError {
	return apiError{fasthttp.StatusUnauthorized, "token_algorithm_mismatch", "Token uses " + alg + ", expected " + want}
}

// The router's and the HTTP server's own errors, met before a handler runs.
var (
	errRouteNotFound    = apiError{fasthttp.StatusNotFound, "route_not_found", "route not found"}
	errMethodNotAllowed = apiError{fasthttp.StatusMethodNotAllowed, "method_not_allowed", "method not allowed"}
	errInternal         = apiError{fasthttp.StatusInternalServerError, "internal_error", "internal error"}
	errHeaderTooLarge   = apiError{fasthttp.StatusRequestHeaderFieldsTooLarge, "header_too_large", "request header too large"}
	errRequestTimeout   = apiError{fasthttp.StatusRequestTimeout, "request_timeout", "request not received in time"}
	errMalformed        = apiError{fasthttp.StatusBadRequest, "malformed_request", "malformed HTTP request"}
)

// errBodyTooLarge names the limit a body passed.
func errBodyTooLarge(limit int) apiError {
	return apiError{fasthttp.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body too large (limit %d bytes)", limit)}
}

// typedErrors maps the errors of package queengo onto the table: the first
// target err matches (errors.Is) decides. entry is the answer on every route
// but the pops; pop is the answer on the pop routes, whose 500s
// docs/pop-routes.md fixes to "pool" and "pop failed". Every exported Err of
// package queengo has a row (TestTypedErrorsCoverPackageQueengo).
var typedErrors = []struct {
	target     error
	entry, pop apiError
}{
	{queengo.ErrCancelled, errClientGone, errClientGone},
	{queengo.ErrClosed, errShuttingDown, errShuttingDown},
	{queengo.ErrPool, errDatabaseNoConn, errPopNoConn},
	{queengo.ErrUnavailable, errDatabaseUnavailable, errPopUnavailable},
	{queengo.ErrTimeout, errDatabaseTimedOut, errPopTimedOut},
	// A row that vanished under a route that addresses none (a queue
	// deleted during an ack); routes that address one answer its 404
	// (failureOf).
	{queengo.ErrNotFound, errRowMissing, errPopFailed},
	{queengo.ErrConflict, errTxConflict(""), errPopFailed},
	{queengo.ErrQueueFull, errQueueFull, errPopFailed},
	{queengo.ErrStreamHashMismatch, errStreamHashMismatch, errPopFailed},
	{queengo.ErrEncryptionUnavailable, errEncryptionUnavailable, errPopFailed},
	{queengo.ErrEncryptionKeyUnknown, errEncryptionKeyUnknown, errPopEncryptionKeyUnknown},
	{queengo.ErrQueueChanged, errQueueChanged, errPopFailed},
	{queengo.ErrBufferFull, errBufferFull, errPopFailed},
	{queengo.ErrBufferWrite, errBufferWrite, errPopFailed},
	{queengo.ErrNoBuffer, errNoBuffer, errPopFailed},
	{queengo.ErrActorFailed, errActorFailed, errPopActorFailed},
	{queengo.ErrTooManyParked, errTooManyParked, errTooManyParked},
}

// failure is the answer to err, a failure the broker reported, on every
// route but the pops. An error of no known type is errDatabase.
func failure(err error) apiError {
	var c *queengo.ConflictError
	if errors.As(err, &c) {
		return errTxConflict(c.Failure)
	}
	var r *queengo.CycleRefusedError
	if errors.As(err, &r) {
		if r.StateGone {
			return errCycleStateGone
		}
		return errCycleRefused(r.Failure)
	}
	var m *queengo.MissingError
	if errors.As(err, &m) {
		return missingEntry(m)
	}
	for _, t := range typedErrors {
		if errors.Is(err, t.target) {
			return t.entry
		}
	}
	return errDatabase
}

// failureOf is failure on a route that addresses one resource: an err
// matching queengo.ErrNotFound is notFound, that resource's 404.
func failureOf(err error, notFound apiError) apiError {
	var m *queengo.MissingError
	if errors.Is(err, queengo.ErrNotFound) && !errors.As(err, &m) {
		return notFound
	}
	return failure(err)
}

// popFailure is the answer to a failed pop. An error of no known type is
// errPopFailed.
func popFailure(err error) apiError {
	for _, t := range typedErrors {
		if errors.Is(err, t.target) {
			return t.pop
		}
	}
	return errPopFailed
}

// countError counts an answered error by its code.
func (s *Server) countError(e apiError) { s.errorCounter(e.Code).Inc() }

// errorCounter is the counter of the errors answered with code.
func (s *Server) errorCounter(code string) *metrics.Counter {
	return s.metrics.GetOrCreateCounter(`queengo_http_errors_total{code="` + code + `"}`)
}

// retryAfter is the Retry-After of every 503, in seconds: the broker's own
// condition (the database away, shutting down, a full buffer) that a
// client's retry a moment later may find gone.
const retryAfter = "1"

// writeError answers e as {"error": message} and counts it. A 503 carries
// Retry-After: the request may be sent again.
func (s *Server) writeError(ctx *fasthttp.RequestCtx, e apiError) {
	s.countError(e)
	if e.Status == fasthttp.StatusServiceUnavailable {
		ctx.Response.Header.Set("Retry-After", retryAfter)
	}
	buf := append(make([]byte, 0, 64), `{"error":`...)
	buf = appendString(buf, e.Message)
	buf = append(buf, '}')
	writeJSON(ctx, e.Status, buf)
}

// writeFailure answers e, the table's answer to err (a failure the broker
// reported), and logs it with attrs (logFailure).
func (s *Server) writeFailure(ctx *fasthttp.RequestCtx, e apiError, err error, attrs ...any) {
	s.logFailure(ctx, e, err, attrs...)
	s.writeError(ctx, e)
}

// logFailure logs err, a failure the broker reported, under the code of its
// answer e when the fault is the server's (5xx; not a client that left): the
// first of a code at once, then at most one line a second per code, which
// counts the failures of that code it stands for ("repeated"). An outage
// fails every request; a line for each was 100 MB of log in 10 s.
func (s *Server) logFailure(ctx *fasthttp.RequestCtx, e apiError, err error, attrs ...any) {
	if e.Status < fasthttp.StatusInternalServerError || e == errClientGone {
		return
	}
	n, ok := s.failures.take(e.Code, time.Now())
	if !ok {
		return
	}
	s.log.Warn("request failed", append([]any{"path", string(ctx.Path()), "code", e.Code, "err", err, "repeated", n}, attrs...)...)
}

// failureLogEvery spaces the log lines of one error code.
const failureLogEvery = time.Second

// failureLog is the log limiter of logFailure, per error code.
type failureLog struct {
	mu    sync.Mutex
	codes map[string]*failureStreak
}

type failureStreak struct {
	last   time.Time // when a line of the code was last logged
	unseen int       // failures since, not logged
}

// take counts a failure of code at now and reports whether to log it, with
// how many failures the line stands for (itself and the ones not logged
// since the last line).
func (f *failureLog) take(code string, now time.Time) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.codes == nil {
		f.codes = map[string]*failureStreak{}
	}
	st := f.codes[code]
	if st == nil {
		st = &failureStreak{}
		f.codes[code] = st
	}
	st.unseen++
	if !st.last.IsZero() && now.Sub(st.last) < failureLogEvery {
		return 0, false
	}
	n := st.unseen
	st.last, st.unseen = now, 0
	return n, true
}
