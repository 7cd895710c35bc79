package queengo

import (
	"errors"

	"github.com/google/uuid"
)

// The data lifecycle (docs/rules.md D9, docs/retention.md "Retention and
// eviction"): what the store reports to the retention service, and the
// maxSize refusal of a push.

// ErrQueueFull: a pushed item was refused because its queue already holds
// maxSize unconsumed messages (messages past its slowest consumer group's
// committed offset, summed over its partitions). The other items of the
// request are not affected.
var ErrQueueFull = errors.New("queue is full: it holds maxSize unconsumed messages")

// QueueFullMark stands, in the duplicate ids a segment write returns per
// item, for an item the write refused with ErrQueueFull: no stored message
// has this id (it is the all-ones UUID).
var QueueFullMark = uuid.Max

// Dropped counts what segment retention removed.
type Dropped struct {
	Segments int64
	Messages int64
	Bytes    int64 // the frames' bytes
}

// CursorKey names the cursor of a (partition, consumer group).
type CursorKey struct {
	Partition uuid.UUID
	Group     string
}
