package pg

import (
	"testing"
	"time"
)

// TestListen_BackoffStartsOverAfterAListen: the listener waits 100 ms after
// its first loss, doubles while reconnecting keeps failing, up to 5 s, and
// waits 100 ms again after any connection that had its LISTEN in place, so
// a process that lost its listener many times over its life is not left
// without one for seconds at each new loss.
func TestListen_BackoffStartsOverAfterAListen(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	b := time.Duration(0)
	for _, listened := range []bool{true, false, false, false, false, false, false, false, true, true} {
		b = nextListenBackoff(b, listened)
		got = append(got, b)
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms, 100 * ms, 100 * ms}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
}
