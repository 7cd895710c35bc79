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

// ackCoalescer merges acknowledgements and lease extensions as queue actors
// merge pushes: one ack commit is in flight (more only for a large
// backlog), and the requests that arrive meanwhile wait and go into the next
// one, one commit for all of them (the shape of River's BatchCompleter): one
// statement for the acks, and one before it for the extensions when any
// rode along. A request's items stay together, in order, and its caller gets
// exactly their results. A lone ack or extension starts at once, so at low
// load either answers within one commit.
//
// The store applies a commit's extensions first, then its acks in
// (partition, group, offset) order, which is an order the requests could
// have been applied in one after the other: concurrent requests promise each
// other no order.
type ackCoalescer struct {
	store   acker
	timeout time.Duration                // bounds each commit
	warm    *warmPool                    // runs the commits; set by NewBroker, nil in unit tests
	sizes   *metrics.PrometheusHistogram // queengo_ack_commit_items

	mu       sync.Mutex // a leaf: only queues requests and takes batches
	waiting  []*ackRequest
	items    int // in waiting
	inflight int
}

// ackRequest is one caller's acks, or its one lease extension (extend set,
// items empty).
type ackRequest struct {
	items  []queengo.AckItem
	extend *queengo.LeaseExtend
	done   chan ackOutcome // buffered: a commit never waits for a caller that gave up
}

// size is what the request adds to a commit's items: an extension counts as
// one.
func (r *ackRequest) size() int {
	if r.extend != nil {
		return 1
	}
	return len(r.items)
}

type ackOutcome struct {
	res []queengo.AckResult
	ext queengo.LeaseExtension
	err error
}

// acker is the part of the Store an ackCoalescer uses: Ack for a commit of
// acks only (one statement), AckExtend for one that carries extensions.
type acker interface {
	Ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error)
	AckExtend(ctx context.Context, items []queengo.AckItem, extends []queengo.LeaseExtend) ([]queengo.AckResult, []queengo.LeaseExtension, error)
}

func newAckCoalescer(store acker, timeout time.Duration, m *brokerMetrics) *ackCoalescer {
	return &ackCoalescer{store: store, timeout: timeout, sizes: m.ackCommitItems}
}

// ack applies the items in a shared commit and returns their results in
// order. It waits no longer than ctx allows: past its deadline it fails
// with queengo.ErrTimeout, and the items may still be applied by the commit
// they ride in.
func (c *ackCoalescer) ack(ctx context.Context, items []queengo.AckItem) ([]queengo.AckResult, error) {
	o, err := c.submit(ctx, &ackRequest{items: items, done: make(chan ackOutcome, 1)})
	return o.res, err
}

// extend applies the lease extension in a shared commit, as ack does: past
// ctx's deadline it fails with queengo.ErrTimeout, and the extension may
// still be applied.
func (c *ackCoalescer) extend(ctx context.Context, e queengo.LeaseExtend) (queengo.LeaseExtension, error) {
	o, err := c.submit(ctx, &ackRequest{extend: &e, done: make(chan ackOutcome, 1)})
	return o.ext, err
}

// submit queues r, starts a commit if one may start, and waits for r's
// outcome or ctx.
func (c *ackCoalescer) submit(ctx context.Context, r *ackRequest) (ackOutcome, error) {
	c.mu.Lock()
	c.waiting = append(c.waiting, r)
	c.items += r.size()
	batch := c.take()
	c.mu.Unlock()
	if batch != nil {
		c.warm.Go(func() { c.commit(batch) })
	}
	return r.wait(ctx)
}

// answer gives r its outcome; only the first answer counts (a failed queue
// actor answers the acks it held, one of which a round may answer too).
func (r *ackRequest) answer(o ackOutcome) {
	select {
	case r.done <- o:
	default:
	}
}

// wait waits for r's outcome, or ctx: past its deadline it fails with
// queengo.ErrTimeout, and r may still be applied.
func (r *ackRequest) wait(ctx context.Context) (ackOutcome, error) {
	select {
	case o := <-r.done:
		return o, o.err
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ackOutcome{}, fmt.Errorf("%w: not committed within the request deadline", queengo.ErrTimeout)
		}
		return ackOutcome{}, ctx.Err()
	}
}

// nextBatch splits waiting, which is not empty, into the requests one
// commit carries, in order, at most ackBatchMax items (a larger request
// goes alone), and the rest; n is the batch's size.
func nextBatch(waiting []*ackRequest) (batch, rest []*ackRequest, n int) {
	n, k := waiting[0].size(), 1
	for k < len(waiting) && n+waiting[k].size() <= ackBatchMax {
		n += waiting[k].size()
		k++
	}
	return waiting[:k:k], append([]*ackRequest(nil), waiting[k:]...), n
}

// take returns the next batch to commit, if one may start now: none is in
// flight, or the backlog is large and fewer than ackCommitsMax are. c.mu
// must be held.
func (c *ackCoalescer) take() []*ackRequest {
	if len(c.waiting) == 0 || c.inflight >= ackCommitsMax || (c.inflight > 0 && c.items < ackConcurrentMin) {
		return nil
	}
	batch, rest, n := nextBatch(c.waiting)
	c.waiting = rest
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

// run applies one batch in one store call and answers its requests.
func (c *ackCoalescer) run(batch []*ackRequest) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var extends []queengo.LeaseExtend
	for _, r := range batch {
		if r.extend != nil {
			extends = append(extends, *r.extend)
		}
	}
	items := joinAcks(batch)
	c.sizes.Update(float64(len(items) + len(extends)))
	res, ext, err := c.apply(ctx, items, extends)
	c.settle(ctx, batch, res, ext, err)
}

// joinAcks is the items of batch's requests, in order.
func joinAcks(batch []*ackRequest) []queengo.AckItem {
	if len(batch) == 1 {
		return batch[0].items
	}
	var items []queengo.AckItem
	for _, r := range batch {
		items = append(items, r.items...)
	}
	return items
}

// settle answers the requests of batch from the outcome of the store call
// that applied them together: res and ext, or err. When the call failed for
// a reason of its own (not the database's state), one request's items may
// have failed the statement for all of them: each request then runs alone,
// so only that request's caller gets the error.
func (c *ackCoalescer) settle(ctx context.Context, batch []*ackRequest, res []queengo.AckResult, ext []queengo.LeaseExtension, err error) {
	if err != nil && len(batch) > 1 && !queengo.DatabaseDown(err) {
		for _, r := range batch {
			var o ackOutcome
			if r.extend != nil {
				var ext []queengo.LeaseExtension
				if _, ext, o.err = c.apply(ctx, nil, []queengo.LeaseExtend{*r.extend}); o.err == nil {
					o.ext = ext[0]
				}
			} else {
				o.res, _, o.err = c.apply(ctx, r.items, nil)
			}
			r.answer(o)
		}
		return
	}
	for _, r := range batch {
		switch {
		case err != nil:
			r.answer(ackOutcome{err: err})
		case r.extend != nil:
			r.answer(ackOutcome{ext: ext[0]})
			ext = ext[1:]
		default:
			r.answer(ackOutcome{res: res[:len(r.items):len(r.items)]})
			res = res[len(r.items):]
		}
	}
}

// apply runs one store call: Ack when there are no extensions, else
// AckExtend. It checks that every item and extension got its result.
func (c *ackCoalescer) apply(ctx context.Context, items []queengo.AckItem, extends []queengo.LeaseExtend) ([]queengo.AckResult, []queengo.LeaseExtension, error) {
	var (
		res []queengo.AckResult
		ext []queengo.LeaseExtension
		err error
	)
	if len(extends) == 0 {
		res, err = c.store.Ack(ctx, items)
	} else {
		res, ext, err = c.store.AckExtend(ctx, items, extends)
	}
	if err == nil && (len(res) != len(items) || len(ext) != len(extends)) {
		err = fmt.Errorf("ack: %d results for %d items, %d for %d lease extensions", len(res), len(items), len(ext), len(extends))
	}
	return res, ext, err
}
