package queengo

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// QueueModeGroup is the reserved consumer group of a pop or ack that names
// none: an ordinary cursor shared by every consumer that omits the group.
const QueueModeGroup = "__QUEUE_MODE__"

// DefaultPartition is the partition of a push that names none, and the one
// configure creates.
const DefaultPartition = "Default"

// MaxNameLen is the longest queue, partition or group name accepted, in bytes.
const MaxNameLen = 255

// MinPopWaitTimeMax clamps a queue's minPopWaitTime (ms).
const MinPopWaitTimeMax = 60000

// QueueOptions are a queue's settings, as stored in queen.queues.
type QueueOptions struct {
	LeaseTime                 int  `json:"leaseTime"`
	RetryLimit                int  `json:"retryLimit"`
	RetryDelay                int  `json:"retryDelay"`
	Priority                  int  `json:"priority"`
	MaxSize                   int  `json:"maxSize"`
	TTL                       int  `json:"ttl"`
	DeadLetterQueue           bool `json:"deadLetterQueue"`
	DLQAfterMaxRetries        bool `json:"dlqAfterMaxRetries"`
	DelayedProcessing         int  `json:"delayedProcessing"`
	WindowBuffer              int  `json:"windowBuffer"`
	RetentionSeconds          int  `json:"retentionSeconds"`
	CompletedRetentionSeconds int  `json:"completedRetentionSeconds"`
	RetentionEnabled          bool `json:"retentionEnabled"`
	EncryptionEnabled         bool `json:"encryptionEnabled"`
	MaxWaitTimeSeconds        int  `json:"maxWaitTimeSeconds"`
	MinPopWaitTime            int  `json:"minPopWaitTime"`
}

// ConfigureDefaults are the options configure applies for every key a request
// leaves out (configure is a full replace). They differ from the column
// defaults of an implicitly created queue only in LeaseTime: 300 s against 60.
func ConfigureDefaults() QueueOptions {
	return QueueOptions{LeaseTime: 300, RetryLimit: 3, RetryDelay: 1000, TTL: 3600}
}

// Queue is one row of queen.queues.
type Queue struct {
	ID        uuid.UUID
	Name      string
	Namespace string
	Task      string
	Options   QueueOptions
}

// Frame is one message as stored inside a segment. On the read path Payload
// aliases the segment bytes returned by the store.
type Frame struct {
	ID            uuid.UUID
	TransactionID string
	TraceID       uuid.UUID // zero when absent
	ProducerSub   string    // empty when absent
	Payload       []byte    // raw JSON, "null" when the push carried none
}

// Segment is one partition's share of a coalesced write.
type Segment struct {
	Partition uuid.UUID
	Frames    []Frame
	// Seal asks the store to seal the payloads (AES-256-GCM): the queue has
	// encryptionEnabled.
	Seal bool
}

// PushItem is one validated item of a push request.
type PushItem struct {
	Queue     string
	Partition string
	Frame
}

// PushStatus is the outcome of one pushed item.
type PushStatus string

// Push outcomes, as they appear on the wire.
const (
	PushQueued    PushStatus = "queued"
	PushDuplicate PushStatus = "duplicate"
	PushFailed    PushStatus = "failed"
)

// PushResult is the outcome of one pushed item, in request order.
type PushResult struct {
	Status        PushStatus
	TransactionID string
	MessageID     uuid.UUID // the stored message's id; the winner's for a duplicate
	PartitionID   uuid.UUID
	TraceID       uuid.UUID
	Err           error // why the item was not stored, when Status is PushFailed
}

// SubscriptionMode values of a pop; SubscriptionUnset means the pop carried
// none.
const (
	SubscriptionUnset = ""
	SubscriptionAll   = "all"
	SubscriptionNew   = "new"
)

// PopRequest is a parsed pop on any of the three routes.
type PopRequest struct {
	Queue        string // empty on the discovery route
	Partition    string // set on the single-partition route only
	Namespace    string // discovery scope
	Task         string // discovery scope
	Group        string // QueueModeGroup when the request named none
	Batch        int
	Partitions   int // 0 or less: no cap
	Wait         bool
	Timeout      time.Duration
	LeaseSeconds int // 0: the queue's lease
	AutoAck      bool
	SubMode      string     // SubscriptionUnset, SubscriptionAll or SubscriptionNew
	SubFrom      *time.Time // parsed subscriptionFrom; "now" is resolved by the store
	SubFromNow   bool
}

// Discovery reports whether the request came through the namespace/task route.
func (r *PopRequest) Discovery() bool { return r.Queue == "" }

// Message is one delivered message.
type Message struct {
	Frame
	Offset      int64  // in its partition; not on the wire
	CreatedAt   string // the segment's time, formatted by PostgreSQL
	PartitionID uuid.UUID
	Partition   string
	Queue       string // not on the wire; lets discovery consumers' replies stay correct
}

// PopResult is what a pop delivered. An empty Messages means 204.
type PopResult struct {
	LeaseID           string // empty for autoAck
	Messages          []Message
	PartitionsClaimed int
}

// ClaimParams is one pop's claim (see claim_take in sql/functions/claim.sql): the store-level form of a PopRequest.
type ClaimParams struct {
	QueueIDs     []uuid.UUID // in scope, highest priority first
	Partition    uuid.UUID   // uuid.Nil: any partition of the queues
	Group        string
	Batch        int
	MaxParts     int // 0 or less: no cap
	LeaseSeconds int // 0 or less: the queue's lease
	AutoAck      bool
	LeaseID      uuid.UUID
	SubMode      string
	SubFrom      *time.Time
	SubFromNow   bool
	Candidates   []uuid.UUID // nil: search every partition in scope
	// SubscribeOnly makes the claim search no partition: it only records
	// its group's subscription intent (D6), as the first pop of a group
	// does, for a pop of the single-partition route whose partition does
	// not exist yet.
	SubscribeOnly bool
	// Min, when positive, makes the claim take nothing unless at least Min
	// messages are available (ClaimResult.Taken then reports how many).
	Min int
}

// Span is the part of one partition a claim leased (or committed).
type Span struct {
	PartitionID uuid.UUID
	Partition   string
	Queue       string
	From, To    int64 // offsets, inclusive
	Lease       time.Duration
}

// ClaimResult is what one claim delivered.
type ClaimResult struct {
	Spans    []Span
	Messages []Message
	// Ready lists claimable partitions the claim left untaken because the
	// budget or the cap ran out, at most 1000.
	Ready []uuid.UUID
	// Taken counts the messages claimed, or available when Min held them back.
	Taken int
	// Err, when set, is this claim's own failure; the other claims of its
	// round are not affected. Nothing of the claim was applied, except when
	// its answer could not be read after its round committed: its leases
	// then expire and the messages are delivered again.
	Err error
}

// AckItem is one acknowledgement.
type AckItem struct {
	PartitionID   uuid.UUID
	TransactionID string
	Status        string // completed, success, failed, retry or dlq
	Group         string
	LeaseID       uuid.UUID // uuid.Nil: not checked beyond the live span
	Error         string
	// Offset is the message's offset in its partition when the broker knows
	// it from the delivery (its lease book), which spares the store a lookup
	// by TransactionID; 0 when unknown.
	Offset int64
}

// AckFailure is why one acknowledgement or lease extension did not hold: a
// stable code, the very value queen.ack and queen.extend_lease return. It
// carries no wire text: http renders it from its error table. Empty means
// no failure.
type AckFailure string

// The per-item failures of acks and lease extensions.
const (
	// AckMessageNotFound: no message with the item's transaction id in its
	// partition.
	AckMessageNotFound AckFailure = "message_not_found"
	// AckLeaseInvalid: the message is not in the live span of its group's
	// cursor, or the live lease is not the one the item names.
	AckLeaseInvalid AckFailure = "lease_invalid"
	// LeaseExpired: the lease is known but none of its spans is live.
	LeaseExpired AckFailure = "lease_expired"
	// LeaseNotFound: no cursor holds the lease.
	LeaseNotFound AckFailure = "lease_not_found"
)

// AckFailures lists every AckFailure, for the layers that read or render
// them.
var AckFailures = []AckFailure{AckMessageNotFound, AckLeaseInvalid, LeaseExpired, LeaseNotFound}

// AckResult is the outcome of one acknowledgement, in request order. A
// result that is not Success and has no Failure is an item whose status
// queen.ack does not apply (nothing happened; null on the wire).
type AckResult struct {
	Success       bool
	Failure       AckFailure // empty: none
	LeaseReleased bool
	DLQ           bool
	Queue         string
	Partition     string
}

// LeaseExtend asks to extend every live span of Lease to at least
// now+Seconds.
type LeaseExtend struct {
	Lease   uuid.UUID
	Seconds int
	// End ends the lease now instead, Seconds ignored: the pop that took it
	// was abandoned by its client before its answer (Broker.Pop), so its
	// messages are claimable again at once rather than when it runs out.
	End bool
	// Cursors are the cursors the lease covers, when the broker that
	// handed the lease out is the one extending it; nil: they are searched
	// for among every cursor (no index covers lease ids: migration 007).
	Cursors []CursorKey
}

// LeaseExtension is the outcome of one LeaseExtend: the earliest new expiry
// (RFC 3339, milliseconds), or, when the lease is not live, an empty expiry
// and the Failure (LeaseExpired or LeaseNotFound).
type LeaseExtension struct {
	ExpiresAt string
	Failure   AckFailure
}

// TxOp is one operation of a transaction: an ack or one push item.
type TxOp struct {
	Ack  *AckItem
	Push *PushItem
}

// TxResult is the outcome of one TxOp.
type TxResult struct {
	Ack  AckResult
	Push PushResult
}

// DeadLetter is one dead-lettered message of a group.
type DeadLetter struct {
	ID           uuid.UUID
	Frame        Frame
	PartitionID  uuid.UUID
	Partition    string
	Queue        string
	Group        string
	ErrorMessage string
	RetryCount   int
	CreatedAt    string // the original segment's time
	FailedAt     string
}

// DLQFilter selects dead letters; zero fields do not filter.
type DLQFilter struct {
	Queue, Group, Partition string
	From, To                *time.Time
	Limit, Offset           int
}

// GroupState is one consumer group's view of a message (D10).
type GroupState struct {
	Group          string
	Status         string // completed, processing, dead_letter or pending
	Failures       int
	LeaseExpiresAt string
}

// MessageInfo is the per-message management view (D10).
type MessageInfo struct {
	Message
	Encrypted       bool // the payload is stored sealed (Payload is opened)
	Namespace, Task string
	Options         QueueOptions
	Groups          []GroupState
}

// DefaultRequestTimeout bounds the database work of one request (the wait
// for a connection and its statements) when the configuration sets none.
const DefaultRequestTimeout = 10 * time.Second

// The errors the layers report to their callers, compared with errors.Is:
// package pg translates driver failures into them, package actors adds its
// own, and only package http turns them into wire text (the table in
// http/errors.go, where each has its entry). A new one needs an entry there.
var (
	// ErrNotFound: the addressed row (queue, partition, message, dead
	// letter) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrPool: no database connection could be had within the acquire timeout.
	ErrPool = errors.New("no database connection available")
	// ErrTimeout: the database did not answer in time: a statement ran past
	// the statement timeout, or the request deadline (the request timeout:
	// connection wait and statements) passed. A write may still have been
	// applied: sending it again with the same transaction ids is safe.
	ErrTimeout = errors.New("database timed out")
	// ErrUnavailable: the database could not be reached, or the connection
	// broke during the operation.
	ErrUnavailable = errors.New("database unavailable")
	// ErrClosed: the broker is shutting down.
	ErrClosed = errors.New("broker is shutting down")
	// ErrConflict: a transaction referred to a lease or message that is no
	// longer valid, so nothing of it was applied. The failure carries the
	// details as a *ConflictError.
	ErrConflict = errors.New("conflict")
	// ErrCancelled: the caller gave up before the answer: the client of a
	// parked pop went away.
	ErrCancelled = errors.New("client went away")
	// ErrEncryptionUnavailable: a queue asks for encryptionEnabled and the
	// broker has no encryption key (QUEEN_ENCRYPTION_KEY) to seal with. A
	// payload is never stored in plaintext instead.
	ErrEncryptionUnavailable = errors.New("encryptionEnabled needs QUEEN_ENCRYPTION_KEY on the broker")
	// ErrEncryptionKeyUnknown: a stored payload is sealed with a key the
	// broker was not given (neither its encryption key nor a previous one).
	ErrEncryptionKeyUnknown = errors.New("payload is sealed with a key the broker does not have")
	// ErrQueueChanged: a write was refused because the queue's settings
	// changed under it (encryptionEnabled turned on, maybe by another
	// process); nothing was written, and sending it again applies the new
	// settings.
	ErrQueueChanged = errors.New("queue settings changed during the write")
	// ErrActorFailed: the broker actor that held the request failed (a
	// panic, logged with its stack) and was replaced; the next request is
	// served by the fresh one. A push answered with it may have been stored
	// anyway: sending it again with the same transaction ids stores each
	// item once.
	ErrActorFailed = errors.New("broker actor failed")
	// ErrTooManyParked: a long poll found nothing and its queue or scope
	// already keeps as many parked pops as the broker allows.
	ErrTooManyParked = errors.New("too many parked pops")
)

// DatabaseDown reports whether err is the database's state rather than the
// operation's own failure: no connection, no answer in time, no server, or
// the broker shutting down.
func DatabaseDown(err error) bool {
	return errors.Is(err, ErrPool) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrUnavailable) ||
		errors.Is(err, ErrClosed)
}

// ConflictError is the failure of a transaction whose ack did not hold;
// nothing of the transaction was applied. It matches ErrConflict.
type ConflictError struct {
	// Op is the index of the failing operation in the transaction.
	Op int
	// Failure is the ack's per-item failure, as AckResult.Failure reports
	// it; empty when the ack's status was not one queen.ack applies.
	Failure AckFailure
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("conflict: operation %d: ack failed: %q", e.Op, e.Failure)
}

// Is makes a ConflictError match ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// DeriveNamespaceTask splits a dotted queue name the way an implicitly created
// queue gets its namespace and task (docs/rules.md Q-3): "orders" is namespace
// "orders" and task "", "billing.invoice.v2" is "billing" and "invoice".
func DeriveNamespaceTask(queue string) (namespace, task string) {
	namespace, rest, found := strings.Cut(queue, ".")
	if !found {
		return namespace, ""
	}
	task, _, _ = strings.Cut(rest, ".")
	return namespace, task
}
