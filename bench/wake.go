package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/queengo/queengo/http/client"
)

// WakeParams configures the wake scenario.
type WakeParams struct {
	Count        int           // repetitions
	Settle       time.Duration // wait between starting the pop and pushing
	PopTimeout   time.Duration
	PayloadBytes int
}

func cmdWake(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("wake", flag.ContinueOnError)
	c := addCommon(fs)
	var p WakeParams
	fs.IntVar(&p.Count, "count", 200, "repetitions")
	fs.DurationVar(&p.Settle, "settle", 20*time.Millisecond, "wait after starting the long poll before pushing, so it is parked")
	fs.DurationVar(&p.PopTimeout, "pop-timeout", 10*time.Second, "long-poll timeout")
	fs.IntVar(&p.PayloadBytes, "payload", PayloadDefault, "payload size in bytes")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if p.Count < 1 || p.PopTimeout <= p.Settle {
		return fmt.Errorf("--count must be positive and --pop-timeout longer than --settle")
	}
	env := newEnv(ctx, c, stdout)
	tgt, err := newQueenTarget(c.Label, c.URL, 4, c.Timeout, c.BrokerPID)
	if err != nil {
		return err
	}
	res, err := runWake(ctx, env, tgt, p)
	if res != nil {
		err = joinErr(err, env.finish(res))
	}
	return err
}

// popOutcome is what a parked pop returned, and when.
type popOutcome struct {
	res *PopResponse
	err error
	at  time.Time
}

// runWake measures how fast a push wakes a parked long poll. Each round
// starts one pop (wait=true) on an empty queue, waits Settle so the broker
// has parked it, pushes one message, and takes the time from the push's
// HTTP answer to the pop's HTTP answer. The pop may answer before the push
// does (the broker wakes waiters right after the commit); such rounds count
// as 0 and are counted in pop_before_push_answer. push_start_to_pop is the
// time from sending the push to the pop's answer, which includes the commit.
func runWake(ctx context.Context, env *Env, tgt *queenTarget, p WakeParams) (*Result, error) {
	queue := fmt.Sprintf("bench-wake-%s", env.Run)
	tgt.layout = Layout{Name: queue, Partitions: 1, Groups: 1, Batch: 1}
	if err := tgt.Prepare(ctx, tgt.layout); err != nil {
		return nil, err
	}
	defer env.cleanup(tgt)
	cl := tgt.client
	var ackBuf []byte
	push := func(seq int64) error {
		items := []client.PushItem{{Partition: partitionName(0), TransactionID: appendTxnID(nil, queue, seq),
			Payload: appendPayload(nil, time.Now().UnixNano(), seq, p.PayloadBytes)}}
		r, err := cl.Push(client.AppendPushBody(nil, queue, items))
		if err == nil && r.Queued != 1 {
			err = opErr("push", fmt.Errorf("item not queued"))
		}
		return err
	}
	pop := func(wait bool) (*PopResponse, error) {
		return cl.Pop(queue, client.PopQuery{Batch: 1, Wait: wait, Timeout: p.PopTimeout})
	}
	// Warm up: create the queue and partition, warm the connections.
	if err := push(-1); err != nil {
		return nil, fmt.Errorf("error in warm-up push: %w", err)
	}
	r, err := pop(true)
	if err != nil || len(r.Acks) != 1 {
		return nil, fmt.Errorf("error in warm-up pop: %v (messages: %d)", err, len(r.Acks))
	}
	if ackBuf, err = cl.AckBatch(ackBuf, "", r.Acks); err != nil {
		return nil, fmt.Errorf("error in warm-up ack: %w", err)
	}

	env.logf("wake %s: %d rounds, settle %s", tgt.Name(), p.Count, p.Settle)
	res := &Result{Scenario: "wake", Target: tgt.Name(), Endpoint: tgt.Endpoint(), StartedAt: time.Now().UTC(),
		Params: Params{Count: p.Count, Partitions: 1, Batch: 1, PayloadBytes: p.PayloadBytes}}
	wake, fromStart, pushLat := NewLatency(1), NewLatency(1), NewLatency(1)
	errs := &Errors{}
	var popFirst, missed, done int
	probe := StartProbe(ctx, env.pgFor(tgt), tgt.ServerPID())
	start := time.Now()
	tk := env.progress(func(elapsed, dt time.Duration) string {
		iv := wake.Tick()
		return fmt.Sprintf("wake %-8s t=%5.1fs  rounds=%d  wake p50=%6.2fms p99=%6.2fms max=%6.2fms  missed=%d errors=%d",
			tgt.Name(), elapsed.Seconds(), done, iv.P50Ms, iv.P99Ms, iv.MaxMs, missed, errs.Count())
	})
	for i := 0; i < p.Count && ctx.Err() == nil; i++ {
		ch := make(chan popOutcome, 1)
		go func() {
			r, err := pop(true)
			ch <- popOutcome{r, err, time.Now()}
		}()
		time.Sleep(p.Settle)
		t0 := time.Now()
		err := push(int64(i))
		t1 := time.Now()
		if err != nil {
			errs.Add(err)
		} else {
			pushLat.Record(0, t1.Sub(t0))
		}
		out := <-ch
		done++
		switch {
		case out.err != nil:
			errs.Add(out.err)
		case len(out.res.Acks) == 0:
			missed++
		default:
			if out.at.Before(t1) {
				popFirst++
			}
			wake.Record(0, out.at.Sub(t1))
			fromStart.Record(0, out.at.Sub(t0))
			var aerr error
			if ackBuf, aerr = cl.AckBatch(ackBuf, "", out.res.Acks); aerr != nil {
				errs.Add(aerr)
			}
		}
	}
	tk.stop()
	res.Seconds = time.Since(start).Seconds()
	res.Messages = int64(done)
	res.Requests = int64(done) * 3
	res.Resources = probe.Stop(ctx, res.Messages)
	res.Latency = wake.Total()
	res.Latencies = map[string]LatencySummary{"wake": res.Latency, "push_start_to_pop": fromStart.Total(),
		"push": pushLat.Total()}
	res.Errors, res.ErrorKinds, res.ErrorSamples = errs.Count(), errs.Kinds(), errs.Samples()
	res.Interrupted = ctx.Err() != nil
	res.metric("pop_before_push_answer", float64(popFirst))
	res.metric("missed", float64(missed))
	if missed > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d parked pops timed out without the pushed message", missed))
	}
	return res, nil
}
