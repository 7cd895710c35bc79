package pg_test

import (
	"context"
	"strings"
	"testing"
)

// TestFigurePlans: the broker-wide figures (the overview's partition
// figures and cursor lag, the ingest rate, the namespace and task sums, the
// status totals) are aggregates over queue, partition and cursor rows with
// primary-key probes of the segments; none scans the segments. These run
// inside PL/pgSQL and SQL functions, whose plans EXPLAIN does not show, so
// the test has auto_explain send the plan of every nested statement to the
// client. With -v it prints them, over 300 queues x 10 partitions x 3
// groups (9,000 cursors) and 60,000 segments.
func TestFigurePlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := setupGroups(t, 300, 10, 20, 3).explain(t)
	for _, q := range []string{
		`SELECT count(*) FROM queen.partition_figures(NULL, false)`,
		`SELECT * FROM queen.cursor_lag()`,
		`SELECT count(*) FROM queen.status_queues(NULL)`,
	} {
		c.take()
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
		plans := c.take()
		text := strings.Join(plans, "\n\n")
		if len(plans) < 2 {
			t.Fatalf("%s: %d plans sent, want the statement's and its nested ones:\n%s", q, len(plans), text)
		}
		t.Logf("%s: %d plans\n%s", q, len(plans), text)
		if strings.Contains(text, "Seq Scan on segments") {
			t.Errorf("%s scans the segments:\n%s", q, text)
		}
	}
}
