package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ConsumeParams configures the consume scenario.
type ConsumeParams struct {
	Messages      int64         // pre-filled messages; each group drains all of them
	Consumers     int           // consumers per group
	Batch         int           // messages per pop (and per ack)
	Partitions    int           // partitions the pre-fill spreads over
	PopPartitions int           // queengo: partitions one pop may claim (0: no cap)
	Pin           bool          // Queen targets: each consumer pops one partition by the single-partition route
	Groups        int           // consumer groups (fan-out)
	PayloadBytes  int           // payload size
	PopTimeout    time.Duration // long-poll timeout of one pop
	MaxDuration   time.Duration // stop draining after this long even if not drained
	StallTimeout  time.Duration // stop if nothing arrived for this long
	PrefillConns  int           // producers used for the (unmeasured) pre-fill
	PrefillBatch  int           // messages per pre-fill request
	Encrypt       bool          // queengo: queue configured with encryptionEnabled
}

// Defaults of the consume scenario.
const (
	ConsumeMessagesDefault = 50000
	ConsumersDefault       = 10
	ConsumePartsDefault    = 100
	PopTimeoutDefault      = time.Second
	ConsumeMaxDefault      = 60 * time.Second
	StallTimeoutDefault    = 10 * time.Second
	PrefillConnsDefault    = 8
	PrefillBatchDefault    = 100
)

func (p ConsumeParams) validate() error {
	switch {
	case p.Messages < 1:
		return fmt.Errorf("--messages must be positive")
	case p.Consumers < 1 || p.Consumers > 500:
		return fmt.Errorf("--consumers must be 1..500, got %d", p.Consumers)
	case p.Batch < 1 || p.Batch > 10000:
		return fmt.Errorf("--batch must be 1..10000, got %d", p.Batch)
	case p.Partitions < 1 || p.Partitions > 10000:
		return fmt.Errorf("--partitions must be 1..10000, got %d", p.Partitions)
	case p.Groups < 1 || p.Groups > 100:
		return fmt.Errorf("--groups must be 1..100, got %d", p.Groups)
	case p.PopTimeout <= 0 || p.MaxDuration <= 0:
		return fmt.Errorf("--pop-timeout and --duration must be positive")
	case p.Pin && p.Consumers < p.Partitions:
		return fmt.Errorf("--pin needs a consumer per partition: --consumers %d < --partitions %d", p.Consumers, p.Partitions)
	}
	return nil
}

func addConsumeFlags(fs *flag.FlagSet, p *ConsumeParams) {
	fs.Int64Var(&p.Messages, "messages", ConsumeMessagesDefault, "messages to pre-fill; every group drains them all")
	fs.IntVar(&p.Consumers, "consumers", ConsumersDefault, "consumers per group, one connection each")
	fs.IntVar(&p.Batch, "batch", BatchDefault, "messages per pop and per batch ack")
	fs.IntVar(&p.Partitions, "partitions", ConsumePartsDefault, "partitions the pre-fill spreads the messages over")
	fs.IntVar(&p.PopPartitions, "pop-partitions", 1, "queengo: partitions one pop may claim (pop parameter partitions; 0: no cap)")
	fs.BoolVar(&p.Pin, "pin", false, "Queen targets: consumer k of a group pops only partition k mod --partitions, by the single-partition route")
	fs.IntVar(&p.Groups, "groups", 1, "consumer groups over the same data (1 = queue mode)")
	fs.IntVar(&p.PayloadBytes, "payload", PayloadDefault, "payload size in bytes")
	fs.DurationVar(&p.PopTimeout, "pop-timeout", PopTimeoutDefault, "long-poll timeout of one pop (wait=true&timeout=...)")
	fs.DurationVar(&p.MaxDuration, "duration", ConsumeMaxDefault, "stop draining after this long")
	fs.DurationVar(&p.StallTimeout, "stall-timeout", StallTimeoutDefault, "stop when nothing arrived for this long")
	fs.IntVar(&p.PrefillConns, "prefill-connections", PrefillConnsDefault, "producers for the pre-fill (not measured)")
	fs.IntVar(&p.PrefillBatch, "prefill-batch", PrefillBatchDefault, "messages per pre-fill request")
}

func cmdConsume(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	c := addCommon(fs)
	var p ConsumeParams
	addConsumeFlags(fs, &p)
	fs.BoolVar(&p.Encrypt, "encrypt", false, "queengo: configure the queue with encryptionEnabled (broker needs QUEEN_ENCRYPTION_KEY); label gets "+encryptLabelSuffix)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := p.validate(); err != nil {
		return err
	}
	if err := checkQueenOnly(p.Encrypt, "--encrypt", c.Target); err != nil {
		return err
	}
	if err := checkQueenOnly(p.Pin, "--pin", c.Target); err != nil {
		return err
	}
	if p.Encrypt {
		c.Label += encryptLabelSuffix
	}
	return runOne(ctx, c, stdout, p.Consumers*p.Groups+p.PrefillConns, func(env *Env, tgt Target) (*Result, error) {
		return runConsume(ctx, env, tgt, p)
	})
}

// prefill publishes n messages (seq 0..n-1) with conns producers, batch
// messages per request, each request to the next partition. It is not
// measured.
func prefill(ctx context.Context, env *Env, tgt Target, n int64, conns, batch, partitions, payload int) error {
	pubs, err := openPublishers(ctx, tgt, conns)
	if err != nil {
		return err
	}
	defer closeAll(pubs)
	var next, reqNo, done atomic.Int64
	errs := &Errors{}
	var last int64
	tk := env.progress(func(elapsed, dt time.Duration) string {
		d := done.Load()
		line := fmt.Sprintf("prefill %-8s t=%5.1fs  %d/%d  msg/s=%.0f", tgt.Name(), elapsed.Seconds(), d, n,
			float64(d-last)/dt.Seconds())
		last = d
		return line
	})
	defer tk.stop()
	var wg sync.WaitGroup
	for w := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for ctx.Err() == nil {
				first := next.Add(int64(batch)) - int64(batch)
				if first >= n {
					return
				}
				k := min(int64(batch), n-first)
				part := int((reqNo.Add(1) - 1) % int64(partitions))
				msgs := make([]Message, k)
				buf = buf[:0]
				now := time.Now().UnixNano()
				for i := range msgs {
					s := len(buf)
					buf = appendPayload(buf, now, first+int64(i), payload)
					msgs[i] = Message{Seq: first + int64(i), Partition: part, Payload: buf[s:]}
				}
				// A pre-fill that loses messages would make the drain never
				// finish: retry a failed batch a few times (the transaction
				// ids make a retried push idempotent on queengo).
				var err error
				for try := 0; try < 3; try++ {
					if err = pubs[w].Publish(ctx, msgs); err == nil {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				if err != nil {
					errs.Add(err)
					return
				}
				done.Add(k)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errs.Count() > 0 {
		return fmt.Errorf("error pre-filling: %s (%s)", errs.String(), errs.Samples()[0])
	}
	return nil
}

// groupState tracks one consumer group's drain.
type groupState struct {
	seen     *SeqSet
	doneOnce sync.Once
	done     chan struct{}
	at       time.Time // when the group had every message
}

// runConsume pre-fills Messages messages, then runs Consumers consumers in
// each of Groups groups; each pops up to Batch messages with a long poll and
// acknowledges them with one batch ack, until every group has received
// every message (counted by distinct sequence number, so redeliveries do
// not end a drain early), MaxDuration passes, or nothing arrives for
// StallTimeout. The drain alone is measured.
func runConsume(ctx context.Context, env *Env, tgt Target, p ConsumeParams) (*Result, error) {
	l := Layout{Name: fmt.Sprintf("bench-consume-%s-%s-b%d-g%d", env.Run, tgt.Name(), p.Batch, p.Groups),
		Partitions: p.Partitions, Groups: p.Groups, Batch: p.Batch, Consumers: p.Consumers,
		PopPartitions: p.PopPartitions, Pin: p.Pin, PopTimeout: p.PopTimeout, Encrypt: p.Encrypt}
	if err := tgt.Prepare(ctx, l); err != nil {
		return nil, err
	}
	defer env.cleanup(tgt)
	env.logf("consume %s: pre-filling %d messages over %d partitions", tgt.Name(), p.Messages, p.Partitions)
	if err := prefill(ctx, env, tgt, p.Messages, max(p.PrefillConns, 1), max(p.PrefillBatch, 1), p.Partitions, p.PayloadBytes); err != nil {
		return nil, err
	}

	consumers, err := openConsumers(ctx, tgt, p.Groups, p.Consumers)
	if err != nil {
		return nil, err
	}
	defer closeAll(consumers)

	env.logf("consume %s: %d groups x %d consumers, batch %d, pop-partitions %d, pin %v", tgt.Name(),
		p.Groups, p.Consumers, p.Batch, p.PopPartitions, p.Pin)
	res := &Result{Scenario: "consume", Target: tgt.Name(), Endpoint: tgt.Endpoint(), StartedAt: time.Now().UTC(),
		Params: Params{Consumers: p.Consumers, Batch: p.Batch, Partitions: p.Partitions, PopPartitions: p.PopPartitions,
			Pin: p.Pin, Groups: p.Groups, PayloadBytes: p.PayloadBytes, Messages: p.Messages}}
	groups := make([]*groupState, p.Groups)
	for g := range groups {
		groups[g] = &groupState{seen: NewSeqSet(p.Messages), done: make(chan struct{})}
	}
	runCtx, stop := context.WithTimeout(ctx, p.MaxDuration)
	defer stop()
	lat := NewLatency(len(consumers))
	errs := &Errors{}
	var received, reqs, empty, badPayload atomic.Int64
	var stalled atomic.Bool

	probe := StartProbe(ctx, env.pgFor(tgt), tgt.ServerPID())
	start := time.Now()
	var last int64
	quietSince := time.Now()
	tk := env.progress(func(elapsed, dt time.Duration) string {
		n := received.Load()
		if n != last {
			quietSince = time.Now()
		} else if time.Since(quietSince) > p.StallTimeout {
			stalled.Store(true)
			stop()
		}
		iv := lat.Tick()
		line := fmt.Sprintf("consume %-8s t=%5.1fs  msg/s=%8.0f  total=%9d/%d  req p50=%6.2fms p99=%6.2fms  empty=%d errors=%d",
			tgt.Name(), elapsed.Seconds(), float64(n-last)/dt.Seconds(), n, p.Messages*int64(p.Groups),
			iv.P50Ms, iv.P99Ms, empty.Load(), errs.Count())
		last = n
		return line + rssNote(probe)
	})

	var wg sync.WaitGroup
	for i, c := range consumers {
		gs := groups[i/p.Consumers]
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn := func(payload []byte) {
				_, seq, ok := parsePayload(payload)
				if !ok {
					badPayload.Add(1)
					return
				}
				gs.seen.Add(seq)
			}
			for runCtx.Err() == nil {
				select {
				case <-gs.done:
					return
				default:
				}
				t0 := time.Now()
				n, err := c.Receive(runCtx, p.Batch, fn)
				d := time.Since(t0)
				reqs.Add(1)
				if n > 0 {
					lat.Record(i, d)
					received.Add(int64(n))
				}
				if err != nil && runCtx.Err() == nil {
					errs.Add(err)
				}
				if n == 0 && err == nil {
					empty.Add(1)
				}
				if u, _ := gs.seen.Counts(); u >= p.Messages {
					gs.doneOnce.Do(func() { gs.at = time.Now(); close(gs.done) })
				}
			}
		}()
	}
	wg.Wait()
	end := time.Now()
	tk.stop()

	drained := true
	var lastDone time.Time
	var unique, dups int64
	for _, gs := range groups {
		u, d := gs.seen.Counts()
		unique += u
		dups += d
		if gs.at.IsZero() {
			drained = false
		} else if gs.at.After(lastDone) {
			lastDone = gs.at
		}
	}
	if drained {
		end = lastDone
	}
	elapsed := end.Sub(start)
	res.Seconds = elapsed.Seconds()
	res.Messages = received.Load()
	res.MsgPerSec = float64(res.Messages) / elapsed.Seconds()
	res.Requests = reqs.Load()
	res.Resources = probe.Stop(ctx, res.Messages)
	res.Latency = lat.Total()
	res.Errors, res.ErrorKinds, res.ErrorSamples = errs.Count(), errs.Kinds(), errs.Samples()
	res.Interrupted = ctx.Err() != nil
	if pl, ok := tgt.(phaseLatencies); ok {
		res.Latencies = map[string]LatencySummary{}
		for name, l := range pl.PhaseLatencies() {
			res.Latencies[name] = l.Total()
		}
	}
	res.metric("unique", float64(unique))
	res.metric("redelivered", float64(dups))
	res.metric("empty_polls", float64(empty.Load()))
	res.metric("drained", b2f(drained))
	if n := badPayload.Load(); n > 0 {
		res.metric("unparseable_payloads", float64(n))
		res.Notes = append(res.Notes, fmt.Sprintf("%d payloads came back without ts/seq", n))
	}
	if !drained {
		why := "--duration passed"
		if stalled.Load() {
			why = fmt.Sprintf("nothing arrived for %s", p.StallTimeout)
		}
		if res.Interrupted {
			why = "interrupted"
		}
		res.Notes = append(res.Notes, fmt.Sprintf("not drained (%s): %d of %d distinct deliveries", why,
			unique, p.Messages*int64(p.Groups)))
	}
	return res, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// openPipeline prepares layout l on tgt and opens producers publishers and
// l.Consumers consumers of one group, for the scenarios that push and
// consume at once; done closes both and removes the layout.
func openPipeline(ctx context.Context, env *Env, tgt Target, l Layout, producers int) (pubs []Publisher, cons []Consumer, done func(), err error) {
	if err := tgt.Prepare(ctx, l); err != nil {
		return nil, nil, nil, err
	}
	if pubs, err = openPublishers(ctx, tgt, producers); err != nil {
		env.cleanup(tgt)
		return nil, nil, nil, err
	}
	if cons, err = openConsumers(ctx, tgt, 1, l.Consumers); err != nil {
		closeAll(pubs)
		env.cleanup(tgt)
		return nil, nil, nil, err
	}
	return pubs, cons, func() {
		closeAll(cons)
		closeAll(pubs)
		env.cleanup(tgt)
	}, nil
}

// openConsumers opens perGroup consumers for each of groups consumer
// groups, one after another; consumer i is in group i/perGroup. On a
// failure it closes those it opened.
func openConsumers(ctx context.Context, tgt Target, groups, perGroup int) ([]Consumer, error) {
	cons := make([]Consumer, groups*perGroup)
	for i := range cons {
		c, err := tgt.NewConsumer(ctx, i/perGroup, i)
		if err != nil {
			closeAll(cons[:i])
			return nil, err
		}
		cons[i] = c
	}
	return cons, nil
}
