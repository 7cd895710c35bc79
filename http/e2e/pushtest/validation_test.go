package pushtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// U-1, U-8 and docs/api.md "POST /api/v1/push": every bad push is a 400
// {"error":"..."} for the whole request, and the database is unchanged:
// neither the queues the good items of the request name nor an existing
// queue it also writes to gain a row (queues, partitions, segments, txids).
func TestU1_PushBadInputRejectedAndNothingWritten(t *testing.T) {
	t.Parallel()
	s := shared(t)
	existing := e2e.Unique(t, "bad-existing")
	s.Push(t, e2e.PushItem{Queue: existing, TransactionID: "there", Payload: 1})
	base := e2e.QueueCounts(t, existing)
	if base != (e2e.Counts{Queues: 1, Partitions: 1, Segments: 1, Txids: 1, Heads: 1}) {
		t.Fatalf("fixture counts %+v", base)
	}
	long := strings.Repeat("q", 256)
	longUnicode := strings.Repeat("é", 128) // 256 bytes
	// NUL is refused too, but PostgreSQL cannot take it in the counting
	// query; the edgetest package covers it.
	badNames := []string{"a\tb", "a\nb", "a\x7fb", "a\u0085b", long, longUnicode}

	type tc struct {
		name, body, msg string
		prefix          bool
	}
	// In bodies, F is a fresh queue (only this case names it) and E the
	// existing one.
	cases := []tc{
		{"empty body", ``, "Empty request body", false},
		{"blank body", " \n\t ", "Empty request body", false},
		{"invalid JSON", `{`, "Invalid JSON", true},
		{"not JSON", `not json`, "Invalid JSON", true},
		{"truncated", `{"items":[{"queue":"F"}]`, "Invalid JSON", true},
		{"broken array", `{"items":[}`, "", false},
		{"trailing garbage", `{"items":[{"queue":"F"}]} x`, "", false},
		{"body is an array", `[{"queue":"F"}]`, "", false},
		{"body is a string", `"F"`, "", false},
		{"items missing", `{}`, "items array is required", false},
		{"items misspelt", `{"item":[{"queue":"F"}]}`, "items array is required", false},
		{"items null", `{"items":null}`, "items array is required", false},
		{"items object", `{"items":{"queue":"F"}}`, "items array is required", false},
		{"items string", `{"items":"F"}`, "items array is required", false},
		{"items number", `{"items":5}`, "items array is required", false},
		{"items true", `{"items":true}`, "items array is required", false},
		{"item number", `{"items":[5]}`, "", false},
		{"item string", `{"items":["F"]}`, "", false},
		{"item null", `{"items":[null]}`, "", false},
		{"item array", `{"items":[[{"queue":"F"}]]}`, "", false},
		{"item true", `{"items":[true]}`, "", false},
		{"queue missing", `{"items":[{"payload":1}]}`, "Queue must be a string", false},
		{"queue null", `{"items":[{"queue":null}]}`, "Queue must be a string", false},
		{"queue number", `{"items":[{"queue":5}]}`, "Queue must be a string", false},
		{"queue true", `{"items":[{"queue":true}]}`, "Queue must be a string", false},
		{"queue object", `{"items":[{"queue":{"name":"F"}}]}`, "Queue must be a string", false},
		{"queue array", `{"items":[{"queue":["F"]}]}`, "Queue must be a string", false},
		{"partition number", `{"items":[{"queue":"F","partition":5}]}`, "Partition must be a string", false},
		{"partition true", `{"items":[{"queue":"F","partition":true}]}`, "Partition must be a string", false},
		{"partition object", `{"items":[{"queue":"F","partition":{}}]}`, "Partition must be a string", false},
		{"transactionId number", `{"items":[{"queue":"F","transactionId":5}]}`, "TransactionId must be a string", false},
		{"transactionId true", `{"items":[{"queue":"F","transactionId":true}]}`, "TransactionId must be a string", false},
		{"transactionId array", `{"items":[{"queue":"F","transactionId":["a"]}]}`, "TransactionId must be a string", false},
		{"traceId number", `{"items":[{"queue":"F","traceId":5}]}`, "TraceId must be a string", false},
		{"traceId true", `{"items":[{"queue":"F","traceId":true}]}`, "TraceId must be a string", false},
		{"traceId object", `{"items":[{"queue":"F","traceId":{}}]}`, "TraceId must be a string", false},
		{"traceId not a UUID", `{"items":[{"queue":"F","traceId":"not-a-uuid"}]}`, "", false},
		{"traceId digits", `{"items":[{"queue":"F","traceId":"123"}]}`, "", false},
		{"traceId UUID plus a char", `{"items":[{"queue":"F","traceId":"3b241101-e2bb-4255-8caf-4136c566a962x"}]}`, "", false},
		{"traceId UUID with bad hex", `{"items":[{"queue":"F","traceId":"zb241101-e2bb-4255-8caf-4136c566a962"}]}`, "", false},
		// A bad item anywhere rejects the whole batch.
		{"bad item last", `{"items":[{"queue":"F","payload":1},{"queue":"E","payload":2},{"queue":5}]}`, "Queue must be a string", false},
		{"bad item first", `{"items":[{"queue":"F","traceId":"nope"},{"queue":"E","payload":2},{"queue":"F"}]}`, "", false},
		{"bad name in the middle", `{"items":[{"queue":"E"},{"queue":"F","partition":"a\tb"},{"queue":"F"}]}`, "", false},
		{"non-object in the middle", `{"items":[{"queue":"E"},7,{"queue":"F"}]}`, "", false},
		{"bad transactionId after good", `{"items":[{"queue":"F","transactionId":"ok"},{"queue":"E","transactionId":{}}]}`, "TransactionId must be a string", false},
	}
	for i, n := range badNames {
		cases = append(cases,
			tc{fmt.Sprintf("queue name %d %q", i, short(n)), fmt.Sprintf(`{"items":[{"queue":"E"},{"queue":%s}]}`, jsonStr(n)), "", false},
			tc{fmt.Sprintf("partition name %d %q", i, short(n)), fmt.Sprintf(`{"items":[{"queue":"F"},{"queue":"E","partition":%s}]}`, jsonStr(n)), "", false})
	}
	{
		// 200 good items to both queues, one bad at the end.
		var b strings.Builder
		b.WriteString(`{"items":[`)
		for i := range 200 {
			q := "F"
			if i%2 == 1 {
				q = "E"
			}
			fmt.Fprintf(&b, `{"queue":"%s","transactionId":"big-%d","payload":{"i":%d}},`, q, i, i)
		}
		b.WriteString(`{"queue":"F","traceId":"bad"}]}`)
		cases = append(cases, tc{"bad item after 200 good", b.String(), "", false})
	}

	var fresh []string
	for _, c := range cases {
		f := e2e.Unique(t, "bad-fresh")
		fresh = append(fresh, f)
		body := strings.ReplaceAll(strings.ReplaceAll(c.body, `"F"`, `"`+f+`"`), `"E"`, `"`+existing+`"`)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			names := append([]string{f}, badNames...)
			before := e2e.QueueCounts(t, names...)
			wantErrorText(t, s.Post(t, "/api/v1/push", body), 400, c.msg, c.prefix)
			if after := e2e.QueueCounts(t, names...); after != before || after != (e2e.Counts{}) {
				t.Fatalf("fresh and bad names: before %+v, after %+v, want nothing", before, after)
			}
			if after := e2e.QueueCounts(t, existing); after != base {
				t.Fatalf("existing queue: before %+v, after %+v", base, after)
			}
		})
	}
	t.Cleanup(func() {
		// Nothing shows up late either.
		if n := e2e.QueueCounts(t, append(fresh, badNames...)...); n != (e2e.Counts{}) {
			t.Errorf("rejected pushes left %+v", n)
		}
		if n := e2e.QueueCounts(t, existing); n != base {
			t.Errorf("existing queue changed: %+v, was %+v", n, base)
		}
		// The broker still serves the existing queue.
		if r := s.Push(t, e2e.PushItem{Queue: existing, TransactionID: "after", Payload: 1}); r[0].Status != "queued" {
			t.Errorf("push after the bad ones: %+v", r)
		}
	})
}

func jsonStr(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func short(s string) string {
	if len(s) > 12 {
		return s[:6] + "..." + fmt.Sprint(len(s))
	}
	return s
}

// Path names follow the same rules: a DELETE naming a queue with a control
// character, invalid UTF-8 or over 255 bytes (URL-decoded) is a 400.
func TestNames_BadPathName(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, p := range []string{"a%09b", "a%00b", "%FF", "a%C2%85b", strings.Repeat("q", 256)} {
		r := s.Delete(t, "/api/v1/resources/queues/"+p)
		e2e.WantErrorBody(t, r, 400)
	}
}
