package queengo

import (
	"time"

	"github.com/google/uuid"
)

// Consumer-group admin (docs/api-admin.md, "Consumer groups"): what the store
// reports of the groups' cursors. Every figure is cursor and segment
// arithmetic: per (partition, group) the offset lag is the partition's head
// minus the cursor's committed offset, and the time lag is the age of the
// segment holding the first unconsumed offset (committed + 1).

// LaggingAfter is the time lag past which a (group, queue) is Lagging.
const LaggingAfter = 300 * time.Second

// The states of a (group, queue) in the consumer-group list.
const (
	GroupLagging = "Lagging" // its oldest unconsumed message waited more than LaggingAfter
	GroupStable  = "Stable"  // it has consumed something, and is not lagging
	GroupDead    = "Dead"    // it never consumed anything, and is not lagging
)

// GroupSummary is one entry of the consumer-group list: a group on a queue.
type GroupSummary struct {
	Group, Queue string
	// Partitions is how many cursors the group has on the queue.
	Partitions int
	// Members counts those cursors holding a live lease: the partitions
	// some consumer of the group is working on now.
	Members int
	// PartitionsWithLag counts the cursors behind their partition's head.
	PartitionsWithLag int
	// TotalLag sums the offset lags (messages past committed).
	TotalLag int64
	// MaxTimeLag is the largest time lag of its partitions, in seconds.
	MaxTimeLag int64
	// Consumed reports whether any cursor ever advanced by consuming.
	Consumed bool
	// LastActivity is the latest consumption on any of its partitions.
	LastActivity *time.Time
	// Subscription is the group's durable subscription record on the
	// queue (D6); nil when it has none.
	Subscription *Subscription
}

// State is Lagging, Stable or Dead (the Group* constants).
func (g *GroupSummary) State() string {
	switch {
	case time.Duration(g.MaxTimeLag)*time.Second > LaggingAfter:
		return GroupLagging
	case g.Consumed:
		return GroupStable
	}
	return GroupDead
}

// Subscription is a durable subscription record (D6).
type Subscription struct {
	Mode      string     // all, new or timestamp
	From      *time.Time // where a new cursor starts; nil for all
	CreatedAt time.Time
}

// GroupPartition is a group's cursor on one partition, with its lag.
type GroupPartition struct {
	Group, Queue, Partition string
	PartitionID             uuid.UUID
	// LeaseID is the live lease on the partition, uuid.Nil when none.
	LeaseID        uuid.UUID
	LastConsumedAt *time.Time
	TotalConsumed  int64
	// OffsetLag is how many messages lie past committed.
	OffsetLag int64
	// OldestUnconsumedAt is when the segment holding the first unconsumed
	// message was written; nil when there is none.
	OldestUnconsumedAt *time.Time
	// TimeLagSeconds is the age of OldestUnconsumedAt, 0 without one.
	TimeLagSeconds int64
}

// GroupDeleted is the outcome of deleting a group's cursors.
type GroupDeleted struct {
	// Cursors lists the (partition, group) cursors deleted, by queue.
	Cursors []GroupCursor
}

// GroupCursor names one cursor of a group an operation changed.
type GroupCursor struct {
	Queue     string
	Partition uuid.UUID
}

// GroupSeek is what a seek asks: the end of every partition (ToEnd), or
// the segment boundary at or before At.
type GroupSeek struct {
	Group, Queue string
	// Partition, when not empty, limits the seek to that partition.
	Partition string
	ToEnd     bool
	At        time.Time
}

// GroupSought is the outcome of a seek.
type GroupSought struct {
	// Moved lists the cursors moved (their leases released).
	Moved []GroupCursor
	// HeadAt is when the partition's newest segment was written (a
	// single-partition seek only); nil when it holds none.
	HeadAt *time.Time
}

// StatsStep is one step of a statistics report: named counts computed when
// asked, and how long that took.
type StatsStep struct {
	Counts   []StatsCount
	Duration time.Duration
}

// StatsCount is one figure of a StatsStep.
type StatsCount struct {
	Name  string
	Value int64
}

// StatsReport is what POST /api/v1/stats/refresh reports, step by step.
type StatsReport struct {
	Partition, Queue, Namespace, Task, System StatsStep
}
