// Package actors is the broker's concurrent core: a registry actor, one
// supervising actor per queue (parked pops, backoff, minPopWaitTime holds,
// the ready set of partitions, and the queue's partition writers), partition
// writer actors that coalesce pushes into one segment per commit, and scope
// actors for the discovery pop route. HTTP handlers call Broker methods, which
// send messages to the actors and wait for their replies; the actors talk to
// PostgreSQL only through the Store interface, on goroutines of their own, and
// never block inside Receive.
package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// Store is what the actors need from the database layer (package pg).
type Store interface {
	EnsureQueue(ctx context.Context, name string) (queengo.Queue, error)
	QueuesInScope(ctx context.Context, namespace, task string) ([]queengo.Queue, error)
	EnsurePartition(ctx context.Context, queueID uuid.UUID, name string) (uuid.UUID, error)
	LookupPartition(ctx context.Context, queueID uuid.UUID, name string) (uuid.UUID, error)
	Append(ctx context.Context, segs []queengo.Segment) ([][]uuid.UUID, error)
	Claim(ctx context.Context, claims []queengo.ClaimParams) ([]queengo.ClaimResult, error)
	PopMaintenance(ctx context.Context) (bool, error)
	Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error)
	Transaction(ctx context.Context, ops []queengo.TxOp) ([]queengo.TxResult, error)
	RequeueDeadLetter(ctx context.Context, id uuid.UUID) (queengo.DeadLetter, queengo.Frame, error)
}

// Backoff is the long-poll re-check schedule of pop-routes.md: a parked pop
// re-checks every Initial until Threshold consecutive checks came back empty,
// then the interval grows by Multiplier per empty check up to Max. A wake
// (a push in scope) resets it.
type Backoff struct {
	Initial    time.Duration
	Threshold  int
	Multiplier float64
	Max        time.Duration
}

// Config configures a Broker.
type Config struct {
	Store Store
	// Notifier, when set, carries wake-ups to and from other broker
	// processes on the same database.
	Notifier Notifier
	Backoff  Backoff
	Logger   *slog.Logger
	// ClaimsInFlight caps the claim statements one queue actor runs at once;
	// each carries every pop that was ready when it started.
	ClaimsInFlight int
	// CommitsInFlight caps the shared segment commits one queue actor runs
	// at once; each carries every partition's segment that was ready. A
	// second one starts only for a large backlog (concurrentCommitMin).
	CommitsInFlight int
	// MaintenanceRefresh is how often the pop maintenance flag is re-read, so
	// a switch made by another broker process takes effect here.
	MaintenanceRefresh time.Duration
	// RequestTimeout bounds the database work of one operation: a push's
	// wait for the commit its items ride in (and that commit itself), each
	// claim round of a pop (not a long poll's wait), a queue or partition
	// lookup, the background reads. Past it the operation fails with
	// queengo.ErrTimeout. Zero means queengo.DefaultRequestTimeout.
	RequestTimeout time.Duration
}

// Broker is the entry point of the actor tree.
type Broker struct {
	cfg      Config
	log      *slog.Logger
	system   *actor.ActorSystem
	registry *actor.PID
	queues   sync.Map // queue name -> *actor.PID
	scopes   sync.Map // scopeKey -> *actor.PID

	popMaintenance atomic.Bool
	closing        atomic.Bool
	stopRefresh    chan struct{}
	refreshDone    chan struct{}
	cross          *crossProcess
	stopCross      context.CancelFunc
}

// New starts the actor system and the registry.
func New(cfg Config) *Broker {
	if cfg.ClaimsInFlight <= 0 {
		cfg.ClaimsInFlight = 4
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
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	b := &Broker{cfg: cfg, log: log, stopRefresh: make(chan struct{}), refreshDone: make(chan struct{})}
	// Proto.Actor logs every actor start at info level; keep its own lines to
	// warnings and above.
	actorLog := slog.New(log.Handler()).With("lib", "protoactor")
	b.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(levelFilter{min: slog.LevelWarn, h: actorLog.Handler()})
	}))
	b.registry = b.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return newRegistry(b) }))
	go b.refreshMaintenance()
	if cfg.Notifier != nil {
		var ctx context.Context
		ctx, b.stopCross = context.WithCancel(context.Background())
		b.cross = newCrossProcess(b, cfg.Notifier)
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
	close(b.stopRefresh)
	<-b.refreshDone
	if b.stopCross != nil {
		b.stopCross()
	}
	done := make(chan struct{})
	b.system.Root.Send(b.registry, &releaseAll{done: done})
	<-done
}

// Shutdown stops the actor system; call it after the HTTP server drained.
func (b *Broker) Shutdown() { b.system.Shutdown() }

func (b *Broker) refreshMaintenance() {
	defer close(b.refreshDone)
	t := time.NewTicker(b.cfg.MaintenanceRefresh)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.RequestTimeout)
		if on, err := b.cfg.Store.PopMaintenance(ctx); err == nil {
			b.popMaintenance.Store(on)
		}
		cancel()
		select {
		case <-b.stopRefresh:
			return
		case <-t.C:
		}
	}
}

// SetPopMaintenanceLocal records a pop maintenance switch this process made,
// so it applies here at once rather than at the next refresh.
func (b *Broker) SetPopMaintenanceLocal(on bool) { b.popMaintenance.Store(on) }

func (b *Broker) queuePID(name string) *actor.PID {
	if pid, ok := b.queues.Load(name); ok {
		return pid.(*actor.PID)
	}
	reply := make(chan *actor.PID, 1)
	b.system.Root.Send(b.registry, &getQueue{name: name, reply: reply})
	pid := <-reply
	b.queues.Store(name, pid)
	return pid
}

func (b *Broker) scopePID(k scopeKey) *actor.PID {
	if pid, ok := b.scopes.Load(k); ok {
		return pid.(*actor.PID)
	}
	reply := make(chan *actor.PID, 1)
	b.system.Root.Send(b.registry, &getScope{key: k, reply: reply})
	pid := <-reply
	b.scopes.Store(k, pid)
	return pid
}

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
func (b *Broker) Push(ctx context.Context, items []queengo.PushItem) ([]queengo.PushResult, error) {
	if b.closing.Load() {
		return nil, queengo.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
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
		pid := b.queuePID(q)
		for _, p := range porder {
			req := &appendReq{partition: p, reply: reply}
			for _, i := range byPart[p] {
				req.idx = append(req.idx, i)
				req.frames = append(req.frames, items[i].Frame)
			}
			b.system.Root.Send(pid, req)
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
// pop-routes.md answers with a bare 204, and an error wrapping queengo.ErrPool
// or queengo.ErrTimeout (or another store error) for the 500s. cancel closes
// when the client went away; the pop is then dropped from the park.
func (b *Broker) Pop(req *queengo.PopRequest, cancel <-chan struct{}) (queengo.PopResult, error) {
	if b.closing.Load() {
		return queengo.PopResult{}, nil
	}
	if b.popMaintenance.Load() {
		// D11: park until the timeout first, so consume loops do not spin.
		if req.Wait && req.Timeout > 0 {
			t := time.NewTimer(req.Timeout)
			defer t.Stop()
			select {
			case <-t.C:
			case <-cancel:
			}
		}
		return queengo.PopResult{}, nil
	}
	var pid *actor.PID
	if req.Discovery() {
		pid = b.scopePID(scopeKey{namespace: req.Namespace, task: req.Task})
	} else {
		pid = b.queuePID(req.Queue)
	}
	w := &waiter{req: req, reply: make(chan popReply, 1), leaseID: uuid.Must(uuid.NewV7())}
	if req.Wait {
		w.deadline = time.Now().Add(req.Timeout)
	}
	b.system.Root.Send(pid, w)
	select {
	case r := <-w.reply:
		return r.res, r.err
	case <-cancel:
		b.system.Root.Send(pid, &cancelPop{w: w})
		return queengo.PopResult{}, queengo.ErrCancelled
	}
}

// Ack applies acknowledgements; partitions whose lease ended are offered to
// the parked pops of their group at once.
func (b *Broker) Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error) {
	res, err := b.cfg.Store.Ack(ctx, items)
	if err != nil {
		return nil, err
	}
	for i, r := range res {
		if r.LeaseReleased {
			b.freed(r.Queue, items[i].PartitionID, items[i].Group)
		}
	}
	return res, nil
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

// RequeueDeadLetter pushes a dead letter's payload again as a new message of
// its partition and removes the entry.
func (b *Broker) RequeueDeadLetter(ctx context.Context, id uuid.UUID) (queengo.DeadLetter, queengo.Frame, error) {
	d, f, err := b.cfg.Store.RequeueDeadLetter(ctx, id)
	if err == nil {
		b.freed(d.Queue, d.PartitionID, "")
	}
	return d, f, err
}

// freed tells a queue's actor that a partition may be claimable: for one
// group (a lease ended) or, with group empty, for all (something was written
// outside the partition writers).
func (b *Broker) freed(queue string, partition uuid.UUID, group string) {
	if queue == "" {
		return
	}
	if group == "" {
		b.announce(queue, partition)
	}
	b.offer(queue, partition, group)
}

// offer hands a possibly claimable partition to its queue's actor.
func (b *Broker) offer(queue string, partition uuid.UUID, group string) {
	b.system.Root.Send(b.queuePID(queue), &partitionFreed{partition: partition, group: group})
}

// announce tells other broker processes about a commit here.
func (b *Broker) announce(queue string, partition uuid.UUID) {
	if b.cross != nil {
		b.cross.committed(queue, partition)
	}
}

// QueueChanged tells the queue's actor that its row was created, replaced or
// deleted by this process (configure, delete), so it reloads its settings.
func (b *Broker) QueueChanged(name string, deleted bool) {
	b.system.Root.Send(b.queuePID(name), &queueChanged{deleted: deleted})
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

func errText(err error) string {
	switch {
	case errors.Is(err, queengo.ErrPool):
		return "database unavailable: no connection"
	case errors.Is(err, queengo.ErrTimeout):
		return "database timed out"
	case errors.Is(err, queengo.ErrUnavailable):
		return "database unavailable"
	}
	return fmt.Sprintf("write failed: %v", err)
}

// databaseDown reports whether err is the database's state rather than the
// operation's own failure: no connection, no answer in time, no server.
func databaseDown(err error) bool {
	return errors.Is(err, queengo.ErrPool) || errors.Is(err, queengo.ErrTimeout) ||
		errors.Is(err, queengo.ErrUnavailable) || errors.Is(err, queengo.ErrClosed)
}
