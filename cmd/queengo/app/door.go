package app

import (
	"context"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/actors"
	"github.com/queengo/queengo/cmd/queengo/admin"
	"github.com/queengo/queengo/cmd/queengo/jobs"
	"github.com/queengo/queengo/cmd/queengo/pushbuffer"
)

// door is the one Broker the HTTP layer sees: the data path (the actor
// tree, with the push buffer in front of its pushes), the operator's door
// and this process's figures. Each method belongs to exactly one part.
type door struct {
	*actors.Broker
	*admin.Admin
	buffer    *pushbuffer.Buffer
	collector *jobs.Collector
	cfg       *Config
}

// Push goes through the push buffer, which stores it through the actor
// tree or buffers it.
func (d *door) Push(ctx context.Context, items []queengo.PushItem) ([]queengo.PushResult, error) {
	return d.buffer.Push(ctx, items)
}

// PushMaintenance reads the push maintenance switch as stored.
func (d *door) PushMaintenance(ctx context.Context) (bool, error) { return d.buffer.Maintenance(ctx) }

// SetPushMaintenance switches push maintenance for every broker process.
func (d *door) SetPushMaintenance(ctx context.Context, on bool) error {
	return d.buffer.SetMaintenance(ctx, on)
}

// PushMaintenanceOn is push maintenance as this process applies it.
func (d *door) PushMaintenanceOn() bool { return d.buffer.MaintenanceOn() }

// BufferStats reports this process's file buffer.
func (d *door) BufferStats() queengo.BufferStats { return d.buffer.Stats() }

// MetricsSnapshot is the collector's last sample in this process; nil
// before its first tick.
func (d *door) MetricsSnapshot() *queengo.MetricsSnapshot { return d.collector.Snapshot() }

// ClusterTotals are the request and message counts of every broker process
// on the database, as the collector knows them.
func (d *door) ClusterTotals() queengo.ClusterTotals { return d.collector.ClusterTotals() }

// Instance names this process in the metrics samples (host:port).
func (d *door) Instance() string { return d.collector.Instance() }

// ProcessStats reads this process's CPU, memory and goroutines.
func (d *door) ProcessStats() queengo.ProcessStats { return jobs.ReadProcess() }

// Settings is the configuration this process runs with, secrets hidden.
func (d *door) Settings() []queengo.Setting { return d.cfg.Settings() }
