package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/queengo/queengo"
)

const (
	// ackCommitsMax caps the ack commits in flight at once, so that acks
	// cannot take every pooled connection from pops and pushes.
	ackCommitsMax = 4
	// ackConcurrentMin is the backlog of waiting items that starts another
	// commit beside the ones in flight. Below it the next commit waits and
	// carries everything that arrived meanwhile: a commit's fixed cost in
	// PostgreSQL (about 0.3 ms of CPU: its statements and the commit) is
	// what batch-1 acks pay per message otherwise. At 100 items it is a few
	// percent against about 13 µs per item, so bigger acks need not wait.
	ackConcurrentMin = 100
	// ackBatchMax caps the items of one commit, so one statement's arrays
	// and its time holding cursor locks stay bounded; a batch ack larger
	// than that still goes whole.
	ackBatchMax = 5000
)

// ackCommitItems is the number of items each ack commit carried.
var ackCommitItems = metrics.NewHistogram(`queengo_ack_commit_items`)

// ackCoalescer merges acknowledgements as queue actors merge pushes: one
// ack commit is in flight (more only for a large backlog), and the acks that
// arrive meanwhile wait and go into the next one, one statement and one
// commit for all of them (the shape of River's BatchCompleter). A request's
// items stay together, in order, and its caller gets exactly their results.
// A lone ack starts at once, so at low load an ack answers within one
// commit.
//
// The store applies the merged items in (partition, group, offset) order,
// which is an order the requests could have been applied in one after the
// other: concurrent requests promise each other no order.
type ackCoalescer struct {
	store   acker
	timeout time.Duration // bounds each commit

	mu       sync.Mutex // a leaf: only queues requests and takes batches
	waiting  []*ackRequest
	items    int // in waiting
	inflight int
}

type ackRequest struct {
	items []queengo.AckItem
	done  chan ackOutcome // buffered: a commit never waits for a caller that gave up
}

type ackOutcome struct {
	res []queengo.AckResult
	err error
}

// acker is the part of the Store an ackCoalescer uses.
type acker interface {
	Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error)
}

func newAckCoalescer(store acker, timeout time.Duration) *ackCoalescer {
	return &ackCoalescer{store: store, timeout: timeout}
}

// ack applies the items in a shared commit and returns their results in
// order. It waits no longer than ctx allows: past its deadline it fails
// with queengo.ErrTimeout, and the items may still be applied by the commit
// they ride in.
func (c *ackCoalescer) ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error) {
	r := &ackRequest{items: items, done: make(chan ackOutcome, 1)}
	c.mu.Lock()
	c.waiting = append(c.waiting, r)
	c.items += len(items)
	batch := c.take()
	c.mu.Unlock()
	if batch != nil {
		go c.commit(batch)
	}
	select {
	case o := <-r.done:
		return o.res, o.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: the ack was not committed within the request deadline", queengo.ErrTimeout)
		}
		return nil, ctx.Err()
	}
}

// take returns the next batch to commit, if one may start now: none is in
// flight, or the backlog is large and fewer than ackCommitsMax are. c.mu
// must be held.
func (c *ackCoalescer) take() []*ackRequest {
	if len(c.waiting) == 0 || c.inflight >= ackCommitsMax || (c.inflight > 0 && c.items < ackConcurrentMin) {
		return nil
	}
	n, k := len(c.waiting[0].items), 1
	for k < len(c.waiting) && n+len(c.waiting[k].items) <= ackBatchMax {
		n += len(c.waiting[k].items)
		k++
	}
	batch := c.waiting[:k:k]
	c.waiting = append([]*ackRequest(nil), c.waiting[k:]...)
	c.items -= n
	c.inflight++
	return batch
}

// commit applies batch and, while requests are waiting when it is done, the
// next batch, on the calling goroutine.
func (c *ackCoalescer) commit(batch []*ackRequest) {
	for batch != nil {
		c.run(batch)
		c.mu.Lock()
		c.inflight--
		batch = c.take()
		c.mu.Unlock()
	}
}

// run applies one batch in one store call and answers its requests. When the
// call fails for a reason of its own (not the database's state), one
// request's items may have failed the statement for all of them: each
// request then runs alone, so only that request's caller gets the error.
func (c *ackCoalescer) run(batch []*ackRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var items []queengo.AckItem
	if len(batch) == 1 {
		items = batch[0].items
	} else {
		for _, r := range batch {
			items = append(items, r.items...)
		}
	}
	ackCommitItems.Update(float64(len(items)))
	res, err := c.store.Ack(ctx, items)
	if err == nil && len(res) != len(items) {
		err = fmt.Errorf("ack: %d results for %d items", len(res), len(items))
	}
	if err != nil && len(batch) > 1 && !databaseDown(err) {
		for _, r := range batch {
			res, err := c.store.Ack(ctx, r.items)
			r.done <- ackOutcome{res: res, err: err}
		}
		return
	}
	for _, r := range batch {
		if err != nil {
			r.done <- ackOutcome{err: err}
			continue
		}
		r.done <- ackOutcome{res: res[:len(r.items):len(r.items)]}
		res = res[len(r.items):]
	}
}
