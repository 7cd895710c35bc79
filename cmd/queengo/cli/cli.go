// Package cli is queengo's command line for operators: subcommands that
// read and change a running broker through its public HTTP API only
// (docs/api.md), so they work against any Queen-compatible server and
// against several brokers behind a load balancer. `queengo` without a
// command still serves and `queengo migrate` still migrates; main
// dispatches here only when the first argument is one of Commands.
//
// Output is a table for people, or JSON with --json for scripts, and the
// exit code tells a script what happened (ExitOK and the rest below).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/queengo/queengo/http/client"
	"github.com/spf13/cobra"
)

// Exit codes. They are part of the command line's contract
// (docs/operations.md lists them): a script may branch on each.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitUsage: bad flags or arguments, or unreadable input (a push file
	// that is not JSON); nothing was sent, or nothing more after the line
	// named.
	ExitUsage = 1
	// ExitRejected: the server refused the request with a 4xx other than
	// 404 (bad input, 401/403 for the token, 409 for a full queue).
	ExitRejected = 2
	// ExitServer: the server failed (5xx) or could not be reached, or
	// the request timed out; retrying later may help.
	ExitServer = 3
	// ExitNotFound: the server answered 404 (unknown queue, group, dead
	// letter, message).
	ExitNotFound = 4
	// ExitPartial: a push whose requests all succeeded but some of whose
	// items the server reported as failed (the rest are stored).
	ExitPartial = 5
	// ExitInterrupted: SIGINT or SIGTERM stopped a command before it was
	// done (128 + SIGINT, as shells report it). tail, which runs until
	// stopped, exits 0 instead.
	ExitInterrupted = 130
)

// errInterrupted is a request cut short by SIGINT or SIGTERM.
var errInterrupted = errors.New("interrupted")

// URLDefault is the broker address when neither --url nor QUEENGO_URL is
// given: the broker's default port on this machine.
const URLDefault = "http://localhost:6632"

// TimeoutDefault bounds each HTTP request of a command. The broker bounds
// its own database work by DB_REQUEST_TIMEOUT_MS (10 s), so 30 s leaves it
// room to answer its own timeout before the client gives up.
const TimeoutDefault = 30 * time.Second

// Commands are the first arguments main hands to Main; anything else is the
// server's (no argument, its flags, or migrate).
var Commands = []string{"queues", "queue", "groups", "seek", "dlq", "push", "tail", "streams", "help"}

// IsCommand reports whether arg, the first command-line argument, names a
// command of this package.
func IsCommand(arg string) bool { return slices.Contains(Commands, arg) }

// Env is what a command reads from outside its arguments.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// StderrTerminal shows the push progress bar: only people watching a
	// terminal want it, not a log file.
	StderrTerminal bool
}

// OSEnv is the process's own environment.
func OSEnv() Env {
	return Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		StderrTerminal: isTerminal(os.Stderr)}
}

// Main runs the command args (without the program name) and returns the
// exit code.
func Main(args []string, env Env) int {
	a := &app{env: env}
	root := a.root()
	root.SetArgs(args)
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, context.Canceled) {
		// Only the signals end ctx: a request they cut short.
		err = errInterrupted
	}
	code := exitCode(err)
	switch {
	case a.json:
		enc := json.NewEncoder(env.Stderr)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(errorJSON{Error: err.Error(), Status: statusOf(err), Exit: code})
	case code == ExitUsage:
		fmt.Fprintf(env.Stderr, "queengo: %v\nRun 'queengo help' for usage.\n", err)
	default:
		fmt.Fprintf(env.Stderr, "queengo: %v\n", err)
	}
	return code
}

// errorJSON is how a failure is reported on stderr with --json.
type errorJSON struct {
	Error  string `json:"error"`
	Status int    `json:"status,omitempty"` // the HTTP status, when the server answered
	Exit   int    `json:"exit"`
}

// app holds the global flags and the environment of one Main.
type app struct {
	env     Env
	url     string
	token   string
	json    bool
	timeout time.Duration
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "queengo",
		Short: "queengo broker and its command line",
		Long: `queengo without a command runs the broker (its flags: queengo -h);
queengo migrate applies the schema migrations and exits.

The commands below talk to a running broker over its HTTP API.
Exit codes: 0 ok, 1 usage or bad input, 2 the server refused the request (4xx),
3 server error or unreachable, 4 not found (404), 5 push stored only some items,
130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// The broker's own flags are parsed by the server's flag set;
		// here a command is required.
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	url := a.env.Getenv("QUEENGO_URL")
	if url == "" {
		url = URLDefault
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", url, "broker base URL (env QUEENGO_URL)")
	pf.StringVar(&a.token, "token", a.env.Getenv("QUEENGO_TOKEN"), "bearer token when the broker has JWT_ENABLED (env QUEENGO_TOKEN)")
	pf.BoolVar(&a.json, "json", false, "print JSON for scripts instead of tables")
	pf.DurationVar(&a.timeout, "timeout", TimeoutDefault, "bound of each HTTP request")
	root.AddCommand(a.queuesCmd(), a.queueCmd(), a.groupsCmd(), a.seekCmd(), a.dlqCmd(), a.pushCmd(), a.tailCmd(), a.streamsCmd())
	return root
}

// usageError is a mistake in the command line or its input: exit 1.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// exitCode maps an error to its exit code. Errors of cobra itself (an
// unknown command, a wrong number of arguments) carry no type of ours and
// are usage errors.
func exitCode(err error) int {
	var ae *client.APIError
	var ue *client.UnreachableError
	var pe *partialError
	switch {
	case errors.As(err, &pe):
		return ExitPartial
	case errors.As(err, &ae):
		switch {
		case ae.Status == 404:
			return ExitNotFound
		case ae.Status >= 400 && ae.Status < 500:
			return ExitRejected
		}
		return ExitServer
	case errors.As(err, &ue):
		return ExitServer
	case errors.Is(err, errInterrupted):
		return ExitInterrupted
	}
	return ExitUsage
}

func statusOf(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}
