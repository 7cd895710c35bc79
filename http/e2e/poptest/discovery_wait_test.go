package poptest

import (
	"context"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// TestPop_DiscoveryWaitParksAfterAutoAckDrainedTheScope (seed rule of issue
// 9): a discovery-route pop with wait=true, sent after an autoAck pop
// drained the same scope, parks (it does not answer 204 at once) and wakes
// on the next push in the scope with that push's message; whether the
// parked pop is autoAck itself or leases.
func TestPop_DiscoveryWaitParksAfterAutoAckDrainedTheScope(t *testing.T) {
	t.Parallel()
	s := shared(t)
	for _, tc := range []struct {
		name    string
		autoAck string
	}{
		{"parked pop autoAck", "true"},
		{"parked pop leasing", "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := e2e.Unique(t, "dwait")
			q := ns + ".t.q"
			s.PushN(t, q, "Default", 3)
			// The autoAck pop drains the scope for group g: its cursor is
			// committed past every message.
			p := s.PopOK(t, e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "batch", "10", "autoAck", "true"))
			if len(p.Messages) != 3 {
				t.Fatalf("the draining pop delivered %v, want all 3", p.TxIDs())
			}

			path := e2e.PopDiscovery("namespace", ns, "consumerGroup", "g", "wait", "true", "timeout", "20000",
				"autoAck", tc.autoAck)
			ch := async(context.Background(), s, path)
			if o, parked := pending(ch, 700*time.Millisecond); !parked {
				t.Fatalf("the pop after the drain answered %d %q, want it parked", o.r.Status, o.r.Body)
			}
			pushed := s.PushN(t, q, "Default", 1)
			o := await(t, ch, 15*time.Second)
			if o.r.Status != 200 {
				t.Fatalf("the parked pop answered %d %q after the push, want the pushed message", o.r.Status, o.r.Body)
			}
			e2e.WantTxIDs(t, "woken pop", o.r.Pop, pushed.TxIDs())
		})
	}
}
