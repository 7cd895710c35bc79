package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// writeJSON prints v as indented JSON, for scripts (--json).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table prints aligned columns for people.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// fields prints "name: value" lines, aligned.
func fields(w io.Writer, kv ...string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[i], kv[i+1])
	}
	return tw.Flush()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// orDash shows a missing value as "-".
func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// seconds shows a lag in seconds as a duration (90 -> 1m30s).
func seconds(s int64) string { return (time.Duration(s) * time.Second).String() }

// preview shortens a JSON payload to one line of at most n runes.
func preview(raw json.RawMessage, n int) string {
	s := string(raw)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
