package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// PushParams configures the push scenario.
type PushParams struct {
	Connections  int           // concurrent producers, each with its own connection
	Batch        int           // messages per request
	Partitions   int           // requests go round-robin over this many partitions
	PayloadBytes int           // size of each message's JSON payload
	Duration     time.Duration // how long to push
	MaxMessages  int64         // stop after this many messages (0: no limit)
	Encrypt      bool          // queengo: queue configured with encryptionEnabled
}

// Defaults of the push scenario.
const (
	ConnectionsDefault  = 50
	BatchDefault        = 10
	PartitionsDefault   = 10
	PayloadDefault      = 100
	PushDurationDefault = 10 * time.Second
)

func (p PushParams) validate() error {
	switch {
	case p.Connections < 1 || p.Connections > 500:
		return fmt.Errorf("--connections must be 1..500, got %d", p.Connections)
	case p.Batch < 1 || p.Batch > 10000:
		return fmt.Errorf("--batch must be 1..10000, got %d", p.Batch)
	case p.Partitions < 1 || p.Partitions > 10000:
		return fmt.Errorf("--partitions must be 1..10000, got %d", p.Partitions)
	case p.PayloadBytes < 0 || p.PayloadBytes > 1<<20:
		return fmt.Errorf("--payload must be 0..1048576 bytes, got %d", p.PayloadBytes)
	case p.Duration <= 0 && p.MaxMessages <= 0:
		return fmt.Errorf("--duration or --messages must be positive")
	}
	return nil
}

func cmdPush(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	c := addCommon(fs)
	var p PushParams
	fs.IntVar(&p.Connections, "connections", ConnectionsDefault, "concurrent producers (1..500), one connection each")
	fs.IntVar(&p.Batch, "batch", BatchDefault, "messages per request (1, 10, 100, ...)")
	fs.IntVar(&p.Partitions, "partitions", PartitionsDefault, "partitions (1..10000); each request goes to the next one")
	fs.IntVar(&p.PayloadBytes, "payload", PayloadDefault, "payload size in bytes")
	fs.DurationVar(&p.Duration, "duration", PushDurationDefault, "how long to push")
	fs.Int64Var(&p.MaxMessages, "messages", 0, "stop after this many messages (0: run for --duration)")
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
	if p.Encrypt {
		c.Label += encryptLabelSuffix
	}
	return runOne(ctx, c, stdout, p.Connections, func(env *Env, tgt Target) (*Result, error) {
		return runPush(ctx, env, tgt, p)
	})
}

// runPush runs the push scenario against tgt: Connections producers publish
// Batch messages per request, each request to the next partition in turn,
// until Duration passes or MaxMessages are sent. Only the pushing is
// measured; preparing and deleting the queue are not.
func runPush(ctx context.Context, env *Env, tgt Target, p PushParams) (*Result, error) {
	l := Layout{Name: fmt.Sprintf("bench-push-%s-%s-b%d", env.Run, tgt.Name(), p.Batch),
		Partitions: p.Partitions, Batch: p.Batch, Consumers: p.Connections, Encrypt: p.Encrypt}
	if err := tgt.Prepare(ctx, l); err != nil {
		return nil, err
	}
	defer env.cleanup(tgt)
	pubs, err := openPublishers(ctx, tgt, p.Connections)
	if err != nil {
		return nil, err
	}
	defer closeAll(pubs)

	env.logf("push %s: %d connections, batch %d, %d partitions, payload %d B, %s",
		tgt.Name(), p.Connections, p.Batch, p.Partitions, p.PayloadBytes, p.Duration)
	res := &Result{Scenario: "push", Target: tgt.Name(), Endpoint: tgt.Endpoint(), StartedAt: time.Now().UTC(),
		Params: Params{Connections: p.Connections, Batch: p.Batch, Partitions: p.Partitions,
			PayloadBytes: p.PayloadBytes, DurationSec: p.Duration.Seconds()}}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if p.Duration > 0 {
		runCtx, stop = context.WithTimeout(runCtx, p.Duration)
		defer stop()
	}
	lat := NewLatency(p.Connections)
	errs := &Errors{}
	var seq, reqNo, sent, reqs atomic.Int64

	probe := StartProbe(ctx, env.pgFor(tgt), tgt.ServerPID())
	start := time.Now()
	var last int64
	ticker := env.progress(func(elapsed, dt time.Duration) string {
		n := sent.Load()
		iv := lat.Tick()
		line := fmt.Sprintf("push %-8s t=%5.1fs  msg/s=%8.0f  total=%9d  req p50=%6.2fms p99=%6.2fms  errors=%d",
			tgt.Name(), elapsed.Seconds(), float64(n-last)/dt.Seconds(), n, iv.P50Ms, iv.P99Ms, errs.Count())
		last = n
		return line + rssNote(probe)
	})

	var wg sync.WaitGroup
	for w := 0; w < p.Connections; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, p.Batch*(p.PayloadBytes+64))
			msgs := make([]Message, p.Batch)
			for runCtx.Err() == nil {
				first := seq.Add(int64(p.Batch)) - int64(p.Batch)
				if p.MaxMessages > 0 && first >= p.MaxMessages {
					return
				}
				part := int((reqNo.Add(1) - 1) % int64(p.Partitions))
				buf = buf[:0]
				now := time.Now().UnixNano()
				for i := range msgs {
					s := len(buf)
					buf = appendPayload(buf, now, first+int64(i), p.PayloadBytes)
					msgs[i] = Message{Seq: first + int64(i), Partition: part, Payload: buf[s:]}
				}
				t0 := time.Now()
				err := pubs[w].Publish(ctx, msgs)
				reqs.Add(1)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(err)
					}
					continue
				}
				lat.Record(w, time.Since(t0))
				sent.Add(int64(len(msgs)))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	ticker.stop()

	res.Seconds = elapsed.Seconds()
	res.Messages = sent.Load()
	res.MsgPerSec = float64(res.Messages) / elapsed.Seconds()
	res.Requests = reqs.Load()
	res.Resources = probe.Stop(ctx, res.Messages)
	res.Latency = lat.Total()
	res.Errors, res.ErrorKinds, res.ErrorSamples = errs.Count(), errs.Kinds(), errs.Samples()
	res.Interrupted = ctx.Err() != nil
	return res, nil
}

// openPublishers opens n publishers in parallel.
func openPublishers(ctx context.Context, tgt Target, n int) ([]Publisher, error) {
	pubs := make([]Publisher, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range pubs {
		wg.Add(1)
		go func() { defer wg.Done(); pubs[i], errs[i] = tgt.NewPublisher(ctx, i) }()
	}
	wg.Wait()
	var opened []Publisher
	for i, p := range pubs {
		if errs[i] != nil {
			closeAll(opened)
			return nil, errs[i]
		}
		opened = append(opened, p)
	}
	return pubs, nil
}
