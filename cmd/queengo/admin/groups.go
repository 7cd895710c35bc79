package admin

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/queengo/queengo"
)

// GroupStore is what the consumer-group admin routes (docs/api-admin.md "Consumer groups") need of the store.
type GroupStore interface {
	ListGroups(ctx context.Context, limit, offset int) ([]queengo.GroupSummary, error)
	LaggingGroups(ctx context.Context, minLag time.Duration, limit, offset int) ([]queengo.GroupPartition, error)
	GroupPartitions(ctx context.Context, group string, limit, offset int) ([]queengo.GroupPartition, error)
	DeleteGroup(ctx context.Context, group, queue string, metadata bool) (queengo.GroupDeleted, error)
	SeekGroup(ctx context.Context, seek queengo.GroupSeek) (queengo.GroupSought, error)
	StatsReport(ctx context.Context) (queengo.StatsReport, error)
}

// ListGroups returns one page of the consumer-group list: one entry per
// (group, queue), by group then queue (byte order), from figures of every
// group shared between readers (jobs.Figures).
func (a *Admin) ListGroups(ctx context.Context, limit, offset int) ([]queengo.GroupSummary, error) {
	all, _, err := a.figures.Groups(ctx)
	if err != nil {
		return nil, err
	}
	return page(all, limit, offset), nil
}

// LaggingGroups returns one page of the (partition, group) cursors whose
// oldest unconsumed message was written at least minLag ago, the longest
// waiting first; like ListGroups, from figures shared between readers.
func (a *Admin) LaggingGroups(ctx context.Context, minLag time.Duration, limit, offset int) ([]queengo.GroupPartition, error) {
	all, _, err := a.figures.Lagging(ctx)
	if err != nil {
		return nil, err
	}
	// all is the longest waiting first, so the cursors waiting minLag or
	// more are a prefix. The time lags are taken now, from when each oldest
	// unconsumed segment was written: only the offsets and leases are as
	// old as the figures.
	now := time.Now()
	n := sort.Search(len(all), func(i int) bool {
		o := all[i].OldestUnconsumedAt
		return o == nil || now.Sub(*o) < minLag
	})
	out := slices.Clone(page(all[:n], limit, offset))
	for i := range out {
		out[i].TimeLagSeconds = max(int64(now.Sub(*out[i].OldestUnconsumedAt)/time.Second), 0)
	}
	return out, nil
}

// GroupPartitions returns one page of the group's cursors, by queue then
// partition, or an error wrapping queengo.ErrNotFound for a group with
// neither a cursor nor a subscription record.
func (a *Admin) GroupPartitions(ctx context.Context, group string, limit, offset int) ([]queengo.GroupPartition, error) {
	return a.store.GroupPartitions(ctx, group, limit, offset)
}

// DeleteGroup deletes the group's cursors and attempt counts on queue (on
// every queue when empty) and, with metadata, its subscription records
// there. Its next pop is a first contact again (D6); its parked pops on the
// queues concerned look again at once.
func (a *Admin) DeleteGroup(ctx context.Context, group, queue string, metadata bool) (queengo.GroupDeleted, error) {
	res, err := a.store.DeleteGroup(ctx, group, queue, metadata)
	if err == nil {
		a.groupMoved(group, res.Cursors)
	}
	return res, err
}

// SeekGroup moves the group's cursors on a queue (or one partition) to the
// end or to a time and releases their leases; the group's parked pops look
// again at once, so a seek back delivers at once.
func (a *Admin) SeekGroup(ctx context.Context, seek queengo.GroupSeek) (queengo.GroupSought, error) {
	res, err := a.store.SeekGroup(ctx, seek)
	if err == nil {
		a.groupMoved(seek.Group, res.Moved)
	}
	return res, err
}

// groupMoved tells the data path that the group's cursors moved (its pops
// look again at once) and drops the shared figures.
func (a *Admin) groupMoved(group string, cursors []queengo.GroupCursor) {
	a.hooks.GroupMoved(group, cursors)
	a.figures.Drop()
}

// RefreshStats forgets the dashboard figures (jobs.Figures), so the next read
// of each computes them anew, and computes the figures of the statistics
// report now.
func (a *Admin) RefreshStats(ctx context.Context) (queengo.StatsReport, error) {
	a.figures.Drop()
	return a.store.StatsReport(ctx)
}
