package actors

import (
	"sync"
	"sync/atomic"
)

// parkedByQueue counts, per queue name, the long polls this process keeps
// parked in the queue's actor (discovery scopes are not counted: their pops
// belong to no queue until they claim). Each queue actor's parking lot adds
// to its queue's counter; a counter stays when its actor passivates (at 0),
// so the map grows with the queues this process has served, like the
// actors' own directory.
var parkedByQueue sync.Map // string -> *atomic.Int64

// queueParked returns the parked-pop counter of queue.
func queueParked(queue string) *atomic.Int64 {
	if c, ok := parkedByQueue.Load(queue); ok {
		return c.(*atomic.Int64)
	}
	c, _ := parkedByQueue.LoadOrStore(queue, &atomic.Int64{})
	return c.(*atomic.Int64)
}

// ParkedByQueue returns this process's parked long polls per queue, for the
// queues that have any.
func ParkedByQueue() map[string]int64 {
	out := map[string]int64{}
	parkedByQueue.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n > 0 {
			out[k.(string)] = n
		}
		return true
	})
	return out
}

// ParkedTotal is every long poll this process keeps parked, discovery
// scopes' included (queengo_parked_pops).
func ParkedTotal() int64 { return parked.Load() }
