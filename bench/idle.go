package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queengo/queengo/http/client"
)

// IdleParams configures the idle scenario.
type IdleParams struct {
	Polls       int           // parked long polls
	Duration    time.Duration // how long to hold them
	PollTimeout time.Duration // timeout of one long poll; a poll that times out re-parks at once
	Ramp        int           // new polls per second while ramping up
	Queues      int           // polls spread round-robin over this many queues
	Partitions  int           // > 0: poll k pops partition k mod Partitions of its queue by the single-partition route
	PushRate    float64       // messages per second pushed while the polls are held, round-robin over the partitions
}

func cmdIdle(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	c := addCommon(fs)
	var p IdleParams
	fs.IntVar(&p.Polls, "polls", 1000, "parked long polls (up to 10000), one connection each")
	fs.DurationVar(&p.Duration, "duration", 60*time.Second, "how long to hold them after the ramp-up")
	fs.DurationVar(&p.PollTimeout, "poll-timeout", 30*time.Second, "timeout of one long poll; it re-parks when it expires")
	fs.IntVar(&p.Ramp, "ramp", 2000, "new polls per second while ramping up (a burst of connects overflows the listen backlog)")
	fs.IntVar(&p.Queues, "queues", 1, "queues the polls are spread over")
	fs.IntVar(&p.Partitions, "partitions", 0, "poll k pops partition k mod this of its queue by the single-partition route (0: the wildcard route)")
	fs.Float64Var(&p.PushRate, "push-rate", 0, "messages per second pushed while the polls are held, round-robin over the partitions (0: none)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if p.Polls < 1 || p.Polls > 20000 || p.Duration <= 0 || p.PollTimeout < time.Second || p.Ramp < 1 || p.Queues < 1 ||
		p.Partitions < 0 || p.PushRate < 0 {
		return fmt.Errorf("need 1 <= --polls <= 20000, --duration > 0, --poll-timeout >= 1s, --ramp >= 1, --queues >= 1, --partitions >= 0, --push-rate >= 0")
	}
	env := newEnv(ctx, c, stdout)
	tgt, err := newQueenTarget(c.Label, c.URL, p.Polls+4, c.Timeout, c.BrokerPID)
	if err != nil {
		return err
	}
	res, err := runIdle(ctx, env, tgt, p)
	if res != nil {
		err = joinErr(err, env.finish(res))
	}
	return err
}

// runIdle parks Polls long polls (wait=true) on empty queues and holds them
// for Duration, sampling every --interval: the broker's RSS, its goroutines
// (go_goroutines from /metrics/prometheus, if exposed), the PostgreSQL
// connections of the broker's database (all, and busy ones), and the
// latency of GET /health, which shows whether the broker still answers.
// With Partitions, the polls are pinned to partitions that exist (each was
// created by a message, taken and acked before the polls start). Without a
// PushRate nothing is pushed, so every poll should end in a 204 at its
// timeout; one that answers sooner counts as an early answer. With one,
// the messages pushed while the polls are held are delivered to them and
// acked.
func runIdle(ctx context.Context, env *Env, tgt *queenTarget, p IdleParams) (*Result, error) {
	queues := make([]string, p.Queues)
	for i := range queues {
		queues[i] = fmt.Sprintf("bench-idle-%s-%d", env.Run, i)
	}
	if err := tgt.Prepare(ctx, Layout{Name: queues[0]}); err != nil {
		return nil, err
	}
	defer func() {
		if env.C.Keep {
			return
		}
		for _, q := range queues {
			_ = tgt.client.DeleteQueue(q)
		}
	}()
	cl := tgt.client
	if err := createPartitions(cl, queues, p.Partitions); err != nil {
		return nil, err
	}
	res := &Result{Scenario: "idle", Target: tgt.Name(), Endpoint: tgt.Endpoint(), StartedAt: time.Now().UTC(),
		Params: Params{Count: p.Polls, DurationSec: p.Duration.Seconds(), Partitions: p.Partitions, Rate: p.PushRate}}
	g0, gOK := cl.Goroutines()
	probe := StartProbe(ctx, env.pgFor(tgt), tgt.ServerPID())
	rss0 := probe.RSS()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errs := &Errors{}
	health := NewLatency(1)
	var parked, early, answered, pushed, delivered atomic.Int64
	var rampDone atomic.Bool
	var mu sync.Mutex
	parkedMin, parkedMax := int64(-1), int64(0)
	gMax, pgMax, busyMax := g0, 0, 0
	start := time.Now()
	// The polls are held for Duration after the last one has been started.
	// The deadline is planned from the ramp rate and moved later if the
	// ramp-up took longer than planned.
	var deadlineNs atomic.Int64
	deadlineNs.Store(start.Add(time.Duration(float64(p.Polls)/float64(p.Ramp)*float64(time.Second)) + p.Duration).UnixNano())
	deadline := func() time.Time { return time.Unix(0, deadlineNs.Load()) }

	tk := env.progress(func(elapsed, dt time.Duration) string {
		// /health is timed only while the polls are parked; at the deadline
		// they all answer at once, which is a different measurement.
		holding := time.Until(deadline()) > time.Second
		t0 := time.Now()
		if err := cl.Health(); err != nil {
			errs.Add(err)
		} else if holding {
			health.Record(0, time.Since(t0))
		}
		n := parked.Load()
		g, ok := cl.Goroutines()
		total, busy := -1, -1
		if env.PG != nil {
			total, busy, _ = env.PG.Connections(ctx)
		}
		mu.Lock()
		parkedMax = max(parkedMax, n)
		// The minimum counts only while every poll should be parked: after the
		// ramp-up and before the final polls start to end at the deadline.
		if rampDone.Load() && holding && (parkedMin < 0 || n < parkedMin) {
			parkedMin = n
		}
		if ok {
			gMax = max(gMax, g)
		}
		pgMax, busyMax = max(pgMax, total), max(busyMax, busy)
		mu.Unlock()
		line := fmt.Sprintf("idle %-8s t=%5.1fs  parked=%5d  rss=%.0fMB  goroutines=%s  pg conns=%d busy=%d  health p99=%.2fms  early=%d errors=%d",
			tgt.Name(), elapsed.Seconds(), n, float64(probe.RSS())/(1<<20), optInt(g, ok), total, busy,
			health.Tick().P99Ms, early.Load(), errs.Count())
		return line
	})

	var wg sync.WaitGroup
	rampEvery := time.Second / time.Duration(p.Ramp)
	for i := 0; i < p.Polls && runCtx.Err() == nil; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := queues[i%len(queues)]
			query := client.PopQuery{Batch: 1, Wait: true}
			if p.Partitions > 0 {
				query.Partition = fmt.Sprintf("p%d", i%p.Partitions)
			}
			var buf []byte
			for runCtx.Err() == nil {
				remaining := time.Until(deadline())
				if remaining < 500*time.Millisecond {
					return
				}
				query.Timeout = min(p.PollTimeout, remaining)
				t0 := time.Now()
				parked.Add(1)
				r, err := cl.Pop(q, query)
				parked.Add(-1)
				answered.Add(1)
				switch {
				case err != nil:
					if runCtx.Err() == nil {
						errs.Add(err)
						time.Sleep(100 * time.Millisecond)
					}
				case len(r.Acks) > 0:
					delivered.Add(int64(len(r.Acks)))
					if buf, err = cl.AckBatch(buf, "", r.Acks); err != nil {
						errs.Add(err)
					}
				case time.Since(t0) < query.Timeout-500*time.Millisecond:
					early.Add(1)
				}
			}
		}()
		// Pace by the schedule, not by sleeping a fixed gap: a sleep of
		// 500µs takes a millisecond or more, which would halve the rate.
		if ahead := time.Until(start.Add(time.Duration(i+1) * rampEvery)); ahead > time.Millisecond {
			time.Sleep(ahead)
		}
	}
	if late := time.Now().Add(p.Duration); late.After(deadline()) {
		deadlineNs.Store(late.UnixNano())
	}
	rampDone.Store(true)
	env.logf("idle %s: %d polls parked after %.1fs; holding for %s", tgt.Name(), p.Polls, time.Since(start).Seconds(), p.Duration)
	if p.PushRate > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trickle(runCtx, cl, queues, max(p.Partitions, 1), p.PushRate, deadline, &pushed, errs)
		}()
	}
	wg.Wait()
	tk.stop()

	res.Seconds = time.Since(start).Seconds()
	res.Requests = answered.Load()
	res.Resources = probe.Stop(ctx, 0)
	res.Latencies = map[string]LatencySummary{"health": health.Total()}
	res.Errors, res.ErrorKinds, res.ErrorSamples = errs.Count(), errs.Kinds(), errs.Samples()
	res.Interrupted = ctx.Err() != nil
	mu.Lock()
	defer mu.Unlock()
	res.metric("parked_max", float64(parkedMax))
	res.metric("parked_min", float64(max(parkedMin, 0)))
	res.metric("early_answers", float64(early.Load()))
	if p.PushRate > 0 {
		res.metric("pushed", float64(pushed.Load()))
	}
	if p.PushRate > 0 || delivered.Load() > 0 { // without pushes, a message delivered is a finding
		res.metric("delivered", float64(delivered.Load()))
	}
	if res.Resources.BrokerPeakRSSBytes != nil && rss0 > 0 {
		res.metric("rss_kb_per_poll", float64(*res.Resources.BrokerPeakRSSBytes-rss0)/1024/float64(p.Polls))
	}
	if gOK {
		res.metric("goroutines_before", float64(g0))
		res.metric("goroutines_max", float64(gMax))
	}
	if env.PG != nil {
		res.metric("pg_conns_max", float64(pgMax))
		res.metric("pg_busy_max", float64(busyMax))
	}
	return res, nil
}

// createPartitions makes partitions p0..p{n-1} of every queue exist and
// leaves them empty: one message each, pushed, popped and acked.
func createPartitions(cl *QueenClient, queues []string, n int) error {
	if n == 0 {
		return nil
	}
	for _, q := range queues {
		for lo := 0; lo < n; lo += 100 {
			items := make([]client.PushItem, 0, 100)
			for k := lo; k < min(lo+100, n); k++ {
				items = append(items, client.PushItem{Partition: fmt.Sprintf("p%d", k), TransactionID: []byte(fmt.Sprintf("setup-%d", k)),
					Payload: []byte(`{"setup":true}`)})
			}
			if _, err := cl.Push(client.AppendPushBody(nil, q, items)); err != nil {
				return err
			}
		}
		var buf []byte
		for k := range n {
			r, err := cl.Pop(q, client.PopQuery{Batch: 1, Partition: fmt.Sprintf("p%d", k)})
			if err != nil {
				return err
			}
			if buf, err = cl.AckBatch(buf, "", r.Acks); err != nil {
				return err
			}
		}
	}
	return nil
}

// trickle pushes rate messages per second, one request every 10 ms, round
// robin over the queues and their partitions p0..p{parts-1}, until the
// deadline is half a second away (the polls stop then).
func trickle(ctx context.Context, cl *QueenClient, queues []string, parts int, rate float64, deadline func() time.Time,
	pushed *atomic.Int64, errs *Errors) {
	const every = 10 * time.Millisecond
	tk := time.NewTicker(every)
	defer tk.Stop()
	start, sent := time.Now(), 0
	items := make([][]client.PushItem, len(queues))
	var body []byte
	for ctx.Err() == nil && time.Until(deadline()) > 500*time.Millisecond {
		<-tk.C
		due := int(rate * time.Since(start).Seconds())
		for k := sent; k < due; k++ { // message k: queue k mod Q, partition k/Q mod parts
			q := k % len(queues)
			items[q] = append(items[q], client.PushItem{Partition: fmt.Sprintf("p%d", (k/len(queues))%parts),
				TransactionID: []byte(fmt.Sprintf("trickle-%d", k)), Payload: []byte(`{"trickle":true}`)})
		}
		sent = max(sent, due)
		for q, its := range items {
			if len(its) == 0 {
				continue
			}
			body = client.AppendPushBody(body[:0], queues[q], its)
			items[q] = its[:0]
			if _, err := cl.Push(body); err != nil {
				errs.Add(err)
				continue
			}
			pushed.Add(int64(len(its)))
		}
	}
}

func optInt(v int, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprint(v)
}
