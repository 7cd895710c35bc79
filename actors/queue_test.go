package actors

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestReadySet_LaterOfferSurvivesEarlierClaim: a claim that started before a
// partition was offered again must not erase that offer when it comes back
// without the partition (the bug that left one partition circulating among
// ten consumers).
func TestReadySet_LaterOfferSurvivesEarlierClaim(t *testing.T) {
	t.Parallel()
	rs := &readySet{set: map[uuid.UUID]uint64{}}
	p := uuid.New()
	rs.offer(p, 1)
	since := uint64(1) // a claim starts after offer 1
	rs.offer(p, 2)     // the partition is freed again meanwhile
	rs.drop(p, since)
	if _, ok := rs.set[p]; !ok {
		t.Fatal("an offer made after the claim started was dropped")
	}
	rs.drop(p, 2)
	if _, ok := rs.set[p]; ok {
		t.Fatal("a claim that started after the last offer did not drop it")
	}
}

// TestBackoff_Schedule: pop-routes.md's re-check schedule: the initial
// interval for the first POP_WAIT_BACKOFF_THRESHOLD empty checks, then
// growing by the multiplier per empty check, capped at the maximum.
func TestBackoff_Schedule(t *testing.T) {
	t.Parallel()
	a := &queueActor{b: &Broker{cfg: Config{Backoff: Backoff{Initial: 100 * time.Millisecond, Threshold: 3,
		Multiplier: 2, Max: time.Second}}}}
	k := &keyState{interval: 100 * time.Millisecond}
	now := time.Now()
	var got []time.Duration
	for range 8 {
		a.backoff(k, now)
		got = append(got, k.next.Sub(now))
	}
	want := []time.Duration{100, 100, 100, 200, 400, 800, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("intervals %v, want %v ms", got, want)
		}
	}
}

// TestWakeResetsBackoff: a push in scope resets every key's backoff.
func TestWakeResetsBackoff(t *testing.T) {
	t.Parallel()
	a := newQueueActor(&Broker{cfg: Config{Backoff: Backoff{Initial: 100 * time.Millisecond, Threshold: 3,
		Multiplier: 2, Max: time.Second}}}, "q")
	k := &keyState{interval: time.Second, empties: 9, next: time.Now().Add(time.Second)}
	a.keys["g\x00"] = k
	a.wakeAll()
	if k.empties != 0 || k.interval != 100*time.Millisecond {
		t.Fatalf("after a wake: %d empties, interval %v", k.empties, k.interval)
	}
}
