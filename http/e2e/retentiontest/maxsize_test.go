package retentiontest

import (
	"strings"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

// maxSize (docs/api.md "POST /api/v1/configure"): a push that would take a queue past maxSize unconsumed
// messages, counted past its slowest group's committed offset, is refused
// item by item (status failed, a clear error); the request's other items,
// here one for another queue, are unaffected; consuming makes room.
func TestMaxSize_RefusesItemsPastTheSlowestGroup(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q, other := e2e.Unique(t, "capped"), e2e.Unique(t, "uncapped")
	s.Configure(t, q, map[string]any{"maxSize": 4})
	s.PushN(t, q, "", 2)
	res := s.Push(t,
		e2e.PushItem{Queue: q, Payload: 1}, e2e.PushItem{Queue: other, Payload: 2},
		e2e.PushItem{Queue: q, Payload: 3}, e2e.PushItem{Queue: q, Payload: 4})
	for i, want := range []string{"queued", "queued", "queued", "failed"} {
		if res[i].Status != want {
			t.Fatalf("item %d: %+v, want %s", i, res[i], want)
		}
	}
	if e := res[3].Error; !strings.Contains(e, "maxSize") {
		t.Fatalf("refused item's error %q does not name maxSize", e)
	}
	if c := e2e.QueueCounts(t, q); c.Txids != 4 {
		t.Fatalf("%d messages stored, want 4", c.Txids)
	}

	// A slow group takes one message and has not acked it yet; a fast one
	// consumes all four: the queue is still full.
	slow := s.PopOK(t, e2e.PopQueue(q, "batch", "1", "consumerGroup", "slow")).Messages[0]
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "4", "consumerGroup", "fast"))
	for _, m := range p.Messages {
		s.AckOK(t, m, "completed", "fast")
	}
	// Each request carries an item for the other queue too: a request whose
	// every item fails is not a 201 (http/push.go), and the rule here is the
	// items'.
	if r := s.Push(t, e2e.PushItem{Queue: q, Payload: 5}, e2e.PushItem{Queue: other, Payload: 5}); r[0].Status != "failed" || r[1].Status != "queued" {
		t.Fatalf("push with the slow group 4 behind: %+v", r)
	}
	s.AckOK(t, slow, "completed", "slow")
	r := s.Push(t, e2e.PushItem{Queue: q, Payload: 6}, e2e.PushItem{Queue: q, Payload: 7})
	if r[0].Status != "queued" || r[1].Status != "failed" {
		t.Fatalf("push after the slow group consumed one: %+v", r)
	}
}

// maxSize (docs/api.md "POST /api/v1/configure"): a push whose every item a full queue refuses answers 409
// with the per-item array, not a 500 the SDKs would retry as a server fault;
// nothing of it is stored.
func TestMaxSize_PushRefusedWhollyAnswers409(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "full")
	s.Configure(t, q, map[string]any{"maxSize": 1})
	s.PushN(t, q, "", 1)
	r := s.Post(t, "/api/v1/push", map[string]any{"items": []e2e.PushItem{{Queue: q, Payload: 2}, {Queue: q, Payload: 3}}})
	if r.Status != 409 {
		t.Fatalf("status %d, want 409: %s", r.Status, r.Body)
	}
	var res []e2e.PushResult
	r.JSON(t, &res)
	if len(res) != 2 || res[0].Status != "failed" || !strings.Contains(res[1].Error, "maxSize") {
		t.Fatalf("results %+v", res)
	}
	if c := e2e.QueueCounts(t, q); c.Txids != 1 {
		t.Fatalf("%d messages stored, want 1", c.Txids)
	}
}
