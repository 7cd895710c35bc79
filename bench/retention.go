package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// RetentionParams configures the retention scenario: push and pop figures
// on a live queue, first alone (baseline), then while the broker's
// retention service deletes a big backlog of another queue.
type RetentionParams struct {
	Backlog           int64         // messages pre-filled into the backlog queue
	BacklogConns      int           // producers of the (unmeasured) backlog fill
	BacklogBatch      int           // messages per backlog fill request
	BacklogPartitions int           // partitions of the backlog queue
	Connections       int           // producers on the live queue
	Consumers         int           // consumers on the live queue (one group, queue mode)
	Batch             int           // messages per push
	ConsumeBatch      int           // messages per pop and batch ack
	Partitions        int           // partitions of the live queue
	PopPartitions     int           // queengo pop parameter partitions
	PayloadBytes      int           // payload size
	Phase             time.Duration // length of each measured phase
	PopTimeout        time.Duration // long-poll timeout of one pop
	DropAfter         int           // retentionSeconds of the backlog queue in phase 2
}

// Defaults of the retention scenario.
const (
	RetentionBacklogDefault    = 1_000_000
	RetentionPhaseDefault      = 20 * time.Second
	RetentionBacklogBatch      = 1000
	RetentionBacklogConns      = 8
	RetentionBacklogPartitions = 10
	RetentionConnsDefault      = 10
	RetentionPartsDefault      = 10
	// retentionKeepSeconds is the backlog queue's retentionSeconds during
	// the fill and the baseline: long enough that nothing is dropped yet.
	retentionKeepSeconds = 86400
)

func (p RetentionParams) validate() error {
	switch {
	case p.Backlog < 1:
		return fmt.Errorf("--backlog must be positive")
	case p.BacklogConns < 1 || p.BacklogConns > 500:
		return fmt.Errorf("--backlog-connections must be 1..500, got %d", p.BacklogConns)
	case p.BacklogBatch < 1 || p.BacklogBatch > 10000:
		return fmt.Errorf("--backlog-batch must be 1..10000, got %d", p.BacklogBatch)
	case p.BacklogPartitions < 1 || p.BacklogPartitions > 10000:
		return fmt.Errorf("--backlog-partitions must be 1..10000, got %d", p.BacklogPartitions)
	case p.Connections < 1 || p.Connections > 500:
		return fmt.Errorf("--connections must be 1..500, got %d", p.Connections)
	case p.Consumers < 1 || p.Consumers > 500:
		return fmt.Errorf("--consumers must be 1..500, got %d", p.Consumers)
	case p.Batch < 1 || p.Batch > 10000:
		return fmt.Errorf("--batch must be 1..10000, got %d", p.Batch)
	case p.ConsumeBatch < 1 || p.ConsumeBatch > 10000:
		return fmt.Errorf("--consume-batch must be 1..10000, got %d", p.ConsumeBatch)
	case p.Partitions < 1 || p.Partitions > 10000:
		return fmt.Errorf("--partitions must be 1..10000, got %d", p.Partitions)
	case p.PayloadBytes < 0 || p.PayloadBytes > 1<<20:
		return fmt.Errorf("--payload must be 0..1048576 bytes, got %d", p.PayloadBytes)
	case p.Phase <= 0 || p.PopTimeout <= 0:
		return fmt.Errorf("--phase and --pop-timeout must be positive")
	case p.DropAfter < 1:
		return fmt.Errorf("--drop-after must be at least 1 second")
	}
	return nil
}

func cmdRetention(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("retention", flag.ContinueOnError)
	c := addCommon(fs)
	var p RetentionParams
	fs.Int64Var(&p.Backlog, "backlog", RetentionBacklogDefault, "messages pre-filled into the backlog queue that retention deletes")
	fs.IntVar(&p.BacklogConns, "backlog-connections", RetentionBacklogConns, "producers for the backlog fill (not measured)")
	fs.IntVar(&p.BacklogBatch, "backlog-batch", RetentionBacklogBatch, "messages per backlog fill request")
	fs.IntVar(&p.BacklogPartitions, "backlog-partitions", RetentionBacklogPartitions, "partitions of the backlog queue")
	fs.IntVar(&p.Connections, "connections", RetentionConnsDefault, "producers on the live queue, one connection each")
	fs.IntVar(&p.Consumers, "consumers", RetentionConnsDefault, "consumers on the live queue (one group, queue mode)")
	fs.IntVar(&p.Batch, "batch", BatchDefault, "messages per push on the live queue")
	fs.IntVar(&p.ConsumeBatch, "consume-batch", PrefillBatchDefault, "messages per pop and batch ack on the live queue")
	fs.IntVar(&p.Partitions, "partitions", RetentionPartsDefault, "partitions of the live queue; each push goes to the next")
	fs.IntVar(&p.PopPartitions, "pop-partitions", 1, "partitions one pop may claim (0: no cap)")
	fs.IntVar(&p.PayloadBytes, "payload", PayloadDefault, "payload size in bytes (live and backlog)")
	fs.DurationVar(&p.Phase, "phase", RetentionPhaseDefault, "length of each measured phase (baseline, then during retention)")
	fs.DurationVar(&p.PopTimeout, "pop-timeout", PopTimeoutDefault, "long-poll timeout of one pop")
	fs.IntVar(&p.DropAfter, "drop-after", 1, "retentionSeconds the backlog queue is reconfigured to at the start of phase 2")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := p.validate(); err != nil {
		return err
	}
	if err := checkQueenOnly(true, "--encrypt", c.Target); err != nil {
		return fmt.Errorf("retention drives the queengo target only (configure and psql), not %q", c.Target)
	}
	if c.NoPG {
		return fmt.Errorf("retention reads the backlog's rows with psql: drop --no-pg and give --pg-url")
	}
	env := newEnv(ctx, c, stdout)
	if env.PG == nil {
		return fmt.Errorf("retention needs psql and --pg-url pointing at the broker's database")
	}
	res, err := runRetention(ctx, env, p)
	if res != nil {
		err = joinErr(err, env.finish(res))
	}
	return err
}

// backlogRemaining counts the messages still stored for queue: the sum of
// its segments' offset spans, read with psql (one index-backed join, cheap
// next to a count of txid rows).
func backlogRemaining(ctx context.Context, pg *PG, queue string) (int64, error) {
	s := quoteIdent(pg.Schema)
	out, err := pg.Query(ctx, fmt.Sprintf(`SELECT coalesce(sum(s.last_offset - s.first_offset + 1), 0)
FROM %[1]s.segments s JOIN %[1]s.partitions p ON p.id = s.partition_id JOIN %[1]s.queues q ON q.id = p.queue_id
WHERE q.name = %[2]s`, s, quoteLiteral(queue)))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(out, 10, 64)
}

// retentionSample is one reading of the backlog's remaining messages.
type retentionSample struct {
	at        time.Duration // since the reconfigure (negative: in the baseline)
	remaining int64
}

// retentionTrack summarizes the samples of phase 2: when retention was first
// seen dropping, when the backlog was empty, and the drop rates.
type retentionTrack struct {
	initial     int64
	started     time.Duration // first sample below initial; -1: never
	lastFull    time.Duration // last sample still at initial before that
	finished    time.Duration // first sample at 0; -1: not by the end
	lastAt      time.Duration
	remaining   int64 // at the last sample
	peakPerSec  float64
	meanPerSec  float64
	droppedInP1 int64 // rows that vanished during the baseline (should be 0)
}

// summarizeRetention reads the phase-2 samples (at >= 0) against the
// backlog's size after the fill. The mean drop rate runs from the last
// sample that still showed the whole backlog to the first that showed it
// empty (or the last sample), so it is a lower bound at the sampling
// resolution.
func summarizeRetention(initial int64, samples []retentionSample) retentionTrack {
	t := retentionTrack{initial: initial, started: -1, finished: -1, remaining: initial}
	prev := retentionSample{at: 0, remaining: initial}
	minP1 := initial
	for _, s := range samples {
		if s.at < 0 {
			minP1 = min(minP1, s.remaining)
			continue
		}
		if t.started < 0 {
			if s.remaining >= initial {
				t.lastFull = s.at
			} else {
				t.started = s.at
			}
		}
		if dt := (s.at - prev.at).Seconds(); dt > 0 && prev.remaining > s.remaining {
			t.peakPerSec = max(t.peakPerSec, float64(prev.remaining-s.remaining)/dt)
		}
		if t.finished < 0 && s.remaining == 0 {
			t.finished = s.at
		}
		t.lastAt, t.remaining, prev = s.at, s.remaining, s
	}
	t.droppedInP1 = initial - minP1
	if t.started >= 0 {
		end := t.lastAt
		if t.finished >= 0 {
			end = t.finished
		}
		var rem int64
		for _, s := range samples {
			if s.at == end {
				rem = s.remaining
			}
		}
		if d := (end - t.lastFull).Seconds(); d > 0 {
			t.meanPerSec = float64(initial-rem) / d
		}
	}
	return t
}

// loadStats is what one measured phase of live load produced.
type loadStats struct {
	seconds            float64
	pushed, consumed   int64
	pushLat            LatencySummary
	popLat, ackLat     LatencySummary
	resources          Resources
	errors             int64
	pushRate, consRate float64
}

// runRetention runs the scenario: fill the backlog, baseline, reconfigure
// the backlog to expire, the same load again while retention deletes it.
func runRetention(ctx context.Context, env *Env, p RetentionParams) (*Result, error) {
	c := env.C
	base := fmt.Sprintf("bench-retention-%s", env.Run)
	newTgt := func(conns int) (*queenTarget, error) {
		return newQueenTarget(c.Label, c.URL, conns, c.Timeout, c.BrokerPID)
	}
	backlog, err := newTgt(p.BacklogConns)
	if err != nil {
		return nil, err
	}
	bl := Layout{Name: base + "-backlog", Partitions: p.BacklogPartitions, Batch: p.BacklogBatch, Consumers: 1}
	if err := backlog.Prepare(ctx, bl); err != nil {
		return nil, err
	}
	defer env.cleanup(backlog)
	keep := map[string]any{"retentionEnabled": true, "retentionSeconds": retentionKeepSeconds}
	if err := backlog.client.Configure(bl.Name, keep); err != nil {
		return nil, fmt.Errorf("error configuring %s with retention: %w", bl.Name, err)
	}
	env.logf("retention: filling %s with %d messages (%d connections, batch %d, %d partitions)",
		bl.Name, p.Backlog, p.BacklogConns, p.BacklogBatch, p.BacklogPartitions)
	fillStart := time.Now()
	if err := prefill(ctx, env, backlog, p.Backlog, p.BacklogConns, p.BacklogBatch, p.BacklogPartitions, p.PayloadBytes); err != nil {
		return nil, err
	}
	fillSecs := time.Since(fillStart).Seconds()
	initial, err := backlogRemaining(ctx, env.PG, bl.Name)
	if err != nil {
		return nil, fmt.Errorf("error counting the backlog: %w", err)
	}
	env.logf("retention: backlog holds %d messages after %.1fs", initial, fillSecs)

	res := &Result{Scenario: "retention", Target: c.Label, Endpoint: c.URL, StartedAt: time.Now().UTC(),
		Params: Params{Connections: p.Connections, Consumers: p.Consumers, Batch: p.Batch, Partitions: p.Partitions,
			PopPartitions: p.PopPartitions, PayloadBytes: p.PayloadBytes, DurationSec: p.Phase.Seconds(), Messages: p.Backlog}}
	res.metric("backlog", float64(initial))
	res.metric("backlog_fill_seconds", fillSecs)
	if initial != p.Backlog {
		res.Notes = append(res.Notes, fmt.Sprintf("backlog holds %d messages, not the %d pushed", initial, p.Backlog))
	}

	// The samples of both phases, taken on the progress tick; at is
	// relative to the reconfigure, so baseline samples are negative.
	var mu sync.Mutex
	var samples []retentionSample
	var reconfAt time.Time
	sample := func() string {
		n, err := backlogRemaining(ctx, env.PG, bl.Name)
		if err != nil {
			return "  backlog=?"
		}
		mu.Lock()
		at := time.Duration(-1)
		if !reconfAt.IsZero() {
			at = time.Since(reconfAt)
		}
		samples = append(samples, retentionSample{at: at, remaining: n})
		mu.Unlock()
		return fmt.Sprintf("  backlog=%d", n)
	}

	errs := &Errors{} // both phases; per phase in the metrics
	baseline, err := runLiveLoad(ctx, env, newTgt, base+"-live1", "baseline", p, errs, sample, nil)
	if err != nil || ctx.Err() != nil {
		return nil, joinErr(err, ctx.Err())
	}
	// The reconfigure happens inside the phase, once its probe has taken
	// the "before" readings, right before the load starts. Configure is a
	// full replace: every option set before is sent again.
	reconfigure := func() error {
		drop := map[string]any{"retentionEnabled": true, "retentionSeconds": p.DropAfter}
		mu.Lock()
		reconfAt = time.Now()
		mu.Unlock()
		if err := backlog.client.Configure(bl.Name, drop); err != nil {
			return fmt.Errorf("error reconfiguring %s to retentionSeconds %d: %w", bl.Name, p.DropAfter, err)
		}
		env.logf("retention: %s reconfigured to retentionSeconds %d", bl.Name, p.DropAfter)
		return nil
	}
	during, err := runLiveLoad(ctx, env, newTgt, base+"-live2", "dropping", p, errs, sample, reconfigure)
	if err != nil {
		return nil, err
	}
	// One last reading at the end of the phase.
	sample()

	mu.Lock()
	tr := summarizeRetention(initial, samples)
	mu.Unlock()

	res.Seconds = during.seconds
	res.Messages = during.pushed
	res.MsgPerSec = during.pushRate
	res.Latency = during.pushLat
	res.Resources = during.resources
	res.Latencies = map[string]LatencySummary{
		"push_baseline": baseline.pushLat, "push_retention": during.pushLat,
		"pop_baseline": baseline.popLat, "pop_retention": during.popLat,
		"ack_baseline": baseline.ackLat, "ack_retention": during.ackLat,
	}
	res.Errors, res.ErrorKinds, res.ErrorSamples = errs.Count(), errs.Kinds(), errs.Samples()
	res.Interrupted = ctx.Err() != nil
	for name, s := range map[string]*loadStats{"baseline": baseline, "retention": during} { // metric suffixes
		res.metric("push_msg_s_"+name, s.pushRate)
		res.metric("consume_msg_s_"+name, s.consRate)
		res.metric("pushed_"+name, float64(s.pushed))
		res.metric("consumed_"+name, float64(s.consumed))
		res.metric("errors_"+name, float64(s.errors))
		if v := s.resources.BrokerCPUSeconds; v != nil {
			res.metric("broker_cpu_s_"+name, *v)
		}
		if v := s.resources.PGCPUSeconds; v != nil {
			res.metric("pg_cpu_s_"+name, *v)
		}
		if v := s.resources.WALBytes; v != nil {
			res.metric("wal_mb_"+name, float64(*v)/(1<<20))
		}
	}
	if baseline.pushRate > 0 {
		res.metric("push_ratio", during.pushRate/baseline.pushRate)
	}
	if baseline.consRate > 0 {
		res.metric("consume_ratio", during.consRate/baseline.consRate)
	}
	res.metric("backlog_left", float64(tr.remaining))
	res.metric("retention_dropped", float64(initial-tr.remaining))
	if tr.started >= 0 {
		res.metric("retention_started_s", tr.started.Seconds())
		res.metric("retention_drop_msg_s", tr.meanPerSec)
		res.metric("retention_peak_drop_msg_s", tr.peakPerSec)
	} else {
		res.Notes = append(res.Notes, fmt.Sprintf("retention dropped nothing within the %s phase: is the broker running with a short RETENTION_INTERVAL (e.g. 1000)?", p.Phase))
	}
	if tr.finished >= 0 {
		res.metric("retention_finished_s", tr.finished.Seconds())
		if tr.started >= 0 {
			res.metric("retention_took_s", (tr.finished - tr.lastFull).Seconds())
		}
	} else if tr.started >= 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("retention had not finished by the end of phase 2: %d of %d messages dropped (%.0f%%), %d left",
			initial-tr.remaining, initial, 100*float64(initial-tr.remaining)/float64(max(initial, 1)), tr.remaining))
	}
	if tr.droppedInP1 > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d backlog messages vanished during the baseline", tr.droppedInP1))
	}
	return res, nil
}

// runLiveLoad runs p.Connections producers and p.Consumers consumers on a
// fresh queue name for p.Phase and reports what each side did. sample is
// called on every progress tick and its text appended to the line; atStart,
// if not nil, right before the load starts.
func runLiveLoad(ctx context.Context, env *Env, newTgt func(int) (*queenTarget, error), name, phase string,
	p RetentionParams, errs *Errors, sample func() string, atStart func() error) (*loadStats, error) {
	tgt, err := newTgt(p.Connections + p.Consumers)
	if err != nil {
		return nil, err
	}
	l := Layout{Name: name, Partitions: p.Partitions, Groups: 1, Batch: max(p.Batch, p.ConsumeBatch),
		Consumers: p.Consumers, PopPartitions: p.PopPartitions, PopTimeout: p.PopTimeout}
	pubs, cons, done, err := openPipeline(ctx, env, tgt, l, p.Connections)
	if err != nil {
		return nil, err
	}
	defer done()

	env.logf("retention, %s: %d producers x batch %d, %d consumers x batch %d on %s, %s",
		phase, p.Connections, p.Batch, p.Consumers, p.ConsumeBatch, name, p.Phase)
	runCtx, stop := context.WithTimeout(ctx, p.Phase)
	defer stop()
	pushLat := NewLatency(p.Connections)
	errs0 := errs.Count()
	var seq, reqNo, sent, received atomic.Int64

	probe := StartProbe(ctx, env.PG, tgt.ServerPID())
	if atStart != nil {
		if err := atStart(); err != nil {
			probe.Stop(ctx, 0)
			return nil, err
		}
	}
	start := time.Now()
	var lastSent, lastRecv int64
	tk := env.progress(func(elapsed, dt time.Duration) string {
		s, r := sent.Load(), received.Load()
		iv := pushLat.Tick()
		line := fmt.Sprintf("%-9s t=%5.1fs  push/s=%8.0f  pop/s=%8.0f  push p50=%6.2fms p99=%6.2fms  errors=%d",
			phase, elapsed.Seconds(), float64(s-lastSent)/dt.Seconds(), float64(r-lastRecv)/dt.Seconds(),
			iv.P50Ms, iv.P99Ms, errs.Count())
		lastSent, lastRecv = s, r
		return line + sample() + rssNote(probe)
	})

	var wg sync.WaitGroup
	for _, c := range cons {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				n, err := c.Receive(runCtx, p.ConsumeBatch, func([]byte) {})
				received.Add(int64(n))
				if err != nil && runCtx.Err() == nil {
					errs.Add(err)
				}
			}
		}()
	}
	for w, pub := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, p.Batch*(p.PayloadBytes+64))
			msgs := make([]Message, p.Batch)
			for runCtx.Err() == nil {
				first := seq.Add(int64(p.Batch)) - int64(p.Batch)
				part := int((reqNo.Add(1) - 1) % int64(p.Partitions))
				buf = buf[:0]
				now := time.Now().UnixNano()
				for i := range msgs {
					s := len(buf)
					buf = appendPayload(buf, now, first+int64(i), p.PayloadBytes)
					msgs[i] = Message{Seq: first + int64(i), Partition: part, Payload: buf[s:]}
				}
				t0 := time.Now()
				// The push is not cancelled at the deadline: a push in
				// flight finishes and counts, as in the push scenario.
				err := pub.Publish(ctx, msgs)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(err)
					}
					continue
				}
				pushLat.Record(w, time.Since(t0))
				sent.Add(int64(len(msgs)))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	tk.stop()
	st := &loadStats{seconds: elapsed.Seconds(), pushed: sent.Load(), consumed: received.Load(),
		pushLat: pushLat.Total(), errors: errs.Count() - errs0}
	st.resources = probe.Stop(ctx, st.pushed+st.consumed)
	st.pushRate = float64(st.pushed) / elapsed.Seconds()
	st.consRate = float64(st.consumed) / elapsed.Seconds()
	pl := tgt.PhaseLatencies()
	st.popLat, st.ackLat = pl["pop"].Total(), pl["ack"].Total()
	return st, nil
}

func init() {
	ratio := func(name string) func(r *Result) string {
		return fMetric(name, 2)
	}
	tables = append(tables, table{"Push and pop while retention drops a backlog", scenarioIs("retention"), []column{
		{"target", func(r *Result) string { return r.Target }},
		{"backlog", fMetric("backlog", 0)},
		{"phase s", func(r *Result) string { return fNum(r.Params.DurationSec, 0) }},
		{"push msg/s before", fMetric("push_msg_s_baseline", 0)},
		{"during", fMetric("push_msg_s_retention", 0)},
		{"ratio", ratio("push_ratio")},
		{"consume msg/s before", fMetric("consume_msg_s_baseline", 0)},
		{"during", fMetric("consume_msg_s_retention", 0)},
		{"ratio", ratio("consume_ratio")},
		{"push p50 ms before", fLat("push_baseline", p50)},
		{"during", fLat("push_retention", p50)},
		{"push p99 ms before", fLat("push_baseline", p99)},
		{"during", fLat("push_retention", p99)},
		{"PG CPU s before", fMetric("pg_cpu_s_baseline", 1)},
		{"during", fMetric("pg_cpu_s_retention", 1)},
		{"drop seen at s", fMetric("retention_started_s", 1)},
		{"drop took s", fMetric("retention_took_s", 1)},
		{"dropped msg/s", fMetric("retention_drop_msg_s", 0)},
		{"left", fMetric("backlog_left", 0)},
		{"errors", func(r *Result) string { return fInt(r.Errors) }},
	}})
}
