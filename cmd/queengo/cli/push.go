package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/queengo/queengo/http/client"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// PushBatchDefault is how many messages one push request carries. Requests
// go one after the other (to keep the input's order), so the round trip and
// the commit per request set the pace: 20,000 small payloads took 3.4-4.3 s
// at 100 a request, 2.5-2.8 s at 500 and 1.5-1.9 s at 1000 on the shared
// 2-core machine (docs/operations.md). pushBodyMax bounds a batch's size.
const PushBatchDefault = 1000

// pushBodyMax flushes a batch early once its payloads pass 4 MiB, a quarter
// of the broker's 16 MiB body limit, so large payloads never make a request
// the broker refuses as a whole (413).
const pushBodyMax = 4 << 20

// pushLineMax is the longest input line read: the broker's body limit,
// since no longer payload could be pushed anyway.
const pushLineMax = 16 << 20

// maxFailuresShown caps the per-item failures a push reports one by one.
const maxFailuresShown = 10

type pushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition,omitempty"`
	Payload       json.RawMessage `json:"payload"`
	TransactionID string          `json:"transactionId,omitempty"`
}

type pushResult struct {
	Status string  `json:"status"`
	Error  *string `json:"error"`
}

// pushFailure is one item the broker did not store; Item is its line
// (lines input) or its 1-based position (array input).
type pushFailure struct {
	Item  int    `json:"item"`
	Error string `json:"error"`
}

// pushSummary is what a push reports, also when it stopped early.
type pushSummary struct {
	Queue     string        `json:"queue"`
	Partition string        `json:"partition"`
	Queued    int           `json:"queued"`
	Duplicate int           `json:"duplicate"`
	Failed    int           `json:"failed"`
	Requests  int           `json:"requests"`
	Seconds   float64       `json:"seconds"`
	Failures  []pushFailure `json:"failures"`
	// StoppedAt is the first item of the request that failed, when one
	// did: nothing from it on was stored.
	StoppedAt int `json:"stoppedAt,omitempty"`
}

// partialError is a push that ran to the end with some items failed.
type partialError struct{ failed, total int }

func (e *partialError) Error() string {
	return fmt.Sprintf("%d of %d messages were not stored", e.failed, e.total)
}

func (a *app) pushCmd() *cobra.Command {
	var partition, idPrefix string
	var batch int
	var lines, noProgress bool
	cmd := &cobra.Command{
		Use:   "push QUEUE [FILE]",
		Short: "Push messages from a file or stdin",
		Long: `Push the payloads in FILE (or stdin, also for "-") to QUEUE, in input order,
--batch messages per request. The input is a JSON array of payloads, or one
JSON payload per line (blank lines skipped); it is read as an array when it
starts with '[' unless --lines says each line is a payload.

Without --id-prefix every message gets a generated transaction id, so pushing
the same input again stores it again. With --id-prefix P each message's
transaction id is P followed by its line (or position in the array), and a
push repeated after a failure stores each message once (the broker answers
the ones it has "duplicate").

A progress bar shows on stderr when it is a terminal. The summary (--json: an
object) goes to stdout. Exit code 5 when some items failed (the rest are
stored), 2 or 3 when a request failed: nothing from its first item
("stoppedAt") on was stored.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if batch < 1 || batch > 10000 {
				return usagef("--batch must be 1 to 10000")
			}
			in, size := a.env.Stdin, int64(-1)
			if len(args) == 2 && args[1] != "-" {
				f, err := os.Open(args[1])
				if err != nil {
					return usageError{err}
				}
				defer f.Close()
				in = f
				if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
					size = st.Size()
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			p := &pusher{app: a, c: c, idPrefix: idPrefix, batch: batch,
				sum: pushSummary{Queue: args[0], Partition: partition, Failures: []pushFailure{}}}
			if partition == "" {
				p.sum.Partition = "Default"
			}
			p.in = &countingReader{r: in}
			if a.env.StderrTerminal && !noProgress {
				p.bar = newBar(a.env.Stderr, size)
			}
			err = p.run(cmd.Context(), lines)
			if p.bar != nil {
				_ = p.bar.Finish()
			}
			if werr := p.report(); werr != nil && err == nil {
				err = werr
			}
			if err == nil && p.sum.Failed > 0 {
				err = &partialError{p.sum.Failed, p.sum.Queued + p.sum.Duplicate + p.sum.Failed}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&partition, "partition", "", "partition to push to (default Default)")
	f.IntVar(&batch, "batch", PushBatchDefault, "messages per request, 1 to 10000")
	f.BoolVar(&lines, "lines", false, "read one payload per line even when the input starts with '['")
	f.StringVar(&idPrefix, "id-prefix", "", "transaction id prefix: ids are PREFIX<line>, so a repeated push stores nothing twice")
	f.BoolVar(&noProgress, "no-progress", false, "never show the progress bar")
	return cmd
}

// newBar is a byte bar over a file of known size, else a spinner counting
// messages.
func newBar(w io.Writer, size int64) *progressbar.ProgressBar {
	opts := []progressbar.Option{progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("pushing"),
		progressbar.OptionThrottle(100 * time.Millisecond), progressbar.OptionClearOnFinish(),
		progressbar.OptionSetElapsedTime(true)}
	if size >= 0 {
		return progressbar.NewOptions64(size, append(opts, progressbar.OptionShowBytes(true))...)
	}
	return progressbar.NewOptions64(-1, append(opts, progressbar.OptionShowCount(),
		progressbar.OptionSetItsString("msg"), progressbar.OptionShowIts())...)
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type pusher struct {
	*app
	c        *client.Client
	in       *countingReader
	bar      *progressbar.ProgressBar
	idPrefix string
	batch    int
	sum      pushSummary
	start    time.Time
}

// run reads the input and pushes it batch by batch, in order.
func (p *pusher) run(ctx context.Context, forceLines bool) error {
	p.start = time.Now()
	defer func() { p.sum.Seconds = time.Since(p.start).Seconds() }()
	br := bufio.NewReaderSize(p.in, 64<<10)
	next, err := p.source(br, forceLines)
	if err != nil {
		return err
	}
	var items []pushItem
	var pos []int
	bytesIn := 0
	flush := func() error {
		if len(items) == 0 {
			return nil
		}
		err := p.send(ctx, items, pos)
		items, pos, bytesIn = items[:0], pos[:0], 0
		return err
	}
	for {
		raw, n, err := next()
		if err == io.EOF {
			return flush()
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return err
		}
		it := pushItem{Queue: p.sum.Queue, Partition: p.sum.Partition, Payload: raw}
		if p.idPrefix != "" {
			it.TransactionID = p.idPrefix + strconv.Itoa(n)
		}
		items, pos = append(items, it), append(pos, n)
		if bytesIn += len(raw); len(items) >= p.batch || bytesIn >= pushBodyMax {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// source returns the iterator over the input's payloads: each with its
// line or array position; io.EOF at the end.
func (p *pusher) source(br *bufio.Reader, forceLines bool) (func() (json.RawMessage, int, error), error) {
	first, err := firstByte(br)
	if err != nil && err != io.EOF {
		return nil, usageError{err}
	}
	if first == '[' && !forceLines {
		dec := json.NewDecoder(br)
		if _, err := dec.Token(); err != nil {
			return nil, usagef("reading the array: %v", err)
		}
		i := 0
		return func() (json.RawMessage, int, error) {
			if !dec.More() {
				if _, err := dec.Token(); err != nil {
					return nil, i, usagef("after item %d: the array does not end: %v", i, err)
				}
				// Anything after the array would be lost silently.
				if _, err := dec.Token(); err != io.EOF {
					return nil, i, usagef("after the array's %d items: more input", i)
				}
				return nil, i, io.EOF
			}
			i++
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, i, usagef("item %d: not JSON: %v", i, err)
			}
			return raw, i, nil
		}, nil
	}
	line := 0
	return func() (json.RawMessage, int, error) {
		for {
			b, err := readLine(br)
			if len(b) == 0 && err != nil {
				if err == io.EOF {
					return nil, line, io.EOF
				}
				return nil, line, usageError{err}
			}
			line++
			b = bytes.TrimSpace(b)
			if len(b) == 0 {
				continue
			}
			if !json.Valid(b) {
				return nil, line, usagef("line %d: not a JSON value: %s", line, preview(b, 60))
			}
			return bytes.Clone(b), line, nil
		}
	}, nil
}

// readLine reads one line without its newline, refusing lines longer than
// pushLineMax.
func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		out = append(out, chunk...)
		if len(out) > pushLineMax {
			return nil, errors.New("a line is longer than 16 MiB")
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimRight(out, "\r\n"), err
	}
}

// firstByte peeks at the first byte that is not white space.
func firstByte(br *bufio.Reader) (byte, error) {
	for {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return b, br.UnreadByte()
	}
}

// send pushes one batch and counts its results.
func (p *pusher) send(ctx context.Context, items []pushItem, pos []int) error {
	var results []pushResult
	err := p.c.SendJSON(ctx, http.MethodPost, "/api/v1/push", map[string]any{"items": items}, &results)
	p.sum.Requests++
	if err != nil {
		p.sum.StoppedAt = pos[0]
		return err
	}
	for i, r := range results {
		switch r.Status {
		case "queued":
			p.sum.Queued++
		case "duplicate":
			p.sum.Duplicate++
		default:
			p.sum.Failed++
			if len(p.sum.Failures) < maxFailuresShown && i < len(pos) {
				msg := r.Status
				if r.Error != nil {
					msg = *r.Error
				}
				p.sum.Failures = append(p.sum.Failures, pushFailure{Item: pos[i], Error: msg})
			}
		}
	}
	if p.bar != nil {
		if p.bar.GetMax64() >= 0 {
			_ = p.bar.Set64(p.in.n)
		} else {
			_ = p.bar.Add(len(items))
		}
	}
	return nil
}

// report prints the summary: an object with --json, else a line (and the
// failures) for people.
func (p *pusher) report() error {
	s := &p.sum
	if p.json {
		return writeJSON(p.env.Stdout, s)
	}
	fmt.Fprintf(p.env.Stdout, "pushed to %s/%s: %d queued, %d duplicate, %d failed in %d requests (%.2fs)\n",
		s.Queue, s.Partition, s.Queued, s.Duplicate, s.Failed, s.Requests, s.Seconds)
	for _, f := range s.Failures {
		fmt.Fprintf(p.env.Stdout, "  item %d: %s\n", f.Item, f.Error)
	}
	if s.StoppedAt > 0 {
		fmt.Fprintf(p.env.Stdout, "stopped at item %d: nothing from it on was stored\n", s.StoppedAt)
	}
	return nil
}
