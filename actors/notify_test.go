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
	c.peers.Store(true)
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

// TestCrossProcess_HearsCommitsLeaseEndsAndRowChanges: the other processes'
// commits (every group) and ended leases (one group) reach offer, their
// queue row changes reach change; the process's own announcements and
// malformed payloads reach neither.
func TestCrossProcess_HearsCommitsLeaseEndsAndRowChanges(t *testing.T) {
	type offered struct {
		queue, group string
		p            uuid.UUID
	}
	type changed struct {
		queue   string
		deleted bool
	}
	var offers []offered
	var changes []changed
	c := newCrossProcess(nil, slog.Default(), 0, heard{
		offer:  func(q string, p uuid.UUID, g string) { offers = append(offers, offered{q, g, p}) },
		change: func(q string, deleted bool) { changes = append(changes, changed{q, deleted}) },
	})
	p := uuid.New()
	// What another process announces, as it announces it.
	other := newCrossProcess(nil, slog.Default(), 0, heard{})
	other.peers.Store(true)
	other.freed("q", p, "g|/é")
	for _, payload := range []string{
		"other|" + p.String() + "|a|b", // a queue name may hold the separator
		other.pending[0],
		"other|" + p.String() + "/|q",
		"other|" + p.String() + "/not*base64|q",
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
	if want := []offered{{"a|b", "", p}, {"q", "g|/é", p}}; !reflect.DeepEqual(offers, want) {
		t.Fatalf("offered %v, want %v", offers, want)
	}
	if want := []changed{{"q", true}, {"q", false}}; !reflect.DeepEqual(changes, want) {
		t.Fatalf("changes %v, want %v", changes, want)
	}
}

// TestCrossProcess_HelloMakesAPeer: a process says hello when its LISTEN is
// in place, whether or not it counted anyone yet, and a process that hears
// from another announces to it from then on, before its next count.
func TestCrossProcess_HelloMakesAPeer(t *testing.T) {
	old := newCrossProcess(nil, slog.Default(), 0, heard{})
	fresh := newCrossProcess(nil, slog.Default(), 0, heard{})
	fresh.listening()
	if want := []string{fresh.instance + "|hello|"}; !reflect.DeepEqual(fresh.pending, want) {
		t.Fatalf("pending %q after the LISTEN, want %q", fresh.pending, want)
	}
	p := uuid.New()
	old.committed("q", p)
	if len(old.pending) != 0 {
		t.Fatalf("announced %q before hearing of anyone", old.pending)
	}
	old.receive(fresh.pending[0])
	old.committed("q", p)
	if want := []string{old.instance + "|" + p.String() + "|q"}; !reflect.DeepEqual(old.pending, want) {
		t.Fatalf("pending %q after the hello, want %q", old.pending, want)
	}
}
