package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queengo/queengo/http/client"
)

// StreamsParams configures the streams scenario.
type StreamsParams struct {
	Partitions int           // source partitions
	Events     int           // events per partition, pre-filled
	Batch      int           // messages per pop, so per cycle
	Workers    int           // concurrent runners
	Window     time.Duration // tumbling window, by event time (createdAt)
	Limit      time.Duration // a run that has not drained by then stops
	RefURL     string        // the reference server, run after --url
	RefLabel   string
}

func cmdStreams(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	c := addCommon(fs)
	var p StreamsParams
	fs.IntVar(&p.Partitions, "partitions", 10, "source partitions")
	fs.IntVar(&p.Events, "events", 2000, "events per partition, pushed before the stream starts")
	fs.IntVar(&p.Batch, "batch", 100, "messages per pop, so per cycle")
	fs.IntVar(&p.Workers, "workers", 10, "concurrent stream runners (each pops, reads state, commits a cycle)")
	fs.DurationVar(&p.Window, "window", time.Second, "tumbling window, by the events' createdAt")
	fs.DurationVar(&p.Limit, "limit", 5*time.Minute, "stop a run that has not drained by then (its result says interrupted)")
	fs.StringVar(&p.RefURL, "ref-url", "", "the reference server's URL: the same stream runs there after --url, and the summary gives the ratio")
	fs.StringVar(&p.RefLabel, "ref-label", "queen-cpp", "name the reference's results carry")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if p.Partitions < 1 || p.Events < 1 || p.Batch < 1 || p.Workers < 1 || p.Window <= 0 {
		return fmt.Errorf("--partitions, --events, --batch, --workers and --window must be positive")
	}
	env := newEnv(ctx, c, stdout)
	targets := [][2]string{{c.Label, c.URL}}
	if p.RefURL != "" {
		targets = append(targets, [2]string{p.RefLabel, p.RefURL})
	}
	var results []*Result
	var err error
	for _, t := range targets {
		var res *Result
		res, err = runStreams(ctx, env, t[0], t[1], p)
		if res != nil {
			results = append(results, res)
		}
		if err != nil || ctx.Err() != nil {
			break
		}
	}
	if len(results) > 0 {
		err = joinErr(err, env.finish(results...))
	}
	if len(results) == 2 {
		a, b := results[0], results[1]
		fmt.Fprintf(env.Out, "\nstreams: %s %.0f events/s, %s %.0f events/s: %.2fx; cycle p50 %.2f ms vs %.2f ms, p99 %.2f ms vs %.2f ms\n",
			a.Target, a.MsgPerSec, b.Target, b.MsgPerSec, a.MsgPerSec/b.MsgPerSec,
			a.Latencies["cycle"].P50Ms, b.Latencies["cycle"].P50Ms, a.Latencies["cycle"].P99Ms, b.Latencies["cycle"].P99Ms)
	}
	return err
}

// streamMsg is a popped message, as the SDKs' runtimes read it.
type streamMsg struct {
	TransactionID string          `json:"transactionId"`
	PartitionID   string          `json:"partitionId"`
	Partition     string          `json:"partition"`
	LeaseID       string          `json:"leaseId"`
	CreatedAt     time.Time       `json:"createdAt"`
	Data          json.RawMessage `json:"data"`
}

// runStreams runs, against the broker at rawURL, the SDKs' tumbling-window
// sum keyed by partition (Stream.from(src).windowTumbling(...).aggregate({sum,
// count}).to(sink)), as their runtimes do it over the streams routes: each
// runner pops a batch of one partition for the query's consumer group,
// reads that partition's state, folds the batch into its open windows,
// emits the windows the batch's watermark closed to the sink (and deletes
// their state), and commits the cycle with the ack of the batch's last
// message. It pre-fills Events per partition, then measures from the first
// pop until every event was acked in a committed cycle: events per second,
// the latency of the cycle request, and of a whole cycle (pop, state read,
// commit).
func runStreams(ctx context.Context, env *Env, label, rawURL string, p StreamsParams) (*Result, error) {
	cl, err := client.New(rawURL, client.MaxConns(p.Workers+8), client.Timeout(env.C.Timeout), client.UserAgent("queengo-bench"))
	if err != nil {
		return nil, fmt.Errorf("error parsing the URL %q: %w", rawURL, err)
	}
	src := fmt.Sprintf("bench-streams-%s-%s-src", env.Run, label)
	sink := fmt.Sprintf("bench-streams-%s-%s-sink", env.Run, label)
	group := "streams." + src
	for _, q := range []string{src, sink} {
		if err := cl.Configure(ctx, q, map[string]any{"leaseTime": 30}); err != nil {
			return nil, fmt.Errorf("error configuring %s: %w", q, err)
		}
	}
	if !env.C.Keep {
		defer func() {
			for _, q := range []string{src, sink} {
				_ = cl.DeleteQueue(context.Background(), q)
			}
		}()
	}
	env.logf("streams %s: pre-filling %d partitions x %d events", label, p.Partitions, p.Events)
	for part := range p.Partitions {
		for off := 0; off < p.Events; off += 1000 {
			var items []map[string]any
			for k := off; k < min(off+1000, p.Events); k++ {
				items = append(items, map[string]any{"queue": src, "partition": partitionName(part),
					"transactionId": fmt.Sprintf("%s-%d-%d", src, part, k), "payload": map[string]any{"v": k % 100}})
			}
			if err := cl.SendJSON(ctx, http.MethodPost, "/api/v1/push", map[string]any{"items": items}, nil); err != nil {
				return nil, fmt.Errorf("error pre-filling: %w", err)
			}
		}
	}
	var reg struct {
		QueryID string `json:"query_id"`
	}
	if err := cl.SendJSON(ctx, http.MethodPost, "/streams/v1/queries", map[string]any{"name": src, "source_queue": src,
		"sink_queue": sink, "config_hash": "bench-tumbling-sum", "reset": true}, &reg); err != nil {
		return nil, fmt.Errorf("error registering the query: %w", err)
	}

	total := int64(p.Partitions * p.Events)
	res := &Result{Scenario: "streams", Target: label, Endpoint: rawURL, StartedAt: time.Now().UTC(),
		Params: Params{Partitions: p.Partitions, Batch: p.Batch, Consumers: p.Workers, Messages: total}}
	cycleLat, wholeLat := NewLatency(p.Workers), NewLatency(p.Workers)
	errs := &Errors{}
	var acked, cycles, refused, emitted atomic.Int64
	start := time.Now()
	tk := env.progress(func(elapsed, dt time.Duration) string {
		iv := cycleLat.Tick()
		return fmt.Sprintf("streams %-9s t=%5.1fs  events=%d/%d  cycles=%d  cycle p50=%6.2fms p99=%6.2fms  refused=%d errors=%d",
			label, elapsed.Seconds(), acked.Load(), total, cycles.Load(), iv.P50Ms, iv.P99Ms, refused.Load(), errs.Count())
	})
	runCtx, cancel := context.WithTimeout(ctx, p.Limit)
	defer cancel()
	popPath := "/api/v1/pop/queue/" + url.PathEscape(src) + "?" + url.Values{"consumerGroup": {group},
		"batch": {strconv.Itoa(p.Batch)}, "wait": {"true"}, "timeout": {"500"}}.Encode()
	windowMs := p.Window.Milliseconds()
	var wg sync.WaitGroup
	for w := range p.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil && acked.Load() < total {
				t0 := time.Now()
				var pop struct {
					Messages []streamMsg `json:"messages"`
				}
				err := cl.Do(ctx, http.MethodGet, popPath, nil, func(status int, _ client.Header, body []byte) error {
					if status == http.StatusNoContent {
						return nil
					}
					return client.ReadJSON(http.MethodGet, popPath, status, body, &pop)
				})
				if err != nil {
					errs.Add(opErr("pop", err))
					continue
				}
				if len(pop.Messages) == 0 {
					continue
				}
				msgs := pop.Messages
				pid := msgs[0].PartitionID
				var st struct {
					Rows []struct {
						Key   string `json:"key"`
						Value struct {
							Sum   float64 `json:"sum"`
							Count float64 `json:"count"`
						} `json:"value"`
					} `json:"rows"`
				}
				if err := cl.SendJSON(ctx, http.MethodPost, "/streams/v1/state/get", map[string]any{"query_id": reg.QueryID,
					"partition_id": pid, "keys": []string{}}, &st); err != nil {
					errs.Add(opErr("state", err))
					continue
				}
				type acc struct{ sum, count float64 }
				open := map[int64]*acc{}
				for _, r := range st.Rows {
					if ws, err := strconv.ParseInt(r.Key, 10, 64); err == nil {
						open[ws] = &acc{r.Value.Sum, r.Value.Count}
					}
				}
				var watermark int64
				for _, m := range msgs {
					var d struct {
						V float64 `json:"v"`
					}
					_ = json.Unmarshal(m.Data, &d)
					ts := m.CreatedAt.UnixMilli()
					ws := ts - ts%windowMs
					a := open[ws]
					if a == nil {
						a = &acc{}
						open[ws] = a
					}
					a.sum += d.V
					a.count++
					watermark = max(watermark, ts)
				}
				keys := make([]int64, 0, len(open))
				for ws := range open {
					keys = append(keys, ws)
				}
				sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
				ops, items := []map[string]any{}, []map[string]any{}
				for _, ws := range keys {
					a, key := open[ws], strconv.FormatInt(ws, 10)
					if ws+windowMs <= watermark {
						items = append(items, map[string]any{"queue": sink, "partition": msgs[0].Partition,
							"payload": map[string]any{"windowStart": ws, "sum": a.sum, "count": a.count}})
						ops = append(ops, map[string]any{"type": "delete", "key": key})
						continue
					}
					ops = append(ops, map[string]any{"type": "upsert", "key": key, "value": map[string]any{"sum": a.sum, "count": a.count}})
				}
				last := msgs[len(msgs)-1]
				body := map[string]any{"query_id": reg.QueryID, "partition_id": pid, "consumer_group": group,
					"state_ops": ops, "push_items": items,
					"ack": map[string]any{"transactionId": last.TransactionID, "leaseId": last.LeaseID, "status": "completed", "count": len(msgs)}}
				t1 := time.Now()
				var out struct {
					Success bool   `json:"success"`
					Error   string `json:"error"`
				}
				err = cl.SendJSON(ctx, http.MethodPost, "/streams/v1/cycle", body, &out)
				var apiErr *client.APIError
				switch {
				case errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict:
					refused.Add(1)
					continue
				case err == nil && !out.Success:
					errs.Add(opErr("cycle", errors.New("success false: "+out.Error)))
					continue
				case err != nil:
					errs.Add(opErr("cycle", err))
					continue
				}
				now := time.Now()
				cycleLat.Record(w, now.Sub(t1))
				wholeLat.Record(w, now.Sub(t0))
				cycles.Add(1)
				emitted.Add(int64(len(items)))
				acked.Add(int64(len(msgs)))
			}
		}()
	}
	wg.Wait()
	tk.stop()
	res.Seconds = time.Since(start).Seconds()
	res.Messages = acked.Load()
	res.MsgPerSec = float64(res.Messages) / res.Seconds
	res.Requests = cycles.Load() * 3
	res.Latency = cycleLat.Total()
	res.Latencies = map[string]LatencySummary{"cycle": res.Latency, "pop_state_cycle": wholeLat.Total()}
	res.Errors, res.ErrorKinds, res.ErrorSamples = errs.Count(), errs.Kinds(), errs.Samples()
	res.Interrupted = runCtx.Err() != nil
	res.metric("cycles", float64(cycles.Load()))
	res.metric("cycles_refused", float64(refused.Load()))
	res.metric("windows_emitted", float64(emitted.Load()))
	return res, nil
}
