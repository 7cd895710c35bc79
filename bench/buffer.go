package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"
)

// cmdBuffer measures the push buffer (issue 13) over HTTP: for each batch
// size it switches push maintenance on (POST /api/v1/system/maintenance), runs
// the push scenario (every item answered "buffered": an fsynced local log,
// no PostgreSQL), switches maintenance off and times the replay until GET
// /api/v1/system/maintenance reports no buffered message. The broker needs
// FILE_BUFFER_DIR; the replay rate is bounded by FILE_BUFFER_MAX_BATCH per
// FILE_BUFFER_FLUSH_MS.
func cmdBuffer(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("buffer", flag.ContinueOnError)
	c := addCommon(fs)
	batches := fs.String("batches", "1,10,100", "comma-separated messages per request")
	var p PushParams
	fs.IntVar(&p.Connections, "connections", ConnectionsDefault, "concurrent producers (1..500), one connection each")
	fs.IntVar(&p.Partitions, "partitions", PartitionsDefault, "partitions (1..10000); each request goes to the next one")
	fs.IntVar(&p.PayloadBytes, "payload", PayloadDefault, "payload size in bytes")
	fs.DurationVar(&p.Duration, "duration", PushDurationDefault, "how long to push into the buffer, per batch size")
	replayMax := fs.Duration("replay-timeout", 10*time.Minute, "cap on waiting for one replay")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	bs, err := parseInts(*batches)
	if err != nil {
		return fmt.Errorf("--batches: %w", err)
	}
	// The queue must outlive the push run: the replay writes it after.
	keep := c.Keep
	c.Keep = true
	env := newEnv(ctx, c, stdout)
	tgt, err := env.newTarget("queengo", p.Connections)
	if err != nil {
		return err
	}
	defer tgt.Close()
	client := tgt.(*queenTarget).client
	var results []*Result
	var errs []error
	for _, b := range bs {
		if ctx.Err() != nil {
			break
		}
		p.Batch = b
		if err := p.validate(); err != nil {
			return err
		}
		res, err := runBuffer(ctx, env, tgt, client, p, *replayMax)
		if res != nil {
			results = append(results, res)
		}
		if err != nil {
			errs = append(errs, err)
			break
		}
		if !keep {
			if err := client.DeleteQueue(bufferQueue(env, tgt, b)); err != nil {
				fmt.Fprintf(env.Out, "warning: deleting the queue: %v\n", err)
			}
		}
	}
	if len(results) > 0 {
		errs = append(errs, env.finish(results...))
	}
	return errors.Join(errs...)
}

// bufferQueue is the queue runPush writes for batch b.
func bufferQueue(env *Env, tgt Target, b int) string {
	return fmt.Sprintf("bench-push-%s-%s-b%d", env.Run, tgt.Name(), b)
}

// runBuffer is one batch size: buffered push, then the timed replay. The
// result is the push's, with the replay's figures as metrics
// (replay_msg_per_sec, replay_seconds).
func runBuffer(ctx context.Context, env *Env, tgt Target, c *QueenClient, p PushParams, replayMax time.Duration) (*Result, error) {
	if err := setPushMaintenance(c, true); err != nil {
		return nil, err
	}
	// Maintenance must not stay on if the run fails.
	on := true
	defer func() {
		if on {
			_ = setPushMaintenance(c, false)
		}
	}()
	res, err := runPush(ctx, env, tgt, p)
	if err != nil {
		return res, err
	}
	res.Scenario = "buffer-push"
	pending, err := bufferedMessages(c)
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := setPushMaintenance(c, false); err != nil {
		return res, err
	}
	on = false
	deadline := start.Add(replayMax)
	for pending > 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, fmt.Errorf("replay of %d messages not done within %v (%d pending)", res.Messages, replayMax, pending)
		}
		time.Sleep(20 * time.Millisecond)
		if pending, err = bufferedMessages(c); err != nil {
			return res, err
		}
	}
	took := time.Since(start)
	res.metric("replay_seconds", took.Seconds())
	res.metric("replay_msg_per_sec", float64(res.Messages)/took.Seconds())
	env.logf("replay: %d messages in %.2fs: %.0f msg/s", res.Messages, took.Seconds(), float64(res.Messages)/took.Seconds())
	return res, nil
}

// setPushMaintenance is POST /api/v1/system/maintenance.
func setPushMaintenance(c *QueenClient, on bool) error {
	err := c.c.SendJSON(context.Background(), "POST", "/api/v1/system/maintenance", map[string]bool{"enabled": on}, nil)
	return opErr("maintenance", err)
}

// bufferedMessages reads bufferedMessages from GET /api/v1/system/maintenance.
func bufferedMessages(c *QueenClient) (int64, error) {
	var v struct {
		BufferedMessages *int64 `json:"bufferedMessages"`
	}
	if err := c.c.GetJSON(context.Background(), "/api/v1/system/maintenance", nil, &v); err != nil {
		return 0, opErr("maintenance", err)
	}
	if v.BufferedMessages == nil {
		return 0, opErr("maintenance", errors.New("the answer has no bufferedMessages"))
	}
	return *v.BufferedMessages, nil
}
