package importer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/queengo/queengo/cmd/queengo/app"
	"github.com/queengo/queengo/pg"
)

// Exit codes of `queengo import`, for scripts (docs/operations.md lists
// them).
const (
	// ExitOK: imported, and the verification found no difference.
	ExitOK = 0
	// ExitUsage: bad flags, a database that is not the one it should be,
	// an unknown queue, a conflict with what queengo holds, a missing key;
	// nothing was written.
	ExitUsage = 1
	// ExitDifferences: the run ended and its verification table shows
	// differences (rows marked DIFF).
	ExitDifferences = 2
	// ExitFailed: a database failed or could not be reached; running the
	// same command again goes on from where this one stopped.
	ExitFailed = 3
	// ExitInterrupted: SIGINT or SIGTERM stopped the run; running it again
	// goes on from where it stopped.
	ExitInterrupted = 130
)

// IsCommand reports whether arg, the first command-line argument, is this
// package's command.
func IsCommand(arg string) bool { return arg == "import" }

// Env is what the command reads from outside its arguments.
type Env struct {
	Stdout, Stderr io.Writer
	// Getenv reads the broker's environment: DATABASE_URL (or PG_*) and
	// QUEEN_ENCRYPTION_KEY, as the broker reads them (app.LoadConfig).
	Getenv func(string) string
	// StderrTerminal shows progress bars instead of progress lines.
	StderrTerminal bool
}

// OSEnv is the process's environment.
func OSEnv(stderrTerminal bool) Env {
	return Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, StderrTerminal: stderrTerminal}
}

// Main runs `queengo import` with args (the words after "import") and
// returns the exit code.
func Main(args []string, env Env) int {
	code := ExitOK
	root := &cobra.Command{Use: "queengo", SilenceUsage: true, SilenceErrors: true}
	imp := &cobra.Command{Use: "import", Short: "Import another broker's database into queengo's", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			code = ExitUsage
			return errors.New("which broker's database? queengo import queen --from URL (queengo import queen --help)")
		}}
	root.AddCommand(imp)
	var from string
	var queues []string
	var dry, noProgress bool
	var pageMessages int
	queen := &cobra.Command{
		Use:   "queen --from URL",
		Short: "Copy a reference Queen server's database into queengo's (DATABASE_URL)",
		Long: `Copies a reference Queen server's database (--from) into queengo's database
(DATABASE_URL, or PG_HOST, PG_PORT, PG_USER, PG_PASSWORD, PG_DB, as the broker
reads them; another database: both use a schema named queen): queues with
their options, partitions, messages in order, every consumer group's position
(it resumes at the first message it had not consumed; a leased message was
not), durable subscriptions, dead letters, traces and the maintenance
switches. Payloads Queen encrypted are opened with QUEEN_ENCRYPTION_KEY and
sealed again with it. A run that stops (a crash, Ctrl-C) goes on from where it
stopped when run again, and never copies a message twice. It ends with a
verification table, source against target.

Exit codes: 0 imported and verified, 1 bad input (nothing written),
2 the verification found differences, 3 a database failed (run again to go
on), 130 interrupted (run again to go on).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				code = ExitUsage
				return errors.New("--from is required: the Queen database's URL")
			}
			var p Progress
			switch {
			case noProgress:
			case env.StderrTerminal:
				p = NewBar(env.Stderr)
			default:
				p = NewLines(env.Stderr, LinesIntervalDefault)
			}
			code = execute(cmd.Context(), env, from, Options{Queues: queues, DryRun: dry, PageMessages: pageMessages,
				Out: env.Stdout, Progress: p})
			return nil
		},
	}
	f := queen.Flags()
	f.StringVar(&from, "from", "", "URL of the Queen database (postgres://user@host:5432/db)")
	f.StringSliceVar(&queues, "queues", nil, "import only these queues (comma-separated, or the flag repeated)")
	f.BoolVar(&dry, "dry-run", false, "print what the import would do and write nothing")
	f.IntVar(&pageMessages, "page", PageMessagesDefault, "messages read and written per transaction")
	f.BoolVar(&noProgress, "no-progress", false, "print no progress")
	imp.AddCommand(queen)
	root.SetArgs(append([]string{"import"}, args...))
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(env.Stderr, "queengo import:", err)
		if code == ExitOK {
			code = ExitUsage
		}
	}
	return code
}

// storeTimeout bounds each of the target store's calls: the largest, a
// count over every trace name of the imported partitions, may take long
// on a big database.
const storeTimeout = 30 * time.Minute

// execute opens both databases, runs the import and says how it ended.
func execute(ctx context.Context, env Env, from string, o Options) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(env.Stderr, "queengo import: "+format+"\n", args...)
		return code
	}
	cfg, err := app.LoadConfig(nil, env.Getenv)
	if err != nil {
		return fail(ExitUsage, "%v", err)
	}
	keys := append([][]byte(nil), cfg.EncryptionReadKeys...)
	if cfg.EncryptionKey != nil {
		keys = append([][]byte{cfg.EncryptionKey}, keys...)
	}
	src, err := pg.OpenQueenSource(ctx, pg.QueenSourceConfig{URL: from, Keys: keys})
	switch {
	case errors.Is(err, pg.ErrNotQueen), errors.Is(err, pg.ErrBadURL):
		return fail(ExitUsage, "--from: %v", err)
	case err != nil:
		return fail(ExitFailed, "cannot read the Queen database (--from): %v", err)
	}
	defer src.Close()
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dst, err := pg.Open(ctx, pg.Config{URL: cfg.DatabaseURL, PoolSize: 2, RequestTimeout: storeTimeout, Logger: log,
		EncryptionKey: cfg.EncryptionKey, EncryptionReadKeys: cfg.EncryptionReadKeys})
	if err != nil {
		return fail(ExitUsage, "DATABASE_URL: %v", err)
	}
	defer dst.Close()
	if o.Progress == nil {
		o.Progress = silent{}
	}
	_, err = Run(ctx, src, dst, o, len(keys) > 0)
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return fail(ExitUsage, "%v", err)
	case errors.Is(err, ErrDifferences):
		return fail(ExitDifferences, "%v; a run while Queen still took messages or acks copies what it found: run again once it is quiet", err)
	case ctx.Err() != nil:
		return fail(ExitInterrupted, "interrupted: run the same command again to go on from where it stopped")
	}
	return fail(ExitFailed, "%v\nrun the same command again to go on from where it stopped", err)
}
