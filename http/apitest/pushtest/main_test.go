package pushtest

import (
	"testing"

	"github.com/queengo/queengo/http/apitest"
)

func TestMain(m *testing.M) { apitest.Main(m, "push") }

func TestSmokePushPop(t *testing.T) {
	t.Parallel()
	s := apitest.Start(t)
	q := apitest.Unique(t, "smoke")
	res := s.Push(t, apitest.PushItem{Queue: q, Payload: map[string]any{"n": 1}})
	if res[0].Status != "queued" {
		t.Fatalf("%+v", res)
	}
	p := s.Pop(t, "/api/v1/pop/queue/"+q)
	if p == nil || len(p.Messages) != 1 {
		t.Fatalf("pop: %+v", p)
	}
}
