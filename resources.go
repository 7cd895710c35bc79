package queengo

import (
	"time"

	"github.com/google/uuid"
)

// MessageCounts are the message figures of a partition, queue, namespace or
// the whole broker, computed by arithmetic on offsets (sql/functions/
// resources.sql, queen.partition_figures, says how each is defined).
// Pending, Processing, Completed and Failed count a message once per
// consumer group; Total counts it once.
type MessageCounts struct {
	Total, Pending, Processing, Completed, Failed, DeadLetter int64
}

// Add adds o to c.
func (c *MessageCounts) Add(o MessageCounts) {
	c.Total += o.Total
	c.Pending += o.Pending
	c.Processing += o.Processing
	c.Completed += o.Completed
	c.Failed += o.Failed
	c.DeadLetter += o.DeadLetter
}

// Stats describes a distribution: average, median, minimum and maximum (all
// zero over nothing).
type Stats struct {
	Avg, Median, Min, Max float64
}

// Overview is the broker-wide summary of GET /api/v1/resources/overview.
type Overview struct {
	Queues, Partitions, Namespaces, Tasks int
	Messages                              MessageCounts
	// LagMessages and LagSeconds are over every cursor (partition, group):
	// head - committed, and the age of the oldest segment holding an
	// unconsumed message of it (0 when it has consumed everything).
	LagMessages, LagSeconds Stats
	// IngestedPerSecond: the messages of the segments written in the last
	// minute, / 60.
	IngestedPerSecond float64
	At                time.Time
}

// ResourceFilter selects queues (or their partitions) on the resource
// routes; empty fields do not filter.
type ResourceFilter struct {
	Queue, Namespace, Task string
	Limit, Offset          int
}

// QueueSummary is one queue of GET /api/v1/resources/queues.
type QueueSummary struct {
	Queue
	CreatedAt  time.Time
	Partitions int
	Messages   MessageCounts
}

// PartitionSummary is one partition with its figures.
type PartitionSummary struct {
	ID        uuid.UUID
	Name      string
	Queue     string
	CreatedAt time.Time
	// Head is the last offset assigned (0: nothing was ever written).
	Head     int64
	Messages MessageCounts
	// OldestAt and NewestAt are the times of its oldest and newest retained
	// segments, LastWriteAt of its last write; zero when none.
	OldestAt, NewestAt, LastWriteAt time.Time
}

// QueueResource is GET /api/v1/resources/queues/:queue: the queue, one page of
// its partitions (by name) and the totals over all of them.
type QueueResource struct {
	QueueSummary
	Page []PartitionSummary
}

// GroupingSummary is one namespace or task of GET
// /api/v1/resources/namespaces and /tasks.
type GroupingSummary struct {
	Name               string
	Queues, Partitions int
	Messages           MessageCounts
}

// Cleared is the outcome of a queue clear.
type Cleared struct {
	Partitions int   // partitions cleared
	Messages   int64 // retained messages dropped
}

// MissingError is ErrNotFound naming the thing that is missing (one of the
// Missing* names) when a request addresses more than one; http answers the
// 404 of that thing.
type MissingError struct{ What string }

// The things a MissingError names. The SQL functions that report what is
// missing use the same words for queue and partition.
const (
	MissingQueue     = "queue"
	MissingPartition = "partition"
	// MissingGroup: a consumer group with neither a cursor nor a
	// subscription record where the operation looked.
	MissingGroup = "consumer group"
)

func (e *MissingError) Error() string { return e.What + " not found" }

// Is makes a MissingError match ErrNotFound.
func (e *MissingError) Is(target error) bool { return target == ErrNotFound }
