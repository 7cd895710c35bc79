package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/queengo/queengo/http/client"
	"github.com/spf13/cobra"
)

// TailIntervalDefault is how often tail asks for new messages.
const TailIntervalDefault = time.Second

// tailOverlap is how far before the newest message it has seen tail looks
// again. A segment's createdAt is taken when its write holds its
// partitions' locks, and it becomes visible at commit a few milliseconds
// later; meanwhile a segment of another partition may commit with a later
// createdAt. Looking 2 s back (and skipping what was printed) catches every
// write that took less than that between the two; a longer one can be
// missed, which tail accepts for reading nothing but the messages list.
const tailOverlap = 2 * time.Second

// messagePage is the messages list's largest page (docs/api-admin.md "Messages").
const messagePage = 1000

// messagePartitionsMax is how many partitions the messages list looks at
// in one request (the most recently written ones).
const messagePartitionsMax = 100

// tailEntry is an element of GET /api/v1/messages.
type tailEntry struct {
	ID            string  `json:"id"`
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	Queue         string  `json:"queue"`
	Partition     string  `json:"partition"`
	TraceID       *string `json:"traceId"`
	CreatedAt     string  `json:"createdAt"`
}

// tailLine is what tail prints per message with --json, one per line.
type tailLine struct {
	CreatedAt     string          `json:"createdAt"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	PartitionID   string          `json:"partitionId"`
	TransactionID string          `json:"transactionId"`
	ID            string          `json:"id"`
	TraceID       *string         `json:"traceId"`
	Data          json.RawMessage `json:"data,omitempty"`
}

func (a *app) tailCmd() *cobra.Command {
	var partition string
	var interval time.Duration
	var noData bool
	cmd := &cobra.Command{
		Use:   "tail QUEUE",
		Short: "Print the messages pushed to a queue from now on, consuming nothing",
		Long: `Print each message pushed to QUEUE (or one --partition) after tail started,
oldest first, until interrupted (exit 0). Each line is the message's time,
partition, transaction id and payload; --json prints one JSON object per
line.

tail only reads: it polls the messages list (GET /api/v1/messages) every
--interval and reads each new message's payload from the message view, so
no consumer group sees anything of it, none is created, and nothing is left
behind however tail ends; a read-only token is enough. --no-data skips the
payloads (one request per message fewer). Each poll looks at most at the 100
partitions written most recently: with more written within one interval,
narrow it with --partition or a shorter --interval (tail warns on stderr).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval <= 0 {
				return usagef("--interval must be more than 0")
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			t := &tailer{app: a, c: c, queue: args[0], partition: partition, data: !noData,
				seen: map[string]string{}}
			return t.run(cmd.Context(), interval)
		},
	}
	cmd.Flags().StringVar(&partition, "partition", "", "only this partition")
	cmd.Flags().DurationVar(&interval, "interval", TailIntervalDefault, "how often to look for new messages")
	cmd.Flags().BoolVar(&noData, "no-data", false, "print no payloads")
	return cmd
}

type tailer struct {
	*app
	c                *client.Client
	queue, partition string
	data             bool
	// seen holds what was printed (or was there at the start) by
	// partitionId/transactionId, with its createdAt, for the overlap.
	seen map[string]string
	// cursor is the newest createdAt seen: each poll starts tailOverlap
	// before it.
	cursor time.Time
}

func (t *tailer) run(ctx context.Context, interval time.Duration) error {
	// The start: the broker's clock (its Date header), so a client clock
	// that is off does not matter. What is already there is marked seen.
	start, err := t.list(ctx, time.Time{})
	if err != nil {
		return t.stopped(err)
	}
	fmt.Fprintf(t.env.Stderr, "tailing %s since %s (Ctrl-C to stop)\n", t.queue, t.cursor.Format(time.RFC3339))
	for _, m := range start {
		t.seen[m.PartitionID+"/"+m.TransactionID] = m.CreatedAt
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if err := t.poll(ctx); err != nil {
			return t.stopped(err)
		}
	}
}

// stopped turns the interruption that ends every tail into success.
func (t *tailer) stopped(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// list reads every page of the messages written since from (the zero time:
// since the broker's now minus tailOverlap, which also sets the cursor).
func (t *tailer) list(ctx context.Context, from time.Time) ([]tailEntry, error) {
	var all []tailEntry
	q := url.Values{"queue": {t.queue}, "limit": {strconv.Itoa(messagePage)}}
	if t.partition != "" {
		q.Set("partition", t.partition)
	}
	if from.IsZero() {
		// A first request to read the broker's clock: the list of one
		// message also answers 404 for an unknown queue.
		q.Set("limit", "1")
		var page struct{}
		var date string
		path := "/api/v1/messages?" + q.Encode()
		err := t.c.Do(ctx, http.MethodGet, path, nil, func(status int, h client.Header, body []byte) error {
			date = h.Get("Date")
			return client.ReadJSON(http.MethodGet, path, status, body, &page)
		})
		if err != nil {
			return nil, err
		}
		now, err := http.ParseTime(date)
		if err != nil {
			now = time.Now()
		}
		t.cursor = now.UTC()
		from = t.cursor.Add(-tailOverlap)
		q.Set("limit", strconv.Itoa(messagePage))
	}
	q.Set("from", from.UTC().Format(time.RFC3339Nano))
	partitions := map[string]bool{}
	for offset := 0; ; offset += messagePage {
		q.Set("offset", strconv.Itoa(offset))
		var page struct {
			Messages  []tailEntry `json:"messages"`
			Truncated bool        `json:"truncated"`
		}
		if err := t.c.GetJSON(ctx, "/api/v1/messages", q, &page); err != nil {
			return nil, err
		}
		for _, m := range page.Messages {
			partitions[m.PartitionID] = true
		}
		all = append(all, page.Messages...)
		if page.Truncated {
			fmt.Fprintln(t.env.Stderr, "tail: more messages arrived than one look reads (100,000); some are not shown")
		}
		if page.Truncated || len(page.Messages) < messagePage {
			break
		}
	}
	if len(partitions) >= messagePartitionsMax {
		fmt.Fprintf(t.env.Stderr, "tail: %d partitions were written within one look; messages of others may not be shown (use --partition or a shorter --interval)\n",
			len(partitions))
	}
	return all, nil
}

// poll prints the messages not seen yet, oldest first.
func (t *tailer) poll(ctx context.Context) error {
	from := t.cursor.Add(-tailOverlap)
	got, err := t.list(ctx, from)
	if err != nil {
		return err
	}
	// The list is partition by partition, newest first within each:
	// reversed, each partition's messages are in offset order, and a
	// stable sort by time keeps that order among messages written together.
	slices.Reverse(got)
	slices.SortStableFunc(got, func(x, y tailEntry) int { return strings.Compare(x.CreatedAt, y.CreatedAt) })
	for _, m := range got {
		key := m.PartitionID + "/" + m.TransactionID
		if _, ok := t.seen[key]; ok {
			continue
		}
		t.seen[key] = m.CreatedAt
		if c, err := time.Parse(time.RFC3339Nano, m.CreatedAt); err == nil && c.After(t.cursor) {
			t.cursor = c
		}
		if err := t.print(ctx, m); err != nil {
			return err
		}
	}
	// What is older than the next look's start will not be listed again.
	next := t.cursor.Add(-tailOverlap).Format("2006-01-02T15:04:05.000000Z")
	for k, at := range t.seen {
		if at < next {
			delete(t.seen, k)
		}
	}
	return nil
}

// print writes one message, reading its payload from the message view
// unless --no-data; a message deleted in between is printed without it.
func (t *tailer) print(ctx context.Context, m tailEntry) error {
	var data json.RawMessage
	if t.data {
		var view struct {
			Payload json.RawMessage `json:"payload"`
		}
		err := t.c.GetJSON(ctx, "/api/v1/messages/"+seg(m.PartitionID)+"/"+seg(m.TransactionID), nil, &view)
		var ae *client.APIError
		switch {
		case errors.As(err, &ae) && ae.Status == 404:
		case err != nil:
			return err
		default:
			data = view.Payload
		}
	}
	if t.json {
		b, _ := json.Marshal(tailLine{CreatedAt: m.CreatedAt, Queue: m.Queue, Partition: m.Partition,
			PartitionID: m.PartitionID, TransactionID: m.TransactionID, ID: m.ID, TraceID: m.TraceID, Data: data})
		_, err := fmt.Fprintln(t.env.Stdout, string(b))
		return err
	}
	shown := "-"
	if data != nil {
		shown = string(data)
	}
	_, err := fmt.Fprintf(t.env.Stdout, "%s  %s  %s  %s\n", m.CreatedAt, m.Partition, m.TransactionID, shown)
	return err
}
