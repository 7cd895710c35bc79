package actors

// The actor tests share one vocabulary, the helpers of this file, so that a
// test reads the same in every file:
//
//   - fixtures: setup (a broker on a fakeStore, or on a store that embeds
//     one), returning a bundle: s.b the broker, s.f the fake, s.signals the
//     points of the tree a test can wait for; setupSupervision,
//     setupHandOff, setupAbandon and setupMaintenance build on it for the
//     files that need more;
//   - the actors' dependencies: withClock (a testClock), withMiddleware
//     (receiver middleware, such as panicOnTestPanic);
//   - requests: pushItem, sendPop (a pop straight to an actor), s.parkPop;
//   - waiting: await (a pop's answer), waitChan (a channel), waitFor (a
//     test signal), eventually (a condition, polled).
//
// The units that need no broker (the ack coalescer, the parking lot, the
// ready sets, the warm pool...) build the one value they test and wait the
// same way.

import (
	"fmt"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// bundle is a broker on a fake store, closed and shut down when the test
// ends.
type bundle struct {
	b       *Broker
	f       *fakeStore   // the store, or the fakeStore it embeds
	signals *testSignals // every one initialised
}

// faked is a store that is or embeds a fakeStore.
type faked interface{ fake() *fakeStore }

func (f *fakeStore) fake() *fakeStore { return f }

// setup starts a broker with cfg, on a new fakeStore when cfg names no
// store, and with a short backoff when it sets none; tune adjusts the
// actors' dependencies (the bundle's signals already in them) before
// anything starts.
func setup(t *testing.T, cfg Config, tune ...func(*deps)) *bundle {
	t.Helper()
	if cfg.Store == nil {
		cfg.Store = newFakeStore()
	}
	if cfg.Backoff.Initial == 0 {
		cfg.Backoff = Backoff{Initial: 50 * time.Millisecond, Threshold: 3, Multiplier: 2, Max: 200 * time.Millisecond}
	}
	s := &bundle{signals: &testSignals{}}
	for _, sig := range []*testSignal{&s.signals.idleChecked, &s.signals.passivated, &s.signals.restarted, &s.signals.maintained} {
		sig.init()
	}
	if f, ok := cfg.Store.(faked); ok {
		s.f = f.fake()
	}
	s.b = newBroker(cfg, func(d *deps) {
		d.signals = s.signals
		for _, tu := range tune {
			tu(d)
		}
	})
	t.Cleanup(func() {
		s.b.Close()
		s.b.Shutdown()
	})
	return s
}

// withClock runs the actors on c.
func withClock(c clock) func(*deps) { return func(d *deps) { d.clock = c } }

// withMiddleware adds receiver middleware to every queue and scope actor.
func withMiddleware(mw ...actor.ReceiverMiddleware) func(*deps) {
	return func(d *deps) { d.props = append(d.props, actor.WithReceiverMiddleware(mw...)) }
}

// testMetrics are a broker's figures in a set nothing serves.
func testMetrics() *brokerMetrics { return newBrokerMetrics(metrics.NewSet()) }

// testPanic makes the actor that receives it panic (panicOnTestPanic).
type testPanic struct{}

// panicOnTestPanic is receiver middleware that turns a testPanic into a
// panic inside the actor, as a bug would.
func panicOnTestPanic(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*testPanic); ok {
			panic("a bug")
		}
		next(c, env)
	}
}

// pushItem is a one-item push to the default partition of queue q.
func pushItem(txid string) queengo.PushItem {
	return queengo.PushItem{Queue: "q", Partition: queengo.DefaultPartition,
		Frame: queengo.Frame{ID: uuid.Must(uuid.NewV7()), TransactionID: txid, Payload: []byte("1")}}
}

// sendPop hands a pop straight to an actor, as Broker.Pop does, so a test
// controls the order in which pops reach it.
func sendPop(b *Broker, target any, req *queengo.PopRequest) *waiter {
	w := &waiter{req: req, reply: make(chan popReply, 1), leaseID: uuid.Must(uuid.NewV7())}
	switch k := target.(type) {
	case scopeKey:
		b.toScope(k, w)
	case string:
		b.toQueue(k, w)
	default:
		panic(fmt.Sprintf("sendPop: %T", target))
	}
	return w
}

// parkPop sends a long poll of group g on queue q and waits until it is
// parked.
func (s *bundle) parkPop(t *testing.T) *waiter {
	t.Helper()
	parked := s.b.ParkedByQueue()["q"]
	w := sendPop(s.b, "q", &queengo.PopRequest{Queue: "q", Group: "g", Batch: 1, Wait: true, Timeout: time.Hour})
	eventually(t, func() error {
		if s.b.ParkedByQueue()["q"] == parked {
			return fmt.Errorf("the pop was not parked")
		}
		return nil
	})
	return w
}

// await waits for a pop's answer, failing the test after d.
func await(t *testing.T, w *waiter, d time.Duration) popReply {
	t.Helper()
	select {
	case r := <-w.reply:
		return r
	case <-time.After(d):
		t.Fatalf("pop (lease %s) not answered within %v", w.leaseID, d)
	}
	return popReply{}
}

// waitChan returns what ch gives, failing the test after 5 s.
func waitChan[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not happen within 5s", what)
	}
	var zero T
	return zero
}

// waitFor waits for one signal of sig, failing the test after 5 s.
func waitFor(t *testing.T, sig *testSignal, what string) {
	t.Helper()
	waitChan(t, sig.ch, what)
}

// eventually calls cond every millisecond until it returns nil, and fails
// the test with its error when it still does not after 5 s
// (e2e.Eventually's shape).
func eventually(t *testing.T, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
}
