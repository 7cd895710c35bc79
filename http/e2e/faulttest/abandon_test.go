package faulttest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// TestD12_APopWhoseClientLeftDuringItsClaimFreesItsLease: a long poll whose
// client hangs up while its claim is in the database gets nothing, and the
// message that claim leased goes to the next pop of the group at once, not
// when the lease (300 s here) runs out. The claim is held in the database by
// freezing the proxy until the broker saw the hang-up.
func TestD12_APopWhoseClientLeftDuringItsClaimFreesItsLease(t *testing.T) {
	// A request timeout that outlasts the hang-up check (every 500 ms), so
	// the frozen claim is not cancelled first.
	s, p := startProxied(t, nil, "DB_REQUEST_TIMEOUT_MS=20000")
	q := e2e.Unique(t, "abandon")
	s.Configure(t, q, map[string]any{"leaseTime": 300})
	txs := s.PushN(t, q, "Default", 1).TxIDs()
	s.PopOK(t, e2e.PopQueue(q, "consumerGroup", "warm")) // the queue actor knows the queue

	rounds := promValue(t, s, "queengo_claim_round_pops_count")
	p.Freeze()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := s.WithClient(&http.Client{Transport: &http.Transport{}})
	left := make(chan error, 1)
	go func() {
		_, err := gone.PopCtx(ctx, e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "30000"))
		left <- err
	}()
	waitProm(t, s, "queengo_claim_round_pops_count", rounds+1) // its claim is out
	cancel()
	if err := <-left; err == nil {
		t.Fatal("the cancelled pop returned an answer")
	}
	waitProm(t, s, "queengo_pops_cancelled_total", 1) // the broker saw the hang-up
	p.Thaw()

	r, err := s.PopCtx(context.Background(), e2e.PopQueue(q, "consumerGroup", "g", "wait", "true", "timeout", "10000"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 200 {
		t.Fatalf("the next pop of the group got %d %q: the message is still leased to the client that left", r.Status, r.Body)
	}
	e2e.WantTxIDs(t, "next pop", r.Pop, txs)
	if v := promValue(t, s, "queengo_pops_abandoned_total"); v != 1 {
		t.Fatalf("queengo_pops_abandoned_total %v, want 1", v)
	}
}

// promValue reads an unlabelled sample of the broker's /metrics/prometheus.
func promValue(t *testing.T, s *e2e.Server, name string) float64 {
	t.Helper()
	v, _ := e2e.PromValue(s.Get(t, "/metrics/prometheus").Body, name, "")
	return v
}

// waitProm waits until an unlabelled sample reaches at least want.
func waitProm(t *testing.T, s *e2e.Server, name string, want float64) {
	t.Helper()
	err := e2e.Eventually(10*time.Second, 10*time.Millisecond, func() error {
		if v := promValue(t, s, name); v < want {
			return fmt.Errorf("%s %v", name, v)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for %s >= %v: %v", name, want, err)
	}
}
