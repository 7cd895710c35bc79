// Package jobs is the broker's background work, none of it on the push or
// pop path: the data lifecycle (Retention: segment retention, eviction past
// maxWaitTimeSeconds, idle-partition cleanup, D9), the metrics collector
// (Collector: the status and analytics history and Queen's per-queue
// Prometheus families), and the shared dashboard figures (Figures: costly
// broker-wide reads computed once for every reader of the process). Each
// declares what it needs of the database as an interface that *pg.Store
// meets, and registers its figures in the set it is given.
package jobs
