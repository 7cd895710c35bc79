package pg

import (
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// TestAckCall_ASpanIsOneCursorsRunOfOneLease: the items of a (partition,
// group) form a span only when all complete a message at a known offset
// under one lease they name, each offset once, without a gap; the items of
// any other cursor go to queen.ack whole, in item order.
func TestAckCall_ASpanIsOneCursorsRunOfOneLease(t *testing.T) {
	p1, p2, l1, l2 := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	item := func(p uuid.UUID, group string, l uuid.UUID, off int64, status string) queengo.AckItem {
		return queengo.AckItem{PartitionID: p, Group: group, LeaseID: l, Offset: off, Status: status}
	}
	ok := func(p uuid.UUID, off int64) queengo.AckItem { return item(p, "g", l1, off, "completed") }
	for _, c := range []struct {
		name  string
		items []queengo.AckItem
		want  string
	}{
		{"a run in any order", []queengo.AckItem{ok(p1, 3), ok(p1, 1), item(p1, "g", l1, 2, "success")},
			"spans [1-3:[1 2 0]] rest []"}, // a span lists its items in offset order
		{"one span per cursor", []queengo.AckItem{ok(p1, 5), ok(p2, 7), item(p1, "h", l1, 9, "completed")},
			"spans [5-5:[0] 7-7:[1] 9-9:[2]] rest []"},
		{"a gap", []queengo.AckItem{ok(p1, 1), ok(p1, 3), ok(p2, 4)}, "spans [4-4:[2]] rest [0 1]"},
		{"an offset twice", []queengo.AckItem{ok(p1, 1), ok(p1, 2), ok(p1, 2)}, "spans [] rest [0 1 2]"},
		{"two leases", []queengo.AckItem{ok(p1, 1), item(p1, "g", l2, 2, "completed")}, "spans [] rest [0 1]"},
		{"no lease", []queengo.AckItem{item(p1, "g", uuid.Nil, 1, "completed")}, "spans [] rest [0]"},
		{"no offset", []queengo.AckItem{ok(p2, 1), ok(p1, 0)}, "spans [1-1:[0]] rest [1]"},
		{"a failure", []queengo.AckItem{ok(p1, 1), item(p1, "g", l1, 2, "failed"), ok(p2, 1)},
			"spans [1-1:[2]] rest [0 1]"},
	} {
		a := newAckCall(c.items)
		var spans []string
		for _, sp := range a.spans {
			spans = append(spans, fmt.Sprintf("%d-%d:%v", sp.first, sp.last, sp.items))
		}
		if got := fmt.Sprintf("spans %v rest %v", spans, a.rest); got != c.want {
			t.Fatalf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
