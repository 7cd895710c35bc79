package queengo

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Streams (docs/api.md "Streams", issue 42): the SDKs run the operators of a
// stream; the broker keeps a registry of named queries, per-query state rows
// keyed by source partition and key, and commits a cycle (state changes,
// sink pushes, source ack) in one PostgreSQL transaction.

// Limits of the streams routes.
const (
	// MaxStateKeyLen caps a state key in bytes: keys are what a keyBy or a
	// window produced, never documents.
	MaxStateKeyLen = 4096
	// MaxStateValueLen caps one state value (its JSON text) in bytes; the
	// reducers' accumulators are small, and a row read back on every cycle
	// must stay cheap.
	MaxStateValueLen = 1 << 20
	// StreamResetBatch is how many state rows one statement of a reset
	// deletes: a reset of a large query is a series of bounded deletes,
	// each its own transaction, never one that holds the table.
	StreamResetBatch = 5000
)

// MissingQuery is the MissingError of a cycle or state read naming a
// query_id the registry does not hold.
const MissingQuery = "query"

// StreamRegistration is a query registration (POST /streams/v1/queries).
type StreamRegistration struct {
	Name, SourceQueue, SinkQueue, ConfigHash string
	// Reset wipes the query's state and takes ConfigHash when it differs.
	Reset bool
}

// StreamRegistered is the outcome of a registration.
type StreamRegistered struct {
	ID uuid.UUID
	// Fresh: the name was new. DidReset: a reset wiped the state.
	Fresh, DidReset bool
}

// ErrStreamHashMismatch is the refusal of a registration whose config_hash
// differs from the registered one, without reset.
var ErrStreamHashMismatch = errors.New("config_hash mismatch")

// StateFilter selects state rows of one (query, source partition). Empty
// Keys and KeyPrefix select every row; RipeAtOrBefore, when set, keeps the
// rows whose value has a numeric windowEnd at or before it (ms).
type StateFilter struct {
	Query, Partition uuid.UUID
	Keys             []string
	KeyPrefix        string
	RipeAtOrBefore   *int64
}

// StateRow is one state row.
type StateRow struct {
	Key       string
	Value     json.RawMessage
	UpdatedAt time.Time
}

// StateOp is one state change of a cycle: an upsert of Value (JSON), or a
// delete when Delete.
type StateOp struct {
	Delete bool
	Key    string
	Value  json.RawMessage
}

// CycleAck is the source ack of a cycle: it resolves every offset of the
// live lease up to and including the message of TransactionID (the SDK
// sends the last message of the batch it processed).
type CycleAck struct {
	TransactionID string
	// LeaseID, when not uuid.Nil, must be the cursor's live lease.
	LeaseID uuid.UUID
	// Status is completed (or success), or failed or dlq: the message is
	// dead-lettered, the ones before it completed.
	Status string
	Error  string
}

// Cycle is one streaming cycle for (Query, Partition), committed in one
// transaction: Ops, then Push (to the sink), then Ack (of the source
// partition for Group), all or nothing.
type Cycle struct {
	Query, Partition uuid.UUID
	Group            string
	Ops              []StateOp
	Push             []PushItem
	Ack              *CycleAck
	// ReleaseLease ends the lease with the ack (the default); false keeps
	// it on the offsets after the acked one (the gate's ordered partial
	// ack), which return when it expires.
	ReleaseLease bool
}

// CycleResult is the outcome of a committed cycle.
type CycleResult struct {
	Push []PushResult
	// Acked is how many offsets the ack resolved; LeaseReleased whether
	// it ended the lease; DLQ whether it dead-lettered the message.
	Acked         int64
	LeaseReleased bool
	DLQ           bool
	// SourceQueue is the source partition's queue name (for wake-ups).
	SourceQueue string
}

// CycleRefusedError is a cycle refused as a whole: nothing was applied.
// Failure says why its ack did not hold (AckMessageNotFound,
// AckLeaseInvalid); StateGone, that a cycle without an ack (the runtimes'
// idle window flush) deletes a state row another cycle deleted since it was
// read: that cycle emitted the window already, and emitting it again would
// duplicate it in the sink. It matches ErrConflict.
type CycleRefusedError struct {
	Failure   AckFailure
	StateGone bool
}

func (e *CycleRefusedError) Error() string {
	if e.StateGone {
		return "cycle refused: a state row it deletes is gone"
	}
	return fmt.Sprintf("cycle refused: ack failed: %q", e.Failure)
}

// Is makes a CycleRefusedError match ErrConflict.
func (e *CycleRefusedError) Is(target error) bool { return target == ErrConflict }

// StreamQuery is a registered query as operators see it.
type StreamQuery struct {
	ID                                       uuid.UUID
	Name, SourceQueue, SinkQueue, ConfigHash string
	// ConsumerGroup is the group of the query's last acking cycle ("" none).
	ConsumerGroup        string
	CreatedAt, UpdatedAt time.Time
	// StateRows and StatePartitions count its state; Lag is the source
	// messages its group has not committed (0 before its first cycle).
	StateRows, StatePartitions, Lag int64
}

// StreamPartition is one source partition of a query, as operators see it.
type StreamPartition struct {
	PartitionID uuid.UUID
	Partition   string
	// StateRows counts the query's state there; Lag the messages its group
	// has not committed; UpdatedAt is the last state write (nil: none).
	StateRows, Lag int64
	UpdatedAt      *time.Time
}
