package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Params are the knobs of one scenario run, as recorded in its result.
// Zero fields do not apply to the scenario and are omitted.
type Params struct {
	Connections   int     `json:"connections,omitempty"`
	Consumers     int     `json:"consumers,omitempty"` // per consumer group
	Batch         int     `json:"batch,omitempty"`     // messages per request
	Partitions    int     `json:"partitions,omitempty"`
	PopPartitions int     `json:"pop_partitions,omitempty"`
	Pin           bool    `json:"pin,omitempty"` // consume: each consumer pops one partition
	Groups        int     `json:"groups,omitempty"`
	PayloadBytes  int     `json:"payload_bytes,omitempty"`
	DurationSec   float64 `json:"duration_sec,omitempty"`
	WarmupSec     float64 `json:"warmup_sec,omitempty"` // e2e: left out of the latencies
	Messages      int64   `json:"messages,omitempty"`   // pre-filled, or the storage run's total
	Rate          float64 `json:"rate,omitempty"`       // offered msg/s
	Count         int     `json:"count,omitempty"`      // repetitions (wake) or parked polls (idle)
	Segments      int     `json:"segments,omitempty"`
	FramesPerSeg  int     `json:"frames_per_segment,omitempty"`
	Format        string  `json:"format,omitempty"`
}

// Result is the outcome of one scenario run against one target.
type Result struct {
	Scenario     string                    `json:"scenario"`
	Target       string                    `json:"target"`
	Endpoint     string                    `json:"endpoint,omitempty"`
	Params       Params                    `json:"params"`
	StartedAt    time.Time                 `json:"started_at"`
	Seconds      float64                   `json:"seconds"`  // measured phase only
	Messages     int64                     `json:"messages"` // delivered (consume) or stored (push)
	MsgPerSec    float64                   `json:"msg_per_sec"`
	Requests     int64                     `json:"requests"`
	Errors       int64                     `json:"errors"`
	ErrorKinds   map[string]int64          `json:"error_kinds,omitempty"`
	ErrorSamples []string                  `json:"error_samples,omitempty"`
	Latency      LatencySummary            `json:"latency"` // per request (consume: pop + ack)
	Latencies    map[string]LatencySummary `json:"latencies,omitempty"`
	Metrics      map[string]float64        `json:"metrics,omitempty"`
	Resources    Resources                 `json:"resources"`
	Interrupted  bool                      `json:"interrupted,omitempty"`
	Notes        []string                  `json:"notes,omitempty"`
}

// metric sets a scenario-specific number.
func (r *Result) metric(name string, v float64) {
	if r.Metrics == nil {
		r.Metrics = map[string]float64{}
	}
	r.Metrics[name] = v
}

// Report is the JSON document --json writes and chart reads.
type Report struct {
	Version     int               `json:"version"`
	GeneratedAt time.Time         `json:"generated_at"`
	Command     string            `json:"command"`
	Host        HostInfo          `json:"host"`
	Postgres    map[string]string `json:"postgres,omitempty"`
	Results     []*Result         `json:"results"`
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("error encoding report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("error writing %s: %w", path, err)
	}
	return nil
}

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("error reading %s: %w", path, err)
	}
	rep := &Report{}
	if err := json.Unmarshal(b, rep); err != nil {
		return nil, fmt.Errorf("error decoding %s: %w", path, err)
	}
	return rep, nil
}

// WriteMarkdownFile writes the report as Markdown.
func (rep *Report) WriteMarkdownFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("error creating %s: %w", path, err)
	}
	rep.WriteMarkdown(f, true)
	if err := f.Close(); err != nil {
		return fmt.Errorf("error writing %s: %w", path, err)
	}
	return nil
}

// WriteMarkdown writes one table per kind of scenario, and, with header,
// the machine and PostgreSQL settings and the command first.
func (rep *Report) WriteMarkdown(w io.Writer, header bool) {
	if header {
		h := rep.Host
		fmt.Fprintf(w, "# Benchmark results\n\n")
		fmt.Fprintf(w, "- generated: %s\n", rep.GeneratedAt.UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "- command: `%s`\n", rep.Command)
		fmt.Fprintf(w, "- machine: %d CPUs (%s), %d GiB, Linux %s, %s\n", h.CPUs, h.CPUModel, h.MemoryGiB, h.Kernel, h.GoVersion)
		if len(rep.Postgres) > 0 {
			keys := make([]string, 0, len(rep.Postgres))
			for k := range rep.Postgres {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, len(keys))
			for i, k := range keys {
				parts[i] = k + "=" + rep.Postgres[k]
			}
			fmt.Fprintf(w, "- postgres: %s\n", strings.Join(parts, ", "))
		}
		fmt.Fprintln(w)
	}
	for _, tbl := range tables {
		var rows []*Result
		for _, r := range rep.Results {
			if tbl.match(r.Scenario) {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "### %s\n\n", tbl.title)
		writeTable(w, tbl.cols, rows)
		fmt.Fprintln(w)
	}
	for _, r := range rep.Results {
		for _, n := range r.Notes {
			fmt.Fprintf(w, "- note (%s, %s, batch %d): %s\n", r.Scenario, r.Target, r.Params.Batch, n)
		}
		if r.Errors > 0 {
			fmt.Fprintf(w, "- errors (%s, %s, batch %d): %s\n", r.Scenario, r.Target, r.Params.Batch, kindsString(r.ErrorKinds))
		}
	}
}

// column is one column of a Markdown table.
type column struct {
	head string
	cell func(r *Result) string
}

// table is the set of columns shown for a kind of scenario.
type table struct {
	title string
	match func(scenario string) bool
	cols  []column
}

func scenarioIs(names ...string) func(string) bool {
	return func(s string) bool {
		for _, n := range names {
			if s == n {
				return true
			}
		}
		return false
	}
}

// Formatting helpers; "-" marks a value that could not be measured.
func fInt(v int64) string { return fmt.Sprintf("%d", v) }
func fNum(v float64, prec int) string {
	return fmt.Sprintf("%.*f", prec, v)
}
func fOpt(v *float64, prec int) string {
	if v == nil {
		return "-"
	}
	return fNum(*v, prec)
}
func fMB(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(*v)/(1<<20))
}
func fRate(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}
func fMetric(name string, prec int) func(r *Result) string {
	return func(r *Result) string {
		v, ok := r.Metrics[name]
		if !ok {
			return "-"
		}
		return fNum(v, prec)
	}
}
func fLat(name string, q func(LatencySummary) float64) func(r *Result) string {
	return func(r *Result) string {
		l, ok := r.Latencies[name]
		if !ok || l.Count == 0 {
			return "-"
		}
		return fNum(q(l), 2)
	}
}
func fParam(get func(p Params) int) func(r *Result) string {
	return func(r *Result) string {
		v := get(r.Params)
		if v == 0 {
			return "-"
		}
		return fmt.Sprintf("%d", v)
	}
}

var (
	p50 = func(l LatencySummary) float64 { return l.P50Ms }
	p95 = func(l LatencySummary) float64 { return l.P95Ms }
	p99 = func(l LatencySummary) float64 { return l.P99Ms }
	pmx = func(l LatencySummary) float64 { return l.MaxMs }
)

// costColumns are the server-side costs every throughput table shows.
var costColumns = []column{
	{"broker CPU s/M", func(r *Result) string { return fOpt(r.Resources.BrokerCPUPerMillion, 1) }},
	{"PG CPU s/M", func(r *Result) string { return fOpt(r.Resources.PGCPUPerMillion, 1) }},
	{"peak RSS MB", func(r *Result) string { return fMB(r.Resources.BrokerPeakRSSBytes) }},
	{"WAL B/msg", func(r *Result) string { return fOpt(r.Resources.WALBytesPerMsg, 0) }},
	{"table B/msg", func(r *Result) string { return fOpt(r.Resources.TableBytesPerMsg, 0) }},
	{"client CPU s", func(r *Result) string { return fNum(r.Resources.ClientCPUSeconds, 1) }},
}

var throughputColumns = append([]column{
	{"scenario", func(r *Result) string { return r.Scenario }},
	{"target", func(r *Result) string { return r.Target }},
	{"conns", fParam(func(p Params) int { return max(p.Connections, p.Consumers) })},
	{"batch", fParam(func(p Params) int { return p.Batch })},
	{"parts", fParam(func(p Params) int { return p.Partitions })},
	{"groups", fParam(func(p Params) int { return p.Groups })},
	{"payload B", fParam(func(p Params) int { return p.PayloadBytes })},
	{"messages", func(r *Result) string { return fInt(r.Messages) }},
	{"seconds", func(r *Result) string { return fNum(r.Seconds, 1) }},
	{"msg/s", func(r *Result) string { return fRate(r.MsgPerSec) }},
	{"req p50 ms", func(r *Result) string { return fNum(r.Latency.P50Ms, 2) }},
	{"req p95 ms", func(r *Result) string { return fNum(r.Latency.P95Ms, 2) }},
	{"req p99 ms", func(r *Result) string { return fNum(r.Latency.P99Ms, 2) }},
	{"errors", func(r *Result) string { return fInt(r.Errors) }},
}, costColumns...)

// phaseColumns split a queengo consume request into its pop and its ack.
var phaseColumns = []column{
	{"target", func(r *Result) string { return r.Target }},
	{"batch", fParam(func(p Params) int { return p.Batch })},
	{"consumers", fParam(func(p Params) int { return p.Consumers })},
	{"groups", fParam(func(p Params) int { return p.Groups })},
	{"pop p50 ms", fLat("pop", p50)},
	{"pop p99 ms", fLat("pop", p99)},
	{"ack p50 ms", fLat("ack", p50)},
	{"ack p99 ms", fLat("ack", p99)},
	{"empty polls", fMetric("empty_polls", 0)},
	{"redelivered", fMetric("redelivered", 0)},
	{"drained", fMetric("drained", 0)},
}

// tables lists the Markdown tables in the order they are written.
var tables = []table{
	{"Push and consume", scenarioIs("push", "consume"), throughputColumns},
	{"Consume: pop and ack separately", func(s string) bool { return s == "consume" }, phaseColumns},
	{"End to end at a fixed offered rate", scenarioIs("e2e"), append([]column{
		{"target", func(r *Result) string { return r.Target }},
		{"producers", fParam(func(p Params) int { return p.Connections })},
		{"consumers", fParam(func(p Params) int { return p.Consumers })},
		{"batch", fParam(func(p Params) int { return p.Batch })},
		{"parts", fParam(func(p Params) int { return p.Partitions })},
		{"offered msg/s", func(r *Result) string { return fRate(r.Params.Rate) }},
		{"sent msg/s", fMetric("sent_per_sec", 0)},
		{"delivered msg/s", func(r *Result) string { return fRate(r.MsgPerSec) }},
		{"delivery p50 ms", fLat("delivery", p50)},
		{"p95", fLat("delivery", p95)},
		{"p99", fLat("delivery", p99)},
		{"max", fLat("delivery", pmx)},
		{"push p99 ms", fLat("push", p99)},
		{"errors", func(r *Result) string { return fInt(r.Errors) }},
	}, costColumns...)},
	{"Streams: a tumbling-window sum keyed by partition", scenarioIs("streams"), []column{
		{"target", func(r *Result) string { return r.Target }},
		{"parts", fParam(func(p Params) int { return p.Partitions })},
		{"batch", fParam(func(p Params) int { return p.Batch })},
		{"runners", fParam(func(p Params) int { return p.Consumers })},
		{"events", func(r *Result) string { return fInt(r.Messages) }},
		{"events/s", func(r *Result) string { return fRate(r.MsgPerSec) }},
		{"cycle p50 ms", fLat("cycle", p50)},
		{"p99", fLat("cycle", p99)},
		{"pop+state+cycle p50 ms", fLat("pop_state_cycle", p50)},
		{"p99", fLat("pop_state_cycle", p99)},
		{"cycles", fMetric("cycles", 0)},
		{"refused", fMetric("cycles_refused", 0)},
		{"errors", func(r *Result) string { return fInt(r.Errors) }},
	}},
	{"Wake-up latency of a parked long poll", scenarioIs("wake"), []column{
		{"target", func(r *Result) string { return r.Target }},
		{"count", func(r *Result) string { return fInt(int64(r.Latencies["wake"].Count)) }},
		{"wake p50 ms", fLat("wake", p50)},
		{"p95", fLat("wake", p95)},
		{"p99", fLat("wake", p99)},
		{"max", fLat("wake", pmx)},
		{"push-start to pop p50 ms", fLat("push_start_to_pop", p50)},
		{"p99", fLat("push_start_to_pop", p99)},
		{"push p50 ms", fLat("push", p50)},
		{"pop answered first", fMetric("pop_before_push_answer", 0)},
		{"missed wakes", fMetric("missed", 0)},
		{"errors", func(r *Result) string { return fInt(r.Errors) }},
	}},
	{"Parked long polls", scenarioIs("idle"), []column{
		{"target", func(r *Result) string { return r.Target }},
		{"polls", fParam(func(p Params) int { return p.Count })},
		{"pinned parts", fParam(func(p Params) int { return p.Partitions })},
		{"seconds", func(r *Result) string { return fNum(r.Seconds, 0) }},
		{"parked max", fMetric("parked_max", 0)},
		{"parked min", fMetric("parked_min", 0)},
		{"RSS before MB", func(r *Result) string { return fMB(r.Resources.BrokerRSSStartBytes) }},
		{"peak RSS MB", func(r *Result) string { return fMB(r.Resources.BrokerPeakRSSBytes) }},
		{"KB per poll", fMetric("rss_kb_per_poll", 1)},
		{"goroutines max", fMetric("goroutines_max", 0)},
		{"PG conns max", fMetric("pg_conns_max", 0)},
		{"PG busy max", fMetric("pg_busy_max", 0)},
		{"broker CPU s", func(r *Result) string { return fOpt(r.Resources.BrokerCPUSeconds, 2) }},
		{"PG CPU s", func(r *Result) string { return fOpt(r.Resources.PGCPUSeconds, 2) }},
		{"health p99 ms", fLat("health", p99)},
		{"early answers", fMetric("early_answers", 0)},
		{"pushed", fMetric("pushed", 0)},
		{"delivered", fMetric("delivered", 0)},
		{"errors", func(r *Result) string { return fInt(r.Errors) }},
	}},
	{"Push buffer: buffered push, then replay", scenarioIs("buffer-push"), []column{
		{"conns", fParam(func(p Params) int { return p.Connections })},
		{"batch", fParam(func(p Params) int { return p.Batch })},
		{"parts", fParam(func(p Params) int { return p.Partitions })},
		{"payload B", fParam(func(p Params) int { return p.PayloadBytes })},
		{"messages", func(r *Result) string { return fInt(r.Messages) }},
		{"buffered msg/s", func(r *Result) string { return fRate(r.MsgPerSec) }},
		{"req p50 ms", func(r *Result) string { return fNum(r.Latency.P50Ms, 2) }},
		{"req p99 ms", func(r *Result) string { return fNum(r.Latency.P99Ms, 2) }},
		{"replay s", fMetric("replay_seconds", 1)},
		{"replay msg/s", fMetric("replay_msg_per_sec", 0)},
		{"errors", func(r *Result) string { return fInt(r.Errors) }},
	}},
	{"Segment storage format", scenarioIs("storage"), []column{
		{"format", func(r *Result) string { return r.Params.Format }},
		{"segments", fParam(func(p Params) int { return p.Segments })},
		{"frames/segment", fParam(func(p Params) int { return p.FramesPerSeg })},
		{"payload B", fParam(func(p Params) int { return p.PayloadBytes })},
		{"messages", func(r *Result) string { return fInt(r.Messages) }},
		{"table B/msg", func(r *Result) string { return fOpt(r.Resources.TableBytesPerMsg, 1) }},
		{"insert µs/msg", fMetric("insert_us_per_msg", 2)},
		{"insert PG CPU µs/msg", fMetric("insert_pg_cpu_us_per_msg", 2)},
		{"WAL B/msg", func(r *Result) string { return fOpt(r.Resources.WALBytesPerMsg, 1) }},
		{"read µs/msg", fMetric("read_us_per_msg", 2)},
		{"read PG CPU µs/msg", fMetric("read_pg_cpu_us_per_msg", 2)},
	}},
}

// writeTable writes rows as a Markdown table with aligned columns, so the
// same text reads well in a terminal.
func writeTable(w io.Writer, cols []column, rows []*Result) {
	cells := make([][]string, len(rows)+1)
	widths := make([]int, len(cols))
	cells[0] = make([]string, len(cols))
	for i, c := range cols {
		cells[0][i] = c.head
	}
	for j, r := range rows {
		cells[j+1] = make([]string, len(cols))
		for i, c := range cols {
			cells[j+1][i] = c.cell(r)
		}
	}
	for _, row := range cells {
		for i, s := range row {
			widths[i] = max(widths[i], len([]rune(s)))
		}
	}
	line := func(row []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, s := range row {
			b.WriteString(" ")
			b.WriteString(s)
			b.WriteString(strings.Repeat(" ", widths[i]-len([]rune(s))))
			b.WriteString(" |")
		}
		fmt.Fprintln(w, b.String())
	}
	line(cells[0])
	sep := make([]string, len(cols))
	for i := range sep {
		sep[i] = strings.Repeat("-", widths[i])
	}
	line(sep)
	for _, row := range cells[1:] {
		line(row)
	}
}

// kindsString renders error counts most frequent first.
func kindsString(kinds map[string]int64) string {
	var e Errors
	e.kinds = kinds
	return e.String()
}
