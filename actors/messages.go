package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// Every message the actors of the tree exchange, grouped by who sends it.
// Requests (appendReq, waiter) reach an actor only through its handle
// (registry.go), which counts them; everything else is a hint or an internal
// result and may be dropped when the actor is gone.

// ---------------------------------------------------------------- Broker -> queue or scope actor

// appendReq is one push request's items for one partition.
type appendReq struct {
	partition string
	idx       []int // positions in the push request
	frames    []queengo.Frame
	reply     chan<- pushDone

	answered bool // owned by the queue actor: reply was sent
}

// pushDone answers an appendReq, item by item; err is set (and every item
// failed) when the database was unavailable or timed out, or the actor
// failed.
type pushDone struct {
	idx     []int
	results []queengo.PushResult
	err     error
}

// waiter is one pop from the moment it reaches its actor until it is
// answered. The fields below leaseID are owned by the actor.
type waiter struct {
	req     *queengo.PopRequest
	reply   chan popReply
	leaseID uuid.UUID

	arrived   time.Time // when it reached the actor: rounds serve the oldest first
	deadline  time.Time // wait=true: when the long poll answers empty
	key       string    // parking key, set when first parked
	pid       uuid.UUID // the single-partition route: its partition's id, once a claim knew it
	cancelled bool
	answered  bool
	holdUntil time.Time // minPopWaitTime: deliver what there is at this time
	noHold    bool      // the queue was empty at the first look: never hold
	rescoped  bool      // a discovery pop that looked again after its scope's queues were read again
	parked    parkedAt  // where it is in the parking lot while parked
}

type popReply struct {
	res queengo.PopResult
	err error
}

// cancelPop: the client of a parked pop went away.
type cancelPop struct{ w *waiter }

// partitionFreed: a partition may be claimable again for group (every group
// when empty): a lease ended, or something was written outside the writers.
// uuid.Nil is a partition of the queue not known here (a lost claim's lease
// ended, lostLeases): the group's next claim searches every partition.
type partitionFreed struct {
	partition uuid.UUID
	group     string
}

// queueChanged: the queue's row was created, replaced or deleted (configure,
// delete), by this process or, announced over NOTIFY, another; reload it.
type queueChanged struct{ deleted bool }

// ---------------------------------------------------------------- Broker -> registry

type getQueue struct {
	name  string
	reply chan *handle
}

type getScope struct {
	key   scopeKey
	reply chan *handle
}

// releaseAll answers every parked pop empty, for shutdown. The Broker sends
// it to the registry with done set; the registry fans it out to every actor
// (done nil), which answers released to its parent.
type releaseAll struct{ done chan struct{} }

// ---------------------------------------------------------------- registry -> actors

// wake tells a scope actor that a queue in its scope was pushed to.
type wake struct{ queue uuid.UUID }

// scopeHint tells a discovery scope's actor that a partition of queue may be
// claimable: for one group (a lease ended) or, with group empty, for all (a
// commit). The broker sends it where the queue's own actor cannot pass the
// news on: a lease that ended, a commit heard from another process with no
// actor of the queue here. queue empty: a queue of the scope not known here
// (a lost claim's lease ended, lostLeases), sent to that scope's actor only.
type scopeHint struct{ queue, group string }

// checkIdle asks an actor whether it may be passivated (registry.go).
type checkIdle struct{}

// idleTick is the registry's timer: time to ask every actor checkIdle.
type idleTick struct{}

// ---------------------------------------------------------------- actors -> registry

// queuePushed tells the registry that a segment was committed to a queue, so
// the discovery scopes containing it wake their parked pops.
type queuePushed struct {
	queue           uuid.UUID
	namespace, task string
}

// released is an actor's answer to releaseAll.
type released struct{ from *actor.PID }

// retired tells the registry that an actor passivated itself: its handle
// refuses requests from now on; the registry forgets and stops it.
type retired struct {
	h     *handle
	queue string    // set for a queue actor
	scope *scopeKey // set for a scope actor
}

// ---------------------------------------------------------------- an actor to itself

// tick is an actor's timer: a parked pop's re-check or deadline, a hold's
// end or a lease expiry may be due.
type tick struct{}

// partitionReady carries the ids a partition writer looked up or created.
type partitionReady struct {
	by        *queueActor // the incarnation that asked
	partition string
	q         queengo.Queue
	pid       uuid.UUID
	err       error
}

// commitDone is the outcome of one shared segment commit.
type commitDone struct {
	by      *queueActor
	writers []*partitionWriter // in the order of the committed segments
	dups    [][]uuid.UUID
	err     error
}

// queueLoaded carries the queue row a queue actor loaded (or created).
type queueLoaded struct {
	by  *queueActor
	q   queengo.Queue
	err error
}

// A claimRound (round.go) is its own result message: the goroutine that ran
// it sends it back to the actor that started it.

var (
	tickMsg      = &tick{}
	checkIdleMsg = &checkIdle{}
	idleTickMsg  = &idleTick{}
)
