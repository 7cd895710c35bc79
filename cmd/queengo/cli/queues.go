package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"

	"github.com/queengo/queengo/http/client"
	"github.com/spf13/cobra"
)

// listPage is the largest page of the resource lists (docs/api-admin.md
// "Resources": limit 1 to 1000): fewest requests for a whole list.
const listPage = 1000

type counts struct {
	Total      int64 `json:"total"`
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
	DeadLetter int64 `json:"deadLetter"`
}

// queueEntry is an element of GET /api/v1/resources/queues.
type queueEntry struct {
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Task       string `json:"task"`
	Priority   int    `json:"priority"`
	CreatedAt  string `json:"createdAt"`
	Partitions int64  `json:"partitions"`
	Messages   counts `json:"messages"`
}

func (a *app) queuesCmd() *cobra.Command {
	var namespace, task string
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "List the queues with their message counts",
		Long: `List every queue (newest first) with its partitions and messages.
--json prints the API's queue entries (GET /api/v1/resources/queues), every page.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			q := url.Values{}
			if namespace != "" {
				q.Set("namespace", namespace)
			}
			if task != "" {
				q.Set("task", task)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			raws, err := allPages(cmd.Context(), c, "/api/v1/resources/queues", q, "queues")
			if err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.env.Stdout, raws)
			}
			t := newTable(a.env.Stdout, "QUEUE", "NAMESPACE", "TASK", "PARTITIONS", "TOTAL", "PENDING", "PROCESSING", "CREATED")
			for _, r := range raws {
				var e queueEntry
				if err := json.Unmarshal(r, &e); err != nil {
					return err
				}
				t.row(e.Name, orDash(&e.Namespace), orDash(&e.Task), itoa(e.Partitions), itoa(e.Messages.Total),
					itoa(e.Messages.Pending), itoa(e.Messages.Processing), e.CreatedAt)
			}
			return t.flush()
		},
	}
	cmd.Flags().StringVar(&namespace, "namespace", "", "only the queues of this namespace")
	cmd.Flags().StringVar(&task, "task", "", "only the queues of this task")
	return cmd
}

// allPages reads every page of a resource list whose answer is
// {"<key>": [...], "total": n} and returns the entries as the API sent them.
func allPages(ctx context.Context, c *client.Client, path string, q url.Values, key string) ([]json.RawMessage, error) {
	all := []json.RawMessage{}
	for {
		q.Set("limit", strconv.Itoa(listPage))
		q.Set("offset", strconv.Itoa(len(all)))
		var page map[string]json.RawMessage
		if err := c.GetJSON(ctx, path, q, &page); err != nil {
			return nil, err
		}
		var items []json.RawMessage
		var total int
		if err := json.Unmarshal(page[key], &items); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(page["total"], &total); err != nil {
			return nil, err
		}
		all = append(all, items...)
		if len(items) == 0 || len(all) >= total {
			return all, nil
		}
	}
}

// queueDetail is GET /api/v1/resources/queues/:queue.
type queueDetail struct {
	Name       string          `json:"name"`
	Namespace  string          `json:"namespace"`
	Task       string          `json:"task"`
	CreatedAt  string          `json:"createdAt"`
	Options    json.RawMessage `json:"options"`
	Partitions []struct {
		Name          string  `json:"name"`
		Stats         counts  `json:"stats"`
		OldestMessage *string `json:"oldestMessage"`
		NewestMessage *string `json:"newestMessage"`
	} `json:"partitions"`
	PartitionCount int    `json:"partitionCount"`
	Totals         counts `json:"totals"`
}

func (a *app) queueCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "queue NAME",
		Short: "Show one queue: options, partitions and its consumer groups",
		Long: `Show a queue's options, totals, every partition's figures and the consumer
groups that read it, with their lag. --json prints
{"queue": <GET /api/v1/resources/queues/NAME, every partition>, "groups": [<the queue's entries of GET /api/v1/consumer-groups>]}.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, name := cmd.Context(), args[0]
			c, err := a.client()
			if err != nil {
				return err
			}
			var raw map[string]json.RawMessage
			parts, err := queuePartitions(ctx, c, name, &raw)
			if err != nil {
				return err
			}
			groups, err := groupEntries(ctx, c)
			if err != nil {
				return err
			}
			mine := []json.RawMessage{}
			var entries []groupEntry
			for _, g := range groups {
				var e groupEntry
				if err := json.Unmarshal(g, &e); err != nil {
					return err
				}
				if e.QueueName == name {
					mine = append(mine, g)
					entries = append(entries, e)
				}
			}
			raw["partitions"] = mustJSON(parts)
			if a.json {
				return writeJSON(a.env.Stdout, map[string]any{"queue": raw, "groups": mine})
			}
			var d queueDetail
			if err := json.Unmarshal(mustJSON(raw), &d); err != nil {
				return err
			}
			return a.printQueue(&d, entries)
		},
	}
}

// queuePartitions reads a queue's detail into raw and returns every
// partition, paging through them.
func queuePartitions(ctx context.Context, c *client.Client, name string, raw *map[string]json.RawMessage) ([]json.RawMessage, error) {
	parts := []json.RawMessage{}
	for {
		q := url.Values{"partitionLimit": {strconv.Itoa(listPage)}, "partitionOffset": {strconv.Itoa(len(parts))}}
		if err := c.GetJSON(ctx, "/api/v1/resources/queues/"+seg(name), q, raw); err != nil {
			return nil, err
		}
		var page []json.RawMessage
		var count int
		if err := json.Unmarshal((*raw)["partitions"], &page); err != nil {
			return nil, err
		}
		if err := json.Unmarshal((*raw)["partitionCount"], &count); err != nil {
			return nil, err
		}
		parts = append(parts, page...)
		if len(page) == 0 || len(parts) >= count {
			return parts, nil
		}
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (a *app) printQueue(d *queueDetail, groups []groupEntry) error {
	w := a.env.Stdout
	kv := []string{"queue", d.Name, "namespace", orDash(&d.Namespace), "task", orDash(&d.Task), "created", d.CreatedAt,
		"partitions", strconv.Itoa(d.PartitionCount),
		"messages", "total " + itoa(d.Totals.Total) + ", pending " + itoa(d.Totals.Pending) + ", processing " +
			itoa(d.Totals.Processing) + ", completed " + itoa(d.Totals.Completed) + ", failed " + itoa(d.Totals.Failed) +
			", dead letters " + itoa(d.Totals.DeadLetter),
		"options", string(d.Options)}
	if err := fields(w, kv...); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t := newTable(w, "PARTITION", "TOTAL", "PENDING", "PROCESSING", "COMPLETED", "FAILED", "DLQ", "OLDEST", "NEWEST")
	for _, p := range d.Partitions {
		t.row(p.Name, itoa(p.Stats.Total), itoa(p.Stats.Pending), itoa(p.Stats.Processing), itoa(p.Stats.Completed),
			itoa(p.Stats.Failed), itoa(p.Stats.DeadLetter), orDash(p.OldestMessage), orDash(p.NewestMessage))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(groups) == 0 {
		_, err := fmt.Fprintln(w, "no consumer groups")
		return err
	}
	return groupTable(w, groups)
}
