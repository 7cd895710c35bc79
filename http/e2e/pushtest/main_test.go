package pushtest

import (
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "push") }

func TestSmokePushPop(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t)
	q := e2e.Unique(t, "smoke")
	res := s.Push(t, e2e.PushItem{Queue: q, Payload: map[string]any{"n": 1}})
	if res[0].Status != "queued" {
		t.Fatalf("%+v", res)
	}
	p := s.Pop(t, "/api/v1/pop/queue/"+q)
	if p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop: %+v", p)
	}
}
