package actors

// ParkedByQueue returns this process's parked long polls per queue, for the
// queues that have any. Each live queue actor counts its own on its handle,
// which goes with the actor when it passivates (with nothing parked);
// discovery scopes' pops belong to no queue until they claim and are only
// in ParkedTotal.
func (b *Broker) ParkedByQueue() map[string]int64 {
	out := map[string]int64{}
	b.dir.queues.Range(func(k, v any) bool {
		if n := v.(*handle).parked.Load(); n > 0 {
			out[k.(string)] = n
		}
		return true
	})
	return out
}

// ParkedTotal is every long poll the Broker keeps parked, discovery scopes'
// included (queengo_parked_pops).
func (b *Broker) ParkedTotal() int64 { return b.metrics.parked.Load() }
