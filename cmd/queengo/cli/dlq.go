package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// dlqPageMax is the DLQ list's largest page (docs/api.md "Dead letters").
const dlqPageMax = 1000

// deadLetter is an element of GET /api/v1/dlq.
type deadLetter struct {
	ID            string          `json:"id"`
	TransactionID string          `json:"transactionId"`
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	ConsumerGroup string          `json:"consumerGroup"`
	ErrorMessage  *string         `json:"errorMessage"`
	RetryCount    int64           `json:"retryCount"`
	Data          json.RawMessage `json:"data"`
	FailedAt      string          `json:"failedAt"`
}

func (a *app) dlqCmd() *cobra.Command {
	var queue, group, partition, from, to string
	var limit, offset int
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List dead letters; requeue or delete them",
		Long: `List dead letters, newest failure first, filtered by queue, consumer group,
partition and failure time, one page of --limit (at most 1000) from --offset.
--json prints the API's answer (GET /api/v1/dlq): {"messages", "total", "pagination"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > dlqPageMax || offset < 0 {
				return usagef("--limit must be 1 to %d and --offset 0 or more", dlqPageMax)
			}
			q := url.Values{"limit": {strconv.Itoa(limit)}, "offset": {strconv.Itoa(offset)}}
			for k, v := range map[string]string{"queue": queue, "consumerGroup": group, "partition": partition} {
				if v != "" {
					q.Set(k, v)
				}
			}
			for k, v := range map[string]string{"from": from, "to": to} {
				if v != "" {
					t, err := parseWhen(v, time.Now())
					if err != nil {
						return err
					}
					q.Set(k, t.UTC().Format("2006-01-02T15:04:05.000Z"))
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var raw map[string]json.RawMessage
			if err := c.GetJSON(cmd.Context(), "/api/v1/dlq", q, &raw); err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.env.Stdout, raw)
			}
			var page struct {
				Messages []deadLetter `json:"messages"`
				Total    int64        `json:"total"`
			}
			if err := json.Unmarshal(mustJSON(raw), &page); err != nil {
				return err
			}
			t := newTable(a.env.Stdout, "ID", "QUEUE", "PARTITION", "GROUP", "RETRIES", "FAILED-AT", "ERROR", "DATA")
			for _, d := range page.Messages {
				t.row(d.ID, d.Queue, d.Partition, d.ConsumerGroup, itoa(d.RetryCount), d.FailedAt, orDash(d.ErrorMessage),
					preview(d.Data, 60))
			}
			if err := t.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.env.Stdout, "%d of %d dead letters (from offset %d)\n", len(page.Messages), page.Total, offset)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "only this queue's dead letters")
	f.StringVar(&group, "group", "", "only this consumer group's")
	f.StringVar(&partition, "partition", "", "only this partition's")
	f.StringVar(&from, "from", "", "failed at or after: ISO-8601, or a duration ago (24h)")
	f.StringVar(&to, "to", "", "failed at or before: ISO-8601, or a duration ago")
	f.IntVar(&limit, "limit", 100, "dead letters to list, 1 to 1000")
	f.IntVar(&offset, "offset", 0, "dead letters to skip")
	cmd.AddCommand(a.dlqActionCmd("requeue", "Push dead letters again as new messages and remove them", http.MethodPost, "/requeue"),
		a.dlqActionCmd("delete", "Remove dead letters", http.MethodDelete, ""))
	return cmd
}

// dlqActionCmd is `dlq requeue ID...` or `dlq delete ID...`: one request per
// id, in order, stopping at the first failure (whose exit code it returns).
func (a *app) dlqActionCmd(name, short, method, suffix string) *cobra.Command {
	return &cobra.Command{
		Use:   name + " ID...",
		Short: short,
		Long: short + ` (the ids are those of "queengo dlq"). One request per id, in order;
the first failure stops the command and sets its exit code (4 for an unknown
id). --json prints the API's answers as an array.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			done := []map[string]any{}
			for _, id := range ids {
				var raw map[string]any
				if err := c.SendJSON(cmd.Context(), method, "/api/v1/dlq/"+seg(id)+suffix, nil, &raw); err != nil {
					if a.json {
						_ = writeJSON(a.env.Stdout, done)
					}
					return err
				}
				done = append(done, raw)
				if !a.json {
					line := name + "d " + id
					if name == "requeue" {
						line += fmt.Sprintf(" as message %s (transaction %s) on %s/%s", str(raw["messageId"]),
							str(raw["transactionId"]), str(raw["queue"]), str(raw["partition"]))
					}
					fmt.Fprintln(a.env.Stdout, line)
				}
			}
			if a.json {
				return writeJSON(a.env.Stdout, done)
			}
			return nil
		},
	}
}
