// Command bench is queengo's load generator and benchmark harness.
//
// It speaks only the Queen MQ HTTP protocol to the broker under test (any
// Queen-compatible server, given by --url), drives RabbitMQ and NATS
// JetStream with the same payloads and batch sizes for comparison, and
// reads the servers' costs from outside: CPU and memory from /proc, WAL and
// table growth from PostgreSQL through psql. It imports no broker package,
// only queengo's HTTP client (http/client, which imports none either), so
// the same binary measures any build of any broker.
//
// Usage, in bench/ (a module of its own, so that the clients of RabbitMQ
// and NATS stay out of the broker's go.mod):
//
//	go run . <scenario> [flags]
//
// Scenarios: push, consume, e2e, wake, idle, compare, storage, admin,
// retention, buffer, and chart (which draws an SVG from the JSON results). Every
// scenario prints one line
// per --interval while it runs and a summary table at the end, also when
// interrupted with Ctrl-C; --json and --md write the results to files.
// bench/README.md describes every flag and every number.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands []command

func init() {
	// Assigned here rather than in the declaration: the run functions refer
	// to commands (for usage), which would be an initialization cycle.
	commands = []command{
		{"push", "producers push batches for a while: msg/s and push latency", cmdPush},
		{"consume", "pre-fill a queue, then consumers pop and batch-ack until drained", cmdConsume},
		{"e2e", "producers at a fixed offered rate and consumers together: delivery latency", cmdE2E},
		{"wake", "one parked long poll, one push: the wake-up latency, repeated", cmdWake},
		{"idle", "many parked long polls for a while: broker memory and PostgreSQL connections", cmdIdle},
		{"compare", "push and consume against queengo, RabbitMQ and NATS in one table", cmdCompare},
		{"storage", "segment storage format: bytea frames against a JSONB array, in PostgreSQL", cmdStorage},
		{"chart", "draw throughput against messages per request from JSON results (SVG)", cmdChart},
		{"admin", "seed queues, partitions, groups and messages, then time every status and admin GET route", cmdAdmin},
		{"retention", "push and pop on a live queue, alone and while retention deletes a big backlog", cmdRetention},
		{"buffer", "push into the file buffer under push maintenance, then time its replay (issue 13)", cmdBuffer},
		{"streams", "a tumbling-window sum keyed by partition over the streams routes: events/s and cycle latency (issue 42)", cmdStreams},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: go run . <scenario> [flags]   (in bench/; flags: go run . <scenario> -h)\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage(os.Stderr)
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	trapSignals(cancel)
	for _, c := range commands {
		if c.name == os.Args[1] {
			err := c.run(ctx, os.Args[2:])
			if errors.Is(err, flag.ErrHelp) {
				os.Exit(2)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "bench: unknown scenario %q\n\n", os.Args[1])
	usage(os.Stderr)
	os.Exit(2)
}

// trapSignals cancels the run on the first SIGINT or SIGTERM, so the
// scenario stops its workers and still prints and writes its summary; a
// second signal exits at once.
func trapSignals(cancel context.CancelFunc) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		fmt.Fprintln(os.Stderr, "\nbench: interrupted, finishing the summary (again to quit at once)")
		cancel()
		<-ch
		os.Exit(130)
	}()
}

// Common holds the flags every scenario takes.
type Common struct {
	URL             string
	Label           string
	BrokerPID       int
	PGURL           string
	Schema          string
	NoPG            bool
	Target          string
	RabbitURL       string
	RabbitQueueType string
	RabbitPrefetch  int
	NATSURL         string
	JSON            string
	MD              string
	Interval        time.Duration
	Timeout         time.Duration
	Keep            bool
	Quiet           bool
}

// Defaults of the common flags.
const (
	URLDefault       = "http://127.0.0.1:6632"
	PGURLDefault     = "postgres://postgres@127.0.0.1:5432/postgres"
	RabbitURLDefault = "amqp://guest:guest@127.0.0.1:5672/"
	NATSURLDefault   = "nats://127.0.0.1:4222"
)

// addCommon registers the common flags on fs.
func addCommon(fs *flag.FlagSet) *Common {
	c := &Common{}
	fs.StringVar(&c.URL, "url", URLDefault, "base URL of the Queen-compatible broker under test")
	fs.StringVar(&c.Label, "label", "queengo", "name the HTTP broker's results carry (e.g. queen-cpp)")
	fs.IntVar(&c.BrokerPID, "broker-pid", 0, "PID of the broker for CPU/RSS readings (0: the process listening on --url's port)")
	fs.StringVar(&c.PGURL, "pg-url", PGURLDefault, "PostgreSQL URL of the broker's database, for WAL/table/CPU readings via psql")
	fs.StringVar(&c.Schema, "schema", "queen", "schema whose tables count as the broker's storage")
	fs.BoolVar(&c.NoPG, "no-pg", false, "skip all PostgreSQL readings")
	fs.StringVar(&c.Target, "target", "queengo", "server to drive: queengo (HTTP, --url), rabbitmq or nats")
	fs.StringVar(&c.RabbitURL, "rabbit-url", RabbitURLDefault, "RabbitMQ AMQP URL")
	fs.StringVar(&c.RabbitQueueType, "rabbit-queue-type", "classic", "RabbitMQ queue type: classic or quorum")
	fs.IntVar(&c.RabbitPrefetch, "rabbit-prefetch", 0, "RabbitMQ consumer prefetch (0: the batch size)")
	fs.StringVar(&c.NATSURL, "nats-url", NATSURLDefault, "NATS URL (JetStream must be enabled)")
	fs.StringVar(&c.JSON, "json", "", "write the results as JSON to this file")
	fs.StringVar(&c.MD, "md", "", "write the results as a Markdown table to this file")
	fs.DurationVar(&c.Interval, "interval", time.Second, "how often to print a progress line")
	fs.DurationVar(&c.Timeout, "timeout", 30*time.Second, "timeout of one request (long polls: their own timeout + 5s)")
	fs.BoolVar(&c.Keep, "keep", false, "keep the run's queues/streams instead of deleting them at the end")
	fs.BoolVar(&c.Quiet, "quiet", false, "no progress lines, only the summary")
	return c
}

// Env is what a scenario run needs besides its own parameters.
type Env struct {
	C      *Common
	Out    io.Writer // progress and summary
	PG     *PG       // nil with --no-pg
	Run    string    // short random id that makes queue names unique
	Report *Report
}

// runOne runs one scenario of a subcommand: it builds the environment and
// a target with conns connections, calls run, and reports what run
// measured even when run also failed.
func runOne(ctx context.Context, c *Common, out io.Writer, conns int, run func(*Env, Target) (*Result, error)) error {
	env := newEnv(ctx, c, out)
	tgt, err := env.newTarget(c.Target, conns)
	if err != nil {
		return err
	}
	defer tgt.Close()
	res, err := run(env, tgt)
	if res != nil {
		err = joinErr(err, env.finish(res))
	}
	return err
}

// newEnv builds the environment from parsed common flags.
func newEnv(ctx context.Context, c *Common, out io.Writer) *Env {
	e := &Env{C: c, Out: out, Run: runID()}
	if !c.NoPG {
		e.PG = &PG{URL: c.PGURL, Schema: c.Schema}
	}
	e.Report = &Report{Version: 1, GeneratedAt: time.Now().UTC(), Command: "bench " + strings.Join(os.Args[1:], " "),
		Host: hostInfo()}
	if e.PG != nil {
		if s, err := e.PG.Settings(ctx); err == nil {
			e.Report.Postgres = s
		} else {
			fmt.Fprintf(out, "warning: no PostgreSQL readings (%v)\n", firstLine(err.Error()))
			e.PG = nil
		}
	}
	return e
}

// logf prints a progress line unless --quiet.
func (e *Env) logf(format string, args ...any) {
	if !e.C.Quiet {
		fmt.Fprintf(e.Out, format+"\n", args...)
	}
}

// newTarget connects to the named target. maxConns sizes the HTTP client.
func (e *Env) newTarget(name string, maxConns int) (Target, error) {
	switch name {
	case "queengo", "queen", "http":
		return newQueenTarget(e.C.Label, e.C.URL, maxConns, e.C.Timeout, e.C.BrokerPID)
	case "rabbitmq", "rabbit":
		return newRabbitTarget(e.C.RabbitURL, e.C.RabbitQueueType, e.C.RabbitPrefetch)
	case "nats", "jetstream":
		return newNATSTarget(e.C.NATSURL)
	}
	return nil, fmt.Errorf("unknown target %q (queengo, rabbitmq, nats)", name)
}

// pgFor returns the PostgreSQL reader if the target's costs include it.
func (e *Env) pgFor(t Target) *PG {
	if t.UsesPostgres() {
		return e.PG
	}
	return nil
}

// finish adds results to the report, prints the summary and writes the
// files the flags ask for.
func (e *Env) finish(results ...*Result) error {
	e.Report.Results = append(e.Report.Results, results...)
	fmt.Fprintln(e.Out)
	e.Report.WriteMarkdown(e.Out, false)
	var errs []error
	if e.C.JSON != "" {
		errs = append(errs, e.Report.WriteJSON(e.C.JSON))
	}
	if e.C.MD != "" {
		errs = append(errs, e.Report.WriteMarkdownFile(e.C.MD))
	}
	return errors.Join(errs...)
}

// runID returns a short random id for queue names.
func runID() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyz23456789"
	b := make([]byte, 6)
	for i := range b {
		b[i] = alphabet[rand.IntN(len(alphabet))]
	}
	return string(b)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// parseFlags parses args, rejecting positional leftovers.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}
