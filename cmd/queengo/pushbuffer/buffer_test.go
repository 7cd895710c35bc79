package pushbuffer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/cmd/queengo/pushbuffer/filebuffer"
)

// fakeStore is the push path behind the buffer: it can be down (every push
// and ping fails with ErrUnavailable) or refuse (every item fails with an
// error that is not "down", as a read-only database does), and it records
// the transaction ids it stored per partition, in commit order, storing a
// repeated transaction id once.
type fakeStore struct {
	down    atomic.Bool
	refuse  atomic.Bool
	appends atomic.Int64
	mu      sync.Mutex
	order   map[string][]string
}

func newFakeStore() *fakeStore { return &fakeStore{order: map[string][]string{}} }

func (s *fakeStore) push(_ context.Context, items []queengo.PushItem) ([]queengo.PushResult, error) {
	s.appends.Add(1)
	if s.down.Load() {
		return nil, fmt.Errorf("%w: connection refused", queengo.ErrUnavailable)
	}
	res := make([]queengo.PushResult, len(items))
	if s.refuse.Load() {
		for i := range res {
			res[i] = queengo.PushResult{Status: queengo.PushFailed,
				Err: errors.New("ERROR: cannot execute INSERT in a read-only transaction (SQLSTATE 25006)")}
		}
		return res, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, it := range items {
		res[i] = queengo.PushResult{Status: queengo.PushQueued, TransactionID: it.TransactionID}
		if slices.Contains(s.order[it.Partition], it.TransactionID) {
			res[i].Status = queengo.PushDuplicate
			continue
		}
		s.order[it.Partition] = append(s.order[it.Partition], it.TransactionID)
	}
	return res, nil
}

func (s *fakeStore) ping(context.Context) error {
	if s.down.Load() {
		return queengo.ErrUnavailable
	}
	return nil
}

func (s *fakeStore) stored(partition string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.order[partition]...)
}

// memSwitch is push maintenance held in memory. A read answers the value
// it found delay after finding it, as a statement in flight does.
type memSwitch struct {
	on    atomic.Bool
	delay atomic.Int64 // ns
}

func (m *memSwitch) PushMaintenance(context.Context) (bool, error) {
	v := m.on.Load()
	time.Sleep(time.Duration(m.delay.Load()))
	return v, nil
}
func (m *memSwitch) SetPushMaintenance(_ context.Context, on bool) error {
	m.on.Store(on)
	return nil
}

type bundle struct {
	b     *Buffer
	store *fakeStore
	sw    *memSwitch
	files *Files
}

// setup starts a buffer in front of a fake store, with a file buffer of
// small files when withFiles.
func setup(t *testing.T, withFiles bool) *bundle {
	t.Helper()
	bb := &bundle{store: newFakeStore(), sw: &memSwitch{}}
	cfg := Config{Switch: bb.sw, Push: bb.store.push, Ping: bb.store.ping, MaxBatch: 3,
		FlushInterval: 5 * time.Millisecond, Refresh: 20 * time.Millisecond, Timeout: 2 * time.Second}
	if withFiles {
		bb.files = openFiles(t, t.TempDir())
		cfg.Files = bb.files
	}
	bb.b = New(cfg)
	t.Cleanup(bb.b.Close)
	return bb
}

// openFiles opens a buffer directory of small files, closed when the test
// ends.
func openFiles(t *testing.T, dir string) *Files {
	t.Helper()
	f, err := OpenFiles(dir, filebufferOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// push sends items of partition p with the given transaction ids.
func (bb *bundle) push(t *testing.T, p string, txids ...string) []queengo.PushResult {
	t.Helper()
	items := make([]queengo.PushItem, len(txids))
	for i, tx := range txids {
		items[i] = queengo.PushItem{Queue: "q", Partition: p,
			Frame: queengo.Frame{ID: uuid.Must(uuid.NewV7()), TransactionID: tx, Payload: []byte(`"` + tx + `"`)}}
	}
	res, err := bb.b.Push(context.Background(), items)
	if err != nil {
		t.Fatalf("push %v: %v", txids, err)
	}
	return res
}

// drained waits until the buffer is empty and off.
func (bb *bundle) drained(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := bb.b.Stats()
		if st.Pending == 0 && !st.Active {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("buffer not drained: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func statuses(res []queengo.PushResult) string {
	var b bytes.Buffer
	for _, r := range res {
		b.WriteString(string(r.Status))
		b.WriteByte(' ')
	}
	return b.String()
}

// A push that finds the database unreachable is buffered; so is every push
// after it until the buffer drained; the replay stores each record once,
// in push order per partition, and later pushes go to the store again.
func TestPushBuffer_DatabaseDownBuffersAndReplaysInOrder(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	bb.store.down.Store(true)
	if got := statuses(bb.push(t, "A", "a1", "a2")); got != "buffered buffered " {
		t.Fatalf("push with the database down: %s, want buffered", got)
	}
	before := bb.store.appends.Load()
	bb.push(t, "B", "b1")
	bb.push(t, "A", "a3", "a4", "a5")
	bb.push(t, "A", "a1") // the same transaction id again: stored once
	if n := bb.store.appends.Load(); n != before {
		t.Fatalf("%d appends while the buffer was active, want none", n-before)
	}
	if st := bb.b.Stats(); st.Pending != 7 || !st.Active || st.DBHealthy || st.Failovers != 1 {
		t.Fatalf("stats %+v, want 7 pending, active, database down, one failover", st)
	}
	bb.store.down.Store(false)
	bb.drained(t)
	if got := fmt.Sprint(bb.store.stored("A")); got != "[a1 a2 a3 a4 a5]" {
		t.Fatalf("partition A stored %s, want [a1 a2 a3 a4 a5]", got)
	}
	if got := fmt.Sprint(bb.store.stored("B")); got != "[b1]" {
		t.Fatalf("partition B stored %s, want [b1]", got)
	}
	if got := statuses(bb.push(t, "A", "a6")); got != "queued " {
		t.Fatalf("push after the drain: %s, want queued", got)
	}
	if st := bb.b.Stats(); st.Files != 0 || st.Bytes != 0 || !st.DBHealthy {
		t.Fatalf("stats after the drain %+v, want no files", st)
	}
}

// D11, in order and nothing lost: a replay whose records the store refuses
// with an error that is not "the database is down" (a database read-only
// during a failover, a full disk, a queue at maxSize) stops at the first
// refused record and tries again, in order; once the store takes them
// they are stored, none moves to failed/.
func TestPushBuffer_ReplayRetriesWhatTheStoreRefusesInOrder(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	ctx := context.Background()
	if err := bb.b.SetMaintenance(ctx, true); err != nil {
		t.Fatal(err)
	}
	bb.push(t, "P", "r1", "r2")
	bb.push(t, "P", "r3", "r4", "r5")
	bb.store.refuse.Store(true)
	refusedAt := bb.store.appends.Load()
	if err := bb.b.SetMaintenance(ctx, false); err != nil {
		t.Fatal(err)
	}
	for bb.store.appends.Load() < refusedAt+3 { // three refused tries
		time.Sleep(5 * time.Millisecond)
	}
	if st := bb.b.Stats(); st.Pending != 5 || st.Failed != 0 || !st.Active {
		t.Fatalf("stats while the store refuses %+v, want 5 pending, none failed, active", st)
	}
	bb.store.refuse.Store(false)
	bb.drained(t)
	if got := fmt.Sprint(bb.store.stored("P")); got != "[r1 r2 r3 r4 r5]" {
		t.Fatalf("stored %s, want [r1 r2 r3 r4 r5]", got)
	}
	if st := bb.b.Stats(); st.Failed != 0 {
		t.Fatalf("%d records in failed/, want none", st.Failed)
	}
}

// Under push maintenance pushes go to the buffer without touching the
// store; switched off, the buffer replays.
func TestPushBuffer_MaintenanceDivertsUntilSwitchedOff(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	ctx := context.Background()
	if err := bb.b.SetMaintenance(ctx, true); err != nil {
		t.Fatal(err)
	}
	before := bb.store.appends.Load()
	if got := statuses(bb.push(t, "P", "m1", "m2")); got != "buffered buffered " {
		t.Fatalf("push under maintenance: %s", got)
	}
	if bb.store.appends.Load() != before {
		t.Fatal("a push under maintenance reached the store")
	}
	if on, _ := bb.b.Maintenance(ctx); !on || !bb.b.MaintenanceOn() {
		t.Fatal("push maintenance not reported on")
	}
	if err := bb.b.SetMaintenance(ctx, false); err != nil {
		t.Fatal(err)
	}
	bb.drained(t)
	if got := fmt.Sprint(bb.store.stored("P")); got != "[m1 m2]" {
		t.Fatalf("stored %s, want [m1 m2]", got)
	}
}

// A switch made by another process (in the store) applies here at the next
// refresh.
func TestPushBuffer_MaintenanceFromAnotherProcess(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	bb.sw.on.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for !bb.b.MaintenanceOn() {
		if time.Now().After(deadline) {
			t.Fatal("the stored switch was not applied")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := statuses(bb.push(t, "P", "x")); got != "buffered " {
		t.Fatalf("push: %s, want buffered", got)
	}
}

// Without a file buffer, push maintenance refuses pushes (never a silent
// drop) and a database outage fails them as before.
func TestPushBuffer_NoBuffer(t *testing.T) {
	t.Parallel()
	bb := setup(t, false)
	ctx := context.Background()
	item := []queengo.PushItem{{Queue: "q", Partition: "P", Frame: queengo.Frame{ID: uuid.New(), TransactionID: "t", Payload: []byte("1")}}}
	bb.store.down.Store(true)
	if _, err := bb.b.Push(ctx, item); !errors.Is(err, queengo.ErrUnavailable) {
		t.Fatalf("push with the database down and no buffer: %v, want ErrUnavailable", err)
	}
	bb.store.down.Store(false)
	if err := bb.b.SetMaintenance(ctx, true); err != nil {
		t.Fatal(err)
	}
	if _, err := bb.b.Push(ctx, item); !errors.Is(err, queengo.ErrNoBuffer) {
		t.Fatalf("push under maintenance without a buffer: %v, want ErrNoBuffer", err)
	}
}

// Records left by an earlier process are replayed at start.
func TestPushBuffer_ReplaysRecordsLeftByAnEarlierProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := OpenFiles(dir, filebufferOptions())
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	for _, tx := range []string{"r1", "r2", "r3", "r4"} {
		it := queengo.PushItem{Queue: "q", Partition: "R", Frame: queengo.Frame{ID: uuid.New(), TransactionID: tx, Payload: []byte("1")}}
		recs = append(recs, encodeItem(nil, &it, time.Now().UnixMilli()))
	}
	if err := f.log.Append(recs); err != nil {
		t.Fatal(err)
	}
	f.Close()
	f = openFiles(t, dir)
	store := newFakeStore()
	bb := &bundle{store: store, b: New(Config{Files: f, Push: store.push, Ping: store.ping,
		FlushInterval: 5 * time.Millisecond, Timeout: 2 * time.Second})}
	t.Cleanup(bb.b.Close)
	bb.drained(t)
	for _, tx := range []string{"r1", "r2", "r3", "r4"} {
		if !slices.Contains(store.stored("R"), tx) {
			t.Errorf("%s not replayed", tx)
		}
	}
}

// decodeItem reads back what encodeItem wrote.
func TestEncodeItemRoundTrip(t *testing.T) {
	t.Parallel()
	in := queengo.PushItem{Queue: "orders", Partition: "p-1", Frame: queengo.Frame{ID: uuid.New(),
		TransactionID: "tx", TraceID: uuid.New(), ProducerSub: "svc", Payload: []byte(`{"a":1}`)}}
	out, err := decodeItem(encodeItem(nil, &in, 42))
	if err != nil {
		t.Fatal(err)
	}
	if out.Queue != in.Queue || out.Partition != in.Partition || out.ID != in.ID || out.TransactionID != in.TransactionID ||
		out.TraceID != in.TraceID || out.ProducerSub != in.ProducerSub || !bytes.Equal(out.Payload, in.Payload) {
		t.Fatalf("decoded %+v, want %+v", out, in)
	}
}

// decodeItem never panics on any record, and whatever it accepts encodes
// back to the same bytes (so replay stores exactly what was buffered).
func FuzzDecodeItem(f *testing.F) {
	it := queengo.PushItem{Queue: "q", Partition: "p", Frame: queengo.Frame{ID: uuid.New(), TransactionID: "t", Payload: []byte("1")}}
	f.Add(encodeItem(nil, &it, 1))
	f.Add([]byte{itemVersion, 0xff})
	f.Fuzz(func(t *testing.T, rec []byte) {
		out, err := decodeItem(rec)
		if err != nil {
			return
		}
		if out.Queue == "" || out.TransactionID == "" || len(out.Payload) == 0 {
			t.Fatalf("accepted an item without queue, transaction id or payload: %+v", out)
		}
	})
}

// filebufferOptions are small files, so the tests cross rotations.
func filebufferOptions() filebuffer.Options { return filebuffer.Options{EventsPerFile: 2} }

// A switch made here is not undone by a refresh read that started before
// it (and read the previous value).
func TestPushBuffer_StaleRefreshDoesNotUndoASwitch(t *testing.T) {
	t.Parallel()
	bb := setup(t, true)
	// Reads take 15 ms of the refresh's 20 ms: most switches below meet a
	// read in flight that found the previous value.
	bb.sw.delay.Store(int64(15 * time.Millisecond))
	ctx := context.Background()
	for range 10 {
		if err := bb.b.SetMaintenance(ctx, true); err != nil {
			t.Fatal(err)
		}
		// A stale read applied would have turned maintenance, and the
		// empty buffer, off by now, until the next read (15-35 ms after
		// the switch) brought it back.
		time.Sleep(18 * time.Millisecond)
		if got := statuses(bb.push(t, "S", uuid.NewString())); got != "buffered " {
			t.Fatalf("push 18 ms after the switch: %s, want buffered", got)
		}
		if err := bb.b.SetMaintenance(ctx, false); err != nil {
			t.Fatal(err)
		}
		bb.drained(t)
	}
}
