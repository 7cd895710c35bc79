package cli

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

// streamEntry is an element of GET /api/v1/streams and the head of GET
// /api/v1/streams/:name (docs/api-admin.md "Streams").
type streamEntry struct {
	Name            string  `json:"name"`
	SourceQueue     string  `json:"sourceQueue"`
	SinkQueue       *string `json:"sinkQueue"`
	ConsumerGroup   *string `json:"consumerGroup"`
	ConfigHash      string  `json:"configHash"`
	StateRows       int64   `json:"stateRows"`
	StatePartitions int64   `json:"statePartitions"`
	Lag             int64   `json:"lag"`
	UpdatedAt       string  `json:"updatedAt"`
	Partitions      []struct {
		Partition string  `json:"partition"`
		StateRows int64   `json:"stateRows"`
		Lag       int64   `json:"lag"`
		UpdatedAt *string `json:"updatedAt"`
	} `json:"partitions"`
}

func (a *app) streamsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "streams",
		Short: "List, show and reset the stream queries of the SDKs' streaming runtimes",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the stream queries with their source, sink, group lag and state size",
		Long: `List every registered stream query (by name): its source and sink queues, the
consumer group its cycles ack with, that group's lag on the source in messages,
and its state rows. --json prints the API's entries (GET /api/v1/streams).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var page struct {
				Queries []json.RawMessage `json:"queries"`
			}
			if err := c.GetJSON(cmd.Context(), "/api/v1/streams", nil, &page); err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.env.Stdout, page.Queries)
			}
			t := newTable(a.env.Stdout, "QUERY", "SOURCE", "SINK", "GROUP", "LAG", "STATE ROWS", "PARTITIONS", "UPDATED")
			for _, r := range page.Queries {
				var e streamEntry
				if err := json.Unmarshal(r, &e); err != nil {
					return err
				}
				t.row(e.Name, e.SourceQueue, orDash(e.SinkQueue), orDash(e.ConsumerGroup), itoa(e.Lag), itoa(e.StateRows),
					itoa(e.StatePartitions), e.UpdatedAt)
			}
			return t.flush()
		},
	}, &cobra.Command{
		Use:   "show NAME",
		Short: "Show one stream query per source partition",
		Long: `Show a stream query and, per partition of its source queue, its state rows, the
last state write and its group's lag. --json prints GET /api/v1/streams/NAME.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var raw json.RawMessage
			if err := c.GetJSON(cmd.Context(), "/api/v1/streams/"+seg(args[0]), nil, &raw); err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.env.Stdout, raw)
			}
			var e streamEntry
			if err := json.Unmarshal(raw, &e); err != nil {
				return err
			}
			w := a.env.Stdout
			fmt.Fprintf(w, "query %s: source %s, sink %s, group %s, config hash %s\n", e.Name, e.SourceQueue,
				orDash(e.SinkQueue), orDash(e.ConsumerGroup), e.ConfigHash)
			fmt.Fprintf(w, "lag %d, state rows %d on %d partitions\n\n", e.Lag, e.StateRows, e.StatePartitions)
			t := newTable(w, "PARTITION", "STATE ROWS", "LAG", "LAST STATE WRITE")
			for _, p := range e.Partitions {
				t.row(p.Partition, itoa(p.StateRows), itoa(p.Lag), orDash(p.UpdatedAt))
			}
			return t.flush()
		},
	}, &cobra.Command{
		Use:   "reset NAME",
		Short: "Delete a stream query's state (it stays registered)",
		Long: `Delete every state row of the query, in bounded transactions, keeping its
registration and its group's cursor: the runtime goes on from where its group
is, with empty state. --json prints the answer of POST /api/v1/streams/NAME/reset.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var res struct {
				DeletedRows int64 `json:"deletedRows"`
			}
			var raw json.RawMessage
			if err := c.SendJSON(cmd.Context(), http.MethodPost, "/api/v1/streams/"+seg(args[0])+"/reset", nil, &raw); err != nil {
				return err
			}
			if a.json {
				return writeJSON(a.env.Stdout, raw)
			}
			if err := json.Unmarshal(raw, &res); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.env.Stdout, "reset %s: %d state rows deleted\n", args[0], res.DeletedRows)
			return err
		},
	})
	return cmd
}
