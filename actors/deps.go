package actors

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
)

const (
	// maxParkedDefault caps the long polls one queue or scope actor keeps
	// parked, and the pops it keeps waiting at all (parked or pending). A
	// parked pop costs a few hundred bytes here and an open connection at
	// the client, so 100k is far beyond any consumer fleet while keeping a
	// runaway client from growing one actor without bound.
	maxParkedDefault = 100_000
	// idleAfterDefault is how long a queue or scope actor must have had
	// nothing to do (nothing parked, nothing in flight, no request) before
	// it is passivated. Respawning costs one queue lookup at the next pop,
	// so minutes are plenty.
	idleAfterDefault = 5 * time.Minute
)

// deps is what the actors need from outside the tree, handed to each as one
// value instead of a pointer back to the Broker. It does not change after
// the Broker starts.
type deps struct {
	store   Store
	clock   clock
	log     *slog.Logger
	backoff Backoff
	// timeout bounds each database call an actor makes (a commit, a claim
	// round, a queue or partition lookup): Config.RequestTimeout.
	timeout time.Duration
	// claimsInFlight and commitsInFlight: Config.ClaimsInFlight and
	// Config.CommitsInFlight.
	claimsInFlight  int
	commitsInFlight int
	// segmentMaxBytes and segmentMaxItems: Config.SegmentMaxBytes and
	// Config.SegmentMaxItems.
	segmentMaxBytes, segmentMaxItems int
	// maxParked caps the parked pops of one actor (maxParkedDefault).
	maxParked int
	// idleAfter is how often the registry asks its actors whether they are
	// idle; one that was idle through a whole interval is passivated, so an
	// idle actor lives between one and two intervals (idleAfterDefault).
	idleAfter time.Duration
	// announce tells other broker processes about a commit here; nil when
	// no Notifier is configured.
	announce func(queue string, partition uuid.UUID)
	// props are added to the props of every queue and scope actor; tests
	// use them to inject receiver middleware.
	props []actor.PropsOption
	// warm runs the queue and scope actors' mailboxes, claim rounds and
	// segment commits on kept goroutines (warmPool), as the ack coalescer
	// runs its commits; nil in unit tests that build deps by hand.
	warm *warmPool
	// leases remembers the cursors of the leases the actors' pops took, for
	// extending them (Broker.ExtendLease).
	leases *leaseBook
	// acks answers the acks a claim round carried (handed off by
	// Broker.Ack) as its own commits' acks are answered.
	acks *ackCoalescer
	// lost keeps the leases of claims whose answer was lost, for the
	// Broker to end (lostLeases).
	lost *lostLeases
	// popMaintenance is the Broker's pop maintenance switch (D11): while it
	// is on no pop claims (popScheduler.take). nil in unit tests that build
	// deps by hand.
	popMaintenance *atomic.Bool
	// metrics are the Broker's figures on /metrics/prometheus.
	metrics *brokerMetrics
	// queueLoads counts the queue rows the queue actors loaded (or
	// created): a discovery scope whose list of queues is older than the
	// last load reads it again before its next round, so a pop that comes
	// after a push to a new queue of the scope sees the queue.
	queueLoads *atomic.Uint64
	// signals lets tests wait for events inside the tree; nil outside tests.
	signals *testSignals
}

// loadedQueue counts a queue row a queue actor loaded (queueLoads); the
// count happens before the load's result reaches the actor, so before any
// push it serves is answered.
func (d *deps) loadedQueue() {
	if d.queueLoads != nil {
		d.queueLoads.Add(1)
	}
}

// queueLoadCount reads queueLoads (0 in unit tests that build deps by
// hand).
func (d *deps) queueLoadCount() uint64 {
	if d.queueLoads == nil {
		return 0
	}
	return d.queueLoads.Load()
}

// actorProps are the props of a queue or scope actor made by producer: its
// mailbox runs on d.warm (a nil pool starts a goroutine per run).
func (d *deps) actorProps(producer actor.Producer) *actor.Props {
	return actor.PropsFromProducer(producer, append([]actor.PropsOption{actor.WithDispatcher(d.warm)}, d.props...)...)
}

// clock is the time the actors see: the real one, or a fake in tests.
type clock interface {
	Now() time.Time
	// AfterFunc calls f on its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) timer
}

// timer is what AfterFunc returns; *time.Timer is one.
type timer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }

// testSignals are the points of the tree a test can wait for; a nil
// *testSignals (outside tests) signals nothing.
type testSignals struct {
	idleChecked testSignal // an actor answered checkIdle and stays
	passivated  testSignal // the registry forgot a passivated actor
	restarted   testSignal // a failed actor answered what it held
	maintained  testSignal // a long poll waits out pop maintenance
}

// testSignal is one event a test can wait for; signalling an uninitialised
// one (outside tests) does nothing.
type testSignal struct{ ch chan struct{} }

func (s *testSignal) init() { s.ch = make(chan struct{}, 64) }

func (s *testSignals) idle() {
	if s != nil {
		s.idleChecked.signal()
	}
}

func (s *testSignals) gone() {
	if s != nil {
		s.passivated.signal()
	}
}

func (s *testSignals) failed() {
	if s != nil {
		s.restarted.signal()
	}
}

func (s *testSignals) waitsOutMaintenance() {
	if s != nil {
		s.maintained.signal()
	}
}

func (s *testSignal) signal() {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- struct{}{}:
	default:
	}
}
