package acktest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/queengo/queengo/http/e2e"
)

// extendRes is one element of a lease extend answer (docs/api.md "POST /api/v1/lease/:leaseId/extend", L-3).
type extendRes struct {
	Index     int     `json:"index"`
	LeaseID   string  `json:"leaseId"`
	Success   bool    `json:"success"`
	Error     *string `json:"error"`
	ExpiresAt *string `json:"expiresAt"`
}

// extend posts to /api/v1/lease/:leaseId/extend and requires 200 with one
// element carrying every field of L-3.
func extend(t testing.TB, s *e2e.Server, lease string, body any) extendRes {
	t.Helper()
	r := s.Post(t, "/api/v1/lease/"+lease+"/extend", body)
	if r.Status != 200 {
		t.Fatalf("extend %s: %d %s", lease, r.Status, r.Body)
	}
	var raw []map[string]json.RawMessage
	r.JSON(t, &raw)
	if len(raw) != 1 {
		t.Fatalf("extend: want one element, got %s", r.Body)
	}
	for _, k := range []string{"index", "leaseId", "success", "error", "expiresAt"} {
		if _, ok := raw[0][k]; !ok {
			t.Fatalf("extend result lacks %q: %s", k, r.Body)
		}
	}
	var out []extendRes
	r.JSON(t, &out)
	if out[0].Index != 0 || out[0].LeaseID != lease {
		t.Fatalf("extend result %s", r.Body)
	}
	return out[0]
}

func extendOK(t testing.TB, s *e2e.Server, lease string, body any) time.Time {
	t.Helper()
	e := extend(t, s, lease, body)
	if !e.Success || e.Error != nil || e.ExpiresAt == nil {
		t.Fatalf("extend %s: %+v", lease, e)
	}
	return parseTS(t, *e.ExpiresAt)
}

func near(a, b time.Time, d time.Duration) bool {
	diff := a.Sub(b)
	return diff > -d && diff < d
}

// L-2 and L-3: one extend moves every live span carrying the lease id: all
// cursors of a multi-partition pop get lease_expires_at >= now + seconds, and
// expiresAt is the earliest of them.
func TestL2_ExtendAllPartitionsOfLease(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "l2-multi")
	var pids []string
	for _, part := range []string{"a", "b", "c"} {
		pids = append(pids, s.PushN(t, q, part, 2)[0].PartitionID)
	}
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "10", "partitions", "0", "leaseSeconds", "5"))
	if p.PartitionsClaimed != 3 || len(p.Messages) != 6 {
		t.Fatalf("pop claimed %d partitions, %d messages", p.PartitionsClaimed, len(p.Messages))
	}
	for _, pid := range pids {
		c := e2e.ReadCursor(t, pid, "")
		if c.LeaseID != p.LeaseID || time.Until(*c.Expires) > 6*time.Second {
			t.Fatalf("cursor before the extend: %+v", c)
		}
	}
	before := time.Now()
	got := extendOK(t, s, p.LeaseID, map[string]any{"seconds": 120})
	earliest := time.Time{}
	for _, pid := range pids {
		c := e2e.ReadCursor(t, pid, "")
		if !c.Live || c.LeaseID != p.LeaseID || c.Expires.Before(before.Add(119*time.Second)) {
			t.Fatalf("cursor %s not extended to 120 s: expires in %v", pid, time.Until(*c.Expires))
		}
		if earliest.IsZero() || c.Expires.Before(earliest) {
			earliest = *c.Expires
		}
	}
	if !near(got, earliest, 2*time.Millisecond) {
		t.Fatalf("expiresAt %v, want the earliest new expiry %v", got, earliest)
	}
	// Every message of every partition still acks with the lease.
	items := make([]map[string]any, len(p.Messages))
	for i, m := range p.Messages {
		items[i] = e2e.AckItem(m, "completed")
	}
	s.AckBatchOK(t, nil, items...)
}

// L-2: an extended lease outlives its original expiry: no redelivery, and
// the lease still acks.
func TestL2_ExtendedLeaseIsNotRedelivered(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "l2-holds")
	s.PushN(t, q, "", 1)
	// The original lease is 3 s: room for the extend to land on a loaded
	// machine (its ack coalescer may wait for a commit in flight); the pop
	// then comes after that lease would have ended.
	p := s.PopOK(t, e2e.PopQueue(q, "leaseSeconds", "3"))
	popped := time.Now()
	extendOK(t, s, p.LeaseID, map[string]any{"seconds": 30})
	time.Sleep(time.Until(popped.Add(3300 * time.Millisecond)))
	s.PopEmpty(t, e2e.PopQueue(q))
	if r := s.AckOK(t, p.Messages[0], "completed", ""); !r.LeaseReleased {
		t.Fatalf("%+v", r)
	}
}

// L-2: an extend never shortens a lease; expiresAt reports the unchanged
// expiry.
func TestL2_ExtendNeverShortens(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "l2-shorten")
	ps := s.PushN(t, q, "", 1)
	p := s.PopOK(t, e2e.PopQueue(q, "leaseSeconds", "300"))
	was := *e2e.ReadCursor(t, ps[0].PartitionID, "").Expires
	got := extendOK(t, s, p.LeaseID, map[string]any{"seconds": 10})
	now := e2e.ReadCursor(t, ps[0].PartitionID, "")
	if !now.Expires.Equal(was) {
		t.Fatalf("lease moved from %v to %v", was, *now.Expires)
	}
	if !near(got, was, 2*time.Millisecond) {
		t.Fatalf("expiresAt %v, want %v", got, was)
	}
}

// L-1 and the target behaviour: an empty body (and {}) extends by 60 s.
func TestL1_ExtendEmptyBodyMeans60(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "l1-default")
	ps := s.PushN(t, q, "", 1)
	pid := ps[0].PartitionID
	p := s.PopOK(t, e2e.PopQueue(q, "leaseSeconds", "5"))
	for _, body := range []any{nil, map[string]any{}} {
		extendOK(t, s, p.LeaseID, body)
		left := time.Until(*e2e.ReadCursor(t, pid, "").Expires)
		if left < 55*time.Second || left > 61*time.Second {
			t.Fatalf("body %v: lease expires in %v, want about 60 s", body, left)
		}
	}
}

// L-2 and L-3: an unknown lease, one that already expired, and one that an
// ack already ended are per-item failures (success false, the reference
// server's text, expiresAt null) inside a 200; an expired lease is not
// revived.
func TestL3_ExtendUnknownOrExpiredLeaseIsItemFailure(t *testing.T) {
	t.Parallel()
	s := shared(t)
	q := e2e.Unique(t, "l3-fail")
	ps := s.PushN(t, q, "", 2)
	pid := ps[0].PartitionID
	fail := func(lease, text string) {
		t.Helper()
		e := extend(t, s, lease, map[string]any{"seconds": 30})
		if e.Success || e.Error == nil || *e.Error != text || e.ExpiresAt != nil {
			t.Fatalf("extend %s: want the failure %q, got %+v", lease, text, e)
		}
	}
	fail(uuid.NewString(), "Lease not found")
	fail("not-a-lease", "Lease not found")

	p := s.PopOK(t, e2e.PopQueue(q, "leaseSeconds", "1"))
	time.Sleep(1100 * time.Millisecond)
	fail(p.LeaseID, "Lease already expired")
	if c := e2e.ReadCursor(t, pid, ""); c.Live {
		t.Fatalf("the expired lease was revived: %+v", c)
	}
	p2 := s.PopUntil(t, e2e.PopQueue(q, "leaseSeconds", "30"), 3*time.Second, 100*time.Millisecond)
	if p2.Messages[0].TransactionID != ps[0].Tx {
		t.Fatalf("no redelivery after the failed extend: %+v", p2)
	}
	// A lease an ack ended.
	if r := s.AckOK(t, p2.Messages[0], "completed", ""); !r.LeaseReleased {
		t.Fatalf("%+v", r)
	}
	fail(p2.LeaseID, "Lease not found")
}

// L-2: an extend that arrives while an ack commit is in flight rides in the
// next ack commit and is answered with its own result once that commit is
// done; the ack in flight is answered with its own result too. A statement
// of the test holds the acked message's cursor row (pg_sleep with the row
// locked) so that the ack commit stays in flight; the extend's lease lives
// on another queue, so only riding behind the ack can delay it. The broker
// is the test's own: holding the ack path would stall the shared one.
func TestL2_ExtendRidesWithAckInFlight(t *testing.T) {
	t.Parallel()
	s := e2e.Start(t)
	qa, qb := e2e.Unique(t, "l2-ride-a"), e2e.Unique(t, "l2-ride-b")
	pa := s.PushN(t, qa, "", 1)[0].PartitionID
	pb := s.PushN(t, qb, "", 1)[0].PartitionID
	ma := s.PopOK(t, e2e.PopQueue(qa, "leaseSeconds", "30")).Messages[0]
	leaseB := s.PopOK(t, e2e.PopQueue(qb, "leaseSeconds", "10")).LeaseID

	// Hold qa's cursor row for a few seconds: long enough for the steps
	// below on a loaded machine, short against the request timeout.
	held := make(chan error, 1)
	go func() {
		held <- e2e.DB.Exec(`SELECT pg_sleep(4) FROM (SELECT 1 FROM queen.cursors
 WHERE partition_id = $1 AND consumer_group = $2 FOR UPDATE) x`, pa, e2e.QueueMode)
	}()
	holder := waitBackend(t, `SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE '%FOR UPDATE%'
   AND datname = current_database() AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()`, "queen.cursors")

	acked := make(chan error, 1)
	go func() {
		res, err := s.AckBatchCtx(context.Background(), "", []map[string]any{e2e.AckItem(ma, "completed")})
		if err == nil && (len(res) != 1 || !res[0].Success || !res[0].LeaseReleased) {
			err = fmt.Errorf("ack results %+v, want one success that released the lease", res)
		}
		acked <- err
	}()
	waitBackend(t, `SELECT pid FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid)) AND query LIKE '%queen.ack%(%'`, holder)

	extended := make(chan *e2e.Response, 1)
	extendErr := make(chan error, 1)
	go func() {
		r, err := s.DoCtx(context.Background(), "POST", "/api/v1/lease/"+leaseB+"/extend", map[string]any{"seconds": 120})
		if err != nil {
			extendErr <- err
			return
		}
		extended <- r
	}()
	// While the ack holds the commit, the extend is not applied: qb's cursor
	// keeps its 10 s lease for as long as the holder runs. The holder is
	// checked after the cursor is read: still running then, it was running
	// during the read.
	for active := true; active; time.Sleep(20 * time.Millisecond) {
		c := e2e.ReadCursor(t, pb, "")
		active = e2e.QueryInt(t, e2e.DB, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'PgSleep'`, holder) == 1
		if active && c.ExpiresIn > 11 {
			t.Fatalf("qb's lease was extended while the ack commit was in flight: %+v", c)
		}
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if err := <-acked; err != nil {
		t.Fatalf("the ack in flight: %v", err)
	}
	var r *e2e.Response
	select {
	case r = <-extended:
	case err := <-extendErr:
		t.Fatalf("the extend: %v", err)
	}
	var out []extendRes
	r.JSON(t, &out)
	if r.Status != 200 || len(out) != 1 || !out[0].Success || out[0].Error != nil || out[0].ExpiresAt == nil || out[0].LeaseID != leaseB {
		t.Fatalf("the extend that rode with the ack: %d %s", r.Status, r.Body)
	}
	if c := e2e.ReadCursor(t, pb, ""); !c.Live || c.ExpiresIn < 100 {
		t.Fatalf("qb's lease after the extend: %+v", c)
	}
}

// waitBackend waits until query (with arg) finds a backend and returns its
// pid.
func waitBackend(t *testing.T, query string, arg any) int64 {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var pid int64
		err := e2e.DB.QueryRow(query, []any{arg}, &pid)
		if err == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no backend for %s: %v", query, err)
		}
	}
}

// TestL2_ExtendThroughAnotherBrokerProcess: a lease popped through one broker
// process extends through another on the same database, which did not hand
// it out and so finds its cursors by searching them all (no index covers
// lease ids: migration 007); every span is extended and acks after it.
func TestL2_ExtendThroughAnotherBrokerProcess(t *testing.T) {
	t.Parallel()
	s := shared(t)
	other := e2e.StartWith(t, e2e.StartOpts{DatabaseURL: e2e.DB.URL, Env: []string{"DB_POOL_SIZE=2"}})
	q := e2e.Unique(t, "l2-other")
	for _, part := range []string{"a", "b"} {
		s.PushN(t, q, part, 1)
	}
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "10", "partitions", "0", "leaseSeconds", "5"))
	if p.PartitionsClaimed != 2 || len(p.Messages) != 2 {
		t.Fatalf("pop claimed %d partitions, %d messages", p.PartitionsClaimed, len(p.Messages))
	}
	before := time.Now()
	extendOK(t, other, p.LeaseID, map[string]any{"seconds": 120})
	items := make([]map[string]any, len(p.Messages))
	for i, m := range p.Messages {
		c := e2e.ReadCursor(t, m.PartitionID, "")
		if !c.Live || c.LeaseID != p.LeaseID || c.Expires.Before(before.Add(119*time.Second)) {
			t.Fatalf("cursor %s not extended to 120 s through the other process: %+v", m.PartitionID, c)
		}
		items[i] = e2e.AckItem(m, "completed")
	}
	s.AckBatchOK(t, nil, items...)
}
