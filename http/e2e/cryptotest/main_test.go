// Package cryptotest checks encryption at rest black-box (issue 10): with
// QUEEN_ENCRYPTION_KEY, the payloads of queues with encryptionEnabled reach
// PostgreSQL sealed (nothing of them in a pg_dump) and every read returns
// them as pushed; a broker without a key refuses such a queue and never
// stores its payloads in plaintext; a rotated broker still reads with the
// previous key.
package cryptotest

import (
	"bytes"
	"encoding/hex"
	"os/exec"
	"testing"

	"github.com/queengo/queengo/http/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m, "cryptotest") }

// Two AES-256 keys, as QUEEN_ENCRYPTION_KEY takes them.
const (
	key1 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	key2 = "f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f"
)

// keyed is the package's broker with key1.
func keyed(t *testing.T) *e2e.Server {
	t.Helper()
	return e2e.Shared(t, "QUEEN_ENCRYPTION_KEY="+key1)
}

// encrypted configures queue with encryptionEnabled (and the options given).
func encrypted(t *testing.T, s *e2e.Server, queue string, options map[string]any) {
	t.Helper()
	o := map[string]any{"encryptionEnabled": true}
	for k, v := range options {
		o[k] = v
	}
	if c := s.Configure(t, queue, o); c.Options["encryptionEnabled"] != true {
		t.Fatalf("configure: options %v", c.Options)
	}
}

// dump is `pg_dump -d <the package database>`.
func dump(t *testing.T) []byte {
	t.Helper()
	if _, err := exec.LookPath("pg_dump"); err != nil {
		t.Fatalf("pg_dump is needed to check what reaches the database: %v", err)
	}
	out, err := exec.Command("pg_dump", "-d", e2e.DB.URL).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	return out
}

// holds reports whether the dump (or any bytes read from the database)
// holds marker as text or as the hex of a bytea (pg_dump's bytea output).
func holds(b []byte, marker string) bool {
	return bytes.Contains(b, []byte(marker)) || bytes.Contains(b, []byte(hex.EncodeToString([]byte(marker))))
}

// segmentsHolding counts the stored segments and dead letters whose bytes
// hold marker.
func segmentsHolding(t *testing.T, marker string) int64 {
	t.Helper()
	return e2e.QueryInt(t, e2e.DB, `SELECT (SELECT count(*) FROM queen.segments WHERE position($1::bytea IN frames) > 0)
     + (SELECT count(*) FROM queen.dead_letters WHERE position($1::bytea IN frame) > 0)`, []byte(marker))
}
