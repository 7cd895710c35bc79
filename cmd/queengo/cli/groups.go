package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/queengo/queengo/http/client"
	"github.com/spf13/cobra"
)

// groupPage is the largest page of the consumer-group lists (docs/api-admin.md
// "Consumer groups": limit 1 to 10000).
const groupPage = 10000

// groupEntry is an element of GET /api/v1/consumer-groups.
type groupEntry struct {
	Name              string  `json:"name"`
	QueueName         string  `json:"queueName"`
	Partitions        int64   `json:"partitions"`
	Members           int64   `json:"members"`
	PartitionsWithLag int64   `json:"partitionsWithLag"`
	TotalLag          int64   `json:"totalLag"`
	MaxTimeLag        int64   `json:"maxTimeLag"`
	State             string  `json:"state"`
	LastActivity      *string `json:"lastActivity"`
}

// laggingEntry is an element of GET /api/v1/consumer-groups/lagging.
type laggingEntry struct {
	Group          string  `json:"consumer_group"`
	Queue          string  `json:"queue_name"`
	Partition      string  `json:"partition_name"`
	OffsetLag      int64   `json:"offset_lag"`
	TimeLagSeconds int64   `json:"time_lag_seconds"`
	OldestAt       *string `json:"oldest_unconsumed_at"`
	LastConsumedAt *string `json:"last_consumed_at"`
}

func (a *app) groupsCmd() *cobra.Command {
	var lagging bool
	var minLag time.Duration
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "List consumer groups and their lag",
		Long: `List every (consumer group, queue) with its partitions, live leases (members),
lag in messages and the age of its oldest unconsumed message.

--lagging lists instead the (group, queue, partition) cursors whose oldest
unconsumed message is at least --min-lag old (default 0: every cursor behind
its partition's head), the longest waiting first.

--json prints the API's entries (GET /api/v1/consumer-groups, or
/api/v1/consumer-groups/lagging with --lagging), every page.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := a.client()
			if err != nil {
				return err
			}
			if !lagging {
				raws, err := groupEntries(ctx, c)
				if err != nil {
					return err
				}
				if a.json {
					return writeJSON(a.env.Stdout, raws)
				}
				entries := make([]groupEntry, len(raws))
				for i, r := range raws {
					if err := json.Unmarshal(r, &entries[i]); err != nil {
						return err
					}
				}
				return groupTable(a.env.Stdout, entries)
			}
			if minLag < 0 {
				return usagef("--min-lag must be 0 or more")
			}
			q := url.Values{"minLagSeconds": {strconv.FormatInt(int64(minLag/time.Second), 10)}}
			raws, err := arrayPages(ctx, c, "/api/v1/consumer-groups/lagging", q)
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.env.Stdout, raws)
			}
			t := newTable(a.env.Stdout, "GROUP", "QUEUE", "PARTITION", "LAG", "TIME-LAG", "OLDEST-UNCONSUMED", "LAST-CONSUMED")
			for _, r := range raws {
				var e laggingEntry
				if err := json.Unmarshal(r, &e); err != nil {
					return err
				}
				t.row(e.Group, e.Queue, e.Partition, itoa(e.OffsetLag), seconds(e.TimeLagSeconds), orDash(e.OldestAt),
					orDash(e.LastConsumedAt))
			}
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&lagging, "lagging", false, "list the cursors behind their head, the longest waiting first")
	cmd.Flags().DurationVar(&minLag, "min-lag", 0, "with --lagging: only cursors whose oldest unconsumed message is at least this old")
	return cmd
}

func groupTable(w io.Writer, entries []groupEntry) error {
	t := newTable(w, "GROUP", "QUEUE", "PARTITIONS", "MEMBERS", "LAGGING", "LAG", "TIME-LAG", "STATE", "LAST-ACTIVITY")
	for _, e := range entries {
		t.row(e.Name, e.QueueName, itoa(e.Partitions), itoa(e.Members), itoa(e.PartitionsWithLag), itoa(e.TotalLag),
			seconds(e.MaxTimeLag), e.State, orDash(e.LastActivity))
	}
	return t.flush()
}

// groupEntries reads every page of GET /api/v1/consumer-groups.
func groupEntries(ctx context.Context, c *client.Client) ([]json.RawMessage, error) {
	return arrayPages(ctx, c, "/api/v1/consumer-groups", url.Values{})
}

// arrayPages reads every page of a consumer-group list, whose answer is a
// bare array: a page shorter than the limit is the last.
func arrayPages(ctx context.Context, c *client.Client, path string, q url.Values) ([]json.RawMessage, error) {
	all := []json.RawMessage{}
	for {
		q.Set("limit", strconv.Itoa(groupPage))
		q.Set("offset", strconv.Itoa(len(all)))
		var page []json.RawMessage
		if err := c.GetJSON(ctx, path, q, &page); err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < groupPage {
			return all, nil
		}
	}
}

func (a *app) seekCmd() *cobra.Command {
	var toEnd bool
	var to, partition string
	cmd := &cobra.Command{
		Use:   "seek GROUP QUEUE (--to-end | --to TIME) [--partition NAME]",
		Short: "Move a consumer group's cursors on a queue to a time or to the end",
		Long: `Move every cursor GROUP has on QUEUE: --to-end skips everything written so
far; --to TIME replays from the first message written after TIME, an ISO-8601
time (2026-12-01T00:00:00Z) or a duration meaning that long ago (90m).
Either way the group's leases are released. With --partition only that
partition's cursor moves, and only to its end (the API has no partition seek
to a time). --json prints the API's answer.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			group, queue := args[0], args[1]
			if toEnd == (to != "") {
				return usagef("give exactly one of --to-end and --to")
			}
			path := "/api/v1/consumer-groups/" + seg(group) + "/queues/" + seg(queue)
			var body any
			if partition != "" {
				if !toEnd {
					return usagef("--partition seeks only to the end: use --to-end")
				}
				path += "/partitions/" + seg(partition) + "/seek"
			} else {
				path += "/seek"
				body = map[string]bool{"toEnd": true}
				if !toEnd {
					t, err := parseWhen(to, time.Now())
					if err != nil {
						return err
					}
					body = map[string]string{"timestamp": t.UTC().Format(time.RFC3339Nano)}
				}
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			var raw map[string]any
			if err := c.SendJSON(cmd.Context(), http.MethodPost, path, body, &raw); err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.env.Stdout, raw)
			}
			if partition != "" {
				return fields(a.env.Stdout, "group", group, "queue", queue, "partition", partition,
					"updated", str(raw["updated"]), "cursor moved to", str(raw["cursorMovedTo"]))
			}
			target := "end"
			if !toEnd {
				target = str(raw["targetTimestamp"])
			}
			return fields(a.env.Stdout, "group", group, "queue", queue, "sought to", target,
				"partitions updated", str(raw["partitionsUpdated"]))
		},
	}
	cmd.Flags().BoolVar(&toEnd, "to-end", false, "skip everything written so far")
	cmd.Flags().StringVar(&to, "to", "", "replay from this time: ISO-8601, or a duration ago (90m)")
	cmd.Flags().StringVar(&partition, "partition", "", "seek only this partition (to its end)")
	return cmd
}

// parseWhen reads an ISO-8601 time, or a duration meaning that long
// before now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("%q is neither an ISO-8601 time nor a duration such as 90m", s)
}

// str shows a decoded JSON value: null as "-".
func str(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return string(mustJSON(v))
}
