package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// E2EParams configures the end-to-end scenario.
type E2EParams struct {
	Producers     int
	Consumers     int
	Batch         int // messages per push; consumers pop up to ConsumeBatch
	ConsumeBatch  int
	Partitions    int
	PopPartitions int
	PayloadBytes  int
	Rate          float64       // offered messages per second, all producers together
	Duration      time.Duration // how long to produce
	Warmup        time.Duration // the first part of Duration, left out of the latencies
	PopTimeout    time.Duration
	Drain         time.Duration // how long consumers may take after producing stops
}

func cmdE2E(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("e2e", flag.ContinueOnError)
	c := addCommon(fs)
	var p E2EParams
	fs.IntVar(&p.Producers, "producers", 0, "concurrent producers (0: enough for --rate, see e2eProducers)")
	fs.IntVar(&p.Consumers, "consumers", 10, "concurrent consumers (one group, queue mode on queengo)")
	fs.IntVar(&p.Batch, "batch", 1, "messages per push")
	fs.IntVar(&p.ConsumeBatch, "consume-batch", 100, "messages per pop at most")
	fs.IntVar(&p.Partitions, "partitions", ConsumePartsDefault, "partitions, round-robin per push")
	fs.IntVar(&p.PopPartitions, "pop-partitions", 1, "queengo: partitions one pop may claim (0: no cap)")
	fs.IntVar(&p.PayloadBytes, "payload", PayloadDefault, "payload size in bytes")
	fs.Float64Var(&p.Rate, "rate", 5000, "offered load in messages per second (all producers together)")
	fs.DurationVar(&p.Duration, "duration", 10*time.Second, "how long to produce")
	fs.DurationVar(&p.Warmup, "warmup", e2eWarmupDefault, "the first part of --duration whose messages count as sent and delivered but not in the latencies (default: 3s, at most a quarter of --duration)")
	fs.DurationVar(&p.PopTimeout, "pop-timeout", PopTimeoutDefault, "long-poll timeout of one pop")
	fs.DurationVar(&p.Drain, "drain", 10*time.Second, "how long consumers may take after producing stops")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	warmupSet := false
	fs.Visit(func(f *flag.Flag) { warmupSet = warmupSet || f.Name == "warmup" })
	if !warmupSet {
		p.Warmup = min(p.Warmup, p.Duration/4) // a short run keeps most of its messages
	}
	if p.Producers == 0 && p.Batch > 0 && p.Rate > 0 {
		p.Producers = e2eProducers(p.Rate, p.Batch)
	}
	switch {
	case p.Producers < 1 || p.Producers > 500 || p.Consumers < 1 || p.Consumers > 500:
		return fmt.Errorf("--producers and --consumers must be 1..500")
	case p.Batch < 1 || p.ConsumeBatch < 1 || p.Partitions < 1:
		return fmt.Errorf("--batch, --consume-batch and --partitions must be positive")
	case p.Rate <= 0 || p.Duration <= 0:
		return fmt.Errorf("--rate and --duration must be positive")
	case p.Warmup < 0 || p.Warmup >= p.Duration:
		return fmt.Errorf("--warmup must be at least 0 and shorter than --duration")
	}
	return runOne(ctx, c, stdout, p.Producers+p.Consumers, func(env *Env, tgt Target) (*Result, error) {
		return runE2E(ctx, env, tgt, p)
	})
}

// e2eWarmupDefault is the default warm-up. The first second of a run on a
// fresh queue creates its partitions and the group's cursors, and the
// consumers' pops meet partitions nobody has claimed yet: at 500 msg/s
// offered on 100 partitions, delivery p99 was 633 ms in that second and
// 12-22 ms in every later one (docs/performance.md "The dated record"), so a 12 s run's p99 was
// the warm-up's. 3 s also covers the settling at 5,000 msg/s.
const e2eWarmupDefault = 3 * time.Second

// e2ePushBudget is the push latency the default producer count allows
// for: each producer sends one batch per P*batch/rate, so a producer whose
// pushes take longer than that falls behind its schedule and the offered
// rate is not sent. With 10 producers at batch 1, 2,000 msg/s left each 5 ms
// per push and the run measured the producers' lag, not the broker
// (docs/performance.md "The dated record", 2026-12-03). 50 ms is several times the push p99 at
// these rates on the reference machine.
const e2ePushBudget = 50 * time.Millisecond

// e2eProducers is the default producer count for an offered rate: enough
// that each producer's interval is at least e2ePushBudget, at least 10 and
// at most 500 (one connection each).
func e2eProducers(rate float64, batch int) int {
	n := int(math.Ceil(rate / float64(batch) * e2ePushBudget.Seconds()))
	return min(max(n, 10), 500)
}

// runE2E runs producers and consumers together. Producers send on a fixed
// schedule (open loop): producer i sends its k-th batch at start + (i/P +
// k) * interval, and the payload carries that scheduled time, not the
// moment the request actually left. A server that falls behind therefore
// shows its backlog as delivery latency instead of silently lowering the
// offered rate (coordinated omission). Delivery latency is the consumer's
// clock when the pop answered minus the scheduled send time. Messages
// scheduled in the warm-up (p.Warmup) are sent, delivered and checked like
// the others but leave the delivery and push latencies out.
func runE2E(ctx context.Context, env *Env, tgt Target, p E2EParams) (*Result, error) {
	l := Layout{Name: fmt.Sprintf("bench-e2e-%s-%s-b%d", env.Run, tgt.Name(), p.Batch),
		Partitions: p.Partitions, Groups: 1, Batch: max(p.Batch, p.ConsumeBatch), Consumers: p.Consumers,
		PopPartitions: p.PopPartitions, PopTimeout: p.PopTimeout}
	pubs, cons, done, err := openPipeline(ctx, env, tgt, l, p.Producers)
	if err != nil {
		return nil, err
	}
	defer done()

	interval := time.Duration(float64(p.Producers*p.Batch) / p.Rate * float64(time.Second))
	env.logf("e2e %s: %d producers x batch %d every %s (%.0f msg/s offered), %d consumers, %s",
		tgt.Name(), p.Producers, p.Batch, interval, p.Rate, p.Consumers, p.Duration)
	res := &Result{Scenario: "e2e", Target: tgt.Name(), Endpoint: tgt.Endpoint(), StartedAt: time.Now().UTC(),
		Params: Params{Connections: p.Producers, Consumers: p.Consumers, Batch: p.Batch, Partitions: p.Partitions,
			PopPartitions: p.PopPartitions, PayloadBytes: p.PayloadBytes, DurationSec: p.Duration.Seconds(), WarmupSec: p.Warmup.Seconds(), Rate: p.Rate}}

	prodCtx, stopProd := context.WithTimeout(ctx, p.Duration)
	defer stopProd()
	consCtx, stopCons := context.WithCancel(ctx)
	defer stopCons()
	pushLat := NewLatency(p.Producers)
	recvLat := NewLatency(p.Consumers)
	delivery := NewLatency(p.Consumers)
	errs := &Errors{}
	seen := NewSeqSet(int64(p.Rate * p.Duration.Seconds() * 1.1))
	var seq, sent, received, reqs, bad atomic.Int64

	probe := StartProbe(ctx, env.pgFor(tgt), tgt.ServerPID())
	start := time.Now()
	measureFrom := start.Add(p.Warmup).UnixNano()
	var lastSent, lastRecv int64
	tk := env.progress(func(elapsed, dt time.Duration) string {
		s, r := sent.Load(), received.Load()
		d := delivery.Tick()
		pushLat.Tick()
		line := fmt.Sprintf("e2e %-8s t=%5.1fs  sent/s=%7.0f  recv/s=%7.0f  delivery p50=%6.2fms p99=%7.2fms max=%7.2fms  errors=%d",
			tgt.Name(), elapsed.Seconds(), float64(s-lastSent)/dt.Seconds(), float64(r-lastRecv)/dt.Seconds(),
			d.P50Ms, d.P99Ms, d.MaxMs, errs.Count())
		lastSent, lastRecv = s, r
		return line + rssNote(probe)
	})

	var cwg sync.WaitGroup
	for i, c := range cons {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			fn := func(payload []byte) {
				now := time.Now().UnixNano()
				ts, s, ok := parsePayload(payload)
				if !ok {
					bad.Add(1)
					return
				}
				if !seen.Add(s) && ts >= measureFrom {
					delivery.Record(i, time.Duration(now-ts))
				}
			}
			for consCtx.Err() == nil {
				t0 := time.Now()
				n, err := c.Receive(consCtx, p.ConsumeBatch, fn)
				if n > 0 {
					recvLat.Record(i, time.Since(t0))
					received.Add(int64(n))
				}
				if err != nil && consCtx.Err() == nil {
					errs.Add(err)
				}
			}
		}()
	}

	var pwg sync.WaitGroup
	wallStart := time.Now()
	for w, pub := range pubs {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			msgs := make([]Message, p.Batch)
			buf := make([]byte, 0, p.Batch*(p.PayloadBytes+64))
			offset := time.Duration(int64(interval) * int64(w) / int64(p.Producers))
			for k := int64(0); ; k++ {
				at := wallStart.Add(offset + time.Duration(k)*interval)
				if wait := time.Until(at); wait > 0 {
					select {
					case <-time.After(wait):
					case <-prodCtx.Done():
					}
				}
				if prodCtx.Err() != nil {
					return
				}
				first := seq.Add(int64(p.Batch)) - int64(p.Batch)
				part := int((first / int64(p.Batch)) % int64(p.Partitions))
				buf = buf[:0]
				for i := range msgs {
					s := len(buf)
					buf = appendPayload(buf, at.UnixNano(), first+int64(i), p.PayloadBytes)
					msgs[i] = Message{Seq: first + int64(i), Partition: part, Payload: buf[s:]}
				}
				t0 := time.Now()
				err := pub.Publish(ctx, msgs)
				reqs.Add(1)
				if err != nil {
					errs.Add(err)
					continue
				}
				if at.UnixNano() >= measureFrom {
					pushLat.Record(w, time.Since(t0))
				}
				sent.Add(int64(len(msgs)))
			}
		}()
	}
	pwg.Wait()
	produced := time.Since(start)
	total := sent.Load()
	drainEnd := time.Now().Add(p.Drain)
	for time.Now().Before(drainEnd) && ctx.Err() == nil {
		if u, _ := seen.Counts(); u >= total {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	end := time.Now()
	stopCons()
	cwg.Wait()
	tk.stop()

	unique, dups := seen.Counts()
	elapsed := end.Sub(start)
	res.Seconds = elapsed.Seconds()
	res.Messages = received.Load()
	res.MsgPerSec = float64(res.Messages) / elapsed.Seconds()
	res.Requests = reqs.Load()
	res.Resources = probe.Stop(ctx, res.Messages)
	res.Latency = pushLat.Total()
	res.Latencies = map[string]LatencySummary{"delivery": delivery.Total(), "push": res.Latency, "receive": recvLat.Total()}
	if pl, ok := tgt.(phaseLatencies); ok {
		for name, l := range pl.PhaseLatencies() {
			res.Latencies[name] = l.Total()
		}
	}
	res.Errors, res.ErrorKinds, res.ErrorSamples = errs.Count(), errs.Kinds(), errs.Samples()
	res.Interrupted = ctx.Err() != nil
	res.metric("sent", float64(total))
	res.metric("sent_per_sec", float64(total)/produced.Seconds())
	res.metric("unique", float64(unique))
	res.metric("redelivered", float64(dups))
	res.metric("lost", float64(total-unique))
	if total > unique {
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d messages not delivered within --drain %s", total-unique, total, p.Drain))
	}
	if achieved := float64(total) / produced.Seconds(); achieved < 0.95*p.Rate {
		res.Notes = append(res.Notes, fmt.Sprintf("producers reached only %.0f of %.0f msg/s offered", achieved, p.Rate))
	}
	return res, nil
}
