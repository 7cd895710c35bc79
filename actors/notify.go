package actors

import (
	"context"
	"encoding/base64"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
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
// LISTEN/NOTIFY: commits made here and leases ended here (D12), whose
// announcements mark partitions ready and wake parked pops in the others,
// and queue rows created, reconfigured or deleted here, which make the
// others' queue actors read the row again (a queue deleted and created
// again has a new id). A payload is "instance|partition id|queue" for a
// commit, "instance|partition id/group|queue" for a partition one group may
// claim again (the group in unpadded base64url, which holds no separator),
// "instance|changed|queue" or "instance|deleted|queue" for a row, and
// "instance|hello|" from a process whose LISTEN is now in place.
//
// A process announces only while another listens (peers): it counts the
// listeners every 5 s and when its own LISTEN is in place, and a process it
// hears from is one, so the processes that ran before a new one learn of it
// from its hello rather than at their next count.
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
	peers   atomic.Bool // read without mu: a process alone builds no payload
	heardN  uint64      // payloads heard from other processes
}

// heard is what the other processes' announcements are handed to.
type heard struct {
	// offer: the partition may be claimable again for group, for every
	// group when empty (a commit).
	offer  func(queue string, partition uuid.UUID, group string)
	change func(queue string, deleted bool) // the queue's row changed
}

// newCrossProcess announces through n and hands what it hears to hear.
func newCrossProcess(n Notifier, log *slog.Logger, timeout time.Duration, hear heard) *crossProcess {
	return &crossProcess{n: n, log: log, timeout: timeout, hear: hear, instance: uuid.NewString(),
		recount: make(chan struct{}, 1), queued: map[string]struct{}{}, kick: make(chan struct{}, 1)}
}

func (c *crossProcess) run(ctx context.Context) {
	go c.n.Listen(ctx, c.listening, c.receive)
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
		c.mu.Lock()
		heard := c.heardN
		c.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		n, err := c.n.Listeners(cctx)
		cancel()
		c.mu.Lock()
		// Our own listener is one of them; a process heard from while
		// counting listens, though the count may predate it.
		c.peers.Store(err != nil || n > 1 || c.heardN != heard)
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
func (c *crossProcess) committed(queue string, partition uuid.UUID) { c.freed(queue, partition, "") }

// freed announces that the partition may be claimable again for group (a
// lease ended), or for every group when group is empty (a commit).
func (c *crossProcess) freed(queue string, partition uuid.UUID, group string) {
	if !c.peers.Load() {
		return
	}
	what := partition.String()
	if group != "" {
		what += "/" + base64.RawURLEncoding.EncodeToString([]byte(group))
	}
	c.announce(what, queue)
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
	if !c.peers.Load() {
		return
	}
	c.mu.Lock()
	c.queue(what, queue)
	c.mu.Unlock()
	signal(c.kick)
}

// listening is called each time our LISTEN is in place: count the
// listeners, and say hello to whoever listens already.
func (c *crossProcess) listening() {
	signal(c.recount)
	c.mu.Lock()
	c.queue("hello", "")
	c.mu.Unlock()
	signal(c.kick)
}

// queue adds a payload to pending unless it is there. c.mu is held.
func (c *crossProcess) queue(what, queue string) {
	p := c.instance + "|" + what + "|" + queue
	if _, ok := c.queued[p]; !ok {
		c.queued[p] = struct{}{}
		c.pending = append(c.pending, p)
	}
}

func (c *crossProcess) receive(payload string) {
	inst, rest, ok := strings.Cut(payload, "|")
	if !ok || inst == c.instance {
		return
	}
	c.mu.Lock()
	c.peers.Store(true)
	c.heardN++
	c.mu.Unlock()
	what, queue, ok := strings.Cut(rest, "|")
	if !ok {
		return
	}
	switch what {
	case "hello":
		return
	case "changed", "deleted":
		c.hear.change(queue, what == "deleted")
		return
	}
	pid, g64, forGroup := strings.Cut(what, "/")
	id, err := uuid.Parse(pid)
	if err != nil {
		return
	}
	var group []byte
	if forGroup {
		if group, err = base64.RawURLEncoding.DecodeString(g64); err != nil || len(group) == 0 {
			return
		}
	}
	c.hear.offer(queue, id, string(group))
}

// signal wakes whoever waits on ch (capacity 1) without blocking: one
// signal stands for any number sent before it is taken.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
