package pg

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/queengo/queengo/pg/pgtest"
)

// queenVectors are payloads the reference server (../shared/reference,
// QUEEN_ENCRYPTION_KEY=queenVectorKey) encrypted, as its database holds
// them, with what was pushed.
const queenVectorKey = "a5017890eb5ed6e85319ca2046b2976e677761985e9211e6338b562b5a857bbb"

var queenVectors = []struct{ env, plain string }{
	{`{"iv": "c7S71okhDcVkX4UFKmKZuA==", "authTag": "YUUQNNP8XWAZzCKoKcEksA==", "encrypted": "fWivdbhMzsgDsx2ZPhWR"}`, `{"secret":"s1"}`},
	{`{"iv": "2jA9FTRFqIDAh9TBqnO3FA==", "authTag": "CHhqUCpoOiTEkySmsVBbvQ==", "encrypted": "wnR9m7jSXHPuYy37LKQc"}`, `{"secret":"s2"}`},
	{`{"iv": "rCzUMoH+LM9btW/UCl3/tw==", "authTag": "pkjZOIYhZP/yXYaTO+0eFg==", "encrypted": "Ah9OHfgDqo3JI2FlW0M="}`, `{"buffered":2}`},
}

func mustKeys(t *testing.T, hexKeys ...string) []queenKey {
	t.Helper()
	var raw [][]byte
	for _, h := range hexKeys {
		k, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, k)
	}
	keys, err := loadQueenKeys(raw)
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestOpenQueen_ReferenceVectors: payloads the reference server encrypted
// open with its key (the first 12 bytes of their IV count), with a second
// key tried after a wrong first one, and not without the right key.
func TestOpenQueen_ReferenceVectors(t *testing.T) {
	other := strings.Repeat("11", 32)
	keys := mustKeys(t, other, queenVectorKey)
	for _, v := range queenVectors {
		got, err := openQueen([]byte(v.env), keys)
		if err != nil || string(got) != v.plain {
			t.Errorf("openQueen(%s) = %q, %v; want %q", v.env, got, err, v.plain)
		}
		if _, err := openQueen([]byte(v.env), mustKeys(t, other)); !errors.Is(err, errQueenKeyUnknown) {
			t.Errorf("with the wrong key: %v, want errQueenKeyUnknown", err)
		}
	}
}

// TestOpenQueen_FixtureEnvelopes: what pgtest.QueenEncrypt writes for the
// tests' Queen databases opens as the reference's own payloads do.
func TestOpenQueen_FixtureEnvelopes(t *testing.T) {
	key, _ := hex.DecodeString(queenVectorKey)
	env, err := pgtest.QueenEncrypt(key, []byte(`{"a":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := openQueen([]byte(env), mustKeys(t, queenVectorKey))
	if err != nil || string(got) != `{"a":[1,2]}` {
		t.Fatalf("openQueen = %q, %v", got, err)
	}
}

// TestOpenQueen_NotAnEnvelope: a payload flagged encrypted that is not
// Queen's object, or whose fields are not base64 of the right sizes, is an
// error, never passed through.
func TestOpenQueen_NotAnEnvelope(t *testing.T) {
	keys := mustKeys(t, queenVectorKey)
	for _, env := range []string{`{"n": 1}`, `"text"`, `{"iv": "!!", "authTag": "x", "encrypted": "y"}`,
		`{"iv": "c7S71okh", "authTag": "YUUQNNP8XWAZzCKoKcEksA==", "encrypted": "fWivdbhMzsgDsx2ZPhWR"}`} {
		if got, err := openQueen([]byte(env), keys); err == nil {
			t.Errorf("openQueen(%s) = %q, want an error", env, got)
		}
	}
}
