package queengo

import (
	"time"

	"github.com/google/uuid"
)

// The statuses of a message for one consumer group (D10), and the status of
// a message no group can receive any more (GET /api/v1/messages filters).
const (
	StatusPending    = "pending"
	StatusProcessing = "processing"
	StatusCompleted  = "completed"
	StatusDeadLetter = "dead_letter"
)

// MessageFilter selects the messages of GET /api/v1/messages; empty fields
// do not filter. From and To bound the time of the messages' segments.
type MessageFilter struct {
	Queue, Partition, Namespace, Task string
	// Status filters on the status for Group, or without a group on the
	// message's overall status (MessageEntry.Status).
	Status, Group string
	From, To      time.Time
	Limit, Offset int
}

// MessageEntry is one message of the list, with its status (for the
// filter's group, else overall), its queue-mode status ("" when the
// partition has no queue-mode cursor) and how many of the named groups with
// a cursor on its partition completed it.
type MessageEntry struct {
	ID, TraceID     uuid.UUID
	TransactionID   string
	ProducerSub     string
	PartitionID     uuid.UUID
	Queue           string
	Partition       string
	Namespace, Task string
	Priority        int
	Status          string
	QueueStatus     string
	ConsumedBy      int
	TotalGroups     int
	CreatedAt       time.Time
	LeaseExpiresAt  time.Time // zero unless processing
}

// MessageList is one page of the message list and the consumption mode of
// the partitions it looked at.
type MessageList struct {
	Messages     []MessageEntry
	HasQueueMode bool
	BusGroups    int
	// Truncated: the walk stopped at its cap of examined messages before
	// the page was full; a narrower filter or time range finds the rest.
	Truncated bool
}

// MessageChange is the outcome of a delete or a move to the dead-letter
// queue of one message.
type MessageChange struct {
	Queue string
	// Groups are the groups the message was dead-lettered for (a move to
	// the dead-letter queue); empty when every group had resolved it
	// already, and nothing changed.
	Groups []string
	// Released are the groups whose lease the change ended.
	Released []string
}

// MessageRetry is the outcome of a retry of one message: its dead letters
// requeued as one new message, and the failed groups whose retry budget and
// delay were reset. Both empty: the message was neither failed nor
// dead-lettered, and nothing changed.
type MessageRetry struct {
	Queue          string
	Requeued       *Frame   // the new message, nil when nothing was dead-lettered
	RequeuedGroups []string // the groups whose dead letters it replaced
	Reset          []string
}
