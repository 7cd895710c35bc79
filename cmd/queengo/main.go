// Command queengo runs the broker: `queengo` serves the Queen MQ HTTP API,
// `queengo migrate` applies the schema migrations and exits. Configuration
// comes from the environment variables of the reference Queen server, and
// flags override them (`queengo -h` lists them). The operator's commands
// (`queengo queues`, `tail`, `push`, ...: package cli) talk to a running
// broker over HTTP. `queengo import queen` copies a reference Queen
// server's database into queengo's (package importer).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	_ "net/http/pprof" // served only on PPROF_ADDR
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/queengo/queengo/cmd/queengo/app"
	"github.com/queengo/queengo/cmd/queengo/cli"
	"github.com/queengo/queengo/cmd/queengo/importer"
	"golang.org/x/term"
)

func main() {
	if len(os.Args) > 1 && cli.IsCommand(os.Args[1]) {
		os.Exit(cli.Main(os.Args[1:], cli.OSEnv()))
	}
	if len(os.Args) > 1 && importer.IsCommand(os.Args[1]) {
		os.Exit(importer.Main(os.Args[2:], importer.OSEnv(term.IsTerminal(int(os.Stderr.Fd())))))
	}
	cfg, err := app.LoadConfig(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "queengo:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	gcDefaults(os.Getenv)
	migrateOnly := len(os.Args) > 1 && os.Args[len(os.Args)-1] == "migrate"
	if err := run(cfg, log, migrateOnly); err != nil {
		log.Error("queengo stopped", "err", err)
		os.Exit(1)
	}
}

const (
	// gcPercentDefault is the collector's target when GOGC is not set. At
	// the default 100 the collector was 18% of the broker's CPU at consume
	// batch 100: most of what the broker allocates (request bodies, pop
	// answers, statement arguments) dies within the request. 400 took the
	// broker's CPU per message from 15 to 11-12 µs and its peak RSS from 43
	// to 69 MB (docs/performance.md "The dated record").
	gcPercentDefault = 400
	// memoryLimitDefault is the soft memory limit when GOMEMLIMIT is not
	// set: past it the collector runs as often as it must, so the higher
	// target cannot grow a large live heap (10,000 parked long polls, a big
	// replay) five-fold.
	memoryLimitDefault = 1 << 30
)

// gcDefaults sets the garbage collector's target and soft memory limit
// unless the operator set GOGC or GOMEMLIMIT, which the runtime has read.
func gcDefaults(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercentDefault)
	}
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimitDefault)
	}
}

// procsFor returns how many Go processors the broker runs on, where the
// runtime chose n: one when it shares a 2-CPU machine with its PostgreSQL
// server (local: the database URL names a Unix socket or a loopback
// address) and the operator did not set GOMAXPROCS, else n. With two, on
// such a machine, the scheduler's idle processor spun and woke on the
// broker's hand-offs between goroutines (a request, its actor, its claim
// round, and back) and took CPU that the database's backends, which the
// broker waits for, were short of: one processor consumed and pushed 10-53%
// more messages a second at batch 1 to 100 and cut the broker's CPU per
// message by a fifth to a half (docs/performance.md, "Other measurements").
// Nothing is known of larger machines, or of a database elsewhere, so they
// keep the runtime's choice.
func procsFor(getenv func(string) string, local bool, n int) int {
	if getenv("GOMAXPROCS") == "" && local && n == 2 {
		return 1
	}
	return n
}

func run(cfg *app.Config, log *slog.Logger, migrateOnly bool) error {
	ctx := context.Background()
	a, err := app.Open(ctx, cfg, log)
	if err != nil {
		return err
	}
	chosen := runtime.GOMAXPROCS(0)
	if n := procsFor(os.Getenv, a.Local(), chosen); n != chosen {
		runtime.GOMAXPROCS(n)
		log.Info("running on one Go processor: PostgreSQL shares this 2-CPU machine (GOMAXPROCS overrides)")
	}
	if migrateOnly {
		a.Shutdown(ctx)
		if a.Pending() {
			return errors.New("database unavailable: the migrations did not run")
		}
		return nil
	}
	if err := a.Start(nil); err != nil {
		a.Shutdown(ctx)
		return err
	}
	log.Info("queengo listening", "addr", a.Addr().String(), "pool_size", cfg.PoolSize, "gomaxprocs", runtime.GOMAXPROCS(0))
	if cfg.PprofAddr != "" {
		go func() {
			// The default mux carries only the pprof handlers.
			log.Warn("pprof server stopped", "err", http.ListenAndServe(cfg.PprofAddr, nil))
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-a.Served():
		a.Shutdown(ctx)
		return err
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	}
	a.Shutdown(ctx)
	log.Info("queengo stopped")
	return nil
}
