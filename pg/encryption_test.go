package pg_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
	"github.com/queengo/queengo/pg"
)

// Encryption at rest through the store: what reaches the tables is sealed,
// every reader opens it (pg/seal_test.go has the frame format's own tests).

// newKey is a random 32-byte key.
func newKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// withKeys is a setup option: the store seals with key and opens with it
// and readKeys.
func withKeys(key []byte, readKeys ...[]byte) func(*pg.Config) {
	return func(c *pg.Config) { c.EncryptionKey, c.EncryptionReadKeys = key, readKeys }
}

// encryptedQueue configures a queue with encryptionEnabled (and retryLimit
// 0: the first failed ack dead-letters).
func (b *bundle) encryptedQueue(t *testing.T) (queengo.Queue, uuid.UUID) {
	t.Helper()
	o := queengo.ConfigureDefaults()
	o.EncryptionEnabled, o.RetryLimit = true, 0
	q, pid, err := b.s.Configure(context.Background(), "enc-"+uuid.NewString()[:8], "", "", o)
	if err != nil {
		t.Fatal(err)
	}
	return q, pid
}

// stored counts the rows of table (segments or dead_letters) of partition
// pid whose frame bytes contain marker.
func (b *bundle) stored(t *testing.T, table, column string, pid uuid.UUID, marker string) int {
	t.Helper()
	var n int
	if err := b.conn(t).QueryRow(context.Background(), `SELECT count(*) FROM queen.`+table+
		` WHERE partition_id = $1 AND position($2::bytea IN `+column+`) > 0`, pid, []byte(marker)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// claimAll claims up to 10 messages of q in queue mode.
func (b *bundle) claimAll(t *testing.T, q queengo.Queue) queengo.ClaimResult {
	t.Helper()
	res, err := b.s.Claim(context.Background(), []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID},
		Group: queengo.QueueModeGroup, Batch: 10, LeaseID: uuid.Must(uuid.NewV7())}})
	if err != nil {
		t.Fatal(err)
	}
	return res[0]
}

// A sealed segment, a transaction's push, a dead letter and its requeue
// keep nothing of the payload in their rows; claim, the message view, the
// dead-letter list and the requeue return it as pushed.
func TestEncryption_SealedAtRestOpenedOnRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, withKeys(newKey()))
	q, pid := b.encryptedQueue(t)
	marker := "pg-marker-" + uuid.NewString()
	payload := `{"m":"` + marker + `"}`
	f := queengo.Frame{ID: uuid.Must(uuid.NewV7()), TransactionID: "a", Payload: []byte(payload)}
	b.append(t, queengo.Segment{Partition: pid, Frames: []queengo.Frame{f}, Seal: true})
	if _, err := b.s.Transaction(ctx, []queengo.TxOp{{Push: &queengo.PushItem{Queue: q.Name, Partition: queengo.DefaultPartition,
		Frame: queengo.Frame{ID: uuid.Must(uuid.NewV7()), TransactionID: "b", Payload: []byte(payload)}}}}); err != nil {
		t.Fatal(err)
	}
	if n := b.stored(t, "segments", "frames", pid, marker); n != 0 {
		t.Fatalf("%d segments hold the payload in plaintext", n)
	}
	// The control: a queue without encryption stores it as it came.
	plain, err := b.s.EnsureQueue(ctx, "plain-"+uuid.NewString()[:8])
	if err != nil {
		t.Fatal(err)
	}
	ppid := b.partition(t, plain, "p")
	b.append(t, queengo.Segment{Partition: ppid, Frames: []queengo.Frame{f}})
	if n := b.stored(t, "segments", "frames", ppid, marker); n != 1 {
		t.Fatalf("the plaintext control: %d segments hold the payload, want 1", n)
	}
	r := b.claimAll(t, q)
	if r.Err != nil || len(r.Messages) != 2 || string(r.Messages[0].Payload) != payload || string(r.Messages[1].Payload) != payload {
		t.Fatalf("claim: %+v", r)
	}
	m, err := b.s.GetMessage(ctx, pid, "b")
	if err != nil || string(m.Payload) != payload || !m.Encrypted {
		t.Fatalf("message view: %q encrypted %v, %v", m.Payload, m.Encrypted, err)
	}

	res, err := b.s.Ack(ctx, []queengo.AckItem{{PartitionID: pid, TransactionID: "a", Status: "failed", Group: queengo.QueueModeGroup}})
	if err != nil || !res[0].DLQ {
		t.Fatalf("failed ack with retryLimit 0: %+v %v", res, err)
	}
	if n := b.stored(t, "dead_letters", "frame", pid, marker); n != 0 {
		t.Fatal("the dead letter holds the payload in plaintext")
	}
	dl, _, err := b.s.ListDeadLetters(ctx, queengo.DLQFilter{Queue: q.Name, Limit: 10})
	if err != nil || len(dl) != 1 || string(dl[0].Frame.Payload) != payload {
		t.Fatalf("dead letters: %+v %v", dl, err)
	}
	_, nf, err := b.s.RequeueDeadLetter(ctx, dl[0].ID)
	if err != nil || string(nf.Payload) != payload {
		t.Fatalf("requeue: %q %v", nf.Payload, err)
	}
	if n := b.stored(t, "segments", "frames", pid, marker); n != 0 {
		t.Fatal("the requeued message is stored in plaintext")
	}
	if m, err := b.s.GetMessage(ctx, pid, nf.TransactionID); err != nil || string(m.Payload) != payload || !m.Encrypted {
		t.Fatalf("requeued message: %q encrypted %v, %v", m.Payload, m.Encrypted, err)
	}
}

// A store without a key refuses encryptionEnabled at configure (and
// changes nothing) and refuses to write a segment that asks to be sealed.
func TestEncryption_RefusedWithoutKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	o := queengo.ConfigureDefaults()
	o.EncryptionEnabled = true
	name := "enc-nokey-" + uuid.NewString()[:8]
	if _, _, err := b.s.Configure(ctx, name, "", "", o); !errors.Is(err, queengo.ErrEncryptionUnavailable) {
		t.Fatalf("configure: %v, want ErrEncryptionUnavailable", err)
	}
	var n int
	if err := b.conn(t).QueryRow(ctx, `SELECT count(*) FROM queen.queues WHERE name = $1`, name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused configure left %d queues (%v)", n, err)
	}
	q, err := b.s.EnsureQueue(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	pid := b.partition(t, q, "p")
	_, err = b.s.Append(ctx, []queengo.Segment{{Partition: pid, Frames: []queengo.Frame{frame("a")}, Seal: true}})
	if !errors.Is(err, queengo.ErrEncryptionUnavailable) {
		t.Fatalf("sealed append without a key: %v, want ErrEncryptionUnavailable", err)
	}
}

// queen.append_segments refuses a plaintext segment for a queue with
// encryptionEnabled (a writer that read the queue before encryption was
// turned on) with ErrQueueChanged, writing nothing.
func TestEncryption_PlaintextWriteToEncryptedQueueRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, withKeys(newKey()))
	_, pid := b.encryptedQueue(t)
	other, err := b.s.EnsureQueue(ctx, "plain-"+uuid.NewString()[:8])
	if err != nil {
		t.Fatal(err)
	}
	opid := b.partition(t, other, "p")
	_, err = b.s.Append(ctx, []queengo.Segment{{Partition: opid, Frames: []queengo.Frame{frame("x")}},
		{Partition: pid, Frames: []queengo.Frame{frame("a")}}})
	if !errors.Is(err, queengo.ErrQueueChanged) {
		t.Fatalf("plaintext append: %v, want ErrQueueChanged", err)
	}
	var n int
	if err := b.conn(t).QueryRow(ctx, `SELECT count(*) FROM queen.segments WHERE partition_id = ANY ($1)`,
		[]uuid.UUID{pid, opid}).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused append wrote %d segments (%v)", n, err)
	}
}

// A payload sealed with a key the store does not have fails the claim that
// meets it and the message view with ErrEncryptionKeyUnknown; nothing
// panics. (The key id is overwritten in place with one no key has.)
func TestEncryption_UnknownKeyFailsTheRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, withKeys(newKey()))
	q, pid := b.encryptedQueue(t)
	b.append(t, queengo.Segment{Partition: pid, Frames: []queengo.Frame{frame("t1")}, Seal: true})
	// flags, message id, len+"t1", payload length: the key id starts at
	// byte 22 (1-based).
	if _, err := b.conn(t).Exec(ctx, `UPDATE queen.segments SET frames = overlay(frames PLACING '\xdeadbeef'::bytea FROM 22)
WHERE partition_id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	if r := b.claimAll(t, q); !errors.Is(r.Err, queengo.ErrEncryptionKeyUnknown) {
		t.Fatalf("claim: %+v, want ErrEncryptionKeyUnknown", r)
	}
	if _, err := b.s.GetMessage(ctx, pid, "t1"); !errors.Is(err, queengo.ErrEncryptionKeyUnknown) {
		t.Fatalf("message view: %v, want ErrEncryptionKeyUnknown", err)
	}
}

// An autoAck pop whose messages cannot be read (sealed with a key this
// store lacks) commits nothing: its claim's cursor move is given back, so
// the group's next pop, on a broker with the key, gets them (autoAck is
// at-most-once delivery, not loss of what was never delivered).
func TestEncryption_AnAutoAckPopThatCannotReadItsMessagesLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, withKeys(newKey()))
	q, pid := b.encryptedQueue(t)
	b.append(t, queengo.Segment{Partition: pid, Frames: []queengo.Frame{frame("t1"), frame("t2")}, Seal: true})
	db := b.conn(t)
	var sealed []byte
	if err := db.QueryRow(ctx, `SELECT frames FROM queen.segments WHERE partition_id = $1`, pid).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	// The first frame's key id, as in TestEncryption_UnknownKeyFailsTheRead.
	if _, err := db.Exec(ctx, `UPDATE queen.segments SET frames = overlay(frames PLACING '\xdeadbeef'::bytea FROM 22)
WHERE partition_id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	auto := func() queengo.ClaimResult {
		t.Helper()
		res, err := b.s.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: "g", Batch: 10, AutoAck: true}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	if r := auto(); !errors.Is(r.Err, queengo.ErrEncryptionKeyUnknown) {
		t.Fatalf("autoAck claim: %+v, want ErrEncryptionKeyUnknown", r)
	}
	var committed int64
	if err := db.QueryRow(ctx, `SELECT committed FROM queen.cursors WHERE partition_id = $1 AND consumer_group = 'g'`,
		pid).Scan(&committed); err != nil || committed != 0 {
		t.Fatalf("the group's cursor at %d (%v) after the claim that could not be read, want 0", committed, err)
	}
	if _, err := db.Exec(ctx, `UPDATE queen.segments SET frames = $2 WHERE partition_id = $1`, pid, sealed); err != nil {
		t.Fatal(err)
	}
	if r := auto(); r.Err != nil || len(r.Messages) != 2 {
		t.Fatalf("autoAck claim once the key is there: %d messages, %v; want both", len(r.Messages), r.Err)
	}
}

// The keys that open are a store's own, not the process's: stores opened in
// one process without the key a first store sealed with (another key, or
// none) cannot open what it sealed, in a claim or the message view, as
// brokers in processes of their own could not; a store given that key as a
// read key can.
func TestEncryption_AStoreOpensOnlyWithItsOwnKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := newKey()
	b := setup(t, withKeys(key))
	q, pid := b.encryptedQueue(t)
	f := frame("t1")
	b.append(t, queengo.Segment{Partition: pid, Frames: []queengo.Frame{f}, Seal: true})
	// Each store claims for a group of its own: a failed claim's lease
	// stands in no other's way.
	claim := func(st *pg.Store, group string) queengo.ClaimResult {
		t.Helper()
		res, err := st.Claim(ctx, []queengo.ClaimParams{{QueueIDs: []uuid.UUID{q.ID}, Group: group, Batch: 10,
			LeaseID: uuid.Must(uuid.NewV7())}})
		if err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	for name, st := range map[string]*pg.Store{"another key": setup(t, withKeys(newKey())).s, "no key": setup(t).s} {
		if r := claim(st, "g-"+uuid.NewString()[:8]); !errors.Is(r.Err, queengo.ErrEncryptionKeyUnknown) {
			t.Fatalf("%s: claim %+v, want ErrEncryptionKeyUnknown", name, r)
		}
		if _, err := st.GetMessage(ctx, pid, "t1"); !errors.Is(err, queengo.ErrEncryptionKeyUnknown) {
			t.Fatalf("%s: message view %v, want ErrEncryptionKeyUnknown", name, err)
		}
	}
	reader := setup(t, withKeys(newKey(), key)).s
	if r := claim(reader, "g-reader"); r.Err != nil || len(r.Messages) != 1 || string(r.Messages[0].Payload) != string(f.Payload) {
		t.Fatalf("a store with the key as a read key: claim %+v", r)
	}
	if m, err := reader.GetMessage(ctx, pid, "t1"); err != nil || string(m.Payload) != string(f.Payload) {
		t.Fatalf("a store with the key as a read key: message view %q, %v", m.Payload, err)
	}
}
