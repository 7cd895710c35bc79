package cryptotest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/queengo/queengo/http/e2e"
)

// A payload pushed to a queue with encryptionEnabled (by push and by
// transaction, and one dead-lettered) appears nowhere in a pg_dump of the
// database, neither as text nor as bytea hex; the same kind of payload
// pushed to a plaintext queue does (the control).
func TestEncryption_PgDumpHoldsNoEncryptedPayload(t *testing.T) {
	t.Parallel()
	s := keyed(t)
	enc, plain := e2e.Unique(t, "dump-enc"), e2e.Unique(t, "dump-plain")
	encrypted(t, s, enc, map[string]any{"retryLimit": 0})
	s.Configure(t, plain, nil)
	pushed := e2e.Unique(t, "marker-pushed")
	inTx := e2e.Unique(t, "marker-tx")
	dead := e2e.Unique(t, "marker-dead")
	control := e2e.Unique(t, "marker-control")

	s.PushQueued(t, e2e.PushItem{Queue: enc, Payload: map[string]any{"secret": dead}, TransactionID: e2e.TxID("dead")},
		e2e.PushItem{Queue: enc, Payload: map[string]any{"secret": pushed}, TransactionID: e2e.TxID("pushed")},
		e2e.PushItem{Queue: plain, Payload: map[string]any{"open": control}})
	r := s.Post(t, "/api/v1/transaction", map[string]any{"operations": []any{map[string]any{"type": "push", "items": []any{
		map[string]any{"queue": enc, "payload": map[string]any{"secret": inTx}, "transactionId": e2e.TxID("tx")}}}}})
	if r.Status != 200 {
		t.Fatalf("transaction: %d %s", r.Status, r.Body)
	}
	// The first message dead-letters (retryLimit 0): the dead letter holds
	// a copy of its frame.
	p := s.PopOK(t, e2e.PopQueue(enc, "batch", "1"))
	if r := s.AckOK(t, p.Messages[0], "failed", ""); !r.DLQ {
		t.Fatalf("failed ack with retryLimit 0: %+v", r)
	}

	d := dump(t)
	for _, m := range []string{pushed, inTx, dead} {
		if holds(d, m) {
			t.Errorf("the pg_dump holds the encrypted payload %s", m)
		}
	}
	if !holds(d, control) {
		t.Fatalf("the pg_dump does not hold the plaintext control %s: the check sees nothing", control)
	}
}

// Pop, the dead-letter list, the message view (isEncrypted true) and a
// requeued message return the payload exactly as it was pushed.
func TestEncryption_ReadsReturnPlaintext(t *testing.T) {
	t.Parallel()
	s := keyed(t)
	q := e2e.Unique(t, "reads")
	encrypted(t, s, q, map[string]any{"retryLimit": 0})
	payload := map[string]any{"order": e2e.Unique(t, "order"), "total": 4200.0, "lines": []any{"a", "b"}}
	want, _ := json.Marshal(payload)
	ps := s.PushQueued(t, e2e.PushItem{Queue: q, Payload: payload, TransactionID: e2e.TxID("r")})

	var view struct {
		Payload     json.RawMessage `json:"payload"`
		IsEncrypted bool            `json:"isEncrypted"`
	}
	s.Get(t, "/api/v1/messages/"+ps[0].PartitionID+"/"+ps[0].Tx).JSON(t, &view)
	if string(view.Payload) != string(want) || !view.IsEncrypted {
		t.Fatalf("message view: payload %s isEncrypted %v, want %s and true", view.Payload, view.IsEncrypted, want)
	}
	p := s.PopOK(t, e2e.PopQueue(q))
	if string(p.Messages[0].RawData) != string(want) {
		t.Fatalf("pop: data %s, want %s", p.Messages[0].RawData, want)
	}
	s.AckOK(t, p.Messages[0], "failed", "")
	var dlq struct {
		Messages []struct {
			ID   string          `json:"id"`
			Data json.RawMessage `json:"data"`
		} `json:"messages"`
	}
	s.Get(t, "/api/v1/dlq"+e2e.Query("queue", q)).JSON(t, &dlq)
	if len(dlq.Messages) != 1 || string(dlq.Messages[0].Data) != string(want) {
		t.Fatalf("dead letters: %+v, want one with data %s", dlq.Messages, want)
	}
	if r := s.Post(t, "/api/v1/dlq/"+dlq.Messages[0].ID+"/requeue", nil); r.Status != 200 {
		t.Fatalf("requeue: %d %s", r.Status, r.Body)
	}
	p = s.PopOK(t, e2e.PopQueue(q))
	if string(p.Messages[0].RawData) != string(want) {
		t.Fatalf("requeued: data %s, want %s", p.Messages[0].RawData, want)
	}
}

// A broker without QUEEN_ENCRYPTION_KEY refuses encryptionEnabled at
// configure with 400 and a JSON error naming the variable, creating
// nothing; the same queue without encryption is configured.
func TestEncryption_ConfigureWithoutKeyRefused(t *testing.T) {
	t.Parallel()
	s := e2e.Shared(t)
	q := e2e.Unique(t, "nokey")
	r := s.Post(t, "/api/v1/configure", map[string]any{"queue": q, "options": map[string]any{"encryptionEnabled": true}})
	if msg := e2e.WantErrorBody(t, r, 400); msg != "encryptionEnabled needs QUEEN_ENCRYPTION_KEY on the broker" {
		t.Fatalf("error %q", msg)
	}
	if c := e2e.QueueCounts(t, q); c.Queues != 0 {
		t.Fatalf("the refused configure created %+v", c)
	}
	s.Configure(t, q, map[string]any{"encryptionEnabled": false})
}

// A broker without a key, on a database where another broker made a queue
// encrypted, refuses every push item to it with the configure error (never
// stores it in plaintext; a push none of whose items is stored is a 500) and
// answers a pop that meets a sealed message 500 "pop failed", logged with its
// code.
func TestEncryption_KeylessBrokerNeverWritesPlaintext(t *testing.T) {
	t.Parallel()
	s := keyed(t)
	q := e2e.Unique(t, "keyless")
	encrypted(t, s, q, nil)
	s.PushN(t, q, "", 1)
	nokey := e2e.Start(t)
	m := e2e.Unique(t, "marker-keyless")
	r := nokey.Post(t, "/api/v1/push", map[string]any{"items": []e2e.PushItem{{Queue: q, Payload: map[string]any{"secret": m}}}})
	var res []e2e.PushResult
	r.JSON(t, &res)
	if r.Status != 500 || len(res) != 1 || res[0].Status != "failed" ||
		res[0].Error != "encryptionEnabled needs QUEEN_ENCRYPTION_KEY on the broker" {
		t.Fatalf("push through a broker without a key: %d %s", r.Status, r.Body)
	}
	if n := segmentsHolding(t, m); n != 0 {
		t.Fatalf("%d rows hold the refused payload", n)
	}
	pr := nokey.TryPop(t, e2e.PopQueue(q))
	if msg := e2e.WantErrorBody(t, pr.Response, 500); msg != "pop failed" {
		t.Fatalf("pop of a sealed message without its key: %q", msg)
	}
	if err := e2e.Eventually(2*time.Second, 50*time.Millisecond, func() error {
		if !strings.Contains(nokey.Logs(), "pop_encryption_key_unknown") {
			return errors.New("not logged")
		}
		return nil
	}); err != nil {
		t.Fatalf("the failed pop is not logged with its code:\n%s", nokey.Logs())
	}
}

// Turning encryptionEnabled on for a queue that already took plaintext
// pushes (its partition writer read the old settings) seals every payload
// pushed after the configure answered; both kinds pop as pushed.
func TestEncryption_TurnedOnForAnExistingQueue(t *testing.T) {
	t.Parallel()
	s := keyed(t)
	q := e2e.Unique(t, "turned-on")
	s.Configure(t, q, nil)
	before := s.PushN(t, q, "", 1)
	encrypted(t, s, q, nil)
	m := e2e.Unique(t, "marker-after")
	after := s.PushQueued(t, e2e.PushItem{Queue: q, Payload: map[string]any{"secret": m}, TransactionID: e2e.TxID("after")})
	if n := segmentsHolding(t, m); n != 0 {
		t.Fatalf("a push after encryptionEnabled was turned on is stored in plaintext (%d rows)", n)
	}
	p := s.PopOK(t, e2e.PopQueue(q, "batch", "10"))
	e2e.WantTxIDs(t, "pop", p, []string{before[0].Tx, after[0].Tx})
	if got := p.Messages[1].Data.(map[string]any)["secret"]; got != m {
		t.Fatalf("sealed payload popped as %v", p.Messages[1].Data)
	}
}

// Key rotation: a broker started with a new QUEEN_ENCRYPTION_KEY and the old
// one in QUEEN_ENCRYPTION_KEY_PREVIOUS pops the messages sealed before and
// seals new ones with the new key; a broker with the new key alone cannot
// open the old ones (500 "pop failed", nothing delivered in plaintext).
func TestEncryption_RotationReadKeyOpensOldMessages(t *testing.T) {
	t.Parallel()
	old := keyed(t)
	q := e2e.Unique(t, "rotation")
	encrypted(t, old, q, nil)
	first := old.PushN(t, q, "", 1)

	rotated := e2e.Start(t, "QUEEN_ENCRYPTION_KEY="+key2, "QUEEN_ENCRYPTION_KEY_PREVIOUS="+key1)
	second := rotated.PushN(t, q, "", 1)
	p := rotated.PopOK(t, e2e.PopQueue(q, "batch", "10", "consumerGroup", "rotated"))
	e2e.WantTxIDs(t, "pop after the rotation", p, []string{first[0].Tx, second[0].Tx})
	for i, m := range p.Messages {
		want := []e2e.PushedMessage{first[0], second[0]}[i].Payload
		if got, _ := json.Marshal(m.Data); string(got) != mustJSON(t, want) {
			t.Fatalf("message %d: %s, want %s", i, got, mustJSON(t, want))
		}
	}
	// The new message is sealed with the new key: the old broker cannot
	// open it, while it still opens its own.
	if r := old.TryPop(t, e2e.PopQueue(q, "batch", "10", "consumerGroup", "old")); r.Status != 500 {
		t.Fatalf("the old broker popped a message sealed with the new key: %d %s", r.Status, r.Body)
	}
	newOnly := e2e.Start(t, "QUEEN_ENCRYPTION_KEY="+key2)
	if r := newOnly.TryPop(t, e2e.PopQueue(q, "batch", "10", "consumerGroup", "new-only")); r.Status != 500 {
		t.Fatalf("a broker without the previous key popped a message sealed with it: %d %s", r.Status, r.Body)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
