package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

const (
	// lostLeasesMax caps the leases a lostLeases keeps; past it a lost
	// claim's lease runs out instead.
	lostLeasesMax = 4096
	// lostFirstTry is when the first attempt to end a lost lease is made,
	// after the failure; each later one waits twice as long as the one
	// before, up to lostLastTry: seven attempts over about two minutes.
	// Each is one scan of the cursors for every lease due (no index covers
	// lease ids), and a claim held up by a frozen connection commits only
	// when it thaws, which may be after the first attempts.
	lostFirstTry = time.Second
	lostLastTry  = 64 * time.Second
)

// lostLeases keeps the leases of claims whose answer was lost: their claim
// round failed on the request deadline or a lost connection
// (queengo.ErrTimeout, queengo.ErrUnavailable), when PostgreSQL may have
// committed the claim all the same. The pop answered 500 and its client
// never saw the lease id, so nobody can ack those messages, and the lease
// would hide them until it runs out (the queue's leaseTime: 5 minutes after
// a configure), holding up its partitions' later messages with them. The
// Broker ends such leases by id (Broker.endLost), trying again at growing
// intervals while they are not found. Safe for concurrent use.
type lostLeases struct {
	mu     sync.Mutex
	leases map[uuid.UUID]*lostLease
}

// lostLease is when a lost lease is tried next and how long the try after
// that waits, and where its pop came from: its queue (the queue routes) or
// its scope (the discovery route), and its group.
type lostLease struct {
	next  time.Time
	wait  time.Duration
	queue string
	scope scopeKey
	group string
}

func newLostLeases() *lostLeases { return &lostLeases{leases: map[uuid.UUID]*lostLease{}} }

// claimFailed records the lease of pop w, whose claim failed with err, when
// the claim may have committed: w leases (autoAck has no lease to end: its
// claim committed the messages, which are gone) and err is the request
// deadline or a lost connection. It reports whether it recorded it.
func (l *lostLeases) claimFailed(w *waiter, err error, now time.Time) bool {
	if w.req.AutoAck || !(errors.Is(err, queengo.ErrTimeout) || errors.Is(err, queengo.ErrUnavailable)) {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.leases) >= lostLeasesMax {
		return false
	}
	e := &lostLease{next: now.Add(lostFirstTry), wait: lostFirstTry, group: w.req.Group}
	if w.req.Discovery() {
		e.scope = scopeKey{namespace: w.req.Namespace, task: w.req.Task}
	} else {
		e.queue = w.req.Queue
	}
	l.leases[w.leaseID] = e
	return true
}

// due returns the leases whose next attempt is due by now, and schedules
// the attempt after it; a lease past its last attempt is forgotten.
func (l *lostLeases) due(now time.Time) []uuid.UUID {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []uuid.UUID
	for id, e := range l.leases {
		switch {
		case now.Before(e.next):
		case e.wait > lostLastTry:
			delete(l.leases, id)
		default:
			out = append(out, id)
			e.wait *= 2
			e.next = now.Add(e.wait)
		}
	}
	return out
}

// settled forgets a lease, which was ended or had ended already, and
// returns it; ok is false when it was not kept (forgotten meanwhile).
func (l *lostLeases) settled(id uuid.UUID) (e lostLease, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p := l.leases[id]; p != nil {
		e, ok = *p, true
	}
	delete(l.leases, id)
	return e, ok
}

// endLost ends the lost leases ids in one statement and forgets the ones
// that were found, ended now or before, telling the actors whose pops of
// their group may claim what they held (lostEnded); the others are tried
// again when due.
func (b *Broker) endLost(ctx context.Context, ids []uuid.UUID) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
	defer cancel()
	extends := make([]queengo.LeaseExtend, len(ids))
	for i, id := range ids {
		extends[i] = queengo.LeaseExtend{Lease: id, End: true}
	}
	_, ext, err := b.cfg.Store.AckExtend(ctx, nil, extends)
	switch {
	case err != nil:
		return err
	case len(ext) != len(ids):
		return fmt.Errorf("ending lost leases: %d results for %d leases", len(ext), len(ids))
	}
	for i, e := range ext {
		switch e.Failure {
		case "":
			b.metrics.lostLeasesEnded.Inc()
			b.log.Info("ended the lease of a claim whose answer was lost", "lease", ids[i])
			b.lostEnded(ids[i])
		case queengo.LeaseExpired:
			b.lostEnded(ids[i])
		}
	}
	return nil
}

// lostEnded forgets the ended lost lease id and tells whoever parks pops of
// its group that a partition may be claimable again. Which partitions the
// claim took is not known here (its answer was lost), so the queue's actor
// has the group's next claim search every partition, and a discovery
// scope's parked pops look again; other processes find the partitions at
// their next full search (at least once a second).
func (b *Broker) lostEnded(id uuid.UUID) {
	e, ok := b.lost.settled(id)
	switch {
	case !ok:
	case e.queue != "":
		b.offer(e.queue, uuid.Nil, e.group)
	default:
		if v, ok := b.dir.scopes.Load(e.scope); ok {
			b.system.Root.Send(v.(*handle).pid, &scopeHint{group: e.group})
		}
	}
}
