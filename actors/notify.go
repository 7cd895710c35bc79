package actors

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

const (
	// notifyEvery batches the wake-ups sent to other broker processes: one
	// NOTIFY statement (its own commit) per interval at most, however many
	// segments committed. A lost or late one costs latency, never messages:
	// parked pops re-check on their backoff anyway.
	notifyEvery = 5 * time.Millisecond
	// peersEvery is how often the notifier looks whether another broker
	// process listens at all; alone, it sends nothing.
	peersEvery = 5 * time.Second
)

// Notifier is what the broker needs to reach other broker processes on the
// same database; *pg.Store satisfies it.
type Notifier interface {
	Listen(ctx context.Context, ready func(), fn func(payload string))
	Notify(ctx context.Context, payloads []string) error
	Listeners(ctx context.Context) (int, error)
}

// crossProcess carries news between broker processes on one database over
// LISTEN/NOTIFY: commits made here (D12), whose announcements mark
// partitions ready and wake parked pops in the others, and queue rows
// created, reconfigured or deleted here, which make the others' queue
// actors read the row again (a queue deleted and created again has a new
// id). A payload is "instance|partition id|queue" for a commit and
// "instance|changed|queue" or "instance|deleted|queue" for a row.
type crossProcess struct {
	n        Notifier
	log      *slog.Logger
	timeout  time.Duration // bounds each statement (Config.RequestTimeout)
	hear     heard
	instance string
	recount  chan struct{} // our LISTEN is in place: count the listeners now

	mu      sync.Mutex
	pending []string            // in the order they were announced
	queued  map[string]struct{} // pending, as a set
	kick    chan struct{}
	peers   bool
}

// heard is what the other processes' announcements are handed to.
type heard struct {
	offer  func(queue string, partition uuid.UUID) // a commit to the partition
	change func(queue string, deleted bool)        // the queue's row changed
}

// newCrossProcess announces through n and hands what it hears to hear.
func newCrossProcess(n Notifier, log *slog.Logger, timeout time.Duration, hear heard) *crossProcess {
	return &crossProcess{n: n, log: log, timeout: timeout, hear: hear, instance: uuid.NewString(),
		recount: make(chan struct{}, 1), queued: map[string]struct{}{}, kick: make(chan struct{}, 1)}
}

func (c *crossProcess) run(ctx context.Context) {
	go c.n.Listen(ctx, func() { signal(c.recount) }, c.receive)
	go c.watchPeers(ctx)
	t := time.NewTicker(notifyEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		batch := c.pending
		c.pending = nil
		clear(c.queued)
		c.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		if err := c.n.Notify(cctx, batch); err != nil {
			c.log.Debug("notify failed", "err", err)
		}
		cancel()
	}
}

func (c *crossProcess) watchPeers(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		n, err := c.n.Listeners(cctx)
		cancel()
		c.mu.Lock()
		// Our own listener is one of them.
		c.peers = err != nil || n > 1
		c.mu.Unlock()
		// A count made before our own LISTEN was in place saw one
		// listener too few: count again as soon as it is.
		select {
		case <-ctx.Done():
			return
		case <-c.recount:
		case <-time.After(peersEvery):
		}
	}
}

// committed announces a commit to (queue, partition).
func (c *crossProcess) committed(queue string, partition uuid.UUID) {
	c.announce(partition.String(), queue)
}

// changed announces that this process created, reconfigured or deleted the
// queue's row.
func (c *crossProcess) changed(queue string, deleted bool) {
	what := "changed"
	if deleted {
		what = "deleted"
	}
	c.announce(what, queue)
}

// announce queues a payload for the next NOTIFY, once however often it is
// announced before then, in the order of first announcement (a queue's
// deletion reaches the others before the commits that created it again).
func (c *crossProcess) announce(what, queue string) {
	c.mu.Lock()
	if !c.peers {
		c.mu.Unlock()
		return
	}
	p := c.instance + "|" + what + "|" + queue
	if _, ok := c.queued[p]; !ok {
		c.queued[p] = struct{}{}
		c.pending = append(c.pending, p)
	}
	c.mu.Unlock()
	signal(c.kick)
}

func (c *crossProcess) receive(payload string) {
	inst, rest, ok := strings.Cut(payload, "|")
	if !ok || inst == c.instance {
		return
	}
	what, queue, ok := strings.Cut(rest, "|")
	if !ok {
		return
	}
	switch what {
	case "changed", "deleted":
		c.hear.change(queue, what == "deleted")
		return
	}
	id, err := uuid.Parse(what)
	if err != nil {
		return
	}
	c.hear.offer(queue, id)
}

// signal wakes whoever waits on ch (capacity 1) without blocking: one
// signal stands for any number sent before it is taken.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
