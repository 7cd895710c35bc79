package actors

import (
	"log/slog"
	"reflect"
	"testing"

	"github.com/google/uuid"
)

// TestCrossProcess_AnnouncementsInOrderOnce: what a process announces goes
// out once per NOTIFY however often it was announced, in the order of first
// announcement, so a queue's deletion reaches the others before the commits
// that created it again; nothing goes out while no other process listens.
func TestCrossProcess_AnnouncementsInOrderOnce(t *testing.T) {
	c := newCrossProcess(nil, slog.Default(), 0, heard{})
	p := uuid.New()
	c.changed("q", true)
	if len(c.pending) != 0 {
		t.Fatalf("announced %v with no other process listening", c.pending)
	}
	c.peers = true
	c.changed("q", true)
	c.committed("q", p)
	c.changed("q", true)
	c.committed("q", p)
	c.changed("q", false)
	in := c.instance + "|"
	want := []string{in + "deleted|q", in + p.String() + "|q", in + "changed|q"}
	if !reflect.DeepEqual(c.pending, want) {
		t.Fatalf("pending %q, want %q", c.pending, want)
	}
}

// TestCrossProcess_HearsCommitsAndRowChanges: the other processes' commits
// reach offer and their queue row changes reach change; the process's own
// announcements and malformed payloads reach neither.
func TestCrossProcess_HearsCommitsAndRowChanges(t *testing.T) {
	type offered struct {
		queue string
		p     uuid.UUID
	}
	type changed struct {
		queue   string
		deleted bool
	}
	var offers []offered
	var changes []changed
	c := newCrossProcess(nil, slog.Default(), 0, heard{
		offer:  func(q string, p uuid.UUID) { offers = append(offers, offered{q, p}) },
		change: func(q string, deleted bool) { changes = append(changes, changed{q, deleted}) },
	})
	p := uuid.New()
	for _, payload := range []string{
		"other|" + p.String() + "|a|b", // a queue name may hold the separator
		"other|deleted|q",
		"other|changed|q",
		c.instance + "|deleted|q",
		c.instance + "|" + p.String() + "|q",
		"other|not-a-uuid|q",
		"other|deleted",
		"garbage",
	} {
		c.receive(payload)
	}
	if want := []offered{{"a|b", p}}; !reflect.DeepEqual(offers, want) {
		t.Fatalf("offered %v, want %v", offers, want)
	}
	if want := []changed{{"q", true}, {"q", false}}; !reflect.DeepEqual(changes, want) {
		t.Fatalf("changes %v, want %v", changes, want)
	}
}
