package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queengo/queengo/http/client"
)

// AdminParams configures the admin scenario: the data it seeds and how it
// measures the operator's routes.
type AdminParams struct {
	Queues       int   // queues seeded
	Partitions   int   // partitions per queue
	Groups       int   // consumer groups, g0..g{n-1}, each with cursors on every partition
	Messages     int64 // messages seeded, spread evenly over every partition
	PayloadBytes int
	SeedConns    int  // concurrent requests while seeding
	SeedBatch    int  // messages per seeding push
	SkipSeed     bool // the data of an earlier run (same --prefix and shape) is there
	Traces       int  // traces recorded on seeded messages
	TraceNames   int  // distinct names those traces carry
	Prefix       string
	Requests     int // requests per route
	Concurrency  int // requests in flight per route
	Aim          time.Duration
	Drop         bool // delete the seeded queues at the end
}

// Defaults of the admin scenario: the scale of issue 12's aim.
const (
	AdminQueuesDefault     = 1000
	AdminPartitionsDefault = 10
	AdminGroupsDefault     = 3
	AdminMessagesDefault   = 10_000_000
	AdminSeedConnsDefault  = 8
	AdminSeedBatchDefault  = 1000
	AdminTracesDefault     = 10_000
	AdminTraceNamesDefault = 100
	AdminRequestsDefault   = 200
	AdminConcurrency       = 4
	AdminAimDefault        = 50 * time.Millisecond
	// adminPopMax is the largest pop batch a Queen-compatible broker takes.
	adminPopMax = 10_000
)

func (p AdminParams) validate() error {
	switch {
	case p.Queues < 1 || p.Queues > 100_000:
		return fmt.Errorf("--queues must be 1..100000, got %d", p.Queues)
	case p.Partitions < 1 || p.Partitions > 10_000:
		return fmt.Errorf("--partitions must be 1..10000, got %d", p.Partitions)
	case p.Groups < 1 || p.Groups > 100:
		return fmt.Errorf("--groups must be 1..100, got %d", p.Groups)
	case p.Messages < int64(p.Queues)*int64(p.Partitions):
		return fmt.Errorf("--messages must be at least one per partition (%d), got %d", p.Queues*p.Partitions, p.Messages)
	case p.PayloadBytes < 0 || p.PayloadBytes > 1<<20:
		return fmt.Errorf("--payload must be 0..1048576 bytes, got %d", p.PayloadBytes)
	case p.SeedConns < 1 || p.SeedConns > 500:
		return fmt.Errorf("--seed-connections must be 1..500, got %d", p.SeedConns)
	case p.SeedBatch < 1 || p.SeedBatch > 10_000:
		return fmt.Errorf("--seed-batch must be 1..10000, got %d", p.SeedBatch)
	case p.Traces < 0 || p.TraceNames < 1:
		return fmt.Errorf("--traces must be 0 or more and --trace-names 1 or more")
	case p.Requests < 1 || p.Concurrency < 1 || p.Concurrency > 256:
		return fmt.Errorf("--requests must be 1 or more and --concurrency 1..256")
	case p.Prefix == "" || strings.ContainsAny(p.Prefix, "./ "):
		return fmt.Errorf("--prefix must be a non-empty name without '.', '/' or spaces")
	}
	return nil
}

func cmdAdmin(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	c := addCommon(fs)
	var p AdminParams
	fs.IntVar(&p.Queues, "queues", AdminQueuesDefault, "queues to seed")
	fs.IntVar(&p.Partitions, "partitions", AdminPartitionsDefault, "partitions per queue")
	fs.IntVar(&p.Groups, "groups", AdminGroupsDefault, "consumer groups (g0..), each consuming a different share of every partition")
	fs.Int64Var(&p.Messages, "messages", AdminMessagesDefault, "messages to seed, spread evenly over all partitions")
	fs.IntVar(&p.PayloadBytes, "payload", PayloadDefault, "payload size in bytes")
	fs.IntVar(&p.SeedConns, "seed-connections", AdminSeedConnsDefault, "concurrent requests while seeding")
	fs.IntVar(&p.SeedBatch, "seed-batch", AdminSeedBatchDefault, "messages per seeding push (one partition per push)")
	fs.BoolVar(&p.SkipSeed, "skip-seed", false, "measure only: the data of an earlier run with the same --prefix and shape is there")
	fs.IntVar(&p.Traces, "traces", AdminTracesDefault, "traces to record on seeded messages (POST /api/v1/traces)")
	fs.IntVar(&p.TraceNames, "trace-names", AdminTraceNamesDefault, "distinct names the seeded traces carry")
	fs.StringVar(&p.Prefix, "prefix", "bench-admin", "queue name prefix; queues are <prefix>-ns<k>.t<k>.q<i>")
	fs.IntVar(&p.Requests, "requests", AdminRequestsDefault, "requests per route")
	fs.IntVar(&p.Concurrency, "concurrency", AdminConcurrency, "requests in flight per route")
	fs.DurationVar(&p.Aim, "aim", AdminAimDefault, "the p99 every route should stay within")
	fs.BoolVar(&p.Drop, "drop", false, "delete the seeded queues at the end (default: keep them for --skip-seed runs)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := p.validate(); err != nil {
		return err
	}
	env := newEnv(ctx, c, stdout)
	client, err := NewQueenClient(c.URL, max(p.SeedConns, p.Concurrency), c.Timeout)
	if err != nil {
		return err
	}
	results, err := runAdmin(ctx, env, client, p)
	if len(results) > 0 {
		err = joinErr(err, env.finish(results...))
	}
	return err
}

// adminLayout names the seeded data: queue i is <prefix>-ns<i%10>.t<i%25>.q<i>,
// so the queues spread over 10 namespaces and 25 tasks; partition p is p<p>;
// the first message of each partition has transaction id <queue>-p<p>-0.
type adminLayout struct{ p AdminParams }

func (l adminLayout) queue(i int) string {
	return fmt.Sprintf("%s-ns%d.t%d.q%05d", l.p.Prefix, i%10, i%25, i)
}

func (l adminLayout) txID(queue string, part int, k int64) string {
	return queue + "-p" + strconv.Itoa(part) + "-" + strconv.FormatInt(k, 10)
}

func (l adminLayout) traceName(i int) string { return fmt.Sprintf("%s-trace-%03d", l.p.Prefix, i) }

// perPartition is how many messages partition j (0-based over all queues)
// gets: an even share, the remainder to the first ones.
func (l adminLayout) perPartition(j int) int64 {
	n := int64(l.p.Queues) * int64(l.p.Partitions)
	k := l.p.Messages / n
	if int64(j) < l.p.Messages%n {
		k++
	}
	return k
}

// consumed is how many messages of partition part of queue q group g
// consumes while seeding: a quarter to all of it for three groups, varying
// with the partition, so lags differ between groups and partitions.
func (l adminLayout) consumed(q, part, g int, total int64) int64 {
	steps := int64(l.p.Groups + 1)
	share := int64((q+part+g)%(l.p.Groups+1)) + 1
	return total * share / steps
}

// runAdmin seeds the data (unless --skip-seed), then measures every route of
// adminRouteList, one after the other.
func runAdmin(ctx context.Context, env *Env, c *QueenClient, p AdminParams) ([]*Result, error) {
	if err := c.Health(); err != nil {
		return nil, fmt.Errorf("error reaching %s: %w", env.C.URL, err)
	}
	l := adminLayout{p}
	var results []*Result
	if !p.SkipSeed {
		seed, err := seedAdmin(ctx, env, c, l)
		if seed != nil {
			results = append(results, seed)
		}
		if err != nil {
			return results, err
		}
	}
	q0 := l.queue(0)
	// The partition id of q0/p0 comes from a push of one probe message,
	// which also works on data an earlier run seeded.
	pid, err := adminPush(c, q0, partitionName(0), []string{fmt.Sprintf("%s-probe-%s", p.Prefix, env.Run)}, p.PayloadBytes)
	if err != nil {
		return results, fmt.Errorf("error pushing the probe message: %w", err)
	}
	tx0 := l.txID(q0, 0, 0)
	env.logf("measuring %d routes: %d requests each, %d in flight, aim p99 <= %s", len(adminRouteList),
		p.Requests, p.Concurrency, p.Aim)
	for _, rt := range adminRouteList {
		if ctx.Err() != nil {
			break
		}
		results = append(results, measureRoute(ctx, env, c, rt, rt.fill(l, pid, tx0), p))
	}
	if p.Drop {
		for i := range p.Queues {
			if err := c.DeleteQueue(l.queue(i)); err != nil {
				env.logf("warning: deleting %s: %v", l.queue(i), err)
			}
		}
	}
	over, missing := 0, 0
	for _, r := range results {
		if r.Scenario != "admin" {
			continue
		}
		switch {
		case r.Metrics["missing"] == 1:
			missing++
		case r.Latency.P99Ms > float64(p.Aim)/float64(time.Millisecond) || r.Errors > 0:
			over++
		}
	}
	env.logf("admin: %d routes, %d missing, %d over the %s aim or failing", len(results), missing, over, p.Aim)
	return results, ctx.Err()
}

// adminRoute is one measured GET: path is a template whose {queue}, {ns},
// {group}, {pid}, {tx} and {trace} fill fills in.
type adminRoute struct{ name, path string }

// adminRouteList lists the status and admin GET routes, with the parameters
// the SDKs and the dashboard send.
var adminRouteList = []adminRoute{
	{"consumer-groups", "/api/v1/consumer-groups"},
	{"consumer-groups lagging", "/api/v1/consumer-groups/lagging?minLagSeconds=60"},
	{"consumer-group", "/api/v1/consumer-groups/{group}"},
	{"resources overview", "/api/v1/resources/overview"},
	{"resources queues", "/api/v1/resources/queues?limit=100&offset=0"},
	{"resources queue", "/api/v1/resources/queues/{queue}"},
	{"resources namespaces", "/api/v1/resources/namespaces"},
	{"resources tasks", "/api/v1/resources/tasks"},
	{"resources partitions", "/api/v1/resources/partitions?queue={queue}"},
	{"messages list", "/api/v1/messages?limit=200&offset=0"},
	{"messages list of a queue", "/api/v1/messages?queue={queue}&limit=200"},
	{"message", "/api/v1/messages/{pid}/{tx}"},
	{"dlq", "/api/v1/dlq?limit=100&offset=0"},
	{"status", "/api/v1/status"},
	{"status queues", "/api/v1/status/queues?limit=100&offset=0"},
	{"status queues of a namespace", "/api/v1/status/queues?namespace={ns}"},
	{"status queue", "/api/v1/status/queues/{queue}"},
	{"status queue messages", "/api/v1/status/queues/{queue}/messages?limit=50&offset=0"},
	{"status analytics", "/api/v1/status/analytics?interval=hour"},
	{"status buffers", "/api/v1/status/buffers"},
	{"analytics system-metrics", "/api/v1/analytics/system-metrics"},
	{"analytics worker-metrics", "/api/v1/analytics/worker-metrics"},
	{"analytics postgres-stats", "/api/v1/analytics/postgres-stats"},
	{"analytics queue-lag", "/api/v1/analytics/queue-lag"},
	{"analytics queue-ops", "/api/v1/analytics/queue-ops"},
	{"analytics queue-parked-replicas", "/api/v1/analytics/queue-parked-replicas"},
	{"analytics retention", "/api/v1/analytics/retention"},
	{"traces names", "/api/v1/traces/names?limit=50&offset=0"},
	{"traces by name", "/api/v1/traces/by-name/{trace}?limit=100&offset=0"},
	{"traces of a message", "/api/v1/traces/{pid}/{tx}"},
	{"metrics", "/metrics"},
	{"metrics prometheus", "/metrics/prometheus"},
}

// fill returns the route's path for the seeded data: queue 0, its
// namespace, group g0, trace name 0, and the message pid/tx0 (the first of
// q0/p0).
func (rt adminRoute) fill(l adminLayout, pid, tx0 string) string {
	ns, _, _ := strings.Cut(l.queue(0), ".")
	return strings.NewReplacer("{queue}", url.PathEscape(l.queue(0)), "{ns}", url.QueryEscape(ns), "{group}", "g0",
		"{pid}", pid, "{tx}", url.PathEscape(tx0), "{trace}", url.PathEscape(l.traceName(0))).Replace(rt.path)
}

// measureRoute sends one request to learn whether the route exists: a 4xx
// answer marks it missing (a broker without the route, or refusing the
// request), and it is not measured. Otherwise it sends p.Requests requests,
// p.Concurrency at a time, and records their latency; answers other than
// 2xx count as errors.
func measureRoute(ctx context.Context, env *Env, c *QueenClient, rt adminRoute, path string, p AdminParams) *Result {
	res := &Result{Scenario: "admin", Target: env.C.Label, Endpoint: rt.path, StartedAt: time.Now().UTC(),
		Params: Params{Connections: p.Concurrency, Partitions: p.Partitions, Groups: p.Groups, Messages: p.Messages,
			Count: p.Requests, PayloadBytes: p.PayloadBytes}}
	res.metric("queues", float64(p.Queues))
	res.metric("aim_ms", float64(p.Aim)/float64(time.Millisecond))
	status, size, err := adminGet(c, path)
	res.metric("status", float64(status))
	if err == nil && status >= 400 && status < 500 {
		res.metric("missing", 1)
		env.logf("%-32s missing (http %d)", rt.name, status)
		return res
	}
	res.metric("bytes", float64(size))
	lat := NewLatency(p.Concurrency)
	errs := &Errors{}
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for w := range p.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && next.Add(1) <= int64(p.Requests) {
				t0 := time.Now()
				st, _, err := adminGet(c, path)
				d := time.Since(t0)
				switch {
				case err != nil:
					errs.Add(err)
				case st >= 300:
					errs.Add(opErr(rt.name, &client.APIError{Method: "GET", Path: path, Status: st}))
				default:
					lat.Record(w, d)
				}
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Latency = lat.Total()
	res.Requests = int64(res.Latency.Count) + errs.Count()
	res.Errors, res.ErrorKinds, res.ErrorSamples = errs.Count(), errs.Kinds(), errs.Samples()
	res.Interrupted = ctx.Err() != nil
	mark := ""
	if res.Latency.P99Ms > float64(p.Aim)/float64(time.Millisecond) {
		mark = "  OVER THE AIM"
	}
	env.logf("%-32s p50=%7.2fms p99=%7.2fms max=%7.2fms  %6.1f KB  errors=%d%s", rt.name, res.Latency.P50Ms,
		res.Latency.P99Ms, res.Latency.MaxMs, float64(size)/1024, res.Errors, mark)
	return res
}

// adminGet sends one GET and returns the status and the body's size.
func adminGet(c *QueenClient, path string) (status, size int, err error) {
	err = c.Do("admin", "GET", path, nil, func(st int, _ client.Header, b []byte) error {
		status, size = st, len(b)
		return nil
	})
	return status, size, err
}

// adminPush pushes one message per transaction id to queue/partition in one
// request, requires every one queued (or a duplicate of an earlier run's),
// and returns the partition id the broker reports.
func adminPush(c *QueenClient, queue, partition string, txids []string, payload int) (string, error) {
	items := make([]client.PushItem, len(txids))
	var buf []byte
	now := time.Now().UnixNano()
	for i, tx := range txids {
		s := len(buf)
		buf = appendPayload(buf, now, int64(i), payload)
		items[i] = client.PushItem{Partition: partition, TransactionID: []byte(tx), Payload: buf[s:len(buf):len(buf)]}
	}
	body := client.AppendPushBody(nil, queue, items)
	var pid string
	err := c.c.Push(context.Background(), body, func(b []byte) error {
		var res []struct {
			Status      string  `json:"status"`
			PartitionID string  `json:"partition_id"`
			Error       *string `json:"error"`
		}
		if err := json.Unmarshal(b, &res); err != nil {
			return fmt.Errorf("error decoding answer: %w", err)
		}
		if len(res) != len(txids) {
			return fmt.Errorf("%d results for %d items", len(res), len(txids))
		}
		for _, r := range res {
			switch r.Status {
			case "queued":
				pid = r.PartitionID
			case "duplicate":
			default:
				msg := r.Status
				if r.Error != nil {
					msg += ": " + *r.Error
				}
				return fmt.Errorf("item not stored: %s", msg)
			}
		}
		return nil
	})
	if err == nil && pid == "" {
		err = errors.New("every item was a duplicate: no partition id reported")
	}
	return pid, opErr("push", err)
}

// seedAdmin pushes the messages, gives every group its cursors, and records
// the traces. Its result (scenario admin-seed) carries the push throughput.
func seedAdmin(ctx context.Context, env *Env, c *QueenClient, l adminLayout) (*Result, error) {
	p := l.p
	parts := p.Queues * p.Partitions
	res := &Result{Scenario: "admin-seed", Target: env.C.Label, Endpoint: env.C.URL, StartedAt: time.Now().UTC(),
		Params: Params{Connections: p.SeedConns, Batch: p.SeedBatch, Partitions: p.Partitions, Groups: p.Groups,
			Messages: p.Messages, PayloadBytes: p.PayloadBytes}}
	res.metric("queues", float64(p.Queues))
	// pids[j] is the id of partition j (queue j/P, partition j%P).
	pids := make([]string, parts)
	var done atomic.Int64
	start := time.Now()
	tk := env.progress(func(elapsed, dt time.Duration) string {
		return fmt.Sprintf("seed push   t=%6.1fs  %d/%d messages  msg/s=%.0f", elapsed.Seconds(), done.Load(),
			p.Messages, float64(done.Load())/elapsed.Seconds())
	})
	err := forEach(ctx, parts, p.SeedConns, func(j int) error {
		q, part := l.queue(j/p.Partitions), j%p.Partitions
		total := l.perPartition(j)
		for first := int64(0); first < total; first += int64(p.SeedBatch) {
			n := min(int64(p.SeedBatch), total-first)
			txids := make([]string, n)
			for k := range txids {
				txids[k] = l.txID(q, part, first+int64(k))
			}
			var pid string
			var err error
			// Transaction ids make a retried push idempotent.
			for try := 0; try < 3; try++ {
				if pid, err = adminPush(c, q, partitionName(part), txids, p.PayloadBytes); err == nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err != nil {
				return fmt.Errorf("seeding %s/%s: %w", q, partitionName(part), err)
			}
			if first == 0 {
				pids[j] = pid
			}
			done.Add(n)
		}
		return nil
	})
	tk.stop()
	res.Seconds = time.Since(start).Seconds()
	res.Messages = done.Load()
	res.MsgPerSec = float64(res.Messages) / res.Seconds
	env.logf("seeded %d messages in %.1fs (%.0f msg/s)", res.Messages, res.Seconds, res.MsgPerSec)
	if err != nil {
		return res, err
	}

	var popped atomic.Int64
	start = time.Now()
	tk = env.progress(func(elapsed, dt time.Duration) string {
		return fmt.Sprintf("seed groups t=%6.1fs  %d messages consumed", elapsed.Seconds(), popped.Load())
	})
	err = forEach(ctx, parts*p.Groups, p.SeedConns, func(k int) error {
		j, g := k/p.Groups, k%p.Groups
		q, part := l.queue(j/p.Partitions), j%p.Partitions
		group := "g" + strconv.Itoa(g)
		var buf []byte
		for left := l.consumed(j/p.Partitions, part, g, l.perPartition(j)); left > 0; {
			pop, err := c.Pop(q, client.PopQuery{Batch: int(min(left, adminPopMax)), Partition: partitionName(part),
				ConsumerGroup: group})
			if err != nil {
				return fmt.Errorf("consuming %s/%s as %s: %w", q, partitionName(part), group, err)
			}
			if len(pop.Acks) == 0 {
				return nil
			}
			if buf, err = c.AckBatch(buf, group, pop.Acks); err != nil {
				return fmt.Errorf("acknowledging %s/%s as %s: %w", q, partitionName(part), group, err)
			}
			left -= int64(len(pop.Acks))
			popped.Add(int64(len(pop.Acks)))
		}
		return nil
	})
	tk.stop()
	res.metric("consumed", float64(popped.Load()))
	env.logf("groups consumed %d messages in %.1fs", popped.Load(), time.Since(start).Seconds())
	if err != nil {
		return res, err
	}

	if p.Traces == 0 {
		return res, nil
	}
	var traced atomic.Int64
	var missing atomic.Bool
	tk = env.progress(func(elapsed, dt time.Duration) string {
		return fmt.Sprintf("seed traces t=%6.1fs  %d/%d traces", elapsed.Seconds(), traced.Load(), p.Traces)
	})
	err = forEach(ctx, p.Traces, p.SeedConns, func(i int) error {
		j := i % parts
		q, part := l.queue(j/p.Partitions), j%p.Partitions
		body, _ := json.Marshal(map[string]any{"transactionId": l.txID(q, part, 0), "partitionId": pids[j],
			"consumerGroup": "g" + strconv.Itoa(i%p.Groups), "eventType": "processed",
			"traceNames": []string{l.traceName(i % p.TraceNames)}, "data": map[string]any{"i": i}})
		return c.Do("trace", "POST", "/api/v1/traces", body, func(status int, _ client.Header, b []byte) error {
			switch {
			case status == 404 || status == 405:
				missing.Store(true)
				return errAdminNoTraces
			case status >= 300:
				return client.NewAPIError("POST", "/api/v1/traces", status, b)
			}
			traced.Add(1)
			return nil
		})
	})
	tk.stop()
	res.metric("traces", float64(traced.Load()))
	if missing.Load() {
		res.Notes = append(res.Notes, "traces not seeded: POST /api/v1/traces is missing")
		env.logf("traces not seeded: POST /api/v1/traces is missing")
		return res, nil
	}
	env.logf("recorded %d traces", traced.Load())
	return res, err
}

// errAdminNoTraces stops the trace seeding of a broker without the route.
var errAdminNoTraces = errors.New("trace route missing")

// forEach calls fn(0..n-1) on conns goroutines and returns the first error;
// after an error or a cancelled ctx no new call starts.
func forEach(ctx context.Context, n, conns int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

func init() {
	tables = append(tables, table{"Status and admin routes", scenarioIs("admin"), []column{
		{"route", func(r *Result) string { return r.Endpoint }},
		{"status", func(r *Result) string {
			st := fMetric("status", 0)(r)
			if r.Metrics["missing"] == 1 {
				return "missing (" + st + ")"
			}
			return st
		}},
		{"requests", func(r *Result) string { return fInt(r.Requests) }},
		{"p50 ms", func(r *Result) string { return adminLat(r, p50) }},
		{"p95 ms", func(r *Result) string { return adminLat(r, p95) }},
		{"p99 ms", func(r *Result) string { return adminLat(r, p99) }},
		{"max ms", func(r *Result) string { return adminLat(r, pmx) }},
		{"KB", func(r *Result) string {
			if _, ok := r.Metrics["bytes"]; !ok {
				return "-"
			}
			return fNum(r.Metrics["bytes"]/1024, 1)
		}},
		{"errors", func(r *Result) string { return fInt(r.Errors) }},
		{"p99 within aim", func(r *Result) string {
			aim, ok := r.Metrics["aim_ms"]
			switch {
			case !ok || r.Latency.Count == 0:
				return "-"
			case r.Latency.P99Ms <= aim && r.Errors == 0:
				return "yes"
			}
			return "NO"
		}},
	}})
}

func adminLat(r *Result, q func(LatencySummary) float64) string {
	if r.Latency.Count == 0 {
		return "-"
	}
	return fNum(q(r.Latency), 2)
}
