// Package actors is the broker's concurrent core: a registry actor that
// spawns, supervises and passivates one actor per queue (its partition
// writers and their group commits, claim rounds, the ready set, parked pops,
// minPopWaitTime holds) and one per discovery scope. The actors are wiring
// (queue.go, scope.go, registry.go); what they decide lives in plain types,
// each testable alone: parking.go, ready.go, round.go, pacer.go, writer.go,
// scheduler.go; every message is in messages.go.
//
// The Broker is the data path's door: push, pop, ack, lease extension,
// transactions and abandoned answers, each a method bounded by a context.
// The operator's writes (package admin) tell it what they changed through
// its hooks (hooks.go). The actors talk to PostgreSQL only through the Store
// interface, on goroutines of their own, and never block inside Receive.
// Failures are the typed errors of package queengo; no text is made here.
package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// Store is what the data path needs from the database layer (package pg).
// Failures are the errors of package queengo (ErrNotFound, ErrPool,
// ErrTimeout, ...), wrapped.
type Store interface {
	EnsureQueue(ctx context.Context, name string) (queengo.Queue, error)
	QueuesInScope(ctx context.Context, namespace, task string) ([]queengo.Queue, error)
	EnsurePartition(ctx context.Context, queueID uuid.UUID, name string) (uuid.UUID, error)
	LookupPartition(ctx context.Context, queueID uuid.UUID, name string) (uuid.UUID, error)
	Append(ctx context.Context, segs []queengo.Segment) ([][]uuid.UUID, error)
	Claim(ctx context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error)
	AppendClaim(ctx context.Context, segs []queengo.Segment, claims []queengo.ClaimParams) ([][]uuid.UUID, []queengo.ClaimResult, bool, error)
	PopMaintenance(ctx context.Context) (bool, error)
	Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error)
	AckClaim(ctx context.Context, items []queengo.AckItem, claims []queengo.ClaimParams) ([]queengo.AckResult, []queengo.ClaimResult, error)
	AckExtend(ctx context.Context, items []queengo.AckItem, extends []queengo.LeaseExtend) ([]queengo.AckResult, []queengo.LeaseExtension, error)
	Transaction(ctx context.Context, ops []queengo.TxOp) ([]queengo.TxResult, error)
	RegisterStream(ctx context.Context, r queengo.StreamRegistration) (queengo.StreamRegistered, error)
	StreamState(ctx context.Context, f queengo.StateFilter) ([]queengo.StateRow, error)
	Cycle(ctx context.Context, cy *queengo.Cycle) (queengo.CycleResult, error)
}

// Backoff is the long-poll re-check schedule of docs/pop-routes.md: a parked pop
// re-checks every Initial until Threshold consecutive checks came back empty,
// then the interval grows by Multiplier per empty check up to Max. A wake
// (a push in scope) resets it.
type Backoff struct {
	Initial    time.Duration
	Threshold  int
	Multiplier float64
	Max        time.Duration
}

// The segment ceilings' defaults (Config.SegmentMaxBytes, SegmentMaxItems).
// Twenty concurrent 15 MB pushes to one partition made one 285 MB segment
// whose write missed the 10 s deadline, where each alone took 0.44 s; 8 MiB
// is half the largest push body (16 MiB), far above what group commit
// gathers at ordinary sizes (tens of messages of a few hundred bytes).
const (
	SegmentMaxBytesDefault = 8 << 20
	SegmentMaxItemsDefault = 10000
)

// Config configures a Broker.
type Config struct {
	Store Store
	// Notifier, when set, carries wake-ups to and from other broker
	// processes on the same database.
	Notifier Notifier
	Backoff  Backoff
	Logger   *slog.Logger
	// ClaimsInFlight caps the claim statements one queue actor runs at once;
	// each carries every pop that was ready when it started. Default 1: a
	// round is one set-based statement whatever it carries, so pops that
	// arrive while one runs ride the next together; with 4 in flight rounds
	// carried about one pop each and consume at batch 1 was 1.3-1.7x slower
	// (docs/performance.md "The dated record").
	ClaimsInFlight int
	// CommitsInFlight caps the shared segment commits one queue actor runs
	// at once; each carries every partition's segment that was ready. A
	// second one starts only for a large backlog (concurrentCommitMin).
	CommitsInFlight int
	// SegmentMaxBytes and SegmentMaxItems are the ceilings of one segment:
	// the pushes to a partition that arrive while its previous segment
	// commits are coalesced into the next one only up to these payload
	// bytes and items, the rest wait for the segment after, so a push's
	// fate (a commit within the deadline) does not depend on the size of
	// its neighbours. A push larger than either goes alone. Zero is
	// SegmentMaxBytesDefault and SegmentMaxItemsDefault.
	SegmentMaxBytes int
	SegmentMaxItems int
	// MaintenanceRefresh is how often the pop maintenance flag is re-read, so
	// a switch made by another broker process takes effect here.
	MaintenanceRefresh time.Duration
	// RequestTimeout bounds the database work of one operation: a push's
	// wait for the commit its items ride in (and that commit itself), each
	// claim round of a pop (not a long poll's wait), a queue or partition
	// lookup, the background reads. Past it the operation fails with
	// queengo.ErrTimeout. Zero means queengo.DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Metrics is the set the actors' figures are registered in (the broker
	// process's, served on /metrics/prometheus); nil: a set of their own
	// that nothing serves.
	Metrics *metrics.Set
}

// Broker is the entry point of the actor tree.
type Broker struct {
	cfg      Config
	log      *slog.Logger
	system   *actor.ActorSystem
	registry *actor.PID
	dir      directory // the live queue and scope actors
	warm     *warmPool // the actors' kept goroutines (deps.warm)
	d        *deps     // what the actors share (Abandon ends a lease as they do)

	popMaintenance atomic.Bool
	popSwitch      sync.Mutex // orders a switch with the refresh's store
	popSwitchedAt  time.Time  // this process's last SetPopMaintenance; guarded by popSwitch
	// popMoved is closed, and replaced, when popMaintenance changes or the
	// broker closes: it ends the waits of pops that came under maintenance.
	// Guarded by popSwitch.
	popMoved    chan struct{}
	closing     atomic.Bool
	stopRefresh chan struct{} // closed by Close: stops refreshMaintenance and watchLeases
	refreshDone chan struct{}
	leasesDone  chan struct{}
	cross       *crossProcess
	stopCross   context.CancelFunc
	acks        *ackCoalescer
	leases      *leaseBook  // shared with the actors (deps.leases)
	lost        *lostLeases // shared with the actors (deps.lost)
	metrics     *brokerMetrics
}

// New starts the actor system and the registry.
func New(cfg Config) *Broker { return newBroker(cfg, nil) }

// newBroker is New; tune, when set, adjusts the actors' dependencies before
// anything starts (tests: a fake clock, signals, short intervals).
func newBroker(cfg Config, tune func(*deps)) *Broker {
	if cfg.ClaimsInFlight <= 0 {
		cfg.ClaimsInFlight = 1
	}
	if cfg.SegmentMaxBytes <= 0 {
		cfg.SegmentMaxBytes = SegmentMaxBytesDefault
	}
	if cfg.SegmentMaxItems <= 0 {
		cfg.SegmentMaxItems = SegmentMaxItemsDefault
	}
	if cfg.CommitsInFlight <= 0 {
		cfg.CommitsInFlight = 2
	}
	if cfg.MaintenanceRefresh <= 0 {
		cfg.MaintenanceRefresh = time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = queengo.DefaultRequestTimeout
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.NewSet()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	m := newBrokerMetrics(cfg.Metrics)
	b := &Broker{cfg: cfg, log: log, stopRefresh: make(chan struct{}), refreshDone: make(chan struct{}),
		leasesDone: make(chan struct{}), acks: newAckCoalescer(cfg.Store, cfg.RequestTimeout, m), leases: newLeaseBook(),
		lost: newLostLeases(), popMoved: make(chan struct{}), metrics: m}
	// Proto.Actor logs every actor start at info level; keep its own lines to
	// warnings and above.
	actorLog := slog.New(log.Handler()).With("lib", "protoactor")
	b.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(levelFilter{min: slog.LevelWarn, h: actorLog.Handler()})
	}))
	d := &deps{store: cfg.Store, clock: realClock{}, log: log, backoff: cfg.Backoff, timeout: cfg.RequestTimeout,
		claimsInFlight: cfg.ClaimsInFlight, commitsInFlight: cfg.CommitsInFlight, maxParked: maxParkedDefault,
		idleAfter: idleAfterDefault, leases: b.leases, acks: b.acks, lost: b.lost, warm: newWarmPool(),
		popMaintenance: &b.popMaintenance, metrics: m, queueLoads: &atomic.Uint64{},
		segmentMaxBytes: cfg.SegmentMaxBytes, segmentMaxItems: cfg.SegmentMaxItems}
	if cfg.Notifier != nil {
		b.cross = newCrossProcess(cfg.Notifier, log, cfg.RequestTimeout, heard{
			offer:  b.offer,
			change: func(queue string, deleted bool) { b.hintQueue(queue, &queueChanged{deleted: deleted}) },
		})
		d.announce = b.cross.committed
	}
	if tune != nil {
		tune(d)
	}
	b.d, b.warm, b.acks.warm = d, d.warm, d.warm
	b.registry = b.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return newRegistry(d, &b.dir) }))
	go b.refreshMaintenance()
	go b.watchLeases(d.clock)
	if b.cross != nil {
		var ctx context.Context
		ctx, b.stopCross = context.WithCancel(context.Background())
		go b.cross.run(ctx)
	}
	return b
}

// Close releases every parked pop (they answer empty), refuses new pops and
// stops the actor system. Pushes already handed to a writer finish first.
func (b *Broker) Close() {
	if b.closing.Swap(true) {
		return
	}
	b.popSwitch.Lock()
	b.popMovedNow()
	b.popSwitch.Unlock()
	close(b.stopRefresh)
	<-b.refreshDone
	<-b.leasesDone
	if b.stopCross != nil {
		b.stopCross()
	}
	done := make(chan struct{})
	b.system.Root.Send(b.registry, &releaseAll{done: done})
	<-done
}

// Shutdown stops the actor system and lets its kept goroutines go; call it
// after the HTTP server drained.
func (b *Broker) Shutdown() {
	b.system.Shutdown()
	b.warm.close()
}

func (b *Broker) refreshMaintenance() {
	defer close(b.refreshDone)
	t := time.NewTicker(b.cfg.MaintenanceRefresh)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
		// A read that started before this process switched the flag may
		// return the old value: it must not undo the switch.
		start := time.Now()
		if on, err := b.cfg.Store.PopMaintenance(ctx); err == nil {
			b.popSwitch.Lock()
			if start.After(b.popSwitchedAt) {
				b.storePopMaintenance(on)
			}
			b.popSwitch.Unlock()
		}
		cancel()
		select {
		case <-b.stopRefresh:
			return
		case <-t.C:
		}
	}
}

// leaseExpiryEvery is how often the broker looks for leases its pops took
// that ended without an ack: their partitions are offered at once, here and
// in the other processes, where a pop parked on another route or in another
// process would otherwise find them at its next re-check.
const leaseExpiryEvery = 100 * time.Millisecond

// watchLeases offers, every leaseExpiryEvery until Close, the partitions of
// the leases this process handed out that ended unacknowledged (by c's
// time) to their groups, and ends the lost leases that are due (lostLeases).
func (b *Broker) watchLeases(c clock) {
	defer close(b.leasesDone)
	t := time.NewTicker(leaseExpiryEvery)
	defer t.Stop()
	// ctx ends at Close: it bounds the attempts to end lost leases.
	// failing is whether the last attempt failed: a database that does not
	// answer fails one every tick, and only the first is logged.
	failing := false
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-b.stopRefresh:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case <-b.stopRefresh:
			return
		case <-t.C:
		}
		for _, l := range b.leases.expire(c.Now()) {
			for i, p := range l.parts {
				q := l.queue
				if l.queues != nil {
					q = l.queues[i]
				}
				b.freed(q, p, l.group)
			}
		}
		if ids := b.lost.due(c.Now()); len(ids) > 0 {
			// Here, not on a goroutine of its own: one attempt at a time,
			// and Close cancels it. The offers above wait meanwhile, which
			// matters little: a lost lease comes from a database that
			// stopped answering.
			err := b.endLost(ctx, ids)
			if err != nil && !failing {
				b.log.Warn("ending the leases of claims whose answer was lost failed; trying again", "leases", len(ids),
					"error", err)
			}
			failing = err != nil
		}
	}
}

// queueHandle returns the handle of the queue's live actor; the registry
// spawns one when there is none.
func (b *Broker) queueHandle(name string) *handle {
	if v, ok := b.dir.queues.Load(name); ok && !v.(*handle).retired() {
		return v.(*handle)
	}
	reply := make(chan *handle, 1)
	b.system.Root.Send(b.registry, &getQueue{name: name, reply: reply})
	return <-reply
}

// scopeHandle is queueHandle for a discovery scope.
func (b *Broker) scopeHandle(k scopeKey) *handle {
	if v, ok := b.dir.scopes.Load(k); ok && !v.(*handle).retired() {
		return v.(*handle)
	}
	reply := make(chan *handle, 1)
	b.system.Root.Send(b.registry, &getScope{key: k, reply: reply})
	return <-reply
}

// toQueue hands a request (an appendReq or a waiter) to the queue's actor,
// spawning it when needed, and returns the handle it went through.
func (b *Broker) toQueue(name string, m any) *handle {
	for {
		// A handle refuses only once its actor passivated; the registry
		// then answers the next lookup with a fresh actor.
		if h := b.queueHandle(name); h.send(b.system.Root, m) {
			return h
		}
	}
}

// toScope is toQueue for a discovery scope.
func (b *Broker) toScope(k scopeKey, m any) *handle {
	for {
		if h := b.scopeHandle(k); h.send(b.system.Root, m) {
			return h
		}
	}
}

// queuePID returns the queue's live actor, spawned when there is none.
func (b *Broker) queuePID(name string) *actor.PID { return b.queueHandle(name).pid }

// Push writes the items, grouped per partition into coalesced segments, and
// returns one result per item in input order.
//
// It waits for the commits its items ride in no longer than the request
// timeout (or ctx's deadline, when earlier): past it, or when a commit failed
// because the database was unavailable or timed out, it returns an error
// wrapping queengo.ErrTimeout, ErrPool or ErrUnavailable, and no results.
// Some of the items may then have been stored, or be stored later by a
// commit still in flight: sending the request again with the same
// transaction ids stores each item once (the others become duplicates).
// The push buffer (package pushbuffer) stands in front of it.
func (b *Broker) Push(ctx context.Context, items []queengo.PushItem) ([]queengo.PushResult, error) {
	if b.closing.Load() {
		return nil, queengo.ErrClosed
	}
	ctx, cancel := requestBound(ctx, b.cfg.RequestTimeout)
	defer cancel()
	results := make([]queengo.PushResult, len(items))
	byQueue := map[string][]int{}
	var order []string
	for i := range items {
		q := items[i].Queue
		if _, ok := byQueue[q]; !ok {
			order = append(order, q)
		}
		byQueue[q] = append(byQueue[q], i)
	}
	reply := make(chan pushDone, len(items))
	parts := 0
	for _, q := range order {
		idx := byQueue[q]
		byPart := map[string][]int{}
		var porder []string
		for _, i := range idx {
			p := items[i].Partition
			if _, ok := byPart[p]; !ok {
				porder = append(porder, p)
			}
			byPart[p] = append(byPart[p], i)
		}
		for _, p := range porder {
			req := &appendReq{partition: p, reply: reply}
			for _, i := range byPart[p] {
				req.idx = append(req.idx, i)
				req.frames = append(req.frames, items[i].Frame)
			}
			b.toQueue(q, req)
			parts++
		}
	}
	for range parts {
		select {
		case d := <-reply:
			if d.err != nil {
				// The other parts go on; their replies land in the
				// buffered channel, which nobody reads any more.
				return nil, d.err
			}
			for k, i := range d.idx {
				results[i] = d.results[k]
			}
		case <-ctx.Done():
			// The writes go on (each commit is bounded by the request
			// timeout too); their replies land in the buffered channel.
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("%w: the push was not committed within the request deadline", queengo.ErrTimeout)
			}
			return nil, ctx.Err()
		}
	}
	return results, nil
}

// Pop serves one pop on any route. It returns an empty result for every case
// docs/pop-routes.md answers with a bare 204, and an error wrapping queengo.ErrPool
// or queengo.ErrTimeout (or another store error) for the 500s. ctx ends when
// the client went away: the pop is then dropped from the park and Pop
// returns queengo.ErrCancelled. The wait of a long poll is req.Timeout, not
// ctx's deadline; each claim round is bounded by the request timeout, and
// the whole pop by its wait plus popSlack request timeouts: past that (a
// database that stopped answering, many pops queued behind its rounds) it
// is dropped as when its client leaves and Pop returns queengo.ErrTimeout.
func (b *Broker) Pop(ctx context.Context, req *queengo.PopRequest) (queengo.PopResult, error) {
	if b.closing.Load() {
		return queengo.PopResult{}, nil
	}
	if b.popMaintenance.Load() {
		// A pop that comes under maintenance waits here, touching neither
		// its actor nor the database (a pop would create its queue); the
		// ones parked before the switch wait in their actor
		// (popScheduler.take).
		var ok bool
		if req, ok = b.waitOutMaintenance(ctx, req); !ok {
			return queengo.PopResult{}, nil
		}
	}
	w := &waiter{req: req, reply: make(chan popReply, 1), leaseID: uuid.Must(uuid.NewV7())}
	var h *handle
	if req.Discovery() {
		h = b.toScope(scopeKey{namespace: req.Namespace, task: req.Task}, w)
	} else {
		h = b.toQueue(req.Queue, w)
	}
	bound := popSlack * b.cfg.RequestTimeout
	if req.Wait {
		bound += req.Timeout
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case r := <-w.reply:
		return r.res, r.err
	case <-ctx.Done():
		b.system.Root.Send(h.pid, &cancelPop{w: w})
		return queengo.PopResult{}, queengo.ErrCancelled
	case <-t.C:
		b.system.Root.Send(h.pid, &cancelPop{w: w})
		return queengo.PopResult{}, fmt.Errorf("%w: the pop was not answered within %v", queengo.ErrTimeout, bound)
	}
}

// waitOutMaintenance holds a pop that came while pop maintenance is on (D11):
// one without wait answers empty at once (ok false); a long poll waits
// until its timeout, its client leaves or the broker closes (ok false), or
// until maintenance is switched off, and then pops as a long poll with the
// time it has left (ok true, with that timeout).
func (b *Broker) waitOutMaintenance(ctx context.Context, req *queengo.PopRequest) (*queengo.PopRequest, bool) {
	if !req.Wait || req.Timeout <= 0 {
		return req, false
	}
	deadline := time.Now().Add(req.Timeout)
	t := time.NewTimer(req.Timeout)
	defer t.Stop()
	b.d.signals.waitsOutMaintenance()
	for {
		b.popSwitch.Lock()
		moved := b.popMoved
		b.popSwitch.Unlock()
		switch {
		case b.closing.Load():
			return req, false
		case !b.popMaintenance.Load():
			left := time.Until(deadline)
			if left <= 0 {
				return req, false
			}
			r := *req
			r.Timeout = left
			return &r, true
		}
		select {
		case <-t.C:
			return req, false
		case <-ctx.Done():
			return req, false
		case <-moved:
		}
	}
}

// storePopMaintenance sets the switch in this process and, when it moved,
// ends the waits of the pops that came under maintenance. The caller holds
// popSwitch.
func (b *Broker) storePopMaintenance(on bool) {
	if b.popMaintenance.Swap(on) != on {
		b.popMovedNow()
	}
}

// popMovedNow wakes the waits on popMoved. The caller holds popSwitch.
func (b *Broker) popMovedNow() {
	close(b.popMoved)
	b.popMoved = make(chan struct{})
}

// popSlack is how many request timeouts a pop may wait beyond its long poll:
// the claim round in flight when it came, then its own. A healthy database
// answers a round in milliseconds, so only a stalled one reaches it.
const popSlack = 2

// Ack applies acknowledgements and returns one result per item in order
// (it sets the Offset of the items whose message this process delivered);
// partitions whose lease ended are offered to the parked pops of their group
// at once. The items ride in one commit with the acks of other requests
// (ackCoalescer), or, when they all name leases this process handed out on
// one queue whose actor keeps pops parked, in that actor's next claim round
// (handOff); past the request timeout (or ctx's deadline, when earlier) Ack
// fails with queengo.ErrTimeout, and the items may still be applied.
func (b *Broker) Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error) {
	ctx, cancel := requestBound(ctx, b.cfg.RequestTimeout)
	defer cancel()
	queue := b.leases.fillOffsets(items)
	res, handed, err := b.handOff(ctx, queue, items)
	if !handed {
		res, err = b.acks.ack(ctx, items)
	}
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		if r.LeaseReleased {
			if items[i].LeaseID != uuid.Nil {
				b.leases.released(items[i].LeaseID, items[i].PartitionID)
			}
			if handed { // the queue actor offered it here when the ack came
				b.announce(r.Queue, items[i].PartitionID, items[i].Group)
				b.hintScopes(r.Queue, items[i].Group)
			} else {
				b.freed(r.Queue, items[i].PartitionID, items[i].Group)
			}
		}
	}
	return res, nil
}

// handOff gives the acks of one queue to its actor when it keeps pops
// parked: the actor offers their partitions to the parked pops of their
// groups and applies the acks at the head of its next claim round, in the
// round's transaction, so a partition whose lease an ack ends is claimed
// for a waiting pop without a commit and a round trip of its own
// (Store.AckClaim). handed is false when the acks are not for an actor.
func (b *Broker) handOff(ctx context.Context, queue string, items []queengo.AckItem) (res []queengo.AckResult, handed bool, err error) {
	if queue == "" {
		return nil, false, nil
	}
	v, ok := b.dir.queues.Load(queue)
	if !ok {
		return nil, false, nil
	}
	h := v.(*handle)
	r := &ackRequest{items: items, done: make(chan ackOutcome, 1)}
	if h.parked.Load() == 0 || !h.send(b.system.Root, r) {
		return nil, false, nil
	}
	o, err := r.wait(ctx)
	return o.res, true, err
}

// Transaction applies pushes and acks atomically, then wakes the pops the
// pushes and released leases concern.
func (b *Broker) Transaction(ctx context.Context, ops []queengo.TxOp) ([]queengo.TxResult, error) {
	res, err := b.cfg.Store.Transaction(ctx, ops)
	if err != nil {
		return nil, err
	}
	for i, op := range ops {
		switch {
		case op.Push != nil && res[i].Push.Status == queengo.PushQueued:
			b.freed(op.Push.Queue, res[i].Push.PartitionID, "")
		case op.Ack != nil && res[i].Ack.LeaseReleased:
			b.freed(res[i].Ack.Queue, op.Ack.PartitionID, op.Ack.Group)
		}
	}
	return res, nil
}

// ExtendLease extends every live span of the lease to at least now+seconds;
// it never shortens one. It returns the earliest new expiry (RFC 3339,
// milliseconds) or, when the lease is not live, an empty expiry and the
// failure (a per-item result on the wire, not an error). The extension
// rides in the next ack commit (ackCoalescer), or starts one at once when
// none is in flight; past the request timeout (or ctx's deadline, when
// earlier) it fails with queengo.ErrTimeout, and may still be applied. The
// lease's cursors go along when this process handed the lease out
// (leaseBook). Otherwise PostgreSQL looks for them among every cursor, in a
// transaction of its own: a scan must not hold up the shared ack commit.
func (b *Broker) ExtendLease(ctx context.Context, lease uuid.UUID, seconds int) (string, queengo.AckFailure, error) {
	ctx, cancel := requestBound(ctx, b.cfg.RequestTimeout)
	defer cancel()
	var (
		e   queengo.LeaseExtension
		err error
	)
	if cursors := b.leases.cursors(lease); cursors != nil {
		e, err = b.acks.extend(ctx, queengo.LeaseExtend{Lease: lease, Seconds: seconds, Cursors: cursors})
	} else {
		var ext []queengo.LeaseExtension
		_, ext, err = b.cfg.Store.AckExtend(ctx, nil, []queengo.LeaseExtend{{Lease: lease, Seconds: seconds}})
		switch {
		case err == nil && len(ext) == 1:
			e = ext[0]
		case err == nil:
			err = fmt.Errorf("extend: %d results for one lease", len(ext))
		}
	}
	if err == nil && e.Failure == "" {
		b.leases.extended(lease, time.Now().Add(time.Duration(seconds)*time.Second))
	}
	return e.ExpiresAt, e.Failure, err
}

// freed tells a queue's actor, here and in the other broker processes, that
// a partition may be claimable: for one group (a lease ended) or, with
// group empty, for all (something was written outside the partition
// writers).
func (b *Broker) freed(queue string, partition uuid.UUID, group string) {
	if queue == "" {
		return
	}
	b.announce(queue, partition, group)
	b.offer(queue, partition, group)
}

// offer hands a possibly claimable partition to its queue's actor and to
// the discovery scopes; a commit reaches the scopes through the queue's
// actor when there is one (queuePushed).
func (b *Broker) offer(queue string, partition uuid.UUID, group string) {
	if !b.hintQueue(queue, &partitionFreed{partition: partition, group: group}) || group != "" {
		b.hintScopes(queue, group)
	}
}

// hintQueue sends m to the queue's actor if the queue has one, and reports
// whether it had: a hint (a freed partition, a changed row) has nothing to
// tell an actor spawned for it, and one that passivated meanwhile drops it.
func (b *Broker) hintQueue(queue string, m any) bool {
	v, ok := b.dir.queues.Load(queue)
	if ok {
		b.system.Root.Send(v.(*handle).pid, m)
	}
	return ok
}

// hintScopes tells every discovery scope's actor that a partition of queue
// may be claimable for group (every group when empty); those whose scope
// holds the queue wake their parked pops.
func (b *Broker) hintScopes(queue, group string) {
	b.dir.scopes.Range(func(_, v any) bool {
		b.system.Root.Send(v.(*handle).pid, &scopeHint{queue: queue, group: group})
		return true
	})
}

// announce tells the other broker processes that a partition may be
// claimable for group (for every group when empty).
func (b *Broker) announce(queue string, partition uuid.UUID, group string) {
	if b.cross != nil && queue != "" {
		b.cross.freed(queue, partition, group)
	}
}

// levelFilter drops records below min.
type levelFilter struct {
	min slog.Level
	h   slog.Handler
}

func (f levelFilter) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= f.min && f.h.Enabled(ctx, l)
}
func (f levelFilter) Handle(ctx context.Context, r slog.Record) error { return f.h.Handle(ctx, r) }
func (f levelFilter) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFilter{min: f.min, h: f.h.WithAttrs(a)}
}
func (f levelFilter) WithGroup(n string) slog.Handler {
	return levelFilter{min: f.min, h: f.h.WithGroup(n)}
}

// requestBound returns ctx's values, ended by timeout from now or by ctx's
// own deadline when earlier, without ctx's cancellation: the HTTP layer's
// context is fasthttp's RequestCtx, which is recycled once its request is
// answered, and a timer of a context derived from it reads its values when
// it fires, racing with the recycling when the handler returned on that
// very timer.
func requestBound(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	d := time.Now().Add(timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return context.WithDeadline(context.WithoutCancel(ctx), d)
}
