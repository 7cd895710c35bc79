package pg

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/queengo/queengo"
)

// testKey makes a sealer with a random key.
func testKey(t testing.TB) *sealer {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	k, err := newSealKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return &sealer{key: k}
}

// ring is the keyring of the sealers' keys.
func ring(sealers ...*sealer) keyring {
	keys := keyring{}
	for _, s := range sealers {
		keys[s.key.id] = s.key.aead
	}
	return keys
}

func sealedFrame(payload string) queengo.Frame {
	return queengo.Frame{ID: uuid.Must(uuid.NewV7()), TransactionID: "tx-1", TraceID: uuid.Must(uuid.NewV7()),
		ProducerSub: "alice", Payload: []byte(payload)}
}

// A sealed frame carries frameSealed and nothing of its payload; it decodes
// to the frame as pushed, its other fields untouched, and the rest of the
// buffer follows it. An empty payload is sealed as null.
func TestSeal_RoundTrip(t *testing.T) {
	t.Parallel()
	k := testKey(t)
	f := sealedFrame(`{"marker":"seal-roundtrip-7f3a"}`)
	b := appendFrame(nil, &f, k)
	if b[0]&frameSealed == 0 {
		t.Fatal("frameSealed not set")
	}
	if bytes.Contains(b, []byte("seal-roundtrip-7f3a")) {
		t.Fatal("the sealed frame contains the payload")
	}
	empty := queengo.Frame{ID: uuid.Must(uuid.NewV7()), TransactionID: "tx-2"}
	b = appendFrame(b, &empty, k)
	var got queengo.Frame
	rest, err := decodeFrame(b, &got, ring(k))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != f.ID || got.TransactionID != f.TransactionID || got.TraceID != f.TraceID ||
		got.ProducerSub != f.ProducerSub || string(got.Payload) != string(f.Payload) {
		t.Fatalf("decoded %+v, want %+v", got, f)
	}
	if rest, err = decodeFrame(rest, &got, ring(k)); err != nil || len(rest) != 0 || string(got.Payload) != "null" {
		t.Fatalf("second frame: %q, rest %d, %v", got.Payload, len(rest), err)
	}
}

// Every frame gets a fresh nonce: the same frame sealed twice differs.
func TestSeal_FreshNoncePerFrame(t *testing.T) {
	t.Parallel()
	k := testKey(t)
	f := sealedFrame(`"same"`)
	a, b := appendFrame(nil, &f, k), appendFrame(nil, &f, k)
	if len(a) != len(b) || bytes.Equal(a, b) {
		t.Fatal("two seals of one frame are equal")
	}
}

// A sealer hands out each nonce it drew once, and draws more when a write
// seals more frames than it reserved.
func TestSealer_NoncesNeverRepeat(t *testing.T) {
	t.Parallel()
	k := testKey(t)
	keys := ring(k)
	k.reserve(3)
	seen := map[string]bool{}
	for range 5 {
		f := sealedFrame(`{}`)
		b := appendFrame(nil, &f, k)
		sealed := b[len(b)-sealedOverhead-len(`{}`):]
		nonce := string(sealed[keyIDSize : keyIDSize+nonceSize])
		if seen[nonce] {
			t.Fatal("a nonce was used twice")
		}
		seen[nonce] = true
		var got queengo.Frame
		if _, err := decodeFrame(b, &got, keys); err != nil || string(got.Payload) != `{}` {
			t.Fatalf("%q %v", got.Payload, err)
		}
	}
}

// The message id is the additional data: a sealed payload copied into
// another frame, or altered, does not open; it is a corrupt frame, not a
// panic.
func TestSeal_MovedOrAlteredPayloadDoesNotOpen(t *testing.T) {
	t.Parallel()
	k := testKey(t)
	keys := ring(k)
	f := sealedFrame(`{"n":1}`)
	b := appendFrame(nil, &f, k)
	moved := bytes.Clone(b)
	other := uuid.Must(uuid.NewV7())
	copy(moved[1:17], other[:])
	var got queengo.Frame
	if _, err := decodeFrame(moved, &got, keys); !errors.Is(err, errCorruptFrame) {
		t.Fatalf("payload moved to another message id: %v, want errCorruptFrame", err)
	}
	altered := bytes.Clone(b)
	altered[len(altered)-1] ^= 1
	if _, err := decodeFrame(altered, &got, keys); !errors.Is(err, errCorruptFrame) {
		t.Fatalf("altered tag: %v, want errCorruptFrame", err)
	}
	// A sealed payload shorter than key id, nonce and tag.
	short := appendFrame(nil, &queengo.Frame{ID: f.ID, Payload: []byte("12345678")}, nil)
	short[0] |= frameSealed
	if _, err := decodeFrame(short, &got, keys); !errors.Is(err, errCorruptFrame) {
		t.Fatalf("short sealed payload: %v, want errCorruptFrame", err)
	}
}

// A payload sealed with a key the keyring lacks (another store's, or none)
// fails with ErrEncryptionKeyUnknown naming the key id (what the pop that
// meets it answers and logs).
func TestSeal_UnknownKey(t *testing.T) {
	t.Parallel()
	k := testKey(t)
	f := sealedFrame(`{"n":1}`)
	b := appendFrame(nil, &f, k)
	for _, keys := range []keyring{ring(testKey(t)), nil} {
		var got queengo.Frame
		_, err := decodeFrame(b, &got, keys)
		if !errors.Is(err, queengo.ErrEncryptionKeyUnknown) {
			t.Fatalf("unknown key: %v, want ErrEncryptionKeyUnknown", err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("key id %x", k.key.id[:])) {
			t.Fatalf("error %q does not name the key id", err)
		}
	}
}

// loadKeys: the encryption key seals, and it and the read keys open, those
// of the keyring loadKeys returns and no other (the keys are a store's, not
// the process's); a key that is not 32 bytes is refused.
func TestLoadKeys(t *testing.T) {
	t.Parallel()
	cur, prev, another := make([]byte, 32), make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(cur)
	_, _ = rand.Read(prev)
	_, _ = rand.Read(another)
	seal, keys, err := loadKeys(Config{EncryptionKey: cur, EncryptionReadKeys: [][]byte{prev}})
	if err != nil || seal == nil || seal.id != keyIDOf(cur) || len(keys) != 2 {
		t.Fatalf("loadKeys: %v %d keys, %v", seal, len(keys), err)
	}
	old, err := newSealKey(prev)
	if err != nil {
		t.Fatal(err)
	}
	_, readOnly, err := loadKeys(Config{EncryptionReadKeys: [][]byte{prev}})
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := loadKeys(Config{EncryptionKey: another})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		key  *sealKey
		keys keyring
		ok   bool
	}{
		{"the key", seal, keys, true},
		{"a read key", old, keys, true},
		{"the key, with only the read key", seal, readOnly, false},
		{"the read key, with only the read key", old, readOnly, true},
		{"the key, with another store's keys", seal, other, false},
	} {
		f := sealedFrame(`{"k":1}`)
		var got queengo.Frame
		_, err := decodeFrame(appendFrame(nil, &f, &sealer{key: c.key}), &got, c.keys)
		if c.ok && (err != nil || string(got.Payload) != `{"k":1}`) {
			t.Fatalf("%s: %q %v", c.name, got.Payload, err)
		}
		if !c.ok && !errors.Is(err, queengo.ErrEncryptionKeyUnknown) {
			t.Fatalf("%s: %v, want ErrEncryptionKeyUnknown", c.name, err)
		}
	}
	if seal, _, err := loadKeys(Config{EncryptionReadKeys: [][]byte{prev}}); err != nil || seal != nil {
		t.Fatalf("read keys only: %v %v, want no sealing key", seal, err)
	}
	if _, _, err := loadKeys(Config{EncryptionKey: cur[:16]}); err == nil {
		t.Fatal("a 16-byte key was accepted")
	}
	if _, _, err := loadKeys(Config{EncryptionKey: cur, EncryptionReadKeys: [][]byte{prev[:31]}}); err == nil {
		t.Fatal("a 31-byte read key was accepted")
	}
	if KeyID(cur) == KeyID(prev) || len(KeyID(cur)) != 2*keyIDSize {
		t.Fatalf("key ids %s and %s", KeyID(cur), KeyID(prev))
	}
}

// benchPayload is a payload of the benchmarks' size (~100 bytes of JSON,
// as in docs/performance.md).
var benchPayload = []byte(`{"orderId":"7f3a2c1e-0b4d-4e5f-8a9b-1c2d3e4f5a6b","total":4200,"currency":"EUR","items":3,"ok":true}`)

func benchFrames(n int) []queengo.Frame {
	fs := make([]queengo.Frame, n)
	for i := range fs {
		fs[i] = queengo.Frame{ID: uuid.Must(uuid.NewV7()), TransactionID: uuid.NewString(), Payload: benchPayload}
	}
	return fs
}

// BenchmarkSeal encodes a segment of batch frames as a write does: plain
// (the baseline), sealed per frame (what the store does: a fresh nonce and
// tag per frame), and, for comparison, the frames sealed as one message per
// segment (one nonce and one tag). ns/msg is per frame.
func BenchmarkSeal(b *testing.B) {
	k := testKey(b)
	for _, batch := range []int{1, 10, 100} {
		fs := benchFrames(batch)
		buf := make([]byte, 0, batch*(len(benchPayload)+100))
		run := func(name string, fn func()) {
			b.Run("batch="+strconv.Itoa(batch)+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					fn()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
			})
		}
		run("plain", func() {
			buf = buf[:0]
			for i := range fs {
				buf = appendFrame(buf, &fs[i], nil)
			}
		})
		run("frame", func() {
			buf = buf[:0]
			k.reserve(batch)
			for i := range fs {
				buf = appendFrame(buf, &fs[i], k)
			}
		})
		var plain, seg []byte
		run("segment", func() {
			plain = plain[:0]
			for i := range fs {
				plain = appendFrame(plain, &fs[i], nil)
			}
			k.reserve(1)
			seg = k.appendSealed(seg[:0], fs[0].ID[:], plain)
		})
	}
}

// BenchmarkOpen decodes a segment of batch frames as a pop does: plain,
// sealed per frame, and sealed as one message per segment (opened, then
// decoded). ns/msg is per frame.
func BenchmarkOpen(b *testing.B) {
	k := testKey(b)
	keys := ring(k)
	for _, batch := range []int{1, 10, 100} {
		fs := benchFrames(batch)
		var plain, sealed []byte
		for i := range fs {
			plain = appendFrame(plain, &fs[i], nil)
			sealed = appendFrame(sealed, &fs[i], k)
		}
		seg := k.appendSealed(nil, fs[0].ID[:], plain)
		decode := func(b *testing.B, rest []byte) {
			var f queengo.Frame
			for len(rest) > 0 {
				var err error
				if rest, err = decodeFrame(rest, &f, keys); err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, c := range []struct {
			name string
			fn   func(b *testing.B)
		}{
			{"plain", func(b *testing.B) { decode(b, plain) }},
			{"frame", func(b *testing.B) { decode(b, sealed) }},
			{"segment", func(b *testing.B) {
				p, err := openSealed(seg, fs[0].ID[:], keys)
				if err != nil {
					b.Fatal(err)
				}
				decode(b, p)
			}},
		} {
			b.Run("batch="+strconv.Itoa(batch)+"/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					c.fn(b)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/msg")
			})
		}
	}
}
