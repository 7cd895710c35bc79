package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PromValue returns the value of the sample line of name with exactly
// labels ("" for none) in a /metrics/prometheus body, and whether there is
// one.
func PromValue(body []byte, name, labels string) (float64, bool) {
	want := name
	if labels != "" {
		want += "{" + labels + "}"
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// WaitParked waits until n long polls are parked on queue as the broker's
// metrics collector last sampled them (queen_queue_parked_consumers): a
// parked pop found nothing to deliver at its last look. Start the broker
// with a short METRICS_SAMPLE_INTERVAL_MS; the wait gives up after 15 s.
func (s *Server) WaitParked(t testing.TB, queue string, n int) {
	t.Helper()
	err := Eventually(15*time.Second, 20*time.Millisecond, func() error {
		r := s.Get(t, "/metrics/prometheus")
		if v, _ := PromValue(r.Body, "queen_queue_parked_consumers", `queue="`+queue+`"`); v != float64(n) {
			return fmt.Errorf("%v parked", v)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for %d long polls parked on %s: %v", n, queue, err)
	}
}
