package cli_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/queengo/queengo/http/e2e"
)

// popAll pops everything of queue in queue mode and returns the payloads
// as the broker sent them, in order.
func popAll(t *testing.T, s *e2e.Server, queue string) []string {
	t.Helper()
	var got []string
	for {
		p := s.Pop(t, e2e.PopQueue(queue, "batch", "100", "autoAck", "true"))
		if p == nil {
			return got
		}
		for _, m := range p.Messages {
			got = append(got, string(m.RawData))
		}
	}
}

type pushSummary struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
	Queued    int    `json:"queued"`
	Duplicate int    `json:"duplicate"`
	Failed    int    `json:"failed"`
	Requests  int    `json:"requests"`
	Failures  []struct {
		Item  int    `json:"item"`
		Error string `json:"error"`
	} `json:"failures"`
	StoppedAt int `json:"stoppedAt"`
}

// A file of one payload per line (blank lines skipped) is pushed in
// batches, in order; a pop gets every payload back as written.
func TestCLI_PushFileLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	want := []string{`{"a":1}`, `"text"`, `[1,2]`, `null`, `{"nested":{"x":[true,false]}}`}
	file := filepath.Join(t.TempDir(), "in.jsonl")
	body := want[0] + "\n\n" + strings.Join(want[1:], "\r\n") + "\n"
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := b.run(t, "", "push", b.queue, file, "--batch", "2").want(t, 0)
	if !strings.Contains(r.stdout, "5 queued, 0 duplicate, 0 failed in 3 requests") {
		t.Fatalf("summary: %s", r.stdout)
	}
	if got := popAll(t, b.s, b.queue); !slices.Equal(got, want) {
		t.Fatalf("popped %q, want %q", got, want)
	}
	// --lines reads a file that starts with '[' line by line.
	if err := os.WriteFile(file, []byte("[1,2]\n[3]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.run(t, "", "push", b.queue, file, "--lines").want(t, 0)
	if got := popAll(t, b.s, b.queue); !slices.Equal(got, []string{"[1,2]", "[3]"}) {
		t.Fatalf("--lines popped %q", got)
	}
}

// A JSON array on stdin is pushed item by item to the partition asked;
// with --id-prefix a second push of the same input stores nothing again.
func TestCLI_PushStdinArray(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := ` [ {"n": 1}, {"n": 2},
	  {"n": 3} ]`
	var sum pushSummary
	r := b.run(t, in, "push", b.queue, "-", "--partition", "p1", "--id-prefix", "imp-", "--json").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("summary (%v): %s", err, r.stdout)
	}
	if sum.Queue != b.queue || sum.Partition != "p1" || sum.Queued != 3 || sum.Failed != 0 || sum.Requests != 1 {
		t.Fatalf("summary: %+v", sum)
	}
	r = b.run(t, in, "push", b.queue, "--partition", "p1", "--id-prefix", "imp-", "--json").want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil || sum.Queued != 0 || sum.Duplicate != 3 {
		t.Fatalf("second push (%v): %s", err, r.stdout)
	}
	p := b.s.PopOK(t, e2e.PopPartition(b.queue, "p1", "batch", "10"))
	if got := p.TxIDs(); !slices.Equal(got, []string{"imp-1", "imp-2", "imp-3"}) {
		t.Fatalf("transaction ids %q", got)
	}
	var ns []string
	for _, m := range p.Messages {
		ns = append(ns, string(m.RawData))
	}
	if !slices.Equal(ns, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}) {
		t.Fatalf("payloads %q", ns)
	}
}

// Input that is not JSON stops the push at its line with exit 1; what
// came before it is stored.
func TestCLI_PushBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.run(t, "{\"ok\":1}\n{bad\n{\"never\":1}\n", "push", b.queue).want(t, 1)
	if !strings.Contains(r.stderr, "line 2") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	if got := popAll(t, b.s, b.queue); !slices.Equal(got, []string{`{"ok":1}`}) {
		t.Fatalf("stored %q", got)
	}
	r = b.run(t, "[1, 2", "push", b.queue).want(t, 1)
	if !strings.Contains(r.stderr, "item") {
		t.Fatalf("stderr of a cut array: %s", r.stderr)
	}
	r = b.run(t, "[3] [4]", "push", b.queue).want(t, 1)
	if !strings.Contains(r.stderr, "more input") {
		t.Fatalf("stderr of input after the array: %s", r.stderr)
	}
	b.run(t, "", "push", b.queue, filepath.Join(t.TempDir(), "missing")).want(t, 1)
	b.run(t, "", "push", b.queue, "--batch", "0").want(t, 1)
}

// A full queue (maxSize) refuses some items: exit 5 with the failures
// named; a push it refuses whole is the server's 409: exit 2, stopped at
// its first item.
func TestCLI_PushExitCodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.s.Configure(t, b.queue, map[string]any{"maxSize": 2})
	var sum pushSummary
	r := b.run(t, "1\n2\n3\n", "push", b.queue, "--json").want(t, 5)
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("summary (%v): %s", err, r.stdout)
	}
	if sum.Queued != 2 || sum.Failed != 1 || len(sum.Failures) != 1 || sum.Failures[0].Item != 3 || sum.Failures[0].Error == "" {
		t.Fatalf("summary: %+v", sum)
	}
	r = b.run(t, "4\n", "push", b.queue).want(t, 2)
	if !strings.Contains(r.stdout, "stopped at item 1") || !strings.Contains(r.stderr, "409") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	// A name the broker refuses: 400, exit 2.
	b.run(t, "1\n", "push", "bad\x01name").want(t, 2)
}

// Exit codes for a broker that is not there and for usage mistakes; the
// server's own `queengo migrate` and flags are not the command line's.
func TestCLI_ExitCodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gone := &bundle{s: &e2e.Server{URL: "http://127.0.0.1:" + strconv.Itoa(e2e.FreePort(t))}, bin: e2e.MustBinary(t)}
	r := gone.run(t, "", "queues").want(t, 3)
	if !strings.Contains(r.stderr, "unreachable") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	b.run(t, "", "queues", "extra").want(t, 1)
	b.run(t, "", "queues", "--no-such-flag").want(t, 1)
	b.run(t, "", "tail").want(t, 1)
	b.run(t, "", "tail", e2e.Unique(t, "missing")).want(t, 4)
	r = b.run(t, "", "help").want(t, 0)
	if !strings.Contains(r.stdout, "Exit codes") || !strings.Contains(r.stdout, "tail") {
		t.Fatalf("help:\n%s", r.stdout)
	}
}

// --token (or QUEENGO_TOKEN) is sent as a bearer token; without one a
// broker with JWT_ENABLED refuses: exit 2.
func TestCLI_Token(t *testing.T) {
	t.Parallel()
	const secret = "cli-test-secret-of-32-bytes-long!"
	b := &bundle{s: e2e.Start(t, "JWT_ENABLED=true", "JWT_SECRET="+secret), queue: e2e.Unique(t, "cli"), bin: e2e.MustBinary(t)}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "ops", "role": "read-only",
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	r := b.run(t, "", "queues").want(t, 2)
	if !strings.Contains(r.stderr, "Authentication required") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	b.run(t, "", "queues", "--token", tok).want(t, 0)
	cmd := b.command("groups")
	cmd.Env = append(cmd.Env, "QUEENGO_TOKEN="+tok)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("QUEENGO_TOKEN: %v\n%s", err, out)
	}
	// A read-only token cannot push: 403, exit 2.
	b.run(t, "1\n", "push", b.queue, "--token", tok).want(t, 2)
}

// tail prints the messages pushed after it started, oldest first, with
// their payloads, and not those pushed before; it consumes nothing (every
// group still gets them all, and no group appears) and exits 0 when
// interrupted.
func TestCLI_Tail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.s.PushN(t, b.queue, "", 2)
	cmd := b.command("tail", b.queue, "--json", "--interval", "100ms")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	started := make(chan string, 1)
	var errText strings.Builder
	errDone := make(chan struct{})
	go func() {
		defer close(errDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "tailing ") {
				started <- sc.Text()
			}
			errText.WriteString(sc.Text() + "\n")
		}
	}()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("tail did not start within 30 s")
	}
	after := append(b.s.PushN(t, b.queue, "", 2), b.s.PushN(t, b.queue, "other", 1)...)
	type line struct {
		Queue         string          `json:"queue"`
		Partition     string          `json:"partition"`
		TransactionID string          `json:"transactionId"`
		Data          json.RawMessage `json:"data"`
	}
	var got []line
	for len(got) < len(after) {
		select {
		case s, ok := <-lines:
			if !ok {
				t.Fatalf("tail stopped after %d lines", len(got))
			}
			var l line
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatalf("not JSON (%v): %s", err, s)
			}
			got = append(got, l)
		case <-time.After(30 * time.Second):
			t.Fatalf("tail printed %d of %d messages within 30 s", len(got), len(after))
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for s := range lines {
		t.Errorf("a line more than pushed: %s", s)
	}
	<-errDone // Wait closes the pipes: every read must be done before it
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tail exited with %v\n%s", err, errText.String())
	}
	for i, p := range after {
		want, _ := json.Marshal(p.Payload)
		if got[i].TransactionID != p.Tx || got[i].Queue != b.queue || string(got[i].Data) != string(want) {
			t.Errorf("line %d: %+v, want %s with %s", i, got[i], p.Tx, want)
		}
	}
	if got[2].Partition != "other" {
		t.Errorf("the last line's partition: %q", got[2].Partition)
	}
	// Nothing consumed, no group made.
	var list []groupJSON
	b.runJSON(t, &list, "groups")
	for _, e := range list {
		if e.QueueName == b.queue {
			t.Fatalf("tail left a consumer group: %+v", e)
		}
	}
	p := b.s.PopOK(t, e2e.PopQueue(b.queue, "batch", "10", "partitions", "2"))
	if len(p.Messages) != len(before)+len(after) {
		t.Fatalf("queue mode got %d messages, want all %d", len(p.Messages), len(before)+len(after))
	}
}
