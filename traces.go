package queengo

import (
	"time"

	"github.com/google/uuid"
)

// Message traces (docs/api.md "Traces"): events a client records for a
// message, found again by message and by name. A trace belongs to its
// message by (partition, transactionId) and lives as long as the partition
// does, not as long as the message's segment.

// NewTrace is a trace event to record.
type NewTrace struct {
	PartitionID   uuid.UUID
	TransactionID string
	Group         string
	EventType     string
	Data          []byte   // compact JSON
	Names         []string // sorted, without duplicates
	WorkerID      string   // the broker process that recorded it
}

// Trace is one recorded trace event.
type Trace struct {
	ID            uuid.UUID
	PartitionID   uuid.UUID
	TransactionID string
	Group         string
	EventType     string
	Data          []byte // JSON as recorded
	WorkerID      string
	CreatedAt     time.Time
	Names         []string // sorted

	// Filled by TracesByName only.
	Queue, Partition string
	// Payload is the message's payload (opened when sealed), nil when the
	// message is no longer retained.
	Payload []byte
}

// TraceName is one name of the trace names list.
type TraceName struct {
	Name     string
	Traces   int64 // traces carrying the name
	Messages int64 // distinct messages with such a trace
	LastSeen time.Time
}
