// The command line's tests run the real queengo binary (the one package e2e
// builds, so main's dispatch is under test too) as a subprocess against a
// real broker on a database of the package's own, and check what a person
// or a script sees: tables, --json, exit codes.
package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "clitest") }

// bundle is a test's broker and a queue of its own.
type bundle struct {
	s     *e2e.Server
	queue string
	bin   string // the queengo binary
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return &bundle{s: e2e.Shared(t), queue: e2e.Unique(t, "cli"), bin: e2e.MustBinary(t)}
}

// result is what one run of the command line left.
type result struct {
	stdout, stderr string
	code           int
}

// command is queengo with args against the bundle's broker; the
// environment's QUEENGO_* variables are left out so the flags decide.
func (b *bundle) command(args ...string) *exec.Cmd {
	cmd := exec.Command(b.bin, append(args, "--url", b.s.URL)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUEENGO_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// run runs queengo with args and stdin and returns what it printed and its
// exit code.
func (b *bundle) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	cmd := b.command(args...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("running %v: %v", args, err)
	}
	return result{out.String(), errb.String(), cmd.ProcessState.ExitCode()}
}

// want requires exit code code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// runJSON runs queengo --json with args, requires exit 0 and decodes
// stdout into v.
func (b *bundle) runJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	r := b.run(t, "", append(args, "--json")...).want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("stdout is not JSON (%v):\n%s", err, r.stdout)
	}
}

// row returns the line of a table whose first cell is first, "" when none.
func row(table, first string) string {
	for line := range strings.Lines(table) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// field returns the value of a "key: value" line, "" when none.
func field(out, key string) string {
	for line := range strings.Lines(out) {
		if k, v, ok := strings.Cut(line, ":"); ok && k == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
