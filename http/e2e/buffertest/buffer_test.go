package buffertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// D11: under push maintenance every push is answered 201 "buffered" and
// nothing reaches PostgreSQL; the switch is stored in PostgreSQL and
// reported by GET; switched off, the buffer drains and every message is
// poppable exactly once, in push order per partition.
func TestD11_PushMaintenanceBuffersThenReplaysInOrder(t *testing.T) {
	b := setup(t, false)
	s := b.s
	q := e2e.Unique(t, "maint")
	e2e.WantError(t, s.Post(t, "/api/v1/system/maintenance", map[string]any{"enabled": "yes"}), 400, "enabled (boolean) is required")

	setMaintenance(t, s, true)
	if n := e2e.QueryInt(t, b.db, `SELECT count(*) FROM queen.system_state WHERE key = 'maintenance_mode' AND (value->>'enabled')::boolean`); n != 1 {
		t.Fatalf("the push maintenance switch is not stored in queen.system_state")
	}
	want := map[string][]string{}
	parts := []string{"A", "B", "C"}
	for round := range 10 {
		for k, p := range parts {
			// Batches of 1, 2 and 3 items; the third partition's items
			// carry no transaction id: the broker assigns one before
			// buffering and echoes it.
			var items []e2e.PushItem
			for i := range k + 1 {
				it := e2e.PushItem{Queue: q, Partition: p, Payload: map[string]any{"round": round, "i": i}}
				if p != "C" {
					it.TransactionID = e2e.TxID(p)
				}
				items = append(items, it)
			}
			r := s.Post(t, "/api/v1/push", map[string]any{"items": items})
			if r.Status != 201 {
				t.Fatalf("push under maintenance: %d %s", r.Status, r.Body)
			}
			var res []map[string]any
			r.JSON(t, &res)
			for i, x := range res {
				tx, _ := x["transactionId"].(string)
				if x["status"] != "buffered" || x["queue"] != q || x["partition"] != p || tx == "" ||
					(items[i].TransactionID != "" && tx != items[i].TransactionID) {
					t.Fatalf("push under maintenance, item %d: %v", i, x)
				}
				want[p] = append(want[p], tx)
			}
		}
	}
	total := int64(len(want["A"]) + len(want["B"]) + len(want["C"]))
	st := state(t, s)
	if !st.MaintenanceMode || st.BufferedMessages != total || !st.BufferHealthy || st.BufferStats.PendingCount != total {
		t.Fatalf("GET maintenance under maintenance: %+v, want on with %d buffered", st, total)
	}
	if n := queueRows(t, b.db, q); n != 0 {
		t.Fatalf("%d messages reached PostgreSQL under push maintenance", n)
	}
	// A duplicate transaction id, buffered: stored once.
	if r := s.Push(t, e2e.PushItem{Queue: q, Partition: "A", TransactionID: want["A"][0], Payload: "again"}); r[0].Status != "buffered" {
		t.Fatalf("duplicate under maintenance: %+v", r[0])
	}

	setMaintenance(t, s, false)
	drained(t, s, 30*time.Second)
	if st := state(t, s); st.MaintenanceMode || st.BufferedMessages != 0 {
		t.Fatalf("GET maintenance after the drain: %+v", st)
	}
	for _, p := range parts {
		wantOnceInOrder(t, "partition "+p, popAll(t, s, q, p), want[p], nil)
	}
	// Pushes go straight to PostgreSQL again.
	if r := s.Push(t, e2e.PushItem{Queue: q, Partition: "A", Payload: "after"}); r[0].Status != "queued" {
		t.Fatalf("push after the drain: %+v", r[0])
	}
}

// Issue 13: PostgreSQL unreachable for about 10 s under 20 pushing clients:
// no push answers a 5xx; every push answered 201 is stored exactly once
// afterwards, in push order per partition; pushes not answered at all (none
// expected) are stored at most once.
func TestD11_DatabaseOutageUnderLoadLosesNothing(t *testing.T) {
	b := setup(t, false)
	s := b.s
	q := e2e.Unique(t, "outage")
	s.Configure(t, q, nil)
	const clients = 20
	type client struct {
		answered, unsure []string
		fives            []string
	}
	cs := make([]*client, clients)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := range clients {
		cs[c] = &client{}
		wg.Go(func() {
			me := cs[c]
			p := fmt.Sprintf("P%d", c)
			for n := 0; ctx.Err() == nil; n++ {
				tx := fmt.Sprintf("c%d-%d", c, n)
				rctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				status, res, err := s.PushCtx(rctx, e2e.PushItem{Queue: q, Partition: p, TransactionID: tx, Payload: n})
				cancel()
				switch {
				case err != nil:
					me.unsure = append(me.unsure, tx)
				case status >= 500:
					me.fives = append(me.fives, fmt.Sprintf("%s: %d", tx, status))
				case status == 201 && (res[0].Status == "queued" || res[0].Status == "buffered"):
					me.answered = append(me.answered, tx)
				default:
					me.fives = append(me.fives, fmt.Sprintf("%s: %d %+v", tx, status, res))
				}
				// About 50 pushes a second per client: enough to meet the
				// cut and the restore in flight, few enough to pop back.
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	time.Sleep(2 * time.Second)
	b.proxy.Cut()
	time.Sleep(10 * time.Second)
	during := state(t, s)
	b.proxy.Restore()
	time.Sleep(3 * time.Second)
	stop()
	wg.Wait()
	if during.BufferStats.DBHealthy || during.BufferedMessages == 0 || during.BufferStats.FailedFiles.FailoverCount < 1 {
		t.Errorf("GET maintenance during the outage: %+v, want the database unhealthy and messages buffered", during)
	}
	drained(t, s, 60*time.Second)
	total := 0
	for c, me := range cs {
		if len(me.fives) > 0 {
			t.Errorf("client %d: %d pushes answered 5xx, e.g. %v", c, len(me.fives), me.fives[:min(3, len(me.fives))])
		}
		wantOnceInOrder(t, fmt.Sprintf("client %d", c), popAll(t, s, q, fmt.Sprintf("P%d", c)), me.answered, me.unsure)
		total += len(me.answered)
	}
	t.Logf("%d pushes answered, %d buffered during the outage", total, during.BufferedMessages)
	if !hasLog(s, "PostgreSQL unreachable for a push") || !hasLog(s, "drained; pushes go to PostgreSQL again") {
		t.Errorf("the switches to and from the buffer were not logged")
	}
}

// Issue 13: a broker killed with SIGKILL while buffering (push maintenance
// on, pushers running) loses nothing it answered: the next broker on the
// same directory replays every answered push exactly once. A record torn by
// the crash (half written, never answered) is cut, not replayed.
func TestD11_KilledWhileBufferingReplaysAfterRestart(t *testing.T) {
	b := setup(t, true)
	q := e2e.Unique(t, "kill")
	setMaintenance(t, b.s, true)
	const clients = 4
	answered := make([][]string, clients)
	unsure := make([][]string, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			p := fmt.Sprintf("K%d", c)
			for n := 0; ; n++ {
				tx := fmt.Sprintf("k%d-%d", c, n)
				items := []e2e.PushItem{{Queue: q, Partition: p, TransactionID: tx, Payload: n},
					{Queue: q, Partition: p, TransactionID: tx + "b", Payload: n}}
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				status, res, err := b.s.PushCtx(rctx, items...)
				cancel()
				if err != nil {
					// The broker died with this push in flight.
					unsure[c] = append(unsure[c], tx, tx+"b")
					return
				}
				if status != 201 || res[0].Status != "buffered" || res[1].Status != "buffered" {
					t.Errorf("push under maintenance: %d %+v", status, res)
					return
				}
				answered[c] = append(answered[c], tx, tx+"b")
			}
		})
	}
	time.Sleep(1500 * time.Millisecond)
	b.s.Kill()
	wg.Wait()
	files := bufferFiles(t, b.dir)
	if len(files) == 0 {
		t.Fatal("no buffer files after the crash")
	}
	// What a crash in the middle of a record's write leaves: a length that
	// promises more than is there.
	appendBytes(t, files[len(files)-1], []byte{200, 0, 0, 0, 1, 2, 3, 4, '{', '"'})

	s := b.start(t)
	if err := e2e.Eventually(10*time.Second, 100*time.Millisecond, func() error {
		if !hasLog(s, "cut torn records") {
			return fmt.Errorf("no log line about the torn record")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Maintenance is still on (it is stored): the replay waits for the
	// switch.
	if st := state(t, s); !st.MaintenanceMode || st.BufferedMessages == 0 {
		t.Fatalf("after the restart: %+v, want maintenance on and the buffer pending", st)
	}
	setMaintenance(t, s, false)
	drained(t, s, 60*time.Second)
	total := 0
	for c := range clients {
		wantOnceInOrder(t, fmt.Sprintf("client %d", c), popAll(t, s, q, fmt.Sprintf("K%d", c)), answered[c], unsure[c])
		total += len(answered[c])
	}
	if total == 0 {
		t.Fatal("no push was answered before the kill")
	}
	t.Logf("%d pushes answered before the kill", total)
}

// Issue 13: a full buffer (FILE_BUFFER_MAX_BYTES) refuses a push with a 503
// JSON error, never a silent drop; what it took before is replayed.
func TestD11_FullBufferAnswers503(t *testing.T) {
	db := e2e.CreateDB(t, "bufferfull")
	dir := t.TempDir()
	s := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: db.URL,
		Env: []string{"FILE_BUFFER_DIR=" + dir, "FILE_BUFFER_MAX_BYTES=4096", "FILE_BUFFER_FILE_BYTES=1024"}})
	q := e2e.Unique(t, "full")
	setMaintenance(t, s, true)
	var stored []string
	for n := 0; ; n++ {
		tx := fmt.Sprintf("f-%d", n)
		r := s.Post(t, "/api/v1/push", map[string]any{"items": []e2e.PushItem{{Queue: q, TransactionID: tx, Payload: "0123456789abcdef0123456789abcdef"}}})
		if r.Status == 503 {
			e2e.WantErrorBody(t, r, 503)
			break
		}
		if r.Status != 201 {
			t.Fatalf("push %d: %d %s", n, r.Status, r.Body)
		}
		stored = append(stored, tx)
		if n > 1000 {
			t.Fatal("the buffer never filled")
		}
	}
	setMaintenance(t, s, false)
	drained(t, s, 30*time.Second)
	wantOnceInOrder(t, "queue", popAll(t, s, q, "Default"), stored, nil)
}
