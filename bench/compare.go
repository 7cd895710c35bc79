package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

func cmdCompare(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	c := addCommon(fs)
	targets := fs.String("targets", "queengo,rabbitmq,nats", "comma-separated targets, in table order")
	batches := fs.String("batches", "1,10,100", "comma-separated messages per request")
	conns := fs.Int("connections", ConnectionsDefault, "producers for push and consumers for consume")
	parts := fs.Int("partitions", ConsumePartsDefault, "partitions (queengo and the NATS subjects)")
	popParts := fs.Int("pop-partitions", 1, "queengo: partitions one pop may claim")
	payload := fs.Int("payload", PayloadDefault, "payload size in bytes")
	pushDur := fs.Duration("push-duration", 10*time.Second, "duration of each push run")
	msgs := fs.Int64("consume-messages", 200000, "messages pre-filled for each consume run (enough for a drain of a few seconds on the peers)")
	consumeMax := fs.Duration("consume-duration", 30*time.Second, "cap on each consume drain")
	popTimeout := fs.Duration("pop-timeout", PopTimeoutDefault, "long-poll timeout of one pop")
	skipConsume := fs.Bool("push-only", false, "skip the consume runs")
	svg := fs.String("svg", "", "also draw the chart to this SVG file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	bs, err := parseInts(*batches)
	if err != nil {
		return fmt.Errorf("--batches: %w", err)
	}
	env := newEnv(ctx, c, stdout)
	var results []*Result
	var errs []error
	for _, b := range bs {
		for _, name := range strings.Split(*targets, ",") {
			if ctx.Err() != nil {
				break
			}
			name = strings.TrimSpace(name)
			tgt, err := env.newTarget(name, *conns+PrefillConnsDefault)
			if err != nil {
				errs = append(errs, err)
				env.logf("compare: skipping %s: %v", name, err)
				continue
			}
			r, err := runPush(ctx, env, tgt, PushParams{Connections: *conns, Batch: b, Partitions: *parts,
				PayloadBytes: *payload, Duration: *pushDur})
			if err != nil {
				errs = append(errs, fmt.Errorf("push %s batch %d: %w", name, b, err))
			} else {
				results = append(results, r)
			}
			if !*skipConsume && ctx.Err() == nil {
				r, err := runConsume(ctx, env, tgt, ConsumeParams{Messages: *msgs, Consumers: *conns, Batch: b,
					Partitions: *parts, PopPartitions: *popParts, Groups: 1, PayloadBytes: *payload,
					PopTimeout: *popTimeout, MaxDuration: *consumeMax, StallTimeout: StallTimeoutDefault,
					PrefillConns: PrefillConnsDefault, PrefillBatch: PrefillBatchDefault})
				if err != nil {
					errs = append(errs, fmt.Errorf("consume %s batch %d: %w", name, b, err))
				} else {
					results = append(results, r)
				}
			}
			tgt.Close()
		}
	}
	err = env.finish(results...)
	if *svg != "" && len(results) > 0 {
		err = joinErr(err, writeChartFile(*svg, []*Report{env.Report}))
	}
	for _, e := range errs {
		fmt.Fprintln(env.Out, "error:", e)
	}
	if len(errs) > 0 && err == nil {
		err = fmt.Errorf("%d of the runs failed", len(errs))
	}
	return err
}

// parseInts parses "1,10,100".
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
