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

// crossProcess carries wake-ups between broker processes (D12): commits made
// here are announced over LISTEN/NOTIFY, and announcements from the others
// mark partitions ready and wake parked pops here.
type crossProcess struct {
	n        Notifier
	log      *slog.Logger
	timeout  time.Duration // bounds each statement (Config.RequestTimeout)
	offer    func(queue string, partition uuid.UUID)
	instance string

	mu      sync.Mutex
	pending map[string]struct{}
	kick    chan struct{}
	peers   bool
}

// newCrossProcess announces through n; offer receives the partitions
// announced by the other processes.
func newCrossProcess(n Notifier, log *slog.Logger, timeout time.Duration, offer func(queue string, partition uuid.UUID)) *crossProcess {
	return &crossProcess{n: n, log: log, timeout: timeout, offer: offer, instance: uuid.NewString(),
		pending: map[string]struct{}{}, kick: make(chan struct{}, 1)}
}

func (c *crossProcess) run(ctx context.Context) {
	go c.n.Listen(ctx, func() {}, c.receive)
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
		batch := make([]string, 0, len(c.pending))
		for p := range c.pending {
			batch = append(batch, p)
		}
		c.pending = map[string]struct{}{}
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
		select {
		case <-ctx.Done():
			return
		case <-time.After(peersEvery):
		}
	}
}

// committed announces a commit to (queue, partition).
func (c *crossProcess) committed(queue string, partition uuid.UUID) {
	c.mu.Lock()
	if !c.peers {
		c.mu.Unlock()
		return
	}
	c.pending[c.instance+"|"+partition.String()+"|"+queue] = struct{}{}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *crossProcess) receive(payload string) {
	inst, rest, ok := strings.Cut(payload, "|")
	if !ok || inst == c.instance {
		return
	}
	pid, queue, ok := strings.Cut(rest, "|")
	if !ok {
		return
	}
	id, err := uuid.Parse(pid)
	if err != nil {
		return
	}
	c.offer(queue, id)
}
