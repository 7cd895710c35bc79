package queengo

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Status, analytics and metrics (docs/api-admin.md "Status, analytics and
// metrics"): the figures the store computes from
// cursor and segment arithmetic, and the samples the metrics collector
// keeps.

// QueueFigures are the database-wide figures of one queue at one moment,
// summed over its partitions and, per partition, over its consumer groups
// (sql/functions/status.sql defines each). A partition no group has a cursor
// on counts as one group with every retained message pending.
type QueueFigures struct {
	QueueID   uuid.UUID
	Name      string
	Namespace string
	Task      string
	Priority  int
	CreatedAt time.Time
	// Partitions is how many partitions the queue has.
	Partitions int
	// Pushed is the sum of the partitions' heads: every message ever
	// appended, retained or not.
	Pushed int64
	// Retained is the messages the partitions still hold (head minus the
	// oldest retained offset, plus one).
	Retained   int64
	Pending    int64
	Processing int64
	Completed  int64
	// Failed is the offsets past committed with a failed ack: a part of
	// Pending and Processing.
	Failed int64
	// OffsetLag is head - committed summed over (partition, group);
	// MaxOffsetLag the largest single (partition, group) lag.
	OffsetLag    int64
	MaxOffsetLag int64
	// Consumed is the sum of the cursors' total_consumed: messages every
	// group committed past (acked, dead-lettered or auto-acked).
	Consumed int64
	// Leases is the live leases, PartitionsLeased the partitions with one,
	// Leased the messages their spans cover and LeasedAcked the messages
	// acked inside them.
	Leases           int
	PartitionsLeased int
	Leased           int64
	LeasedAcked      int64
	// OldestUnconsumedAt is the creation time of the oldest segment some
	// group has not committed past (zero: nothing unconsumed): the time lag.
	OldestUnconsumedAt time.Time
	LastConsumedAt     time.Time // zero: never
	DeadLetters        int64
}

// PartitionFigures are QueueFigures for one partition.
type PartitionFigures struct {
	ID          uuid.UUID
	Name        string
	CreatedAt   time.Time
	LastWriteAt time.Time // zero: never written
	Head        int64
	Retained    int64
	Groups      int
	Pending     int64
	Processing  int64
	Completed   int64
	Failed      int64
	OffsetLag   int64
	Consumed    int64
	// BatchesConsumed counts the batches the groups consumed: the spans
	// their claims handed out that ended resolved, or were auto-acked.
	BatchesConsumed    int64
	Leases             int
	OldestUnconsumedAt time.Time
	LastConsumedAt     time.Time
	OldestMessageAt    time.Time // zero: no segment
	NewestMessageAt    time.Time
	DeadLetters        int64
}

// StatusFilter selects queues by name, namespace and task (each optional).
type StatusFilter struct {
	Queue, Namespace, Task string
}

// QueueDetail is one queue with a page of its partitions, and its totals.
type QueueDetail struct {
	Queue      Queue
	CreatedAt  time.Time
	Totals     QueueFigures
	Partitions []PartitionFigures
	// PartitionCount is how many partitions the queue has in all.
	PartitionCount int
}

// QueueMessage is one message of the status message list.
type QueueMessage struct {
	ID            uuid.UUID
	TransactionID string
	PartitionID   uuid.UUID
	Partition     string
	Offset        int64
	CreatedAt     time.Time
	// Status is derived from the partition's cursors, with the resource
	// routes' per-group rules: "completed" when it is done for every group
	// (committed, acked in a live lease, or tombstoned), else "processing"
	// when some group holds it in a live lease unacked, else "pending".
	Status string
}

// DeadLetterSummary counts the dead letters of a set of queues.
type DeadLetterSummary struct {
	Total              int64
	AffectedPartitions int64
	TopErrors          []ErrorCount
}

// ErrorCount is one error text and how many dead letters carry it.
type ErrorCount struct {
	Error string `json:"error"`
	Count int64  `json:"count"`
}

// SeriesQuery asks for one time series of the samples: the window
// [From, To), cut into buckets of Bucket each, restricted to the queues of
// Filter (and, for process series, to Hostname and Instance when set).
type SeriesQuery struct {
	From, To time.Time
	Bucket   time.Duration
	Filter   StatusFilter
	Hostname string
	Instance string
}

// Series is a time series as JSON: an array of points, each an object with
// a "timestamp" and the series' own fields (docs/api-admin.md).
type Series = json.RawMessage

// PostgresStats is the live view of the database of /analytics/postgres-stats
// as JSON (docs/api-admin.md).
type PostgresStats = json.RawMessage

// RequestCounts are this process's request counters since it started
// (the queengo_* counters of /metrics/prometheus).
type RequestCounts struct {
	PushRequests, PushMessages, PushDuplicates, PushFailed uint64
	PopRequests, PopMessages, PopEmpty, PopErrors          uint64
	AckRequests, AckItems, AckFailed                       uint64
	// DBErrors counts the answers this process gave because the database
	// failed (500 and 503 of the error table's database entries).
	DBErrors uint64
	// Transactions counts the transaction requests.
	Transactions uint64
	// DeadLettered counts the messages this process's requests sent to the
	// dead-letter queue: acks past the retry limit (transactions' included)
	// and moves by the operator. Eviction counts in the retention service.
	DeadLettered uint64
}

// ClusterTotals are the request and message counts of every broker process
// on the database (queen_cluster_*): each process's counters since it
// started, added up. A process that stopped leaves the totals when its
// newest sample ages out of the collector's window, and a restarted one
// counts from 0 again, so the totals can drop (Prometheus reads a drop of
// a counter as a reset).
type ClusterTotals struct {
	PushRequests, PopRequests, AckRequests, Transactions uint64
	PushMessages, PopMessages                            uint64
	// AckMessages are the ack items, AckFailed those answered with a
	// failure.
	AckMessages, AckFailed uint64
	DBErrors               uint64
	// DeadLettered are the messages sent to the dead-letter queue: by acks
	// past the retry limit, by the operator, and by maxWaitTimeSeconds
	// eviction.
	DeadLettered uint64
	// Processes is how many broker processes the totals cover, this one
	// included.
	Processes int
}

// BackoffStats are a process's long polls in back-off: the consumer groups
// whose parked pops re-check less often than POP_WAIT_INITIAL_INTERVAL_MS
// because their re-checks kept coming back empty (docs/pop-routes.md), now.
type BackoffStats struct {
	// Groups counts the (queue or discovery scope, group) pairs with a key
	// in back-off; Queues the queues with one (discovery scopes are not
	// queues); Keys the keys: a group long-polling on several partitions of
	// the single-partition route has one key per partition.
	Groups, Queues, Keys int64
	// AvgInterval is the average re-check interval of those keys; 0 when
	// there are none.
	AvgInterval time.Duration
}

// QueueRates are one queue's latest figures and its rates per minute, from
// the collector's last samples.
type QueueRates struct {
	Figures QueueFigures
	// PushPerMinute: messages appended; PopPerMinute: messages handed out
	// for the first time (consumed plus in live leases); AckPerMinute:
	// messages committed. Each over the collector's last minute of samples
	// (or as much of it as it has), per minute.
	PushPerMinute, PopPerMinute, AckPerMinute float64
	// TimeLagMs is the age of the oldest unconsumed message at the sample.
	TimeLagMs int64
	// Parked is this process's parked long polls on the queue.
	Parked int64
}

// MetricsSnapshot is what the collector last sampled, for
// /metrics/prometheus: per queue its figures and rates, by queue name.
type MetricsSnapshot struct {
	At     time.Time
	Queues []QueueRates
	// DeadLetters is the dead-letter depth of every queue together.
	DeadLetters int64
}

// AllQueuesID is the queue id of the samples that carry every queue's
// figures together, one a tick (sums; time lags the largest and the
// average), so that a series over all queues reads one row a tick.
var AllQueuesID = uuid.Max

// SampleWrite is one tick of the collector: this process's row, and the
// database-wide queue rows that only one process writes per tick.
type SampleWrite struct {
	At       time.Time
	Instance string
	// Process is this process's figures, a JSON object.
	Process []byte
	// Queues makes the queue rows of the tick, called only when no other
	// process wrote queue rows in the last MinGap. continuous says whether
	// the newest queue rows are this instance's at LastWritten: no other
	// process wrote queue rows since this one's last.
	Queues      func(continuous bool) []QueueSample
	LastWritten time.Time
	MinGap      time.Duration
	// Samples older than Cutoff are deleted, at most DeleteLimit of them.
	Cutoff      time.Time
	DeleteLimit int
	// OthersSince: the other instances whose newest process row is newer
	// are added up in SampleResult.Others.
	OthersSince time.Time
}

// QueueSample is one queue row of the samples: the queue's figures at At,
// a JSON object.
type QueueSample struct {
	QueueID uuid.UUID
	At      time.Time
	Figures []byte
}

// SampleResult is what a SampleWrite did.
type SampleResult struct {
	// Led: this process wrote the tick's queue rows.
	Led     bool
	Deleted int64
	// Others adds up the newest process rows of the other instances
	// (SampleWrite.OthersSince); Processes counts them.
	Others ClusterTotals
}

// ProcessStats are this process's resource figures at one moment.
type ProcessStats struct {
	CPUUserUs, CPUSystemUs int64 // CPU time spent since start, microseconds
	RSSBytes, VirtualBytes uint64
	HeapAllocBytes         uint64
	HeapSysBytes           uint64
	Goroutines             int
}
