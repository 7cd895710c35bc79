package actors

import (
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// The hooks are what the operator's writes (package admin) tell the data
// path: each reaches the actors of this process at once, and the other
// broker processes on the database through the Notifier.

// QueueChanged tells the queue's actor, here and in the other broker
// processes, that its row was created, replaced or deleted, so they read it
// again (a deleted queue's actor drops its settings and partitions).
func (b *Broker) QueueChanged(name string, deleted bool) {
	b.system.Root.Send(b.queuePID(name), &queueChanged{deleted: deleted})
	if b.cross != nil {
		b.cross.changed(name, deleted)
	}
}

// GroupMoved offers the partitions whose cursor of group was moved or
// deleted to the group's pops: what lies past the cursor, and the span a
// released lease held, is claimable now. A deleted cursor's ready set
// stays: the group's next claim searches whatever it offers (a first
// contact creates the cursor again), and a full search within a second
// finds the rest.
func (b *Broker) GroupMoved(group string, cursors []queengo.GroupCursor) {
	for _, c := range cursors {
		b.freed(c.Queue, c.Partition, group)
	}
}

// Freed tells the partition's queue actor and the discovery scopes, here
// and in the other broker processes, that the partition may be claimable:
// for group (a lease ended) or, with group empty, for every group
// (something was written outside the partition writers).
func (b *Broker) Freed(queue string, partition uuid.UUID, group string) {
	b.freed(queue, partition, group)
}

// PopMaintenanceSwitched applies a pop maintenance switch this process
// stored: here at once, and a refresh read that started before it does not
// undo it.
func (b *Broker) PopMaintenanceSwitched(on bool) {
	b.popSwitch.Lock()
	b.popSwitchedAt = time.Now()
	b.storePopMaintenance(on)
	b.popSwitch.Unlock()
}

// PopMaintenanceOn is the pop maintenance switch as this process applies it
// (re-read every MaintenanceRefresh).
func (b *Broker) PopMaintenanceOn() bool { return b.popMaintenance.Load() }
